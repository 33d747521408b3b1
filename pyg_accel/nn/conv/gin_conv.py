"""``GINConv`` on pyg_accel's SpMM: PyG's layer, same signature, parameters and
``state_dict``; the neighbourhood sum without an ``E x F`` message tensor."""
from __future__ import annotations

import torch_geometric.nn as pyg_nn
from torch import Tensor
from torch_geometric.typing import OptPairTensor

from ...ops import spmm
from ._graph import PyGPropagate, accelerated, coo_graph, plain_edge_index


class GINConv(PyGPropagate, pyg_nn.GINConv):
    r"""PyG's :class:`torch_geometric.nn.conv.GINConv` (``nn``, ``eps``, ``train_eps``,
    bipartite ``(x_src, x_dst)`` inputs, ``size``): ``nn((1 + eps) x_i + sum_j x_j)`` with
    the sum by SpMM. ``SparseTensor`` / ``torch.sparse`` inputs and explain mode run PyG's
    own code."""

    propagate_type = {'x': OptPairTensor}  # PyG's fallback path (see GCNConv)

    def forward(self, x, edge_index, size=None) -> Tensor:
        ei = plain_edge_index(edge_index)
        if ei is None or not accelerated(self, x):
            return super().forward(x, edge_index, size)
        x_src, x_dst = (x, x) if isinstance(x, Tensor) else x
        num_dst = size[1] if size is not None else (x_dst.size(0) if x_dst is not None else x_src.size(0))
        out = spmm(coo_graph(ei, (x_src.size(0), num_dst)), x_src)
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        return self.nn(out)
