"""``SAGEConv`` on pyg_accel's SpMM: PyG's layer, same signature, parameters and
``state_dict``; mean, sum, max and min aggregation without an ``E x F`` message tensor."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch import Tensor
from torch.nn.parameter import UninitializedParameter
from torch_geometric.typing import OptPairTensor

from ...ops import spmm
from ...ops.sparse import REDUCTIONS, spmm_adjoint
from ._graph import PyGPropagate, accelerated, coo_graph, is_row_prefix, plain_edge_index
from ._row_gemm import row_addmm_, row_mm

_REDUCE = {**{name: name for name in REDUCTIONS}, 'add': 'sum'}  # PyG's aggr names: spmm's, and 'add'
_LINEAR = ('mean', 'sum')  # aggregations that commute with the linear map


class SAGEConv(PyGPropagate, pyg_nn.SAGEConv):
    r"""PyG's :class:`torch_geometric.nn.conv.SAGEConv` (every argument and option as
    there). ``aggr='mean'`` / ``'sum'`` / ``'max'`` / ``'min'`` run on SpMM; for mean and sum, when
    ``out_channels`` is smaller than the input width the linear map is applied before
    aggregating (the same result, a narrower SpMM). Other aggregations,
    ``SparseTensor`` / ``torch.sparse`` inputs and explain mode run PyG's own code."""

    propagate_type = {'x': OptPairTensor}  # PyG's fallback path (see GCNConv)

    def forward(self, x, edge_index, size=None) -> Tensor:
        ei = plain_edge_index(edge_index)
        reduce = _REDUCE.get(self.aggr) if isinstance(self.aggr, str) else None
        if ei is None or reduce is None or not accelerated(self, x) or self._lazy():
            return super().forward(x, edge_index, size)  # (a lazy layer's first call sizes its weights there)
        if isinstance(x, Tensor):
            x = (x, x)
        if self.project and hasattr(self, 'lin'):
            x = (self.lin(x[0]).relu(), x[1])
        x_src, x_dst = x
        num_dst = size[1] if size is not None else (x_dst.size(0) if x_dst is not None else x_src.size(0))
        graph = coo_graph(ei, (x_src.size(0), num_dst))
        weight, bias = self.lin_l.weight, self.lin_l.bias
        fused = reduce in _LINEAR and self._root_shares_input(x_src, x_dst, num_dst)
        out = _sage_with_root(graph, reduce, x_src, weight, bias, self.lin_r.weight, num_dst) if fused else None
        if out is None:
            # Under autocast the GEMMs' outputs are 16-bit while x stays fp32: an in-place
            # addmm_ would mix the two, so the root term is added out of place there.
            in_place = not torch.is_autocast_enabled(x_src.device.type)
            out = self._aggregate(graph, reduce, x_src, weight, bias)
            if self.root_weight and x_dst is not None:
                if in_place and self.lin_r.bias is None and x_dst.dim() == 2:
                    out = out.addmm_(x_dst, self.lin_r.weight.t())  # summed by the GEMM in place
                else:
                    out = out + self.lin_r(x_dst)
        if self.normalize:
            out = F.normalize(out, p=2., dim=-1)
        return out

    @staticmethod
    def _aggregate(graph, reduce: str, x_src: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        """``lin_l(reduce over in-edges of x_src)``, in the cheaper order."""
        if reduce in _LINEAR and weight.size(0) < weight.size(1):  # W (agg x) = agg (W x): the narrower SpMM
            out = spmm(graph, F.linear(x_src, weight), reduce=reduce)
            return out if bias is None else out + bias.to(out.dtype)  # (16-bit under autocast, as PyG's)
        agg = spmm(graph, x_src, reduce=reduce)
        return F.linear(agg, weight, bias)

    def _root_shares_input(self, x_src: Tensor, x_dst: Optional[Tensor], num_dst: int) -> bool:
        """Whether the root term reads the aggregated input itself (one tensor given, as in
        sampled mini-batches, or its first rows, as a trimmed layer is given them), so that
        one backward sums both of its gradients. (Not under
        ``torch.compile``, which traces the two terms and their gradients itself.)"""
        if not self.root_weight or torch.compiler.is_compiling() or self.lin_r.bias is not None:
            return False
        return x_src.dim() == 2 and is_row_prefix(x_dst, x_src) and num_dst == x_dst.size(0)

    def _lazy(self) -> bool:
        """Whether some weight still waits for its input size (``in_channels=-1``). Once
        every weight is sized this is remembered (walking the parameters took ~8 us per
        call on the 2-core VM, on the host path of every step)."""
        if self.__dict__.get('_sized', False):
            return False
        lazy = any(isinstance(p, UninitializedParameter) for p in self.parameters())
        self.__dict__['_sized'] = not lazy  # (not a module attribute: no state_dict or repr entry)
        return lazy


def _sage_with_root(graph, reduce: str, x: Tensor, w_l: Tensor, b_l: Optional[Tensor], w_r: Tensor,
                    num_dst: int) -> Optional[Tensor]:
    """:class:`_SAGEWithRoot`, also under ``torch.autocast``: there it runs with autocast
    off on its inputs cast to the autocast dtype inside it (``x`` once for both terms,
    before the SpMM reads it; no autograd node per cast), so the aggregation, both GEMMs
    and the in-place sums share one 16-bit dtype, and it returns each gradient in its
    input's dtype. ``None`` for inputs autocast would not cast (the caller then adds the
    terms apart)."""
    device_type = x.device.type
    if not torch.is_autocast_enabled(device_type):
        return _SAGEWithRoot.apply(graph, reduce, x, w_l, b_l, w_r, num_dst, None)
    dtype = torch.get_autocast_dtype(device_type)
    if any(t is not None and t.dtype not in (torch.float32, dtype) for t in (x, w_l, b_l, w_r)):
        return None
    with torch.autocast(device_type, enabled=False):
        return _SAGEWithRoot.apply(graph, reduce, x, w_l, b_l, w_r, num_dst, dtype)


class _SAGEWithRoot(torch.autograd.Function):
    """``lin_l(aggr_{e: s -> d} x[s]) + lin_r(x[d])`` for ``d < num_dst``, with a backward
    that adds the root term's gradient into the aggregation's in place (autograd would
    sum two ``[N, F]`` gradients of ``x`` in a pass of its own).

    Shapes: ``x`` ``[N, F]``, ``w_l`` / ``w_r`` ``[O, F]``, ``b_l`` ``[O]``; returns ``[num_dst, O]``.
    ``dtype``: computes in it (the inputs cast; gradients returned in each input's dtype).
    """

    @staticmethod
    def forward(ctx, graph, reduce: str, x: Tensor, w_l: Tensor, b_l: Optional[Tensor], w_r: Tensor,
                num_dst: int, dtype: Optional[torch.dtype]) -> Tensor:
        ctx.dtypes = [None if t is None else t.dtype for t in (x, w_l, b_l, w_r)]
        given = (x, w_l, w_r)  # (a second derivative differentiates through their casts)
        if dtype is not None:
            x, w_l, b_l, w_r = (None if t is None else t.to(dtype) for t in (x, w_l, b_l, w_r))
        lin_first = w_l.size(0) < w_l.size(1)  # (the GEMMs over the batch's rows: see _row_gemm)
        if lin_first:  # W (agg x) = agg (W x): the narrower SpMM
            agg, out = None, spmm(graph, row_mm(x, w_l.t()), reduce=reduce)
            out = out if b_l is None else out.add_(b_l)
        else:
            agg = spmm(graph, x, reduce=reduce)
            out = row_mm(agg, w_l.t(), b_l)
        row_addmm_(out, x[:num_dst], w_r.t())
        ctx.graph, ctx.reduce, ctx.num_dst, ctx.has_bias = graph, reduce, num_dst, b_l is not None
        ctx.lin_first, ctx.dtype = lin_first, dtype
        ctx.save_for_backward(x, w_l, w_r, *(given if dtype is not None else ()))
        ctx.agg = agg  # an intermediate, kept on ctx so that backward can free it once used
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        if torch.is_grad_enabled():  # create_graph=True: gradients that can be differentiated again
            ctx.agg = None
            return (None, None, *_tracked_sage_grads(ctx, grad), None, None)
        x, w_l, w_r = ctx.saved_tensors[:3]
        agg, ctx.agg = ctx.agg, None
        graph, reduce, num_dst = ctx.graph, ctx.reduce, ctx.num_dst
        grad = grad.to(x.dtype).contiguous()  # (the compute dtype, whatever the output became)
        need_x, need_wl, need_bl, need_wr = ctx.needs_input_grad[2:6]
        grad_x = grad_wl = grad_bl = grad_wr = None
        if ctx.lin_first:  # lin_l applied before aggregating: out = A (x w_l^T) + b
            spread = spmm_adjoint(graph, grad, reduce)  # [N, O]
            grad_wl = spread.t().mm(x) if need_wl else None
            grad_x = row_mm(spread, w_l) if need_x else None
        else:  # out = (A x) w_l^T + b
            if agg is None and need_wl:  # a second backward through a retained graph
                agg = spmm(graph, x, reduce=reduce)
            grad_wl = grad.t().mm(agg) if need_wl else None
            del agg  # freed before the [N, F] gradients are made (peak memory as autograd's)
            grad_x = spmm_adjoint(graph, row_mm(grad, w_l), reduce) if need_x else None
        if need_x:
            row_addmm_(grad_x[:num_dst], grad, w_r)  # the root term's gradient, summed in place
        grad_bl = grad.sum(0) if need_bl and ctx.has_bias else None
        grad_wr = grad.t().mm(x[:num_dst]) if need_wr else None
        grads = (None if g is None else g.to(dtype)  # (each in its input's dtype)
                 for g, dtype in zip((grad_x, grad_wl, grad_bl, grad_wr), ctx.dtypes))
        return (None, None, *grads, None, None)


def _tracked_sage_grads(ctx, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
    """:class:`_SAGEWithRoot`'s gradients ``(x, w_l, b_l, w_r)`` for a backward that builds
    a graph (``create_graph=True``): the same formulas from differentiable ops (our SpMM
    and its adjoint, PyTorch's GEMMs, out of place), over the inputs as given (cast as the
    forward cast them), so that a gradient penalty can differentiate them again."""
    saved = ctx.saved_tensors
    x, w_l, w_r = saved[3:] if ctx.dtype is not None else saved
    if ctx.dtype is not None:
        x, w_l, w_r = x.to(ctx.dtype), w_l.to(ctx.dtype), w_r.to(ctx.dtype)
    graph, reduce, num_dst = ctx.graph, ctx.reduce, ctx.num_dst
    grad = grad.to(x.dtype)
    need_x, need_wl, need_bl, need_wr = ctx.needs_input_grad[2:6]
    if ctx.lin_first:  # out = A (x w_l^T) + b
        spread = spmm_adjoint(graph, grad, reduce)
        grad_wl, grad_x = spread.t().mm(x), spread.mm(w_l)
    else:  # out = (A x) w_l^T + b
        grad_wl = grad.t().mm(spmm(graph, x, reduce=reduce)) if need_wl else None
        grad_x = spmm_adjoint(graph, grad.mm(w_l), reduce)
    grad_x = torch.cat([grad_x[:num_dst] + grad.mm(w_r), grad_x[num_dst:]])  # the root term's gradient
    grads = (grad_x if need_x else None, grad_wl if need_wl else None,
             grad.sum(0) if need_bl and ctx.has_bias else None, grad.t().mm(x[:num_dst]) if need_wr else None)
    return tuple(None if g is None else g.to(dtype) for g, dtype in zip(grads, ctx.dtypes))
