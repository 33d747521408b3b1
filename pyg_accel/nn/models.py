"""PyG's ``BasicGNN`` models with pyg_accel's convolutions."""
from __future__ import annotations

import torch_geometric.nn.models as pyg_models

from .conv import GCNConv, SAGEConv

__all__ = ['GCN', 'GraphSAGE']


class GCN(pyg_models.GCN):
    """:class:`torch_geometric.nn.models.GCN` built from :class:`pyg_accel.nn.GCNConv`."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        return GCNConv(in_channels, out_channels, **kwargs)


class GraphSAGE(pyg_models.GraphSAGE):
    """:class:`torch_geometric.nn.models.GraphSAGE` built from :class:`pyg_accel.nn.SAGEConv`."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        return SAGEConv(in_channels, out_channels, **kwargs)
