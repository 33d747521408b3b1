"""A sampled batch padded hop by hop into fixed-size buffers: the inputs of a training
step captured as a CUDA graph (:mod:`pyg_accel.training`). One node type's rows
(:func:`pad_hop_rows`) and one edge type's edges (:func:`pad_hop_edges`) per call, one
kernel launch each on a GPU; :func:`pad_hops` pads a homogeneous batch's ``x`` and
``edge_index`` together.

A batch of an ``H``-hop sample lists each node type's nodes in ``H + 1`` groups (the
seeds first) and each edge type's edges in ``H`` groups: hop ``k + 1``'s edges end at the
destination type's group ``k``. Every group gets padding after it; ids shift by the
padding of the groups before their own, and each edge group's padding edges run from
the padding nodes of the source type's group ``k + 1`` to those of the destination type's
group ``k``, spread evenly and in order (still sorted by destination).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from .. import _build
from ._library import ops
from .sparse import check_edge_index, is_trusted_edge_index

__all__ = ['pad_hops', 'pad_hop_rows', 'pad_hop_edges']

# What a pad op or its argument handling raises for arguments it refuses (after its own
# checks, before it writes anything): the pads then check in Python, naming the argument.
_REFUSED = (RuntimeError, TypeError, AttributeError, IndexError)


def pad_hop_rows(x: Tensor, nodes: Sequence[int], padded_nodes: Sequence[int], x_out: Tensor) -> None:
    """Copies hop-ordered rows into a padded buffer.

    Args:
        x: ``[N, ...]`` rows, ``nodes[g]`` of node group ``g`` at a time (the seeds first).
        nodes / padded_nodes: the ``H + 1`` group sizes, real and padded
            (``padded_nodes[g] > nodes[g]``).
        x_out: ``[sum(padded_nodes), ...]`` contiguous, ``x``'s trailing shape and dtype:
            group ``g``'s rows go to its padded start; the padding rows keep what they held.
    """
    try:  # the op first: it checks its arguments before it writes, so a call it refuses changed nothing
        if x_out.is_contiguous() and x.shape[1:] == x_out.shape[1:]:  # (else: the checks below say what is wrong)
            ops().pad_hop_rows(_matrix(x), nodes, padded_nodes, _matrix(x_out))
            torch.autograd.graph.increment_version(x_out)  # (a custom op's writes do not bump it: memos would go stale)
            return
    except _REFUSED:
        pass  # (the checks below raise an error that names the argument)
    _check_tensors(pad_hop_rows, x=x, x_out=x_out)
    nodes, padded_nodes = _counts(nodes), _counts(padded_nodes)
    _check_groups('nodes', nodes, padded_nodes, minimum=2)
    _check_rows(x, x_out, nodes, padded_nodes)
    ops().pad_hop_rows(_matrix(x), nodes, padded_nodes, _matrix(x_out))
    torch.autograd.graph.increment_version(x_out)  # (a custom op's writes do not bump it: memos would go stale)


def pad_hop_edges(edge_index: Tensor, edges: Sequence[int], padded_edges: Sequence[int], src_nodes: Sequence[int],
                  src_padded_nodes: Sequence[int], dst_nodes: Sequence[int], dst_padded_nodes: Sequence[int],
                  edge_index_out: Tensor) -> None:
    """Copies a hop-ordered edge type into a padded buffer, ids remapped to the padded rows.

    Args:
        edge_index: ``[2, E]`` int64, ``edges[k]`` of hop ``k + 1`` at a time (ending at the
            destination type's group ``k``); ids below the node counts' sums (checked
            unless a pyg_accel loader marked them in range).
        edges / padded_edges: the ``H`` group sizes, real and padded (``padded >= real``).
        src_nodes / src_padded_nodes, dst_nodes / dst_padded_nodes: the ``H + 1`` group
            sizes of the source and destination node types, as given to
            :func:`pad_hop_rows` (the same lists in a homogeneous batch).
        edge_index_out: ``[2, sum(padded_edges)]`` contiguous int64: each group's edges,
            then padding edges that feed padding nodes only.
    """
    try:  # the op first for ids a loader marked in range (it checks the counts before it writes)
        if is_trusted_edge_index(edge_index, (sum(src_nodes), sum(dst_nodes))):
            ops().pad_hop_edges(edge_index, edges, padded_edges, src_nodes, src_padded_nodes, dst_nodes,
                                dst_padded_nodes, edge_index_out)
            torch.autograd.graph.increment_version(edge_index_out)
            return
    except _REFUSED:
        pass  # (the checks below raise an error that names the argument)
    _check_tensors(pad_hop_edges, edge_index=edge_index, edge_index_out=edge_index_out)
    edges, padded_edges = _counts(edges), _counts(padded_edges)
    src_nodes, src_padded_nodes = _counts(src_nodes), _counts(src_padded_nodes)
    dst_nodes, dst_padded_nodes = _counts(dst_nodes), _counts(dst_padded_nodes)
    _check_edges(edge_index, edge_index_out, edges, padded_edges)
    for what, real, padded in (('src_nodes', src_nodes, src_padded_nodes), ('dst_nodes', dst_nodes, dst_padded_nodes)):
        if len(real) != len(edges) + 1:
            raise ValueError(f'pad_hops: edges must have 1 to 16 entries and {what} one more, got {len(edges)} and '
                             f'{len(real)}')
        _check_groups(what, real, padded, minimum=2)
    size = (sum(src_nodes), sum(dst_nodes))
    if not is_trusted_edge_index(edge_index, size):
        check_edge_index(edge_index, size)  # (one host sync; a loader's batches skip it)
    ops().pad_hop_edges(edge_index, edges, padded_edges, src_nodes, src_padded_nodes, dst_nodes, dst_padded_nodes,
                        edge_index_out)
    torch.autograd.graph.increment_version(edge_index_out)


def pad_hops(x: Tensor, edge_index: Tensor, nodes: Sequence[int], edges: Sequence[int],
             padded_nodes: Sequence[int], padded_edges: Sequence[int], x_out: Tensor, edge_index_out: Tensor) -> None:
    """Pads a homogeneous batch: :func:`pad_hop_rows` of ``x`` and :func:`pad_hop_edges`
    of ``edge_index`` over the same node groups.

    Shapes: ``x`` ``[N, F]``, ``edge_index`` ``[2, E]`` int64, ``nodes`` / ``padded_nodes``
    ``H + 1`` counts, ``edges`` / ``padded_edges`` ``H`` counts, ``x_out``
    ``[sum(padded_nodes), F]``, ``edge_index_out`` ``[2, sum(padded_edges)]``.
    """
    _check_tensors(pad_hops, x=x, edge_index=edge_index, x_out=x_out, edge_index_out=edge_index_out)
    if x.device != edge_index.device:
        raise ValueError('pad_hops: every tensor must be on one device')
    nodes, padded_nodes = _counts(nodes), _counts(padded_nodes)
    edges, padded_edges = _counts(edges), _counts(padded_edges)
    if len(nodes) != len(edges) + 1:
        raise ValueError(f'pad_hops: edges must have 1 to 16 entries and nodes one more, got {len(edges)} and '
                         f'{len(nodes)}')
    _check_groups('nodes', nodes, padded_nodes, minimum=2)
    _check_rows(x, x_out, nodes, padded_nodes)  # (everything checked before anything is written)
    _check_edges(edge_index, edge_index_out, edges, padded_edges)
    n = sum(nodes)
    if not is_trusted_edge_index(edge_index, (n, n)):
        check_edge_index(edge_index, (n, n))  # (one host sync; a loader's batches skip it)
    ops().pad_hop_edges(edge_index, edges, padded_edges, nodes, padded_nodes, nodes, padded_nodes, edge_index_out)
    ops().pad_hop_rows(_matrix(x), nodes, padded_nodes, _matrix(x_out))
    for t in (edge_index_out, x_out):  # (a custom op's writes do not bump the version: memos would go stale)
        torch.autograd.graph.increment_version(t)


def _counts(values: Sequence[int]) -> list:
    return [int(v) for v in values]


def _matrix(t: Tensor) -> Tensor:
    """``t`` as ``[N, F]`` (a vector as one column; trailing dimensions flattened)."""
    return t.reshape(t.size(0), -1) if t.dim() != 2 else t


def _check_tensors(fn, **tensors) -> None:
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f'{fn.__name__}: {name} must be a torch.Tensor, got {type(t).__name__}')


def _check_groups(what: str, real: list, padded: list, minimum: int) -> None:
    """ValueErrors naming ``what``, before the kernels (which check again)."""
    if not minimum <= len(real) <= 17:
        raise ValueError(f'pad_hops: {what} must have {minimum} to 17 entries, got {len(real)}')
    if len(padded) != len(real):
        raise ValueError(f'pad_hops: padded_{what} must have as many entries as {what}, got {len(padded)} and '
                         f'{len(real)}')
    for g, (count, slots) in enumerate(zip(real, padded)):
        if count < 0 or slots <= count:
            raise ValueError(f'pad_hops: hop {g} has {count} {what} and {slots} padded slots: each hop needs at least '
                             'one padding node')


def _check_rows(x: Tensor, x_out: Tensor, nodes: list, padded_nodes: list) -> None:
    if x.dim() == 0 or x.shape[1:] != x_out.shape[1:] or x.dtype != x_out.dtype:
        raise ValueError(f'pad_hops: x and x_out must be [N, ...] tensors of one trailing shape and dtype, got '
                         f'{tuple(x.shape)} {x.dtype} and {tuple(x_out.shape)} {x_out.dtype}')
    if not x_out.is_contiguous():
        raise ValueError('pad_hops: x_out must be contiguous')
    if x.device != x_out.device:
        raise ValueError('pad_hops: x and x_out must be on one device')
    for name, t, want in (('x', x, sum(nodes)), ('x_out', x_out, sum(padded_nodes))):
        if t.size(0) != want:
            raise ValueError(f'pad_hops: {name} has {t.size(0)} rows, the counts add up to {want}')


def _check_edges(edge_index: Tensor, edge_index_out: Tensor, edges: list, padded_edges: list) -> None:
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or edge_index.dtype != torch.int64:
        raise ValueError(f'pad_hops: edge_index must be a [2, E] int64 tensor, got {tuple(edge_index.shape)} '
                         f'{edge_index.dtype}')
    if edge_index_out.dim() != 2 or edge_index_out.size(0) != 2 or edge_index_out.dtype != torch.int64 or \
            not edge_index_out.is_contiguous():
        raise ValueError('pad_hops: edge_index_out must be a contiguous [2, E\'] int64 tensor')
    if edge_index.device != edge_index_out.device:
        raise ValueError('pad_hops: edge_index and edge_index_out must be on one device')
    if not 1 <= len(edges) <= 16 or len(padded_edges) != len(edges):
        raise ValueError(f'pad_hops: edges must have 1 to 16 entries and padded_edges as many, got {len(edges)} and '
                         f'{len(padded_edges)}')
    for k, (count, slots) in enumerate(zip(edges, padded_edges)):
        if count < 0 or slots < count:
            raise ValueError(f'pad_hops: hop {k + 1} has {count} edges and {slots} padded slots')
    for name, t, want in (('edge_index', edge_index, sum(edges)), ('edge_index_out', edge_index_out,
                                                                     sum(padded_edges))):
        if t.size(1) != want:
            raise ValueError(f'pad_hops: {name} has {t.size(1)} columns, the counts add up to {want}')


@_build.on_load
def _register() -> None:
    for name in ('pad_hop_rows', 'pad_hop_edges'):
        torch.library.register_fake(f'pyg_accel::{name}')(lambda *args: None)
