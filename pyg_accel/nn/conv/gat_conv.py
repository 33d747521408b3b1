"""``GATConv`` on pyg_accel's SDDMM, edge softmax and SpMM: PyG's layer, same signature,
parameters and ``state_dict``, without the ``E x H x C`` message tensor."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch import Tensor
from torch.nn.parameter import UninitializedParameter
from torch_geometric.typing import OptPairTensor, OptTensor
from torch_geometric.utils import add_self_loops, remove_self_loops

from ...ops import edge_softmax, sddmm, spmm
from ...ops.sparse import take_rows
from ...ops.sparse import is_trusted_edge_index, trust_edge_index
from ._graph import PyGPropagate, accelerated, cached_on, coo_graph, is_row_prefix, looped_graph, plain_edge_index
from ._self_loops import gat_loop_attr, sync_free_mode, with_loops_masked


class GATConv(PyGPropagate, pyg_nn.GATConv):
    r"""PyG's :class:`torch_geometric.nn.conv.GATConv` (every argument and option as
    there: ``heads``, ``concat``, ``negative_slope``, ``dropout``, ``add_self_loops``,
    ``edge_dim``/``edge_attr``, ``fill_value``, ``residual``, bipartite inputs,
    ``return_attention_weights``). Per edge only the ``[E, H]`` attention is formed:
    logits by SDDMM ('add'), PyG's softmax per destination, then SpMM with the
    attention as edge weights. ``SparseTensor`` / ``torch.sparse`` inputs and explain
    mode run PyG's own code. With ``dropout > 0`` in training the attention mask is
    drawn in a different edge order than PyG's (same distribution)."""

    # PyG's fallback path: the signatures PyG generates for this class (see GCNConv).
    propagate_type = {'x': OptPairTensor, 'alpha': Tensor}
    edge_updater_type = {'alpha': OptPairTensor, 'edge_attr': OptTensor}

    def _project(self, x):
        """``(x_src, x_dst)`` as ``[N, H, C]``, their attention logits ``alpha_src`` /
        ``alpha_dst`` ``[N, H]`` (``x_dst`` and ``alpha_dst`` ``None`` for a bipartite
        input without destinations) and the residual term, as PyG computes them."""
        H, C = self.heads, self.out_channels
        lin_src = self.lin if self.lin is not None else self.lin_src
        lin_dst = self.lin if self.lin is not None else self.lin_dst
        x_src, x_dst = (x, x) if isinstance(x, Tensor) else x
        res = self.res(x_dst) if self.res is not None and x_dst is not None else None
        if x_src.dim() != 2:
            raise ValueError("Static graphs not supported in 'GATConv'")
        x_src_h = lin_src(x_src).view(-1, H, C)
        alpha_src = _logits(x_src, x_src_h, lin_src, self.att_src)
        if x_dst is None:
            return x_src_h, None, alpha_src, None, res
        if lin_dst is lin_src and is_row_prefix(x_dst, x_src):  # (x, x[:n]): a trimmed layer's destinations
            x_dst_h = x_src_h[:x_dst.size(0)]
        else:
            x_dst_h = lin_dst(x_dst).view(-1, H, C)
        return x_src_h, x_dst_h, alpha_src, _logits(x_dst, x_dst_h, lin_dst, self.att_dst), res

    def forward(self, x, edge_index, edge_attr: OptTensor = None, size=None,
                return_attention_weights: Optional[bool] = None):
        ei = plain_edge_index(edge_index)
        if ei is None or not accelerated(self, x):
            return super().forward(x, edge_index, edge_attr, size, return_attention_weights)
        if edge_attr is not None and edge_attr.size(0) != ei.size(1):
            raise ValueError(f'GATConv: edge_attr must have one row per edge ({ei.size(1)}), got '
                             f'{tuple(edge_attr.shape)}')
        H, C = self.heads, self.out_channels
        x_src, x_dst, alpha_src, alpha_dst, res = self._project(x)
        num_dst = size[1] if size is not None else (x_dst.size(0) if x_dst is not None else x_src.size(0))
        num_nodes = x_src.size(0) if x_dst is None else min(x_src.size(0), x_dst.size(0))
        num_nodes = min(size) if size is not None else num_nodes
        shape = (x_src.size(0), num_dst)

        masked = self.add_self_loops and sync_free_mode() and not return_attention_weights

        def build(edge_attr):
            e, old_loops = ei, None
            if masked:  # the graph's own loops stay, with -inf logits: no host sync (see _self_loops)
                e, old_loops = with_loops_masked(ei, num_nodes)
                if edge_attr is not None:
                    edge_attr = torch.cat([edge_attr, gat_loop_attr(ei, edge_attr, old_loops, self.fill_value,
                                                                    num_nodes)])
            elif self.add_self_loops:
                e, edge_attr = remove_self_loops(e, edge_attr)
                e, edge_attr = add_self_loops(e, edge_attr, fill_value=self.fill_value, num_nodes=num_nodes)
            if self.add_self_loops and is_trusted_edge_index(ei, shape):  # the loops stay inside both node sets
                trust_edge_index(e, *shape)
            graph = looped_graph(ei, e, shape, num_nodes) if masked else coo_graph(e, shape)
            return e, edge_attr, graph, None if old_loops is None else graph.sort_edges(old_loops)

        if edge_attr is None:  # shared by the layers that see this edge_index
            ei, _, graph, old_loops = cached_on(ei, '_pyg_accel_gat', shape + (num_nodes, self.add_self_loops, masked),
                                                lambda: build(None))
        else:
            ei, edge_attr, graph, old_loops = build(edge_attr)
        if alpha_dst is None:
            alpha = take_rows(alpha_src, graph.src)
        else:
            alpha = sddmm(graph, alpha_dst, alpha_src, op='add')  # [E, H], sorted edge order
        if graph.num_edges > 0:
            if edge_attr is not None and self.lin_edge is not None:
                attr = graph.sort_edges(edge_attr)
                attr = self.lin_edge(attr.view(-1, 1) if attr.dim() == 1 else attr).view(-1, H, C)
                alpha = alpha + (attr * self.att_edge).sum(dim=-1)
            alpha = F.leaky_relu(alpha, self.negative_slope)
            if old_loops is not None:
                alpha = alpha.masked_fill(old_loops.unsqueeze(-1), float('-inf'))
            alpha = edge_softmax(graph, alpha)
            if self.training and self.dropout > 0:
                alpha = F.dropout(alpha, p=self.dropout, training=True)
        out = spmm(graph, x_src, alpha)
        out = out.view(-1, H * C) if self.concat else out.mean(dim=1)
        if res is not None:
            out = out + res
        if self.bias is not None:
            out = out + self.bias
        if return_attention_weights:
            if graph.perm is not None:  # back to the order of the returned edge_index
                alpha = torch.empty_like(alpha).index_copy_(0, graph.perm, alpha)
            return out, (ei, alpha)
        return out


def _logits(x: Tensor, x_h: Tensor, lin, att: Tensor) -> Tensor:
    """Attention logits ``(x_h * att).sum(-1)`` ``[N, H]`` of ``x_h = lin(x)`` ``[N, H, C]``,
    as one narrow GEMM of the input, ``x @ (W_h^T att_h)``, when ``lin`` is a bias-free
    linear map and ``x`` is at most twice as wide as ``x_h``: it reads ``x`` once instead
    of ``x_h`` three times (a product, then a sum) forward and backward. (The same
    values; the summation order differs. Not under autocast, where PyG's logits are fp32
    sums of the 16-bit ``x_h``.)"""
    weight = getattr(lin, 'weight', None)
    foldable = (isinstance(weight, Tensor) and not isinstance(weight, UninitializedParameter)
                and getattr(lin, 'bias', None) is None and x.size(-1) <= 2 * x_h.size(1) * x_h.size(2)
                and not torch.is_autocast_enabled(x.device.type))  # (autocast: fp32 logits of 16-bit x_h, as PyG)
    if not foldable:
        return (x_h * att).sum(dim=-1)
    H, C = x_h.size(1), x_h.size(2)
    folded = torch.einsum('hcf,hc->hf', weight.view(H, C, -1), att.view(H, C))  # [H, F]
    return F.linear(x, folded)
