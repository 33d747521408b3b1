"""PyG's ``BasicGNN`` models with pyg_accel's convolutions."""
from __future__ import annotations

import torch_geometric.nn as pyg_nn
import torch_geometric.nn.models as pyg_models

from .conv import GATConv, GCNConv, SAGEConv

__all__ = ['GCN', 'GAT', 'GraphSAGE']


class GCN(pyg_models.GCN):
    """:class:`torch_geometric.nn.models.GCN` built from :class:`pyg_accel.nn.GCNConv`."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        return GCNConv(in_channels, out_channels, **kwargs)


class GraphSAGE(pyg_models.GraphSAGE):
    """:class:`torch_geometric.nn.models.GraphSAGE` built from :class:`pyg_accel.nn.SAGEConv`."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        return SAGEConv(in_channels, out_channels, **kwargs)


class GAT(pyg_models.GAT):
    """:class:`torch_geometric.nn.models.GAT` built from :class:`pyg_accel.nn.GATConv`
    (``v2=True`` keeps PyG's ``GATv2Conv``)."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        conv = super().init_conv(in_channels, out_channels, **kwargs)  # PyG's choice of widths and heads
        if type(conv) is not pyg_nn.GATConv:
            return conv
        rest = {k: v for k, v in kwargs.items() if k not in ('v2', 'heads', 'concat')}
        return GATConv(in_channels, conv.out_channels, heads=conv.heads, concat=conv.concat, dropout=conv.dropout,
                       **rest)
