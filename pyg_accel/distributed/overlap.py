"""Aggregation over a partition with the halo exchange hidden behind the local edges.

:meth:`GraphPartition.exchange` brings the halo's rows first and aggregates afterwards,
so every layer waits for the all-to-all. A :class:`HaloGraph` splits the partition's
edges by source instead: the *inner* edges read rows this process owns, the *boundary*
edges read halo rows. Forward: the halo rows' all-to-all starts, the inner edges are
aggregated while it runs, then the boundary edges are added into the same output
(:func:`pyg_accel.ops.spmm_add_`). Backward, the other way round: the boundary edges'
gradients go back to their owners while the inner edges' gradient is computed. On the
GPU the all-to-all runs on NCCL's stream, concurrently with the SpMM on the compute
stream; no host synchronisation is added. Rows travel in the partition's
``exchange_dtype`` when it is narrower (:meth:`GraphPartition.wire_dtype`).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..ops import CooGraph, spmm
from ..ops.sparse import spmm_add_, spmm_adjoint, take_rows
from .full_graph import GraphPartition

__all__ = ['HaloGraph']


class HaloGraph:
    """The weighted sum ``out[d] = sum_e w_e h[src_e]`` over a partition's edges into its
    local rows, with the halo exchange overlapped (see the module's docstring).

    Args:
        part: this process's partition.
        edge_index: ``[2, E]`` edges in the partition's local ids (sources in
            ``[0, num_local + num_halo)``, destinations below ``num_local``; default:
            ``part.edge_index``), e.g. :meth:`GraphPartition.gcn_norm`'s.
        edge_weight: ``[E]`` constant edge weights (no gradient flows to them); default 1.
        reduce: ``'sum'``, or ``'mean'`` (each destination's sum divided by its number
            of edges here; every in-edge of a local node is local).

    Attributes:
        inner: the edges whose source is local, ``num_local -> num_local``.
        boundary: the edges whose source is a halo row, ``num_halo -> num_local``.
        inner_weight, boundary_weight: their weights in each graph's edge order (or None).
    """

    def __init__(self, part: GraphPartition, edge_index: Optional[Tensor] = None,
                 edge_weight: Optional[Tensor] = None, reduce: str = 'sum') -> None:
        if reduce not in ('sum', 'mean'):
            raise ValueError(f"HaloGraph: reduce must be 'sum' or 'mean', got {reduce!r}")
        edge_index = part.edge_index if edge_index is None else edge_index
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(f'HaloGraph: edge_index must be [2, E], got {tuple(edge_index.shape)}')
        if edge_weight is not None and tuple(edge_weight.shape) != (edge_index.size(1),):
            raise ValueError(f'HaloGraph: edge_weight must be [{edge_index.size(1)}], got {tuple(edge_weight.shape)}')
        if edge_weight is not None and edge_weight.requires_grad:
            raise ValueError('HaloGraph: edge_weight is a constant here (no gradient reaches it); pass '
                             'edge_weight.detach(), or aggregate learned weights with exchange() and spmm')
        self.part = part
        n, src, dst = part.num_local, edge_index[0], edge_index[1]
        if reduce == 'mean':
            inv = torch.bincount(dst.long(), minlength=n).clamp(min=1).float().reciprocal()[dst.long()]
            edge_weight = inv if edge_weight is None else edge_weight * inv.to(edge_weight.dtype)
        local = src < n
        self.inner, self.inner_weight = self._graph(src[local], dst[local], edge_weight, local, (n, n))
        halo = ~local
        self.boundary, self.boundary_weight = self._graph(src[halo] - n, dst[halo], edge_weight, halo,
                                                          (part.num_halo, n))

    @staticmethod
    def _graph(src: Tensor, dst: Tensor, weight: Optional[Tensor], keep: Tensor, size: Tuple[int, int]
               ) -> Tuple[CooGraph, Optional[Tensor]]:
        graph = CooGraph.from_edge_index(torch.stack([src, dst]), size)  # (checks the ids once)
        return graph, None if weight is None else graph.sort_edges(weight[keep]).contiguous()

    def aggregate(self, h: Tensor) -> Tensor:
        """``[num_local, *] -> [num_local, *]``: the sum over every edge into each local
        row of its weight times the source's row of ``h`` (the halo's rows fetched from
        their owners). Differentiable in ``h``; every process of the group must call it
        (same order, same trailing shape)."""
        if h.size(0) != self.part.num_local:
            raise ValueError(f'HaloGraph.aggregate: expected {self.part.num_local} local rows, got {tuple(h.shape)}')
        if self.part.world_size == 1:
            return spmm(self.inner, h, self.inner_weight)
        return _OverlappedAggregate.apply(h, self)

    def __repr__(self) -> str:
        return (f'HaloGraph(num_local={self.part.num_local}, num_halo={self.part.num_halo}, '
                f'inner_edges={self.inner.num_edges}, boundary_edges={self.boundary.num_edges})')


def _start(out: Tensor, inp: Tensor, out_counts, in_counts, group):
    return dist.all_to_all_single(out, inp, out_counts, in_counts, group=group, async_op=True)


def _finish(work, part: GraphPartition, device: torch.device) -> None:
    """Makes the compute stream wait for ``work``; the timer, if any, gets the wait that
    the compute stream sees (the exchange's time not hidden behind the local edges)."""
    begin = part.timer.start(device) if part.timer is not None else None
    work.wait()
    if begin is not None:
        part.timer.stop(begin)


class _OverlappedAggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: Tensor, graph: HaloGraph) -> Tensor:
        ctx.graph = graph
        part = graph.part
        h = h.contiguous()
        wire = part.wire_dtype(h.dtype)
        recv = h.new_empty((part.num_halo, *h.shape[1:]), dtype=wire)
        work = _start(recv, take_rows(h, part.send_index).to(wire), part.recv_counts, part.send_counts, part.group)
        out = spmm(graph.inner, h, graph.inner_weight)  # runs while the halo rows travel
        _finish(work, part, h.device)
        return spmm_add_(out, graph.boundary, recv.to(h.dtype), graph.boundary_weight)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        graph = ctx.graph
        part = graph.part
        grad = grad.contiguous()
        grad_halo = spmm_adjoint(graph.boundary, grad, weight=graph.boundary_weight)  # [num_halo, *]
        wire = part.wire_dtype(grad.dtype)
        back = grad.new_empty((part.send_index.numel(), *grad.shape[1:]), dtype=wire)
        work = _start(back, grad_halo.to(wire), part.send_counts, part.recv_counts, part.group)
        grad_h = spmm_adjoint(graph.inner, grad, weight=graph.inner_weight)  # runs while they travel back
        _finish(work, part, grad.device)
        return grad_h.index_add_(0, part.send_index, back.to(grad_h.dtype)), None
