"""``GATConv`` on pyg_accel's SDDMM, edge softmax and SpMM: PyG's layer, same signature,
parameters and ``state_dict``, without the ``E x H x C`` message tensor."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch import Tensor
from torch_geometric.typing import OptPairTensor, OptTensor
from torch_geometric.utils import add_self_loops, remove_self_loops

from ...ops import edge_softmax, sddmm, spmm
from ...ops.sparse import take_rows
from ...ops.sparse import is_trusted_edge_index, trust_edge_index
from ._graph import PyGPropagate, accelerated, cached_on, coo_graph, plain_edge_index
from ._self_loops import sync_free_mode, with_loops_masked


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
        """(x_src, x_dst) as [N, H, C] and the residual term, as PyG computes them."""
        H, C = self.heads, self.out_channels
        lin_src = self.lin if self.lin is not None else self.lin_src
        lin_dst = self.lin if self.lin is not None else self.lin_dst
        x_src, x_dst = (x, x) if isinstance(x, Tensor) else x
        res = self.res(x_dst) if self.res is not None and x_dst is not None else None
        if x_src.dim() != 2:
            raise ValueError("Static graphs not supported in 'GATConv'")
        x_src_h = lin_src(x_src).view(-1, H, C)
        if x_dst is None:
            return x_src_h, None, res
        x_dst_h = x_src_h if (x_dst is x_src and lin_dst is lin_src) else lin_dst(x_dst).view(-1, H, C)
        return x_src_h, x_dst_h, res

    def forward(self, x, edge_index, edge_attr: OptTensor = None, size=None,
                return_attention_weights: Optional[bool] = None):
        ei = plain_edge_index(edge_index)
        if ei is None or not accelerated(self, x):
            return super().forward(x, edge_index, edge_attr, size, return_attention_weights)
        if edge_attr is not None and edge_attr.size(0) != ei.size(1):
            raise ValueError(f'GATConv: edge_attr must have one row per edge ({ei.size(1)}), got '
                             f'{tuple(edge_attr.shape)}')
        H, C = self.heads, self.out_channels
        x_src, x_dst, res = self._project(x)
        alpha_src = (x_src * self.att_src).sum(dim=-1)
        alpha_dst = None if x_dst is None else (x_dst * self.att_dst).sum(dim=-1)
        num_dst = size[1] if size is not None else (x_dst.size(0) if x_dst is not None else x_src.size(0))
        num_nodes = x_src.size(0) if x_dst is None else min(x_src.size(0), x_dst.size(0))
        num_nodes = min(size) if size is not None else num_nodes
        shape = (x_src.size(0), num_dst)

        masked = self.add_self_loops and sync_free_mode() and edge_attr is None and not return_attention_weights

        def build(edge_attr):
            e, old_loops = ei, None
            if masked:  # the graph's own loops stay, with -inf logits: no host sync (see _self_loops)
                e, old_loops = with_loops_masked(ei, num_nodes)
            elif self.add_self_loops:
                e, edge_attr = remove_self_loops(e, edge_attr)
                e, edge_attr = add_self_loops(e, edge_attr, fill_value=self.fill_value, num_nodes=num_nodes)
            if self.add_self_loops and is_trusted_edge_index(ei, shape):  # the loops stay inside both node sets
                trust_edge_index(e, *shape)
            graph = coo_graph(e, shape)
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
