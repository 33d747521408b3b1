"""Storage tiers: one table's rows in one kind of memory, read through the one gather kernel.

A :class:`Tier` answers a small interface: where its reads land (``device``), its
``shape`` and ``dtype``, the memories one gather launch reads (``tables()``), rows by id
(``read``), the whole table (``whole``), row writes (``write_rows``) and its size
(``nbytes``). The stores hold one tier per tensor and ask it; they never test kinds.

* :class:`LocalTier`: the whole table in this process's memory: GPU memory, pinned host
  memory read by the GPU, or CPU memory (:class:`~pyg_accel.data.Location`'s memory axis).
* :class:`ShardedTier`: rows split across the processes of a host, every block read in
  place (:class:`~pyg_accel.data.shards.ShardedTensor`; the distribution axis).
* :class:`HostShardedTier`: rows split across the processes of several hosts: this
  host's blocks read in place, the others' fetched from their owners through
  torch.distributed (reads are collective).
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

import torch.distributed as dist

from ..ops import gather, multi_gather, sharded_gather as gather_shards
from ._rows import slice_ids
from .hosts import HostLayout
from .shards import ShardedTensor, row_partition

__all__ = ['Tier', 'LocalTier', 'ShardedTier', 'HostShardedTier', 'tier_for', 'tier_for_block', 'read_together']


class Tier(ABC):
    """One ``[N, *]`` table in one kind of memory.

    Attributes:
        device: where reads land (a GPU also for host memory the GPU reads).
        shared: other processes hold and write rows of it (a cache in front of it on
            this process would go stale).
        collective: its reads (``read``, ``read_slice``, ``whole``) are collective:
            every process of its group makes the same reads in the same order.
    """

    device: torch.device
    shared: bool = False
    collective: bool = False

    @abstractmethod
    def tables(self) -> List[Tensor]:
        """The memories one gather launch reads: their rows, concatenated in order, are
        the table's (for a collective tier: this host's rows of it)."""

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
        return self.read(slice_ids(rows, self.shape[0], self.device))

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

    @property
    def shape(self) -> torch.Size:
        """``[N, *]``: the stored tensor's (read per batch: no list of tables built)."""
        return self.tensor.shape

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


class HostShardedTier(Tier):
    """Rows split across the processes of several hosts (:class:`HostLayout`), in
    near-equal contiguous blocks in rank order: this host's blocks are one
    :class:`ShardedTensor` read in place; rows of other hosts are fetched from the
    processes that hold them through torch.distributed (WholeGraph's distributed memory).

    A read is collective: every process of the group reads, the same number of times
    (its own ids, any number). It exchanges how many rows each process wants from each
    other (one host sync), then the ids, while this host's rows are gathered; each
    process gathers the rows asked of it from its host's blocks and sends them back.
    """

    shared = True
    collective = True

    def __init__(self, full: Tensor, hosts: HostLayout, device: torch.device) -> None:
        """Collective: every process passes the same ``[N, *]`` tensor and keeps its block."""
        if not isinstance(full, Tensor) or full.dim() < 1:
            raise TypeError('HostShardedTier: expected a tensor with a row dimension')
        bounds = row_partition(full.shape[0], hosts.world_size)
        mine = full[bounds[hosts.rank]:bounds[hosts.rank + 1]].to(device, copy=True).contiguous()
        self._hold(mine, full.shape, hosts)

    @classmethod
    def from_block(cls, block: Tensor, num_rows: int, hosts: HostLayout) -> 'HostShardedTier':
        """Collective: this process's block of an ``[num_rows, *]`` table (its rows under
        :func:`row_partition`, on the device it is to be read on), kept without a copy."""
        tier = cls.__new__(cls)
        tier._hold(block, torch.Size((int(num_rows), *block.shape[1:])), hosts)
        return tier

    def _hold(self, mine: Tensor, shape: torch.Size, hosts: HostLayout) -> None:
        self.hosts, self.device = hosts, mine.device
        self.bounds = row_partition(shape[0], hosts.world_size)
        ranks = hosts.ranks_of(hosts.host)
        self.host_rows = range(self.bounds[ranks[0]], self.bounds[ranks[-1] + 1])  # this host's rows
        self.host_view = ShardedTensor.from_local(mine, hosts.host_group)
        self._shape = shape
        self._ends = torch.tensor(self.bounds[1:], device=self.device)

    @property
    def shape(self) -> torch.Size:
        """``[N, *]``: every row, every host's."""
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        """The table's dtype."""
        return self.host_view.dtype

    def element_size(self) -> int:
        return self.host_view.element_size()

    def tables(self) -> List[Tensor]:
        return self.host_view.shards

    def read(self, index: Tensor) -> Tensor:
        return self.read_many([self], index)[0]

    @staticmethod
    def read_many(tiers: Sequence['HostShardedTier'], index: Tensor) -> List[Tensor]:
        """``[tier.read(index) for tier in tiers]`` (tiers of one layout and length, e.g. a
        batch's ``x`` and ``y``) with one exchange of counts, one of ids and one of rows
        (every tier's, grouped) for all of them.

        Order of the work, so that the big transfer overlaps the local reads: counts (the
        read's one host sync), ids; the owners gather the rows asked of them and send them
        back while this process reads this host's rows in place; then one launch per tier
        places both kinds of rows (``[fetched; near]`` read back in the caller's order)."""
        first = tiers[0]
        if any(t.hosts != first.hosts or t.bounds != first.bounds for t in tiers[1:]):
            raise ValueError('HostShardedTier.read_many: the tiers must share one host layout and row count')
        index, world, num_rows = index.long(), first.hosts.world_size, first._shape[0]
        group, lo, hi = first.hosts.exchange_group, first.host_rows.start, first.host_rows.stop
        # every position keyed by the rank to ask, or by `world` when this host holds the row
        key = torch.searchsorted(first._ends, index, right=True)
        key = torch.where((index >= lo) & (index < hi), torch.full_like(key, world), key)
        order = torch.argsort(key, stable=True)  # positions of the rows to fetch (by owner), then this host's
        counts = torch.bincount(key, minlength=world + 1)
        # to every rank: how many rows this one wants from it, and whether any id here is out of
        # range (so that every rank raises, none waiting for the others in the next exchange)
        bad = ((index < 0) | (index >= num_rows)).any().long().expand(world)
        recv = torch.empty((world, 2), dtype=torch.long, device=first.device)
        dist.all_to_all_single(recv, torch.stack([counts[:world], bad], 1), group=group)
        sizes = torch.cat([counts, recv.view(-1)]).tolist()  # (the read's one host sync)
        wanted_from, asked_by, bad_on = sizes[:world], sizes[world + 1::2], sizes[world + 2::2]
        if any(bad_on):
            raise IndexError(f'HostShardedTier: an index is out of range for {num_rows} rows on rank(s) '
                             f'{[r for r, b in enumerate(bad_on) if b]} (every rank of the read raises)')
        num_away = sum(wanted_from)
        wanted, near = index[order[:num_away]], index[order[num_away:]] - lo
        asked = wanted.new_empty(sum(asked_by))
        dist.all_to_all_single(asked, wanted, asked_by, wanted_from, group=group)
        asked -= lo  # (asked of this process: its own rows)
        served = [tier.host_view.gather(asked, check_bounds=False) for tier in tiers]
        fetched = [s.new_empty((num_away, *s.shape[1:])) for s in served]
        rows_sent = _exchange_rows(served, fetched, asked_by, wanted_from, group)
        near_rows = [tier.host_view.gather(near, check_bounds=False) for tier in tiers]  # (while rows travel)
        where = torch.empty_like(order)  # position p of the read takes row where[p] of [fetched; near]
        where[order] = torch.arange(order.numel(), device=order.device)
        for work in rows_sent:
            work.wait()
        return [gather_shards([f, n], where, check_bounds=False) for f, n in zip(fetched, near_rows)]

    def whole(self) -> Tensor:
        return self.read(torch.arange(self._shape[0], device=self.device))

    def write_rows(self, rows: Tensor, values: Tensor) -> None:
        mine = range(self.bounds[self.hosts.rank], self.bounds[self.hosts.rank + 1])
        if rows.numel() and (int(rows.min()) < mine.start or int(rows.max()) >= mine.stop):
            raise IndexError(f'HostShardedTier: rank {self.hosts.rank} holds rows [{mine.start}, {mine.stop}); a '
                             'row update must be made by the rank that holds the rows')
        self.host_view.write_local_rows(rows - self.host_rows.start, values)

    def __repr__(self) -> str:
        mine = range(self.bounds[self.hosts.rank], self.bounds[self.hosts.rank + 1])
        return (f'HostShardedTier(shape={tuple(self._shape)}, dtype={self.dtype}, rank {self.hosts.rank} of '
                f'{self.hosts.world_size} on host {self.hosts.host} of {self.hosts.num_hosts}, rows '
                f'{mine.start}:{mine.stop} on {self.device})')


def _exchange_rows(served: List[Tensor], fetched: List[Tensor], send_sizes: List[int], recv_sizes: List[int],
                   group) -> list:
    """Sends ``served[t]``'s rows to the ranks of ``group`` (``send_sizes[r]`` rows to
    rank ``r``, in rank order) and receives into ``fetched[t]`` (``recv_sizes[r]`` from
    rank ``r``), every table ``t`` in one group of point-to-point operations (on NCCL:
    one launch, one rendezvous per peer, however many tables). Pairs with nothing to
    send or receive are left out. Returns the works to wait on."""
    ops = []
    for tag, (out_rows, in_rows) in enumerate(zip(served, fetched)):
        for peer, (rows, n) in enumerate(zip(out_rows.split_with_sizes(send_sizes), send_sizes)):
            if n:
                ops.append(dist.P2POp(dist.isend, rows, dist.get_global_rank(group, peer), group, tag))
        for peer, (rows, n) in enumerate(zip(in_rows.split_with_sizes(recv_sizes), recv_sizes)):
            if n:
                ops.append(dist.P2POp(dist.irecv, rows, dist.get_global_rank(group, peer), group, tag))
    return dist.batch_isend_irecv(ops) if ops else []


def tier_for(location, tensor: Tensor, hosts: Optional[HostLayout] = None) -> Tier:
    """The tier holding ``tensor`` at ``location`` (a :class:`~pyg_accel.data.Location`).
    Sharded (collective: every process of ``hosts.group`` passes the same tensor and
    keeps its block): in place across the processes of one host, or across several
    hosts (``hosts``: default, the default group as torchrun laid it out). Otherwise the
    whole tensor in the location's memory, kept without a copy when it is there already."""
    if location.sharded:
        hosts = hosts if hosts is not None else HostLayout.of()
        if hosts.num_hosts > 1:
            return HostShardedTier(tensor, hosts, location.device)
        return ShardedTier(ShardedTensor.from_full(tensor, hosts.group, location.device))
    placed = location.place(tensor)
    return LocalTier(placed, location.device, borrowed=placed is tensor)


def tier_for_block(location, block: Tensor, num_rows: int, hosts: Optional[HostLayout] = None) -> Tier:
    """The tier of an ``[num_rows, *]`` table sharded at ``location`` (sharded, a
    :class:`~pyg_accel.data.Location`), built from this process's block alone: its rows
    ``bounds[rank]:bounds[rank + 1]`` under :func:`row_partition` over ``hosts``' processes
    (collective; for tables no process can hold whole). The block moves to the
    location's device and is kept without a further copy."""
    if not location.sharded:
        raise ValueError(f'a block of rows makes a sharded table: the location is {location.kind!r}')
    hosts = hosts if hosts is not None else HostLayout.of()
    if not isinstance(block, Tensor) or block.dim() < 1:
        raise TypeError(f'block must be a tensor with a row dimension, got {type(block).__name__}')
    bounds = row_partition(int(num_rows), hosts.world_size)
    kind = (int(block.shape[0]), tuple(block.shape[1:]), block.dtype)
    every = [kind]
    if hosts.world_size > 1:  # (every process checks every block, so all raise together: none waits)
        every = [None] * hosts.world_size
        dist.all_gather_object(every, kind, group=hosts.group)
    for rank, (rows, row_shape, dtype) in enumerate(every):
        if rows != bounds[rank + 1] - bounds[rank] or (row_shape, dtype) != every[0][1:]:
            raise ValueError(f'process {rank} of {hosts.world_size} must hold rows {bounds[rank]}:{bounds[rank + 1]} '
                             f'of {num_rows} in the row shape and dtype of the others; the blocks are (rows, row '
                             f'shape, dtype) {every}')
    block = block.to(location.device).contiguous()
    if hosts.num_hosts > 1:
        return HostShardedTier.from_block(block, num_rows, hosts)
    return ShardedTier(ShardedTensor.from_local(block, hosts.group))


def read_together(tiers: Sequence[Tier], index: Tensor) -> List[Tensor]:
    """``[tier.read(index) for tier in tiers]``, with every whole table in local memory
    read in one launch (:func:`pyg_accel.ops.multi_gather`) and the tables sharded across
    hosts the same way in one exchange of ids (:meth:`HostShardedTier.read_many`); other
    tiers (sharded on one host, cached) read in one launch each."""
    out: List[Optional[Tensor]] = [None] * len(tiers)
    local = [i for i, tier in enumerate(tiers) if type(tier) is LocalTier]
    if len(local) > 1:
        for i, rows in zip(local, multi_gather([tiers[i].tensor for i in local], index)):
            out[i] = rows
    across: dict = {}  # (layout, bounds) -> positions of the tiers sharded that way across hosts
    for i, tier in enumerate(tiers):
        if type(tier) is HostShardedTier:
            across.setdefault((tier.hosts, tuple(tier.bounds)), []).append(i)
    for members in across.values():
        for i, rows in zip(members, HostShardedTier.read_many([tiers[i] for i in members], index)):
            out[i] = rows
    for i, tier in enumerate(tiers):
        if out[i] is None:
            out[i] = tier.read(index)
    return out
