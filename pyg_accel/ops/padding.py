"""A sampled batch padded hop by hop into fixed-size buffers, in one call (two kernel
launches on a GPU): the inputs of a training step captured as a CUDA graph
(:mod:`pyg_accel.training`)."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from .. import _build
from ._library import ops
from .sparse import check_edge_index, is_trusted_edge_index

__all__ = ['pad_hops']


def pad_hops(x: Tensor, edge_index: Tensor, nodes: Sequence[int], edges: Sequence[int],
             padded_nodes: Sequence[int], padded_edges: Sequence[int], x_out: Tensor, edge_index_out: Tensor) -> None:
    """Copies a hop-ordered batch into padded buffers.

    Args:
        x: ``[N, F]`` node rows, ``nodes[g]`` of node group ``g`` at a time (the seeds first).
        edge_index: ``[2, E]`` int64, ``edges[k]`` of hop ``k + 1`` at a time (ending at
            group ``k``'s nodes); ids below ``N`` (checked unless a pyg_accel loader marked
            it in range).
        nodes / edges: the ``H + 1`` / ``H`` group sizes.
        padded_nodes / padded_edges: the padded sizes (``padded_nodes[g] > nodes[g]``,
            ``padded_edges[k] >= edges[k]``).
        x_out: ``[sum(padded_nodes), F]`` contiguous, ``x``'s dtype: group ``g``'s rows go
            to its padded start; the padding rows keep what they held.
        edge_index_out: ``[2, sum(padded_edges)]`` contiguous int64: each group's edges,
            ids remapped to the padded rows, then padding edges from the last padding
            node of group ``k + 1`` to the last of group ``k``, which feed padding nodes
            only.
    """
    for name, t in (('x', x), ('edge_index', edge_index), ('x_out', x_out), ('edge_index_out', edge_index_out)):
        if not isinstance(t, Tensor):
            raise TypeError(f'pad_hops: {name} must be a torch.Tensor, got {type(t).__name__}')
    n = x.size(0) if x.dim() == 2 else None
    if n is not None and edge_index.dim() == 2 and edge_index.size(0) == 2 and \
            not is_trusted_edge_index(edge_index, (n, n)):
        check_edge_index(edge_index, (n, n))  # (one host sync; a loader's batches skip it)
    ops().pad_hops(x, edge_index, [int(n) for n in nodes], [int(e) for e in edges], [int(n) for n in padded_nodes],
                   [int(e) for e in padded_edges], x_out, edge_index_out)


@_build.on_load
def _register() -> None:
    torch.library.register_fake('pyg_accel::pad_hops')(lambda *args: None)
