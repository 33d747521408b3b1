"""``GCNConv`` on pyg_accel's SpMM: PyG's layer, same signature, parameters and
``state_dict``, with the neighbourhood sum done without an ``E x F`` message tensor."""
from __future__ import annotations

from typing import Optional

import torch_geometric.nn as pyg_nn
from torch import Tensor
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.typing import OptTensor

from ...ops import spmm
from ...ops.sparse import check_edge_index, is_trusted_edge_index, trust_edge_index
from ._graph import PyGPropagate, accelerated, cached_on, coo_graph, plain_edge_index


class GCNConv(PyGPropagate, pyg_nn.GCNConv):
    r"""PyG's :class:`torch_geometric.nn.conv.GCNConv` (every argument and option as
    there), computed as ``spmm(D^-1/2 (A + I) D^-1/2, X W) + b``. The normalised graph
    is built once per call, or once for good with ``cached=True``. ``SparseTensor`` /
    ``torch.sparse`` inputs and explain mode run PyG's own code (same results)."""

    _cached_graph = None
    # PyG's fallback path: the signature of the `propagate` PyG generates for this class
    # (its inspector reads sources by class name, so it would find ours, not PyG's).
    propagate_type = {'x': Tensor, 'edge_weight': OptTensor}

    def reset_parameters(self) -> None:
        super().reset_parameters()
        self._cached_graph = None

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        ei = plain_edge_index(edge_index)
        if ei is None or isinstance(x, (tuple, list)) or not accelerated(self, x):
            return super().forward(x, edge_index, edge_weight)
        if edge_weight is not None and (edge_weight.dim() != 1 or edge_weight.numel() != ei.size(1)):
            raise ValueError(f'GCNConv: edge_weight must have one entry per edge ([{ei.size(1)}]), got '
                             f'{tuple(edge_weight.shape)}')
        # (with cached=True the graph is kept beside PyG's own cache attribute, and used
        # only while that still holds what we put there: code that clears PyG's cache by
        # hand, `conv._cached_edge_index = None`, clears ours)
        if self._cached_graph is not None and self._cached_edge_index is self._cached_graph[2]:
            graph, weight, _ = self._cached_graph
        else:
            n = x.size(self.node_dim)

            def build():
                e, w = ei, edge_weight
                if self.normalize:
                    if not is_trusted_edge_index(ei, (n, n)):  # a clear error before PyG's gcn_norm indexes
                        check_edge_index(ei, (n, n))
                    e, w = gcn_norm(e, w, n, self.improved, self.add_self_loops, self.flow, x.dtype)
                    if is_trusted_edge_index(ei, (n, n)):  # self-loops stay inside [0, n)
                        trust_edge_index(e, n, n)
                graph = coo_graph(e, (n, n))
                return graph, (None if w is None else graph.sort_edges(w))

            if edge_weight is None:  # shared by the layers that see this edge_index
                key = (n, self.improved, self.add_self_loops, self.normalize, x.dtype)
                graph, weight = cached_on(ei, '_pyg_accel_gcn', key, build)
            else:
                graph, weight = build()
            if self.cached:
                self._cached_edge_index = (ei, edge_weight)  # (PyG's slot: the edge_index the cache is of)
                self._cached_graph = (graph, weight, self._cached_edge_index)
        out = spmm(graph, self.lin(x), weight)
        if self.bias is not None:
            out = out + self.bias
        return out
