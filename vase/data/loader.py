"""Data loading that resumes exactly: each epoch's order is rebuilt from (seed, epoch), and an interrupted epoch
continues after the items it had consumed (the data module stores that position in the checkpoint)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Sampler


class ResumableSampler(Sampler[int]):
    """Indices of a dataset, shuffled per epoch by a generator seeded from (seed, epoch), so any epoch's order can
    be rebuilt; `resume` makes the next pass over ``epoch`` start after the items already consumed.

    Under data parallelism each rank takes its own shard of the epoch's order (``rank`` of ``world``), as
    torch's DistributedSampler would (padded by wrapping to a multiple of ``world``, then every ``world``-th item
    from ``rank``), and skips its own consumed items on resume: Lightning's own wrapper would shard the shortened
    list of a resumed epoch against the full length (and fail, or repeat items), so vase shards itself
    (``use_distributed_sampler=False``).

    >>> a, b = ResumableSampler(5, seed=3, rank=0, world=2), ResumableSampler(5, seed=3, rank=1, world=2)
    >>> whole = ResumableSampler(5, seed=3).order(0)
    >>> list(a) == whole[0::2] and list(b) == (whole + whole[:1])[1::2] and len(a) == len(b) == 3
    True
    >>> b.resume(epoch=0, skip=2); list(b) == (whole + whole[:1])[1::2][2:]
    True

    >>> s = ResumableSampler(6, seed=1)
    >>> s.set_epoch(2); full = list(s)
    >>> s.resume(epoch=2, skip=4); list(s) == full[4:]
    True
    >>> list(s) == full  # only one pass skips
    True
    >>> len(ResumableSampler(3, seed=2**64 - 1).order(0))  # an unseeded torch's initial seed
    3
    """

    def __init__(self, n: int, seed: int = 0, shuffle: bool = True, rank: int = 0, world: int = 1) -> None:
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not one of {world} ranks")
        self.n = n
        self.seed = seed
        self.shuffle = shuffle
        self.rank, self.world = int(rank), int(world)
        self.epoch = 0
        self._resume: tuple[int, int] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def resume(self, epoch: int, skip: int) -> None:
        self._resume = (int(epoch), int(skip))

    def order(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.n))
        # modulo 2**63: an unseeded run's seed is torch's 64-bit initial seed, and the product would overflow the
        # generator's seed; every seed below 2**63 / 1,000,003 keeps the order it always had
        g = torch.Generator().manual_seed((int(self.seed) * 1_000_003 + int(epoch)) % 2**63)
        return torch.randperm(self.n, generator=g).tolist()

    def shard(self, order: list[int]) -> list[int]:
        """This rank's part of an epoch's order (DistributedSampler's padding and stride)."""
        if self.world == 1 or not order:
            return order
        total = -(-len(order) // self.world) * self.world
        padded = (order * -(-total // len(order)))[:total]
        return padded[self.rank::self.world]

    def __iter__(self) -> Iterator[int]:
        skip = 0
        if self._resume is not None and self._resume[0] == self.epoch:
            skip = self._resume[1]
            self._resume = None
        yield from self.shard(self.order(self.epoch))[skip:]

    def __len__(self) -> int:
        return -(-self.n // self.world)


class ResumableLoader(DataLoader):
    """A DataLoader that tells Lightning it resumes exactly: its position travels in the data module's checkpoint
    state and is restored through `ResumableSampler`, so the loader itself has nothing to save."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        del state_dict  # the data module restores the position (ResumableSampler.resume)
