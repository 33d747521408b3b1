"""A straightforward per-hop neighbour sampler in PyTorch ops.

The reference the fused op is tested against, and the ablation baseline of
``benchmarks/sampling.py``: one round of tensor ops per hop, sampling without
replacement by sorting random keys over *all* neighbours of the frontier (work
proportional to the degree, not the fanout), dedup through a dense ``[N]`` map.
Same output contract as :func:`pyg_accel.ops.neighbor_sample` (non-disjoint).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch
from torch import Tensor

from ..ops.sampling import SampledSubgraph

__all__ = ['per_hop_neighbor_sample']


def _first_seen_unique(values: Tensor) -> Tensor:
    """Unique values in order of first occurrence."""
    if values.numel() == 0:
        return values
    uniq, inverse = torch.unique(values, return_inverse=True)
    first = torch.full((uniq.numel(),), values.numel(), dtype=torch.long, device=values.device)
    first.scatter_reduce_(0, inverse, torch.arange(values.numel(), device=values.device), reduce='amin')
    return uniq[torch.argsort(first)]


def _draw_positions(start: Tensor, deg: Tensor, fanout: int, replace: bool,
                    generator: Optional[torch.Generator]) -> tuple[Tensor, Tensor]:
    """CSC positions drawn for each frontier node and the frontier index of each."""
    device = start.device
    m = deg.numel()
    if fanout >= 0 and replace:
        k = torch.where(deg > 0, fanout, 0)
        seg = torch.repeat_interleave(torch.arange(m, device=device), k)
        offset = (torch.rand(seg.numel(), device=device, generator=generator) * deg[seg]).long()
        return start[seg] + torch.minimum(offset, deg[seg] - 1), seg
    seg = torch.repeat_interleave(torch.arange(m, device=device), deg)
    seg_start = torch.cumsum(deg, 0) - deg
    rank = torch.arange(seg.numel(), device=device) - seg_start[seg]
    if fanout < 0:
        return start[seg] + rank, seg
    # random order inside each segment: sort by segment + a key in [0, 1)
    order = torch.argsort(seg.double() + torch.rand(seg.numel(), device=device, generator=generator,
                                                    dtype=torch.double))
    keep = rank < fanout  # the first `fanout` of each randomly ordered segment
    chosen = order[keep]
    return start[seg[chosen]] + rank[chosen], seg[chosen]


def per_hop_neighbor_sample(colptr: Tensor, row: Tensor, seed: Tensor, num_neighbors: Sequence[int],
                            replace: bool = False, generator: Optional[torch.Generator] = None) -> SampledSubgraph:
    """Per-hop PyTorch implementation of :func:`pyg_accel.ops.neighbor_sample` (non-disjoint)."""
    colptr, row = colptr.long(), row.long()
    device = colptr.device
    num_nodes = colptr.numel() - 1
    # The seeds as given, repeats included; a node reached later links to its first seed.
    node = seed.long().to(device)
    local = torch.full((num_nodes,), -1, dtype=torch.long, device=device)
    local.scatter_reduce_(0, node, torch.arange(node.numel(), device=device), reduce='amin', include_self=False)
    frontier, frontier_local = node, torch.arange(node.numel(), device=device)
    rows: List[Tensor] = []
    cols: List[Tensor] = []
    edges: List[Tensor] = []
    nodes_per_hop, edges_per_hop = [node.numel()], []
    for fanout in num_neighbors:
        start = colptr[frontier]
        pos, seg = _draw_positions(start, colptr[frontier + 1] - start, int(fanout), replace, generator)
        src = row[pos]
        cols.append(frontier_local[seg])
        new = _first_seen_unique(src[local[src] < 0])
        frontier_local = torch.arange(node.numel(), node.numel() + new.numel(), device=device)
        local[new] = frontier_local
        node = torch.cat([node, new])
        rows.append(local[src])
        edges.append(pos)
        nodes_per_hop.append(new.numel())
        edges_per_hop.append(pos.numel())
        frontier = new
    empty = torch.empty(0, dtype=torch.long, device=device)
    cat = lambda ts: torch.cat(ts) if ts else empty  # noqa: E731
    return SampledSubgraph(node, cat(rows), cat(cols), cat(edges), None, nodes_per_hop, edges_per_hop)
