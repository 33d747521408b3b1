"""PyG's ``BasicGNN`` models with pyg_accel's convolutions."""
from __future__ import annotations

import torch_geometric.nn as pyg_nn
import torch_geometric.nn.models as pyg_models
from torch import Tensor
from torch_geometric.utils._trim_to_layer import TrimToLayer

from ..ops.sparse import is_trusted_dst_sorted, is_trusted_edge_index, trust_edge_index
from .conv import GATConv, GCNConv, SAGEConv
from .conv._graph import memoize_graph, memoized_graph

__all__ = ['GCN', 'GAT', 'GraphSAGE']


class _TrustedTrim(TrimToLayer):
    """PyG's ``trim_to_layer`` (``model(..., num_sampled_nodes_per_hop=...,
    num_sampled_edges_per_hop=...)``) that keeps the in-range mark of a loader's
    ``edge_index`` on the trimmed one: trimming keeps the hops whose nodes remain (a
    prefix of the edges, so sorted edges stay sorted). For a batch sorted by destination
    the trimmed layer's graph is derived from the previous layer's (a prefix of it)
    instead of being built again."""

    def forward(self, layer, num_sampled_nodes_per_hop, num_sampled_edges_per_hop, x, edge_index, edge_attr=None):
        if not isinstance(x, Tensor):  # (x_src, x_dst) pairs, e.g. after to_hetero: PyG's trimming as is
            return super().forward(layer, num_sampled_nodes_per_hop, num_sampled_edges_per_hop, x, edge_index,
                                   edge_attr)
        size = (x.size(0), x.size(0))
        trusted = isinstance(edge_index, Tensor) and is_trusted_edge_index(edge_index, size)
        dst_sorted = trusted and is_trusted_dst_sorted(edge_index)
        parent = memoized_graph(edge_index, size) if dst_sorted else None
        x, trimmed, edge_attr = super().forward(layer, num_sampled_nodes_per_hop, num_sampled_edges_per_hop, x,
                                                edge_index, edge_attr)
        if trusted and isinstance(trimmed, Tensor) and trimmed is not edge_index:
            n = x.size(0)
            trust_edge_index(trimmed, n, n, dst_sorted=dst_sorted)
            if parent is not None and parent.perm is None:  # whole hops go: no node keeps part of its edges
                memoize_graph(trimmed, (n, n), parent.edge_prefix(trimmed.size(1), n, n, whole_destinations=True))
        return x, trimmed, edge_attr

    def __prepare_scriptable__(self):
        """PyG's own trimming under ``torch.jit.script`` (the marks are Python-only)."""
        return TrimToLayer()


class _AccelGNN:
    """Mixin for PyG's ``BasicGNN`` models: trimming that keeps the in-range mark."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._trim = _TrustedTrim()


class GCN(_AccelGNN, pyg_models.GCN):
    """:class:`torch_geometric.nn.models.GCN` built from :class:`pyg_accel.nn.GCNConv`."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        """One layer: :class:`pyg_accel.nn.GCNConv`."""
        return GCNConv(in_channels, out_channels, **kwargs)


class GraphSAGE(_AccelGNN, pyg_models.GraphSAGE):
    """:class:`torch_geometric.nn.models.GraphSAGE` built from :class:`pyg_accel.nn.SAGEConv`."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        """One layer: :class:`pyg_accel.nn.SAGEConv`."""
        return SAGEConv(in_channels, out_channels, **kwargs)


class GAT(_AccelGNN, pyg_models.GAT):
    """:class:`torch_geometric.nn.models.GAT` built from :class:`pyg_accel.nn.GATConv`
    (``v2=True`` keeps PyG's ``GATv2Conv``)."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        """One layer: :class:`pyg_accel.nn.GATConv` with the widths and heads PyG picks."""
        conv = super().init_conv(in_channels, out_channels, **kwargs)  # PyG's choice of widths and heads
        if type(conv) is not pyg_nn.GATConv:
            return conv
        rest = {k: v for k, v in kwargs.items() if k not in ('v2', 'heads', 'concat')}
        return GATConv(in_channels, conv.out_channels, heads=conv.heads, concat=conv.concat, dropout=conv.dropout,
                       **rest)
