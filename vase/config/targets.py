"""Every ``_target_`` of a composed config checked before anything is built: the class or function imports (or the
one line says which module lacks which name), each key beside it is an argument it takes, and a plain typed argument
gets a value of its type."""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
from collections.abc import Iterator
from typing import Any

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from vase.config.schemas import check_value
from vase.errors import ConfigError

_INSTANTIATE_KEYS = {"_target_", "_partial_", "_convert_", "_recursive_", "_args_"}


def nearest(word: str, options: Any) -> str:
    close = difflib.get_close_matches(word, [str(o) for o in options], n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(sorted(map(str, options)))}"


def import_target(target: str) -> Any:
    """The object a ``_target_`` names (Hydra's own lookup, without the ERROR line it logs before raising: vase
    reports the failure itself, in one line)."""
    logger = logging.getLogger("hydra.utils")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        return get_object(target)
    finally:
        logger.setLevel(level)


def target_nodes(node: Any, path: str = "") -> Iterator[tuple[str, DictConfig]]:
    if not isinstance(node, DictConfig):
        return
    if "_target_" in node:
        yield path, node
    for k in node.keys():
        child = node._get_node(k)
        if isinstance(child, DictConfig) and not child._is_none():
            yield from target_nodes(child, f"{path}.{k}" if path else str(k))


def missing_name(target: str) -> str | None:
    """When ``target``'s module imports but holds no such name: "x.y has no class Cls" (Python's own message, "No
    module named 'x.y.Cls'; 'x.y' is not a package", points at the wrong thing). None otherwise."""
    module, _, name = target.rpartition(".")
    if not module:
        return None
    try:
        found = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - the module itself fails: the caller says why
        return None
    if hasattr(found, name):
        return None
    kind = "class" if name[:1].isupper() else "function"
    return f"{module} has no {kind} {name}"


def validate_targets(cfg: DictConfig) -> None:
    """Every ``_target_`` node's keys are arguments its target takes (a typo fails here, not after the model loads);
    an optimizer's learning rate is positive."""
    for path, node in target_nodes(cfg):
        target = str(node._get_node("_target_")._value())
        try:
            fn = import_target(target)
        except Exception as e:  # noqa: BLE001 - any import failure is the user's to see, before a model loads
            missing = missing_name(target)
            if missing:
                raise ConfigError(f"{path}._target_={target!r}: {missing}") from None
            cause = e.__cause__ or e.__context__ or e
            hint = ""
            if isinstance(cause, ModuleNotFoundError) and cause.name and target.startswith(cause.name.split(".")[0]):
                hint = (f"; the module must be importable from where you run: run from the folder that holds "
                        f"{cause.name.split('.')[0]}/ or {cause.name.split('.')[0]}.py, add that folder to PYTHONPATH, "
                        f"or pip install -e your package")
            raise ConfigError(f"{path}._target_={target!r} cannot be imported: {type(cause).__name__}: "
                              f"{str(cause).splitlines()[0] if str(cause) else ''}{hint}") from None
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # no signature to check the keys against (a builtin)
            continue
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            continue
        for key in node.keys():
            if key not in _INSTANTIATE_KEYS and key not in params:
                raise ConfigError(f"{path}.{key}: {target.rsplit('.', 1)[-1]} takes no argument {key!r}, so nothing "
                                  f"would read it{nearest(str(key), [p for p in params if p != 'self'])}")
            if key in params:
                check_argument_type(cfg, f"{path}.{key}", params[key], target)
        if path.endswith("optimizer") and "lr" in node:
            lr = OmegaConf.select(cfg, f"{path}.lr")
            check_value(isinstance(lr, (int, float)) and lr > 0, f"{path}.lr", lr, "must be a positive number")


_PLAIN_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def check_argument_type(cfg: DictConfig, key: str, param: inspect.Parameter, target: str) -> None:
    """A value given to a plain annotated argument (``int``, ``float``, ``bool``, ``str``, optionally ``| None``) must
    be of that type: ``reconstruct.generator.rows=abc`` is refused here, not turned into a failure per object."""
    ann = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
    parts = [a.strip() for a in str(ann).split("|")]
    optional = "None" in parts
    kinds = [p for p in parts if p != "None"]
    if len(kinds) != 1 or kinds[0] not in _PLAIN_TYPES:
        return
    try:
        value = OmegaConf.select(cfg, key)
    except OmegaConfBaseException:
        return  # an interpolation that resolves only at run time: its reader checks it
    if value is None and optional:
        return
    ok = isinstance(value, _PLAIN_TYPES[kinds[0]]) and not (kinds[0] in ("int", "float") and isinstance(value, bool))
    check_value(ok, key, value, f"must be {'a whole number' if kinds[0] == 'int' else 'a number' if kinds[0] == 'float' else kinds[0]}"
           f" ({target.rsplit('.', 1)[-1]} takes {param.name}: {ann})")
