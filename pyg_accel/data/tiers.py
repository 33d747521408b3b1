"""Storage tiers: one table's rows in one kind of memory, read through the one gather kernel.

A :class:`Tier` answers a small interface: where its reads land (``device``), its
``shape`` and ``dtype``, the memories one gather launch reads (``tables()``), rows by id
(``read``), the whole table (``whole``), row writes (``write_rows``) and its size
(``nbytes``). The stores hold one tier per tensor and ask it; they never test kinds.

* :class:`LocalTier`: the whole table in this process's memory: GPU memory, pinned host
  memory read by the GPU, or CPU memory (:class:`~pyg_accel.data.Location`'s memory axis).
* :class:`ShardedTier`: rows split across the processes of a host, every block read in
  place (:class:`~pyg_accel.data.shards.ShardedTensor`; the distribution axis).
* :class:`~pyg_accel.data.RowCache`: the hottest rows of another tier copied to the GPU,
  in front of it (:mod:`pyg_accel.data.row_cache`).

:func:`tier_for` makes the tier a :class:`~pyg_accel.data.Location` calls for;
:func:`read_together` reads several tiers at one index with as few launches as it can.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from ..ops import gather, multi_gather
from .shards import ShardedTensor

__all__ = ['Tier', 'LocalTier', 'ShardedTier', 'tier_for', 'read_together']


class Tier(ABC):
    """One ``[N, *]`` table in one kind of memory.

    Attributes:
        device: where reads land (a GPU also for host memory the GPU reads).
        shared: other processes hold and write rows of it (a cache in front of it on
            this process would go stale).
    """

    device: torch.device
    shared: bool = False

    @abstractmethod
    def tables(self) -> List[Tensor]:
        """The memories one gather launch reads: their rows, concatenated in order, are
        the table's."""

    @abstractmethod
    def read(self, index: Tensor) -> Tensor:
        """``[M, *]`` rows at ``index`` (``[M]`` int32/int64 on :attr:`device`), on
        :attr:`device`; ids out of range raise unless the index is trusted
        (:func:`pyg_accel.ops.trust_index`)."""

    @abstractmethod
    def whole(self) -> Tensor:
        """The whole table as one tensor (the stored one where there is one: no copy)."""

    @abstractmethod
    def write_rows(self, rows: Tensor, values: Tensor) -> None:
        """``table[rows] = values`` in place; ``rows``: validated CPU int64 ids."""

    def read_slice(self, rows: slice) -> Tensor:
        """``table[rows]`` on :attr:`device`."""
        return self.read(torch.arange(self.shape[0])[rows].to(self.device))

    def uncached(self) -> 'Tier':
        """The tier that holds the rows (itself, or what a cache fronts)."""
        return self

    @property
    def shape(self) -> torch.Size:
        """``[N, *]``: every row of the table."""
        first = self.tables()[0]
        return torch.Size((sum(t.shape[0] for t in self.tables()), *first.shape[1:]))

    @property
    def dtype(self) -> torch.dtype:
        """The table's dtype."""
        return self.tables()[0].dtype

    def element_size(self) -> int:
        """Bytes per element."""
        return self.tables()[0].element_size()

    @property
    def nbytes(self) -> int:
        """Bytes of the table (every block, for a sharded one)."""
        return self.shape.numel() * self.element_size()


class LocalTier(Tier):
    """The whole table in this process's memory, read on ``device``.

    Args:
        tensor: the table, already in its memory (GPU, pinned host or CPU).
        device: where reads land (the GPU for pinned host memory).
        borrowed: ``tensor`` is the caller's own (kept without a copy, as PyG's stores
            keep it): the first row write copies it, leaving the caller's alone.
    """

    def __init__(self, tensor: Tensor, device: torch.device, borrowed: bool = False) -> None:
        self.tensor, self.device, self.borrowed = tensor, device, borrowed

    def tables(self) -> List[Tensor]:
        return [self.tensor]

    def read(self, index: Tensor) -> Tensor:
        return gather(self.tensor, index)

    def read_slice(self, rows: slice) -> Tensor:
        return self.tensor[rows].to(self.device, non_blocking=True)

    def whole(self) -> Tensor:
        return self.tensor

    def write_rows(self, rows: Tensor, values: Tensor) -> None:
        if self.borrowed:  # the caller's tensor: PyG's stores leave it alone
            self.tensor, self.borrowed = self.tensor.clone(), False
        self.tensor[rows.to(self.tensor.device)] = values.to(self.tensor.device)

    def __repr__(self) -> str:
        return f'LocalTier({tuple(self.tensor.shape)} {self.dtype} in {self.tensor.device}, read on {self.device})'


class ShardedTier(Tier):
    """Rows split across the processes of a host (:class:`ShardedTensor`), every block
    read in place; a row write must come from the process that holds the rows."""

    shared = True

    def __init__(self, sharded: ShardedTensor) -> None:
        self.sharded = sharded
        self.device = sharded.device

    def tables(self) -> List[Tensor]:
        return self.sharded.shards

    def read(self, index: Tensor) -> Tensor:
        return self.sharded.gather(index)

    def whole(self) -> Tensor:
        return self.sharded.to_dense()

    def write_rows(self, rows: Tensor, values: Tensor) -> None:
        self.sharded.write_local_rows(rows, values)

    def __repr__(self) -> str:
        return repr(self.sharded)


def tier_for(location, tensor: Tensor, group=None) -> Tier:
    """The tier holding ``tensor`` at ``location`` (a :class:`~pyg_accel.data.Location`):
    sharded (collective: every process of ``group`` passes the same tensor and keeps its
    block), or the whole tensor in the location's memory, kept without a copy when it
    is there already."""
    if location.sharded:
        return ShardedTier(ShardedTensor.from_full(tensor, group, location.device))
    placed = location.place(tensor)
    return LocalTier(placed, location.device, borrowed=placed is tensor)


def read_together(tiers: Sequence[Tier], index: Tensor) -> List[Tensor]:
    """``[tier.read(index) for tier in tiers]``, with every whole table in local memory
    read in one launch (:func:`pyg_accel.ops.multi_gather`); other tiers (sharded,
    cached) read in one launch each."""
    out: List[Optional[Tensor]] = [None] * len(tiers)
    local = [i for i, tier in enumerate(tiers) if type(tier) is LocalTier]
    if len(local) > 1:
        for i, rows in zip(local, multi_gather([tiers[i].tensor for i in local], index)):
            out[i] = rows
    for i, tier in enumerate(tiers):
        if out[i] is None:
            out[i] = tier.read(index)
    return out
