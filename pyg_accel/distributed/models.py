"""A GNN over one partition of a graph split across processes (full-graph training)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import nn as accel_nn
from .full_graph import GraphPartition

__all__ = ['PartitionedGNN']


class PartitionedGNN(torch.nn.Module):
    """A stack of pyg_accel's GCN, GraphSAGE or GAT layers over one
    :class:`GraphPartition`: before each layer, :meth:`GraphPartition.exchange` appends
    the halo's rows to the local ones; the layer reads both and writes the local rows.
    GCN normalises with the whole graph's degrees (:meth:`GraphPartition.gcn_norm`).
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
        self.gcn_graph = part.gcn_norm() if kind == 'gcn' else None

    def forward(self, x: Tensor) -> Tensor:
        part = self.part
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            x_ext = part.exchange(x)  # [num_local + num_halo, F]
            if self.kind == 'gcn':
                x = conv(x_ext, *self.gcn_graph)[:part.num_local]
            else:
                x = conv((x_ext, x), part.edge_index)
            if i < len(self.convs) - 1:
                x = x.relu()
        return x
