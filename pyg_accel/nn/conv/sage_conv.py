"""``SAGEConv`` on pyg_accel's SpMM: PyG's layer, same signature, parameters and
``state_dict``; mean and sum aggregation without an ``E x F`` message tensor."""
from __future__ import annotations

import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch import Tensor
from torch.nn.parameter import UninitializedParameter
from torch_geometric.typing import OptPairTensor

from ...ops import spmm
from ._graph import accelerated, coo_graph, plain_edge_index

_REDUCE = {'mean': 'mean', 'sum': 'sum', 'add': 'sum'}


class SAGEConv(pyg_nn.SAGEConv):
    r"""PyG's :class:`torch_geometric.nn.conv.SAGEConv` (every argument and option as
    there). ``aggr='mean'`` / ``'sum'`` run on SpMM; when ``out_channels`` is smaller than
    the input width the linear map is applied before aggregating (the same result, a
    narrower SpMM). Other aggregations, ``SparseTensor`` / ``torch.sparse`` inputs and
    explain mode run PyG's own code."""

    propagate_type = {'x': OptPairTensor}  # PyG's fallback path (see GCNConv)

    def forward(self, x, edge_index, size=None) -> Tensor:
        ei = plain_edge_index(edge_index)
        reduce = _REDUCE.get(self.aggr) if isinstance(self.aggr, str) else None
        if ei is None or reduce is None or not accelerated(self):
            return super().forward(x, edge_index, size)
        if isinstance(x, Tensor):
            x = (x, x)
        if self.project and hasattr(self, 'lin'):
            x = (self.lin(x[0]).relu(), x[1])
        x_src, x_dst = x
        num_dst = size[1] if size is not None else (x_dst.size(0) if x_dst is not None else x_src.size(0))
        graph = coo_graph(ei, (x_src.size(0), num_dst))
        weight, bias = self.lin_l.weight, self.lin_l.bias
        if weight.size(0) < weight.size(1):  # W (agg x) = agg (W x): aggregate the narrower features
            out = spmm(graph, F.linear(x_src, weight), reduce=reduce)
            out = out if bias is None else out + bias
        else:
            out = self.lin_l(spmm(graph, x_src, reduce=reduce))
        if self.root_weight and x_dst is not None:
            root = self.lin_r.weight
            if self.lin_r.bias is None and not isinstance(root, UninitializedParameter) and x_dst.dim() == 2:
                out = out.addmm_(x_dst, root.t())  # summed by the GEMM in place: no pass of its own
            else:
                out = out + self.lin_r(x_dst)
        if self.normalize:
            out = F.normalize(out, p=2., dim=-1)
        return out
