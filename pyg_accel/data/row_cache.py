"""A GPU cache of the hottest rows of a feature tensor held in pinned host memory.

``FeatureStore.cache_rows`` puts one in front of a stored tensor. A read maps each id to a
slot: cached rows come first (slots ``[0, K)``) and every row of the host tensor follows
(slot ``K + id``). One sharded gather launch then serves hits from GPU memory and
misses from pinned host memory (read by the GPU through UVA). Hits and lookups are
counted on the device, so reads never sync the host; ``hit_rate()`` reads the counters.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..ops import sharded_gather

__all__ = ['RowCache', 'rows_by_degree']


class RowCache:
    """The rows ``rows`` (hottest first) of ``stored`` ``[N, *]``, copied to ``device``.

    Attributes:
        cache: ``[K, *]`` the cached rows on ``device``.
        slot: ``[N]`` (int32 when it fits, else int64) on ``device``: the slot of every id.
    """

    def __init__(self, stored: Tensor, rows: Tensor, device: torch.device) -> None:
        n = stored.shape[0]
        rows = torch.as_tensor(rows).reshape(-1).long().cpu()
        if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= n):
            raise IndexError(f'RowCache: rows must lie in [0, {n}), got min {int(rows.min())}, max {int(rows.max())}')
        if rows.unique().numel() != rows.numel():
            raise ValueError('RowCache: rows must be distinct')
        self.num_cached = rows.numel()
        self.device = device
        self.cache = stored[rows.to(stored.device)].to(device)
        slot_dtype = torch.int32 if n + self.num_cached < 2**31 else torch.int64
        slot = torch.arange(self.num_cached, self.num_cached + n, dtype=slot_dtype)
        slot[rows] = torch.arange(self.num_cached, dtype=slot_dtype)
        self.slot = slot.to(device)
        self._hits = torch.zeros((), dtype=torch.long, device=device)
        self._lookups = torch.zeros((), dtype=torch.long, device=device)

    def gather(self, stored: Tensor, index: Tensor) -> Tensor:
        """Rows ``stored[index]`` (``index`` validated, on ``device``) in one launch."""
        slots = self.slot.index_select(0, index)
        self._hits += (slots < self.num_cached).sum()
        self._lookups += index.numel()
        return sharded_gather([self.cache, stored], slots, check_bounds=False)

    def update(self, rows: Tensor, values: Tensor) -> None:
        """Keeps cached copies current after ``stored[rows] = values``."""
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
    def nbytes(self) -> int:
        """GPU bytes held: the cached rows and the slot table."""
        return self.cache.numel() * self.cache.element_size() + self.slot.numel() * self.slot.element_size()

    def __repr__(self) -> str:
        return f'RowCache({self.num_cached} rows, {self.nbytes / 2**20:.1f} MiB on {self.device})'


def rows_by_degree(graph_store, edge_type=None, num_rows: Optional[int] = None) -> Tensor:
    """Node ids ordered by how often a sampler can reach them (their number of
    out-edges in the stored graph: a node is drawn as a neighbour along those), most
    first; the first ``num_rows`` if given. For caches in front of node features."""
    csc = graph_store.graph(edge_type)
    count = torch.bincount(csc.row.long(), minlength=csc.size[0])  # sources: the nodes drawn as neighbours
    order = torch.argsort(count, descending=True, stable=True)
    return (order if num_rows is None else order[:num_rows]).cpu()
