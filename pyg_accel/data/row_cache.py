"""A GPU cache of the hottest rows of a table, as a tier in front of the tier that holds
it (typically features in pinned host memory), and the orders that rank rows for it.

``FeatureStore.cache_rows`` puts one in front of a stored tensor. A read maps each id to a
slot: cached rows come first (slots ``[0, K)``) and every row of the table follows
(slot ``K + id``). One sharded gather launch then serves hits from GPU memory and
misses from the fallback tier's memories (pinned host memory read by the GPU through
UVA). Hits and lookups are counted on the device, so reads never sync the host;
``hit_rate()`` reads the counters.
"""
from __future__ import annotations

from typing import Iterable, Iterator, List, Optional

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from ..ops import sharded_gather
from ..ops.gather import check_index_bounds
from .tiers import Tier

__all__ = ['RowCache', 'rows_by_degree', 'rows_by_access', 'presample_node_ids']


class RowCache(Tier):
    """The rows ``rows`` (hottest first) of the table ``fallback`` holds, copied to
    ``device``, in front of it: reads serve them from there and the rest from
    ``fallback``; writes go to both.

    Attributes:
        fallback: the tier that holds every row.
        cache: ``[K, *]`` the cached rows on ``device``.
        slot: ``[N]`` (int32 when it fits, else int64) on ``device``: the slot of every id.
    """

    def __init__(self, fallback: Tier, rows: Tensor, device: torch.device) -> None:
        if fallback.shared:
            raise ValueError('RowCache: the table is written by other processes too (a sharded table, already in '
                             "GPU memory): a cache here would go stale (the row cache fronts 'pinned' host memory)")
        fallback = fallback.uncached()
        n = fallback.shape[0]
        rows = torch.as_tensor(rows).reshape(-1).long().cpu()
        if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= n):
            raise IndexError(f'RowCache: rows must lie in [0, {n}), got min {int(rows.min())}, max {int(rows.max())}')
        if rows.unique().numel() != rows.numel():
            raise ValueError('RowCache: rows must be distinct')
        self.fallback = fallback
        self.num_cached = rows.numel()
        self.device = device
        self.cache = fallback.read(rows.to(fallback.device)).to(device)
        slot_dtype = torch.int32 if n + self.num_cached < 2**31 else torch.int64
        slot = torch.arange(self.num_cached, self.num_cached + n, dtype=slot_dtype)
        slot[rows] = torch.arange(self.num_cached, dtype=slot_dtype)
        self.slot = slot.to(device)
        self._hits = torch.zeros((), dtype=torch.long, device=device)
        self._lookups = torch.zeros((), dtype=torch.long, device=device)

    def tables(self) -> List[Tensor]:
        return self.fallback.tables()

    def uncached(self) -> Tier:
        return self.fallback

    def whole(self) -> Tensor:
        return self.fallback.whole()

    def read(self, index: Tensor) -> Tensor:
        """Rows at ``index`` (on ``device``) in one launch, hits counted on the device."""
        check_index_bounds(index, self.fallback.shape[0])
        slots = self.slot.index_select(0, index)
        self._hits += (slots < self.num_cached).sum()
        self._lookups += index.numel()
        return sharded_gather([self.cache, *self.fallback.tables()], slots, check_bounds=False)

    def write_rows(self, rows: Tensor, values: Tensor) -> None:
        """Writes through to the fallback and keeps the cached copies current."""
        self.fallback.write_rows(rows, values)
        slots = self.slot.index_select(0, rows.to(self.device))
        hit = slots < self.num_cached
        self.cache[slots[hit].long()] = values.to(self.device)[hit]

    def hit_rate(self) -> float:
        """Fraction of the ids read since the last ``reset_stats`` that were cached."""
        lookups = int(self._lookups)
        return int(self._hits) / lookups if lookups else float('nan')

    def reset_stats(self) -> None:
        """Zeroes the hit and lookup counters (e.g. once per epoch)."""
        self._hits.zero_()
        self._lookups.zero_()

    @property
    def cache_nbytes(self) -> int:
        """GPU bytes the cache holds: the cached rows and the slot table."""
        return self.cache.numel() * self.cache.element_size() + self.slot.numel() * self.slot.element_size()

    def __repr__(self) -> str:
        return f'RowCache({self.num_cached} rows, {self.cache_nbytes / 2**20:.1f} MiB on {self.device})'


def rows_by_degree(graph_store, edge_type=None, num_rows: Optional[int] = None) -> Tensor:
    """Node ids ordered by how often a sampler can reach them (their number of
    out-edges in the stored graph: a node is drawn as a neighbour along those), most
    first; the first ``num_rows`` if given. For caches in front of node features."""
    csc = graph_store.graph(edge_type)
    count = torch.bincount(csc.row.long(), minlength=csc.size[0])  # sources: the nodes drawn as neighbours
    order = torch.argsort(count, descending=True, stable=True)
    return (order if num_rows is None else order[:num_rows]).cpu()


def rows_by_access(node_ids: Iterable[Tensor], num_nodes: int, num_rows: Optional[int] = None) -> Tensor:
    """Node ids ordered by how often they occur in ``node_ids`` (the measured access
    frequency; e.g. :func:`presample_node_ids`, GNNLab's pre-sampling), most first, then
    the nodes never seen, by id; the first ``num_rows`` if given. For caches in front of
    node features.

    Args:
        node_ids: 1-D integer tensors of ids in ``[0, num_nodes)``, on any one device
            (counted there). A node that occurs twice in one tensor (disjoint trees) is
            counted twice: it is read twice.
        num_nodes: the number of nodes (rows of the feature tensor).
    """
    counts: Optional[Tensor] = None
    for ids in node_ids:
        ids = torch.as_tensor(ids).reshape(-1).long()
        if counts is None:
            counts = torch.zeros(num_nodes, dtype=torch.long, device=ids.device)
        lo, hi = (int(v) for v in torch.aminmax(ids)) if ids.numel() else (0, 0)
        if lo < 0 or hi >= num_nodes:
            raise IndexError(f'rows_by_access: node ids must lie in [0, {num_nodes})')
        counts.index_put_((ids.to(counts.device),), torch.ones_like(ids, device=counts.device), accumulate=True)
    if counts is None:
        raise ValueError('rows_by_access: no node ids to count (an empty iterable)')
    order = torch.argsort(counts, descending=True, stable=True)
    return (order if num_rows is None else order[:num_rows]).cpu()


def presample_node_ids(loader, num_batches: int = 16, node_type: Optional[str] = None,
                       generator: Optional[torch.Generator] = None) -> Iterator[Tensor]:
    """The sampled node ids of ``num_batches`` batches of random seeds, drawn by the
    sampler of ``loader`` (a PyG or pyg_accel ``NeighborLoader`` / ``LinkNeighborLoader``
    / ``NodeLoader``) without reading any features: input for :func:`rows_by_access`.
    ``node_type`` picks one type's ids from heterogeneous batches."""
    positions = torch.randperm(len(loader.dataset), generator=generator)
    for index in positions.split(loader.batch_size)[:num_batches]:
        out = loader.collate_fn(index)  # the sampler's output (or a batch, with filter_per_worker)
        node = getattr(out, 'node', None)
        if node is None:  # a Data / HeteroData batch
            node = {t: out[t].n_id for t in out.node_types} if isinstance(out, HeteroData) else out.n_id
        if isinstance(node, dict):
            if node_type is None:
                raise ValueError('presample_node_ids: heterogeneous batches need node_type')
            node = node[node_type]
        yield node
