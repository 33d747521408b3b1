"""Sparse-dense ops for message passing: SpMM, SDDMM and edge softmax over a graph
held once as destination-sorted COO (``CooGraph``), with autograd.

Edges flow ``edge_index[0]`` (source) → ``edge_index[1]`` (destination), as in PyG.
Node features are ``[N, F]`` or ``[N, H, C]`` (H heads); per-edge values are ``[E]`` or
``[E, H]`` **in the graph's sorted edge order** (``graph.sort_edges(values)`` puts values
given in ``edge_index`` order into it). No op builds an ``E x F`` tensor.
"""
from __future__ import annotations

import numbers
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import _build
from ._library import check_cuda_built, ops
from ._marks import record, recorded
from .gather import gather

__all__ = ['CooGraph', 'spmm', 'spmm_add_', 'sddmm', 'edge_softmax', 'take_rows']


def take_rows(t: Tensor, index: Tensor) -> Tensor:
    """``t[index]`` along dim 0 for indices already known to be in range, differentiable.

    On the GPU, rows of 16 bytes or more go through pyg_accel's gather kernel: PyTorch's
    ``index_select`` / advanced indexing runs far below bandwidth on narrow rows (an
    H100, 62 M rows of 32 B: 37 ms against 3.9 ms).
    """
    if t.is_cuda and t.dim() >= 2 and t.shape[1:].numel() * t.element_size() >= 16:  # (t may have no rows)
        return gather(t, index, check_bounds=False)
    return t.index_select(0, index)


def trust_edge_index(edge_index: Tensor, num_src: int, num_dst: int, dst_sorted: bool = False) -> Tensor:
    """Records that ``edge_index`` (as it is now) holds sources in ``[0, num_src)`` and
    destinations in ``[0, num_dst)`` (and, with ``dst_sorted``, destinations in
    non-decreasing order), so that layers build its graph without the validating host
    sync (and without sorting). pyg_accel's loaders mark the batches they produce."""
    record(edge_index, '_pyg_accel_trusted', (int(num_src), int(num_dst), bool(dst_sorted)))
    return edge_index


def is_trusted_edge_index(edge_index: Tensor, size: Tuple[int, int]) -> bool:
    """Whether ``edge_index`` was marked in range for a graph of ``size`` and is unchanged since."""
    mark = recorded(edge_index, '_pyg_accel_trusted')
    return mark is not None and mark[0] <= size[0] and mark[1] <= size[1]


def is_trusted_dst_sorted(edge_index: Tensor) -> bool:
    """Whether ``edge_index`` was marked sorted by destination and is unchanged since."""
    mark = recorded(edge_index, '_pyg_accel_trusted')
    return mark is not None and mark[2]


def _check_range(edge_index: Tensor, size: Optional[Tuple[int, int]]) -> Tuple[Tuple[int, int], bool]:
    """``(size, unsorted)`` of a ``[2, E]`` integer ``edge_index`` after one host sync;
    raises ``IndexError`` for ids outside ``size`` (default: max id + 1)."""
    if torch.compiler.is_compiling() and size is not None:
        # Traced without a host sync (no graph break): the range is asserted on the
        # device, and the edges are sorted whether or not they already are.
        if edge_index.numel():
            src, dst = edge_index[0], edge_index[1]
            torch._assert_async((edge_index.min() >= 0) & (src.max() < size[0]) & (dst.max() < size[1]),
                                'CooGraph: edge_index holds ids outside the graph')
        return size, True
    if not edge_index.numel():
        return (size if size is not None else (0, 0)), False
    src, dst = edge_index[0], edge_index[1]
    lo, hi_src, hi_dst, unsorted = torch.stack([edge_index.min(), src.max(), dst.max(),
                                                (dst[1:] < dst[:-1]).any().to(edge_index.dtype)]).tolist()
    if size is None:
        size = (max(hi_src, hi_dst) + 1,) * 2
    if lo < 0 or hi_src >= size[0] or hi_dst >= size[1]:
        raise IndexError(f'CooGraph: edge_index holds ids outside [0, {size[0]}) x [0, {size[1]}) '
                         f'(min {lo}, max source {hi_src}, max destination {hi_dst})')
    return size, bool(unsorted)


def check_edge_index(edge_index: Tensor, size: Tuple[int, int]) -> Tensor:
    """Raises ``IndexError`` unless every id of ``edge_index`` is inside ``size``; on
    success marks it (:func:`trust_edge_index`, sorted or not), so that building its
    graph later needs no second host sync."""
    _, unsorted = _check_range(edge_index, size)
    return trust_edge_index(edge_index, size[0], size[1], dst_sorted=not unsorted)


def _index_dtype(num_src: int, num_dst: int, num_edges: int) -> torch.dtype:
    """The id dtype a graph keeps: int32 when every id and edge position fits."""
    return torch.int32 if max(num_src, num_dst, num_edges) < 2**31 else torch.int64


def _check_parts(ptr, src, dst, perm, num_src, num_dst) -> None:
    """Raises a ``TypeError`` / ``ValueError`` / ``IndexError`` naming the part of a
    :class:`CooGraph` that is not what the kernels read."""
    for name, n in (('num_src', num_src), ('num_dst', num_dst)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ValueError(f'CooGraph: {name} must be an int >= 0, got {n!r}')
    for name, t in (('ptr', ptr), ('src', src), ('dst', dst), ('perm', perm)):
        if t is None and name == 'perm':
            continue
        if not isinstance(t, Tensor) or t.dim() != 1 or t.dtype not in (torch.int32, torch.int64):
            raise TypeError(f'CooGraph: {name} must be a 1-D int32/int64 tensor, got '
                            f'{getattr(t, "dtype", type(t).__name__)} {tuple(getattr(t, "shape", ()))}')
        if t.device != ptr.device:
            raise ValueError(f'CooGraph: {name} is on {t.device}, ptr on {ptr.device}')
    num_edges = src.numel()
    if ptr.dtype != torch.int64 or ptr.numel() != num_dst + 1:
        raise TypeError(f'CooGraph: ptr must be int64 of shape [num_dst + 1] = [{num_dst + 1}], got {ptr.dtype} '
                        f'{tuple(ptr.shape)}')
    if dst.dtype != src.dtype or dst.numel() != num_edges:
        raise TypeError(f'CooGraph: src and dst must share one dtype and length, got {src.dtype} [{num_edges}] and '
                        f'{dst.dtype} [{dst.numel()}]')
    if perm is not None and (perm.dtype != torch.int64 or perm.numel() != num_edges):
        raise TypeError(f'CooGraph: perm must be None or int64 of shape [{num_edges}], got {perm.dtype} '
                        f'{tuple(perm.shape)}')
    if int(ptr[0]) != 0 or int(ptr[-1]) != num_edges or bool((ptr[1:] < ptr[:-1]).any()):
        raise ValueError(f'CooGraph: ptr must start at 0, never decrease and end at len(src) = {num_edges}')
    if num_edges:
        for name, t, n in (('src', src, num_src), ('dst', dst, num_dst), ('perm', perm, num_edges)):
            if t is not None and (int(t.min()) < 0 or int(t.max()) >= n):
                raise IndexError(f'CooGraph: {name} holds ids outside [0, {n})')
        owner = torch.repeat_interleave(torch.arange(num_dst, device=ptr.device), ptr[1:] - ptr[:-1],
                                        output_size=num_edges)
        if not torch.equal(owner, dst.long()):
            raise ValueError("CooGraph: dst must be the destinations ptr gives (edges sorted by destination)")


class CooGraph:
    """A graph as COO sorted by destination, with its transpose built on first use.

    Attributes:
        ptr: ``[num_dst + 1]`` int64: destination d's edges are ``[ptr[d], ptr[d+1])``.
        src, dst: ``[E]`` endpoints in sorted order (int32 when ids fit, else int64).
        perm: ``[E]`` int64 input edge id of each sorted edge (``None``: input was sorted).
        num_src, num_dst: node counts of the source and destination sides.
    """

    def __init__(self, ptr: Tensor, src: Tensor, dst: Tensor, perm: Optional[Tensor], num_src: int, num_dst: int):
        """A graph from its parts, checked (one host sync; the kernels trust them):
        ``ptr`` int64 ``[num_dst + 1]`` from 0 to ``E``, never decreasing; ``src`` and
        ``dst`` ``[E]`` of one integer dtype, ids below ``num_src`` / ``num_dst``, ``dst``
        the destinations ``ptr`` gives; ``perm`` ``None`` or int64 ``[E]`` ids below ``E``.
        :meth:`from_edge_index` builds one from an ``edge_index``."""
        _check_parts(ptr, src, dst, perm, num_src, num_dst)
        self._setup(ptr, src, dst, perm, num_src, num_dst)

    @classmethod
    def _unchecked(cls, ptr: Tensor, src: Tensor, dst: Tensor, perm: Optional[Tensor], num_src: int,
                   num_dst: int) -> 'CooGraph':
        """A graph from parts this module built (valid by construction): no checks."""
        graph = cls.__new__(cls)
        graph._setup(ptr, src, dst, perm, num_src, num_dst)
        return graph

    def _setup(self, ptr: Tensor, src: Tensor, dst: Tensor, perm: Optional[Tensor], num_src: int,
               num_dst: int) -> None:
        self.ptr, self.src, self.dst, self._perm = ptr, src, dst, perm
        self._perm_of: Optional[Tuple[Tensor, Tensor]] = None  # (perm, order): perm = perm[order] when asked
        self.num_src, self.num_dst = int(num_src), int(num_dst)
        self._transpose: Optional[Tuple[CooGraph, Tensor]] = None
        self._in_degree: Optional[Tensor] = None
        self._mean_weight: Optional[Tensor] = None

    @classmethod
    def from_edge_index(cls, edge_index: Tensor, size: Optional[Tuple[int, int]] = None) -> 'CooGraph':
        """Sorts ``edge_index`` ([2, E], any order, duplicates and self-loops kept) by
        destination (stable). ``size = (num_src, num_dst)`` defaults to max id + 1."""
        if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(f'CooGraph: edge_index must be a [2, E] tensor, got '
                             f'{tuple(getattr(edge_index, "shape", ()))}')
        if edge_index.dtype not in (torch.int32, torch.int64):
            raise TypeError(f'CooGraph: edge_index must be int32 or int64, got {edge_index.dtype}')
        size, unsorted = _check_range(edge_index, size)
        edge_index = edge_index.detach()  # (see _sorted: rows of this, not views of the caller's tensor)
        return cls._sorted(edge_index[0], edge_index[1], int(size[0]), int(size[1]), unsorted)

    @classmethod
    def _sorted(cls, src: Tensor, dst: Tensor, num_src: int, num_dst: int, unsorted: Optional[bool] = None
                ) -> 'CooGraph':
        """``src`` / ``dst`` may be kept as they are (already the index dtype and sorted).
        Callers pass rows of a detached ``edge_index``, never views of the caller's tensor:
        a graph memoised on that tensor (ops/_marks.py) would otherwise keep it alive
        through the view's base, and the tensor, its facts and its graph would never be
        freed (int32 edge_index, which no cast copies)."""
        index_dtype = _index_dtype(num_src, num_dst, src.numel())
        key = dst.to(index_dtype)  # 32-bit keys: half the radix-sort passes of int64
        if unsorted is None:  # on a GPU, sorting beats the host sync that checking would cost
            unsorted = key.numel() > 1 and (key.is_cuda or bool((key[1:] < key[:-1]).any()))
        src = src.to(index_dtype)
        if unsorted:
            key, perm = torch.sort(key, stable=True)
            src = src[perm]
        else:
            perm = None
        # ptr[d] = first edge with key >= d: one binary search per node over the sorted
        # keys, cheaper on the GPU than a histogram's atomics into hub counters (one
        # launch: torch.searchsorted needed the queries as a tensor first)
        check_cuda_built(key.device)
        ptr = ops().csr_ptr(key, num_dst)
        return cls._unchecked(ptr, src, key, perm, num_src, num_dst)

    @classmethod
    def _from_trusted(cls, edge_index: Tensor, num_src: int, num_dst: int, dst_sorted: bool) -> 'CooGraph':
        """The graph of an ``edge_index`` known to be in range (and, with ``dst_sorted``,
        sorted by destination): no checks, one cast for both rows, no sort if sorted."""
        ei = edge_index.detach().to(_index_dtype(num_src, num_dst, edge_index.size(1)))  # (see _sorted)
        return cls._sorted(ei[0], ei[1], num_src, num_dst, unsorted=not dst_sorted)

    def edge_prefix(self, num_edges: int, num_src: int, num_dst: int, whole_destinations: bool = False
                    ) -> 'CooGraph':
        """The graph of this graph's first ``num_edges`` (sorted) edges over ``num_src`` /
        ``num_dst`` nodes, whose ids must lie below those counts: views of the edge arrays
        and a clamped ``ptr``, no sort. PyG's ``trim_to_layer`` keeps such a prefix of a
        sampled batch's edges. With ``whole_destinations`` (no destination loses some but not
        all of its edges, as when trimming whole hops) the 1/deg edge weights carry over.

        Shapes: ``ptr`` ``[num_dst + 1]``, ``src`` / ``dst`` ``[num_edges]``.
        """
        if not (0 <= num_edges <= self.num_edges and 0 <= num_src <= self.num_src and 0 <= num_dst <= self.num_dst):
            raise ValueError(f'edge_prefix: {num_edges} edges over {num_src} x {num_dst} nodes is not a prefix of '
                             f'{self!r}')
        # destination d keeps its edges below num_edges: [min(ptr[d], E'), min(ptr[d + 1], E'))
        ptr = self.ptr[:num_dst + 1].clamp(max=num_edges)
        perm = None if self.perm is None else self.perm[:num_edges]
        graph = CooGraph._unchecked(ptr, self.src[:num_edges], self.dst[:num_edges], perm, num_src, num_dst)
        if whole_destinations and self._mean_weight is not None:
            graph._mean_weight = self._mean_weight[:num_edges]
        return graph

    def with_self_loops(self, num_nodes: int) -> 'CooGraph':
        """The graph of this graph's input edges followed by one self-loop per node below
        ``num_nodes`` (input edge ids ``E .. E + num_nodes - 1``), exactly as sorting that
        list stably by destination would give it (each loop after its node's edges), but
        by a merge: no sort, no host sync. ``num_nodes`` must be at most ``num_src`` and
        ``num_dst``.

        Shapes: ``ptr`` ``[num_dst + 1]``, ``src`` / ``dst`` / ``perm`` ``[E + num_nodes]``.
        """
        E, n = self.num_edges, int(num_nodes)
        if not 0 <= n <= min(self.num_src, self.num_dst):
            raise ValueError(f'with_self_loops: num_nodes must be in [0, {min(self.num_src, self.num_dst)}] for '
                             f'{self!r}, got {n}')
        device, dtype = self.device, _index_dtype(self.num_src, self.num_dst, E + n)
        # an edge into d moves past the loops of the destinations before d (those below n);
        # node j's loop follows j's edges and the loops of the j nodes before it
        at = torch.arange(E, device=device).add_(self.dst.clamp(max=n))
        loop_at = self.ptr[1:n + 1] + torch.arange(n, device=device)
        loops = torch.arange(n, device=device, dtype=dtype)

        def merged(edges: Tensor, loop_values: Tensor) -> Tensor:
            out = torch.empty(E + n, dtype=loop_values.dtype, device=device)
            return out.index_copy_(0, at, edges.to(loop_values.dtype)).index_copy_(0, loop_at, loop_values)
        perm = self.perm if self.perm is not None else torch.arange(E, device=device)
        ptr = self.ptr + torch.arange(self.num_dst + 1, device=device).clamp_(max=n)
        return CooGraph._unchecked(ptr, merged(self.src, loops), merged(self.dst, loops),
                                   merged(perm, torch.arange(E, E + n, device=device)), self.num_src, self.num_dst)

    @property
    def perm(self) -> Optional[Tensor]:
        """``[E]`` int64 input edge id of each sorted edge (``None``: the input was sorted)."""
        if self._perm_of is not None:  # a transpose's, composed on first use (backward passes never ask)
            outer, order = self._perm_of
            self._perm, self._perm_of = outer[order], None
        return self._perm

    @perm.setter
    def perm(self, value: Optional[Tensor]) -> None:
        self._perm, self._perm_of = value, None

    @property
    def num_edges(self) -> int:
        """Number of edges (duplicates and self-loops included)."""
        return self.src.numel()

    @property
    def device(self) -> torch.device:
        """The device of the graph's tensors."""
        return self.ptr.device

    def in_degree(self) -> Tensor:
        """``[num_dst]`` number of edges into each destination (int64)."""
        if self._in_degree is None:
            self._in_degree = self.ptr[1:] - self.ptr[:-1]
        return self._in_degree

    def mean_weight(self, dtype: torch.dtype) -> Tensor:
        """``[E]`` weight ``1 / in_degree(dst_e)`` of each sorted edge: a weighted sum
        with it is the mean over incoming edges (built once per graph)."""
        if self._mean_weight is None or self._mean_weight.dtype != dtype:
            self._mean_weight = ops().mean_edge_weight(self.ptr, self.dst, dtype)  # one launch
        return self._mean_weight

    def sort_edges(self, values: Tensor) -> Tensor:
        """Per-edge values given in ``edge_index`` order, in this graph's edge order."""
        return values if self.perm is None else take_rows(values, self.perm)

    def transpose(self) -> Tuple['CooGraph', Tensor]:
        """The reversed graph (sorted by source) and, for each of its edges, the
        position of that edge in this graph (built once, then cached)."""
        if self._transpose is None:
            rev = CooGraph._sorted(self.dst, self.src, self.num_dst, self.num_src)
            order = rev.perm if rev.perm is not None else torch.arange(self.num_edges, device=self.device)
            rev.perm = None
            if self.perm is not None:
                rev._perm_of = (self.perm, order)
            self._transpose = (rev, order)
        return self._transpose

    def to(self, device) -> 'CooGraph':
        """A copy of the graph on ``device`` (the transpose is rebuilt there on use)."""
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return CooGraph._unchecked(move(self.ptr), move(self.src), move(self.dst), move(self.perm), self.num_src,
                                   self.num_dst)

    def __repr__(self) -> str:
        return f'CooGraph(num_src={self.num_src}, num_dst={self.num_dst}, num_edges={self.num_edges}, ' \
               f'device={self.device})'


def _heads3(x: Tensor, what: str) -> Tuple[Tensor, bool]:
    """``x`` as [N, H, C] and whether it was given as [N, F]."""
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f'{what} must be a floating tensor, got {getattr(x, "dtype", type(x).__name__)}')
    if x.dim() == 2:
        return x.unsqueeze(1), True
    if x.dim() == 3:
        return x, False
    raise ValueError(f'{what} must be [N, F] or [N, H, C], got shape {tuple(x.shape)}')


def _edge2(values: Tensor, graph: CooGraph, heads: int, what: str) -> Tensor:
    if not isinstance(values, Tensor) or not values.is_floating_point():
        raise TypeError(f'{what} must be a floating tensor')
    v = values.unsqueeze(1) if values.dim() == 1 else values
    if v.dim() != 2 or v.size(0) != graph.num_edges or v.size(1) not in (1, heads):
        raise ValueError(f'{what} must be [E] or [E, H] with E = {graph.num_edges}, H = {heads}; got '
                         f'{tuple(values.shape)}')
    return v.expand(graph.num_edges, heads)


def _check_graph_and(graph: CooGraph, *tensors: Tensor) -> None:
    if not isinstance(graph, CooGraph):
        raise TypeError(f'expected a CooGraph, got {type(graph).__name__} (CooGraph.from_edge_index(edge_index))')
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f'expected tensors with the graph, got {type(t).__name__}')
        if t.device != graph.device:
            raise ValueError(f'tensors on {t.device} and a graph on {graph.device}: move them to one device')
    check_cuda_built(graph.device)


# Up to this many edge-features (E x H x C) a graph without a built transpose takes its
# transposed SpMM over its own edges (spmm_transposed): building the transpose (a sort,
# a gather, a binary search) costs more than that saves.
# - CUDA sums by atomics. On an H100 they were 1.9-7x faster up to 2**24
#   edge-features, about even at 2**26 with F <= 64, and 1.3-1.8x slower from 2**26 at
#   F = 256.
# - The CPU kernel gives each thread a slice of the features and sums in edge order:
#   the transpose's sums, bit for bit. On a 2-core VM it was 2.2-8x faster up to 2**22
#   edge-features and 0.5-1.3x beyond, where its output rows leave the caches.
# (benchmarks/spmm_adjoint.py; docs/benchmarks.md.) Above these, and whenever the
# transpose exists (a full graph's, memoised across steps), the SpMM over the transpose.
SCATTER_ADJOINT_MAX = 1 << 25
SCATTER_ADJOINT_MAX_CPU = 1 << 22


def _scatters(graph: CooGraph, x: Tensor) -> bool:
    """Whether the transposed SpMM of ``graph`` for ``x`` ``[num_dst, H, C]`` runs over
    the graph's own edges (``spmm_transposed``) rather than over the built transpose.
    ``PYG_ACCEL_SPMM_ADJOINT=scatter|transpose`` forces either (default ``auto``)."""
    choice = os.environ.get('PYG_ACCEL_SPMM_ADJOINT', 'auto')
    if choice not in ('auto', 'scatter', 'transpose'):
        raise ValueError(f"PYG_ACCEL_SPMM_ADJOINT must be 'auto', 'scatter' or 'transpose', got {choice!r}")
    if choice != 'auto':
        return choice == 'scatter'
    edge_features = graph.num_edges * x.shape[1:].numel()  # (x may have no rows: a type absent from a batch)
    limit = SCATTER_ADJOINT_MAX if x.is_cuda else SCATTER_ADJOINT_MAX_CPU
    return graph._transpose is None and edge_features <= limit


# Second derivatives. A backward that builds a graph of its own (``create_graph=True``:
# gradient penalties, Hessian-vector products) runs with grad mode on. There the
# backward passes below compute their gradients with the autograd functions of this
# module (and differentiable PyTorch ops) instead of the raw kernels, so that those
# gradients can be differentiated again; a plain backward keeps the raw kernels.
# (Only the max's and min's second derivative builds per-edge [E, H, C] values: see _ExtremumRoute.)

def _tracked() -> bool:
    """Whether the running backward builds a graph (``create_graph=True``)."""
    return torch.is_grad_enabled()


def _spmm_of_backward(graph: CooGraph, weight: Optional[Tensor], x: Tensor) -> Tensor:
    """The raw SpMM, or under :func:`_tracked` the differentiable one."""
    if _tracked():
        return _SpMM.apply(graph, weight, x, 'sum')
    return ops().spmm(graph.ptr, graph.dst, graph.src, weight, x, 'sum')[0]


def _spmm_transposed(graph: CooGraph, weight: Optional[Tensor], grad: Tensor) -> Tensor:
    """``[num_src, H, C]``: x's gradient of the raw SpMM for ``grad`` ``[num_dst, H, C]``
    (x[s] gets w[e] * grad[dst] over s's edges): over the graph's own edges, or an SpMM
    over the transpose (see :data:`SCATTER_ADJOINT_MAX`; always the latter, and
    differentiable, under :func:`_tracked`)."""
    if not _tracked() and _scatters(graph, grad):
        return ops().spmm_transposed(graph.ptr, graph.dst, graph.src, weight, grad, graph.num_src)
    rev, order = graph.transpose()
    w = None if weight is None else take_rows(weight, order)
    return _spmm_of_backward(rev, w, grad)


class _SpMM(torch.autograd.Function):
    """spmm under any reduction: the kernel takes the reduction; the backward of a sum or
    mean is the one adjoint (:func:`spmm_adjoint`) and, for the weights, an SDDMM; that
    of a max or min routes the gradient to the sources that reach the extremum."""

    @staticmethod
    def forward(ctx, graph: CooGraph, weight: Optional[Tensor], x: Tensor, reduce: str) -> Tensor:
        out, ties = ops().spmm(graph.ptr, graph.dst, graph.src, weight, x, reduce)
        ctx.graph, ctx.reduce = graph, reduce
        if reduce in EXTREMA:
            ctx.save_for_backward(x, out, ties)
        else:
            ctx.save_for_backward(weight, x)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        graph, reduce, grad = ctx.graph, ctx.reduce, grad.contiguous()
        if reduce in EXTREMA:
            x, out, ties = ctx.saved_tensors
            if _tracked():
                return None, None, _ExtremumRoute.apply(graph, x, out, ties, grad), None
            return None, None, ops().spmm_extremum_backward(graph.ptr, graph.dst, graph.src, x, out, ties, grad), None
        weight, x = ctx.saved_tensors
        grad_w = grad_x = None
        if ctx.needs_input_grad[1]:  # d out[d] / d w[e] = <grad[d], x[src]> (mean: over d's in-degree)
            grad_w = _SDDMM.apply(graph, grad, x) if _tracked() else \
                ops().sddmm(graph.ptr, graph.dst, graph.src, grad, x)
            if reduce == 'mean':
                grad_w = grad_w * graph.mean_weight(grad_w.dtype).unsqueeze(1)
        if ctx.needs_input_grad[2]:
            grad_x = _adjoint(graph, grad, reduce, weight)
        return None, grad_w, grad_x, None


class _ExtremumRoute(torch.autograd.Function):
    """spmm max's (or min's) gradient with respect to ``x`` as a function of the output
    gradient, for second derivatives: linear in it (the route, which sources reach each
    extremum, is piecewise constant in ``x``, so it has no derivative in ``x``). Forward
    is the backward kernel; backward its adjoint, each destination's share-weighted sum
    of its extremal sources' values, through ``[E, H, C]`` per-edge values (this path
    only)."""

    @staticmethod
    def forward(ctx, graph: CooGraph, x: Tensor, out: Tensor, ties: Tensor, grad: Tensor) -> Tensor:
        ctx.graph = graph
        ctx.save_for_backward(x, out, ties)
        return ops().spmm_extremum_backward(graph.ptr, graph.dst, graph.src, x, out, ties, grad)

    @staticmethod
    def backward(ctx, grad_x: Tensor):
        x, out, ties = ctx.saved_tensors
        src, dst = ctx.graph.src, ctx.graph.dst
        best = take_rows(out, dst)
        share = (ties.index_select(0, dst) + (best == 0)).to(grad_x.dtype)  # as extremum_share in csrc
        values = torch.where(take_rows(x, src) == best, take_rows(grad_x, src) / share, 0)
        return None, None, None, None, out.new_zeros(out.shape).index_add(0, dst, values)


class _SDDMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph: CooGraph, a: Tensor, b: Tensor) -> Tensor:
        ctx.graph = graph
        ctx.save_for_backward(a, b)
        return ops().sddmm(graph.ptr, graph.dst, graph.src, a, b)

    @staticmethod
    def backward(ctx, grad: Tensor):
        graph = ctx.graph
        a, b = ctx.saved_tensors
        grad = grad.contiguous()
        grad_a = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a = _spmm_of_backward(graph, grad, b)
        if ctx.needs_input_grad[2]:
            rev, order = graph.transpose()
            grad_b = _spmm_of_backward(rev, take_rows(grad, order), a)
        return None, grad_a, grad_b


class _EdgeSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph: CooGraph, logits: Tensor) -> Tensor:
        out = ops().edge_softmax(graph.ptr, logits)
        ctx.graph = graph
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        (out,) = ctx.saved_tensors
        if not _tracked():
            return None, ops().edge_softmax_backward(ctx.graph.ptr, out, grad.contiguous())
        # out * (grad - the destination's sum of grad * out), from differentiable ops
        dst = ctx.graph.dst
        total = out.new_zeros((ctx.graph.num_dst, out.size(1))).index_add(0, dst, grad * out)
        return None, out * (grad - total.index_select(0, dst))


# spmm's reductions, each taken down to the kernels (csrc/ops.cpp: spmm's `reduce`;
# csrc/sparse/sparse_common.h: their families), and the extrema among them (max, min:
# no edge weights; ties counted; their gradient routed to the sources that reach them).
REDUCTIONS = ('sum', 'mean', 'max', 'min')
EXTREMA = ('max', 'min')

# Dtypes whose mean's adjoint is a transposed sum weighted by 1/deg. In bf16 the rounded
# weight errs by at most 2^-9 relative, as the sum's rounding before a division would,
# and bf16 has fp32's range; fp16's 1/deg goes subnormal past degree 16,384, so fp16
# divides the gradient first.
_MEAN_BY_WEIGHT = (torch.float32, torch.float64, torch.bfloat16)


def spmm(graph: CooGraph, x: Tensor, weight: Optional[Tensor] = None, reduce: str = 'sum') -> Tensor:
    """Aggregates source features into destinations: ``out[d] = reduce_e w_e * x[src_e]``.

    Args:
        graph: the destination-sorted graph.
        x: ``[num_src, F]`` or ``[num_src, H, C]`` source features (fp32/fp16/bf16/fp64).
        weight: ``[E]`` or ``[E, H]`` edge weights in the graph's edge order (default 1).
        reduce: ``'sum'``, ``'mean'`` (sum over the in-degree; 0 for isolated nodes),
            ``'max'`` or ``'min'`` (feature-wise maximum / minimum; 0 for isolated nodes;
            no edge weights). The gradient of ``'max'`` goes to the sources that reach the
            maximum, exactly as PyG's scatter max (``torch.scatter_reduce`` 'amax' into
            zeros): split evenly among ties, and where the maximum is exactly 0 the
            initial zero counts as one more tie, whose share is dropped; ``'min'`` the
            same with 'amin'. The reduction runs in the kernel (one pass, fp32
            accumulation; a mean divides each sum in fp32 before rounding).

    Returns:
        ``[num_dst, F]`` or ``[num_dst, H, C]``, in ``x``'s dtype.
    """
    if reduce not in REDUCTIONS:
        names = ', '.join(map(repr, REDUCTIONS[:-1])) + f' or {REDUCTIONS[-1]!r}'
        raise ValueError(f'spmm: reduce must be {names}, got {reduce!r}')
    x3, flat = _heads3(x, 'spmm: x')
    _check_graph_and(graph, x3, *([] if weight is None else [weight]))
    if x3.size(0) != graph.num_src:
        raise ValueError(f'spmm: x has {x3.size(0)} rows but the graph has {graph.num_src} source nodes')
    if weight is not None and reduce in EXTREMA:
        raise ValueError(f"spmm: reduce='{reduce}' takes no edge weights")
    w = None if weight is None else _edge2(weight, graph, x3.size(1), 'spmm: weight').to(x3.dtype).contiguous()
    if reduce == 'mean' and torch.is_grad_enabled() and (x3.requires_grad or (w is not None and w.requires_grad)):
        _fill_mean_memos(graph, x3.dtype, weighted=w is not None)
    out = _SpMM.apply(graph, w, x3.contiguous(), reduce)
    return out.squeeze(1) if flat else out


def _fill_mean_memos(graph: CooGraph, dtype: torch.dtype, weighted: bool) -> None:
    """Builds the graph facts a mean's backward reads (:func:`_adjoint`; the weights'
    gradient), here rather than inside the autograd function, where filling a memo on
    the graph is a side effect that torch.compile cannot trace (a graph break)."""
    if dtype in _MEAN_BY_WEIGHT or weighted:
        graph.mean_weight(dtype)
    if dtype not in _MEAN_BY_WEIGHT:
        graph.in_degree()


def spmm_add_(out: Tensor, graph: CooGraph, x: Tensor, weight: Optional[Tensor] = None) -> Tensor:
    """Adds ``spmm(graph, x, weight)`` into ``out`` in place and returns ``out``: rows of
    destinations without edges keep their values. No autograd (for functions that
    compute their own backward, e.g. a second edge set aggregated into the rows a first
    SpMM wrote, once its sources have arrived from another GPU).

    Args:
        out: ``[num_dst, F]`` or ``[num_dst, H, C]``, contiguous, in ``x``'s dtype.
        graph, x, weight: as :func:`spmm` (sum reduction).
    """
    x3, flat = _heads3(x, 'spmm_add_: x')
    _check_graph_and(graph, x3, out, *([] if weight is None else [weight]))
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (out, x, weight)):
        raise RuntimeError('spmm_add_ has no autograd: call it on tensors that do not require grad, under '
                           'torch.no_grad(), or inside an autograd.Function that computes its own backward')
    if x3.size(0) != graph.num_src:
        raise ValueError(f'spmm_add_: x has {x3.size(0)} rows but the graph has {graph.num_src} source nodes')
    want = (graph.num_dst, x.size(1)) if flat else (graph.num_dst, *x3.shape[1:])
    if tuple(out.shape) != want or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError(f'spmm_add_: out must be a contiguous {x.dtype} tensor of shape {want}, got '
                         f'{out.dtype} {tuple(out.shape)}')
    w = None if weight is None else _edge2(weight, graph, x3.size(1), 'spmm_add_: weight').to(x3.dtype).contiguous()
    ops().spmm_add_(out.view(graph.num_dst, *x3.shape[1:]), graph.ptr, graph.dst, graph.src, w, x3.contiguous())
    torch.autograd.graph.increment_version(out)  # (a custom op's write does not bump it: facts on out would go stale)
    return out


def spmm_adjoint(graph: CooGraph, grad: Tensor, reduce: str = 'sum', weight: Optional[Tensor] = None) -> Tensor:
    """The gradient of ``spmm(graph, x, weight, reduce)`` with respect to ``x``, for the
    output gradient ``grad`` ``[num_dst, F]``: an SpMM over the transpose. Returns
    ``[num_src, F]``. For layers that compute their own backward: with grad mode off (a
    plain backward) the raw kernels, with it on (``create_graph=True``) a differentiable
    SpMM over the transpose."""
    if reduce not in ('sum', 'mean'):
        raise ValueError(f"spmm_adjoint: reduce must be 'sum' or 'mean', got {reduce!r}")
    grad3, flat = _heads3(grad, 'spmm_adjoint: grad')
    _check_graph_and(graph, grad3)
    if grad3.size(0) != graph.num_dst:
        raise ValueError(f'spmm_adjoint: grad has {grad3.size(0)} rows but the graph has {graph.num_dst} '
                         f'destinations')
    w = None if weight is None else _edge2(weight, graph, grad3.size(1), 'spmm_adjoint: weight').to(grad3.dtype)
    out = _adjoint(graph, grad3.contiguous(), reduce, w)
    return out.squeeze(1) if flat else out


def _adjoint(graph: CooGraph, grad: Tensor, reduce: str, weight: Optional[Tensor]) -> Tensor:
    """:func:`spmm_adjoint` on checked inputs: ``grad`` ``[num_dst, H, C]`` contiguous,
    ``weight`` ``[E, H]`` in its dtype or ``None``; a sum or a mean."""
    if reduce == 'mean' and grad.dtype in _MEAN_BY_WEIGHT:
        mean_w = graph.mean_weight(grad.dtype).unsqueeze(1).expand(graph.num_edges, grad.size(1))
        weight = mean_w if weight is None else weight * mean_w
    elif reduce == 'mean':
        grad = grad / graph.in_degree().clamp(min=1).to(grad.dtype).view(-1, 1, 1)
    return _spmm_transposed(graph, None if weight is None else weight.contiguous(), grad)


def sddmm(graph: CooGraph, a: Tensor, b: Tensor, op: str = 'dot') -> Tensor:
    """Per-edge combination of a destination-side and a source-side node tensor.

    ``op='dot'``: ``out[e, h] = <a[dst_e, h, :], b[src_e, h, :]>`` for ``a`` ``[num_dst, (H,) C]``
    and ``b`` ``[num_src, (H,) C]``; ``op='add'``: ``out[e, h] = a[dst_e, h] + b[src_e, h]`` for
    ``[num_dst, H]`` / ``[num_src, H]`` (GAT's attention logits). Returns ``[E]`` for 2-D
    inputs to 'dot' and ``[E, H]`` otherwise, in the graph's edge order.
    """
    if op == 'add':
        _check_graph_and(graph, a, b)
        if a.dim() != b.dim() or a.shape[1:] != b.shape[1:]:
            raise ValueError(f'sddmm: a and b must share their trailing shape, got {tuple(a.shape)} and '
                             f'{tuple(b.shape)}')
        if a.dim() == 0 or a.size(0) < graph.num_dst or b.size(0) < graph.num_src:
            raise ValueError(f'sddmm: a needs {graph.num_dst} rows (destinations) and b {graph.num_src} (sources), '
                             f'got {tuple(a.shape)} and {tuple(b.shape)}')
        return take_rows(a, graph.dst) + take_rows(b, graph.src)
    if op != 'dot':
        raise ValueError(f"sddmm: op must be 'dot' or 'add', got {op!r}")
    a3, flat = _heads3(a, 'sddmm: a')
    b3, _ = _heads3(b, 'sddmm: b')
    _check_graph_and(graph, a3, b3)
    if a3.shape[1:] != b3.shape[1:] or a3.dtype != b3.dtype:
        raise ValueError(f'sddmm: a and b must share heads, channels and dtype, got {tuple(a.shape)} {a.dtype} '
                         f'and {tuple(b.shape)} {b.dtype}')
    if a3.size(0) != graph.num_dst or b3.size(0) != graph.num_src:
        raise ValueError(f'sddmm: a needs {graph.num_dst} rows (destinations) and b {graph.num_src} (sources), '
                         f'got {a3.size(0)} and {b3.size(0)}')
    out = _SDDMM.apply(graph, a3.contiguous(), b3.contiguous())
    return out.squeeze(1) if flat else out


def edge_softmax(graph: CooGraph, logits: Tensor) -> Tensor:
    """Softmax of ``[E]`` / ``[E, H]`` logits over each destination's incoming edges,
    computed as PyG's ``softmax``: ``exp(l - max) / (sum + 1e-16)``."""
    _check_graph_and(graph, logits)
    flat = logits.dim() == 1
    values = _edge2(logits, graph, 1 if flat else logits.size(-1), 'edge_softmax: logits').contiguous()
    out = _EdgeSoftmax.apply(graph, values)
    return out.squeeze(1) if flat else out


# Fake kernels ################################################################

def _fake_spmm(ptr, dst, src, weight, x, reduce='sum'):
    out = x.new_empty((ptr.shape[0] - 1, x.shape[1], x.shape[2]))
    return out, out.new_empty(out.shape if reduce in EXTREMA else (0,), dtype=torch.int32)


def _fake_csr_ptr(key, num_rows):
    return key.new_empty((num_rows + 1,), dtype=torch.int64)


def _fake_mean_edge_weight(ptr, dst, dtype):
    return dst.new_empty(dst.shape, dtype=dtype)


def _fake_spmm_transposed(ptr, dst, src, weight, x, num_src):
    return x.new_empty((num_src, x.shape[1], x.shape[2]))


def _fake_sddmm(ptr, dst, src, a, b):
    return a.new_empty((src.shape[0], a.shape[1]))


@_build.on_load
def _register() -> None:
    torch.library.register_fake('pyg_accel::spmm')(_fake_spmm)
    torch.library.register_fake('pyg_accel::spmm_add_')(lambda out, ptr, dst, src, weight, x: None)
    torch.library.register_fake('pyg_accel::spmm_transposed')(_fake_spmm_transposed)
    torch.library.register_fake('pyg_accel::csr_ptr')(_fake_csr_ptr)
    torch.library.register_fake('pyg_accel::mean_edge_weight')(_fake_mean_edge_weight)
    torch.library.register_fake('pyg_accel::sddmm')(_fake_sddmm)
    torch.library.register_fake('pyg_accel::spmm_extremum_backward')(
        lambda ptr, dst, src, x, out, ties, grad: torch.empty_like(x))
    torch.library.register_fake('pyg_accel::edge_softmax')(lambda ptr, logits: torch.empty_like(logits))
    torch.library.register_fake('pyg_accel::edge_softmax_backward')(lambda ptr, out, grad: torch.empty_like(out))
