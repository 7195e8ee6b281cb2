"""How evaluation decodes (`Decoding`): vase's own settings, never a checkpoint's ``generation_config.json``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from vase.config.schemas import check_value


@dataclass(frozen=True)
class Decoding:
    """How evaluation decodes (``generation.*`` in evaluate.py, ``evaluate.*`` in train.py): vase's config alone. A
    downloaded checkpoint's ``generation_config.json`` (the hub's Qwen2.5-VL asks for sampling at temperature 0.1 with
    a repetition penalty of 1.05) is never merged in: greedy means greedy, with no penalty unless this says so.

    >>> Decoding.of({"do_sample": True, "temperature": 0.7}).record()["temperature"]
    0.7
    >>> Decoding().tag(), Decoding(repetition_penalty=1.05).tag() != ""
    ('', True)
    """

    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    repetition_penalty: float = 1.0

    @classmethod
    def of(cls, node: Any, key: str = "generation") -> Decoding:
        """The decoding that a config node (``generation`` or ``val``) asks for; missing keys take the
        defaults; a bad value raises ConfigError naming ``<key>.<field>``."""
        get = node.get if hasattr(node, "get") else (lambda k, d=None: getattr(node, k, d))
        d = cls(**{f: get(f, default) for f, default in asdict(cls()).items() if get(f, None) is not None})
        def number(x: Any) -> bool:  # a number, not a word or a flag ("abc" must be a config error, not a ValueError)
            return isinstance(x, (int, float)) and not isinstance(x, bool)

        check_value(isinstance(d.do_sample, bool), f"{key}.do_sample", d.do_sample, "must be true or false")
        check_value(number(d.temperature) and d.temperature > 0, f"{key}.temperature", d.temperature, "must be positive")
        check_value(number(d.top_p) and 0 < d.top_p <= 1, f"{key}.top_p", d.top_p, "must lie in (0, 1]")
        check_value(number(d.top_k) and int(d.top_k) == d.top_k and d.top_k >= 0, f"{key}.top_k", d.top_k,
               "must be a whole number >= 0")
        check_value(number(d.repetition_penalty) and d.repetition_penalty > 0, f"{key}.repetition_penalty",
               d.repetition_penalty, "must be positive")
        return d

    def record(self) -> dict[str, Any]:
        """What a results file records of how its answers were decoded."""
        return {**asdict(self), "source": "vase config (the checkpoint's generation_config.json is not read)"}

    def tag(self) -> str:
        """"" for greedy without a penalty (the default), else a short key of the settings: cached answers made
        with other settings are never reused."""
        if self == Decoding():
            return ""
        return "_dec" + hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]
