"""Induced subgraphs of sampled node sets (``subgraph_type='induced'``).

After sampling, every edge of the graph whose two ends were both sampled is kept, not
only the edges the sampler drew; this is what stock PyG's ``subgraph_type='induced'``
returns (through torch-sparse), in the same order. Pure PyTorch, on the graph's device.
"""
from __future__ import annotations

from typing import Dict, Tuple

import torch
from torch import Tensor

__all__ = ['induced_edges', 'hetero_induced_edges']


def induced_edges(colptr: Tensor, row: Tensor, dst_nodes: Tensor, src_nodes: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """The edges from ``src_nodes`` into ``dst_nodes`` of a CSC graph.

    Args:
        colptr: ``[N_dst + 1]`` CSC column pointers; row: ``[E]`` source of each edge.
        dst_nodes: ``[n_dst]`` destination node ids (the sampled nodes; a repeated seed
            appears once per copy, and each copy gets its in-edges).
        src_nodes: ``[n_src]`` source node ids (the same tensor for a homogeneous
            graph); an edge from a repeated node comes from its first copy.

    Returns:
        ``(row, col, edge)``, each ``[k]`` int64: local source index into
        ``src_nodes``, local destination index into ``dst_nodes``, and the edge's CSC
        position. Ordered by destination (in ``dst_nodes`` order), then by CSC position,
        as torch-sparse orders them.
    """
    device = colptr.device
    dst = dst_nodes.to(device=device, dtype=torch.long)
    src = src_nodes.to(device=device, dtype=torch.long)
    empty = torch.empty(0, dtype=torch.long, device=device)
    if dst.numel() == 0 or src.numel() == 0:
        return empty, empty, empty
    colptr = colptr.long()
    start = colptr[dst]
    degree = colptr[dst + 1] - start
    total = int(degree.sum())
    if total == 0:
        return empty, empty, empty
    col = torch.repeat_interleave(torch.arange(dst.numel(), device=device), degree, output_size=total)
    first = torch.cumsum(degree, 0) - degree  # where each destination's edges begin in the expansion
    position = torch.arange(total, device=device) - first[col] + start[col]
    neighbour = row[position].long()
    sorted_src, order = torch.sort(src, stable=True)  # (equal ids: the first copy first)
    slot = torch.searchsorted(sorted_src, neighbour).clamp_(max=src.numel() - 1)
    kept = sorted_src[slot] == neighbour
    return order[slot[kept]], col[kept], position[kept]


def hetero_induced_edges(colptr: Dict[tuple, Tensor], row: Dict[tuple, Tensor],
                         node: Dict[str, Tensor]) -> Tuple[Dict[tuple, Tensor], Dict[tuple, Tensor],
                                                           Dict[tuple, Tensor]]:
    """:func:`induced_edges` per edge type ``(src, rel, dst)`` of a heterogeneous CSC graph,
    between the sampled nodes ``node[src]`` and ``node[dst]``; edge types whose ends were
    not both sampled get no edges. Returns ``(row, col, edge)`` dicts keyed by edge type."""
    rows, cols, edges = {}, {}, {}
    for edge_type, ptr in colptr.items():
        src_type, _, dst_type = edge_type
        empty = torch.empty(0, dtype=torch.long, device=ptr.device)
        if src_type not in node or dst_type not in node:
            rows[edge_type], cols[edge_type], edges[edge_type] = empty, empty, empty
            continue
        rows[edge_type], cols[edge_type], edges[edge_type] = induced_edges(ptr, row[edge_type], node[dst_type],
                                                                           node[src_type])
    return rows, cols, edges
