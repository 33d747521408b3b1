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
            ids remapped to the padded rows, then padding edges from the padding nodes
            of group ``k + 1`` (in turn) to those of group ``k`` (spread evenly, in
            order: still sorted by destination), which feed padding nodes only.
    """
    for name, t in (('x', x), ('edge_index', edge_index), ('x_out', x_out), ('edge_index_out', edge_index_out)):
        if not isinstance(t, Tensor):
            raise TypeError(f'pad_hops: {name} must be a torch.Tensor, got {type(t).__name__}')
    nodes, edges = [int(n) for n in nodes], [int(e) for e in edges]
    padded_nodes, padded_edges = [int(n) for n in padded_nodes], [int(e) for e in padded_edges]
    _check_layout(x, edge_index, nodes, edges, padded_nodes, padded_edges, x_out, edge_index_out)
    n = x.size(0)
    if not is_trusted_edge_index(edge_index, (n, n)):
        check_edge_index(edge_index, (n, n))  # (one host sync; a loader's batches skip it)
    ops().pad_hops(x, edge_index, nodes, edges, padded_nodes, padded_edges, x_out, edge_index_out)
    for t in (x_out, edge_index_out):  # (a custom op's writes do not bump the version: memos would go stale)
        torch.autograd.graph.increment_version(t)


def _check_layout(x, edge_index, nodes, edges, padded_nodes, padded_edges, x_out, edge_index_out) -> None:
    """ValueErrors naming the argument, before the kernels (which check again)."""
    if x.dim() != 2 or x_out.dim() != 2 or x.size(1) != x_out.size(1) or x.dtype != x_out.dtype:
        raise ValueError(f'pad_hops: x and x_out must be [N, F] matrices of one width and dtype, got '
                         f'{tuple(x.shape)} {x.dtype} and {tuple(x_out.shape)} {x_out.dtype}')
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or edge_index.dtype != torch.int64:
        raise ValueError(f'pad_hops: edge_index must be a [2, E] int64 tensor, got {tuple(edge_index.shape)} '
                         f'{edge_index.dtype}')
    if edge_index_out.dim() != 2 or edge_index_out.size(0) != 2 or edge_index_out.dtype != torch.int64 or \
            not edge_index_out.is_contiguous() or not x_out.is_contiguous():
        raise ValueError('pad_hops: x_out and edge_index_out must be contiguous, edge_index_out [2, E\'] int64')
    if len({x.device, x_out.device, edge_index.device, edge_index_out.device}) != 1:
        raise ValueError('pad_hops: every tensor must be on one device')
    if not 1 <= len(edges) <= 16 or len(nodes) != len(edges) + 1:
        raise ValueError(f'pad_hops: edges must have 1 to 16 entries and nodes one more, got {len(edges)} and '
                         f'{len(nodes)}')
    if len(padded_nodes) != len(nodes) or len(padded_edges) != len(edges):
        raise ValueError('pad_hops: padded_nodes / padded_edges must have as many entries as nodes / edges')
    for g, (count, slots) in enumerate(zip(nodes, padded_nodes)):
        if count < 0 or slots <= count:
            raise ValueError(f'pad_hops: hop {g} has {count} nodes and {slots} padded slots: each hop needs at least '
                             'one padding node')
    for k, (count, slots) in enumerate(zip(edges, padded_edges)):
        if count < 0 or slots < count:
            raise ValueError(f'pad_hops: hop {k + 1} has {count} edges and {slots} padded slots')
    for name, t, want in (('x', x, sum(nodes)), ('x_out', x_out, sum(padded_nodes))):
        if t.size(0) != want:
            raise ValueError(f'pad_hops: {name} has {t.size(0)} rows, the counts add up to {want}')
    for name, t, want in (('edge_index', edge_index, sum(edges)), ('edge_index_out', edge_index_out,
                                                                     sum(padded_edges))):
        if t.size(1) != want:
            raise ValueError(f'pad_hops: {name} has {t.size(1)} columns, the counts add up to {want}')


@_build.on_load
def _register() -> None:
    torch.library.register_fake('pyg_accel::pad_hops')(lambda *args: None)
