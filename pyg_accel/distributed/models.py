"""A GNN over one partition of a graph split across processes (full-graph training)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import nn as accel_nn
from ..ops import CooGraph, spmm
from .full_graph import GraphPartition

__all__ = ['PartitionedGNN']


class PartitionedGNN(torch.nn.Module):
    """A stack of pyg_accel's GCN, GraphSAGE or GAT layers over one
    :class:`GraphPartition`: before each layer, :meth:`GraphPartition.exchange` appends
    the halo's rows to the local ones; the layer reads both and writes the local rows.
    GCN normalises with the whole graph's degrees (:meth:`GraphPartition.gcn_norm`) and
    exchanges the narrower side of each layer: its input, or its input times the weight
    (then only the local rows are multiplied and only they are aggregated into).
    Every process of the partition's group runs it on its own block (wrap it in
    ``DistributedDataParallel`` to average the weight gradients).

    Args:
        kind: ``'gcn'``, ``'sage'`` or ``'gat'``.
        part: this process's partition.
        in_channels, hidden_channels, out_channels, num_layers: the stack's shape.
        dropout: dropout before every layer.
        heads: attention heads of GAT's hidden layers (its last layer has one).

    ``forward(x)``: ``[num_local, in_channels] -> [num_local, out_channels]``.
    """

    def __init__(self, kind: str, part: GraphPartition, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, dropout: float = 0.0, heads: int = 4) -> None:
        super().__init__()
        if kind not in ('gcn', 'sage', 'gat'):
            raise ValueError(f"kind must be 'gcn', 'sage' or 'gat', got {kind!r}")
        if num_layers < 1:
            raise ValueError(f'num_layers must be at least 1, got {num_layers}')
        self.kind, self.part, self.dropout = kind, part, dropout
        self.convs = torch.nn.ModuleList()
        for i in range(num_layers):
            last = i == num_layers - 1
            c_in, c_out = in_channels if i == 0 else hidden_channels, out_channels if last else hidden_channels
            if kind == 'gcn':
                self.convs.append(accel_nn.GCNConv(c_in, c_out, normalize=False))  # normalised globally
            elif kind == 'sage':
                self.convs.append(accel_nn.SAGEConv(c_in, c_out))
            else:
                h = 1 if last else heads
                if c_out % h:
                    raise ValueError(f'hidden_channels ({c_out}) must be a multiple of heads ({h})')
                self.convs.append(accel_nn.GATConv(c_in, c_out // h, heads=h))
        if kind == 'gcn':  # the normalised bipartite graph ext rows -> local rows, sorted once
            edge_index, weight = part.gcn_norm()
            graph = CooGraph.from_edge_index(edge_index, (part.num_local + part.num_halo, part.num_local))
            self.gcn_graph = (graph, graph.sort_edges(weight))

    def forward(self, x: Tensor) -> Tensor:
        part = self.part
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            if self.kind == 'gcn':
                x = self._gcn_layer(conv, x)
            else:
                x = conv((part.exchange(x), x), part.edge_index)  # [num_local + num_halo, F] -> [num_local, F']
            if i < len(self.convs) - 1:
                x = x.relu()
        return x

    def _gcn_layer(self, conv, x: Tensor) -> Tensor:
        """``spmm(A_norm, x W) + b`` as GCNConv computes it, over the local rows."""
        graph, weight = self.gcn_graph
        if conv.in_channels < conv.out_channels:
            h = conv.lin(self.part.exchange(x))
        else:
            h = self.part.exchange(conv.lin(x))
        out = spmm(graph, h, weight)
        return out + conv.bias if conv.bias is not None else out
