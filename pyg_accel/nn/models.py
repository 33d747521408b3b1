"""PyG's ``BasicGNN`` models with pyg_accel's convolutions."""
from __future__ import annotations

from typing import List, Optional

import torch
import torch_geometric.nn as pyg_nn
import torch_geometric.nn.models as pyg_models
from torch import Tensor
from torch_geometric.utils._trim_to_layer import TrimToLayer

from ..ops.hops import Hops, sampled_hops
from ..ops.sparse import is_trusted_dst_sorted, is_trusted_edge_index, trust_edge_index
from .conv import GATConv, GCNConv, GINConv, SAGEConv
from .conv._graph import coo_graph, mark_trimmed, memoize_graph, memoized_graph

__all__ = ['GCN', 'GAT', 'GIN', 'GraphSAGE']


class _TrustedTrim(TrimToLayer):
    """PyG's ``trim_to_layer`` (``model(..., num_sampled_nodes_per_hop=...,
    num_sampled_edges_per_hop=...)``) that keeps the in-range mark of a loader's
    ``edge_index`` on the trimmed one: trimming keeps the hops whose nodes remain (a
    prefix of the edges, so sorted edges stay sorted). For a batch sorted by destination
    the trimmed layer's graph is derived from the previous layer's (a prefix of it)
    instead of being built again. Each trimmed ``edge_index`` also records the untrimmed
    one it was cut from (GCN normalises by the untrimmed degrees)."""

    def forward(self, layer, num_sampled_nodes_per_hop, num_sampled_edges_per_hop, x, edge_index, edge_attr=None):
        if not isinstance(x, Tensor):  # (x_src, x_dst) pairs, e.g. after to_hetero: PyG's trimming as is
            return super().forward(layer, num_sampled_nodes_per_hop, num_sampled_edges_per_hop, x, edge_index,
                                   edge_attr)
        size = (x.size(0), x.size(0))
        trusted = isinstance(edge_index, Tensor) and is_trusted_edge_index(edge_index, size)
        dst_sorted = trusted and is_trusted_dst_sorted(edge_index)
        parent = memoized_graph(edge_index, size) if dst_sorted else None
        x, trimmed, trimmed_attr = super().forward(layer, num_sampled_nodes_per_hop, num_sampled_edges_per_hop, x,
                                                   edge_index, edge_attr)
        if not (isinstance(edge_index, Tensor) and isinstance(trimmed, Tensor)) or trimmed is edge_index:
            return x, trimmed, trimmed_attr
        mark_trimmed(trimmed, edge_index, size[0], edge_attr)
        if trusted:
            n = x.size(0)
            trust_edge_index(trimmed, n, n, dst_sorted=dst_sorted)
            if parent is not None and parent.perm is None:  # whole hops go: no node keeps part of its edges
                memoize_graph(trimmed, (n, n), parent.edge_prefix(trimmed.size(1), n, n, whole_destinations=True))
        return x, trimmed, trimmed_attr

    def __prepare_scriptable__(self):
        """PyG's own trimming under ``torch.jit.script`` (the marks are Python-only)."""
        return TrimToLayer()


class _AccelGNN:
    """Mixin for PyG's ``BasicGNN`` models: each layer computes only the nodes later
    layers need (PyG's ``trim_to_layer``), by itself on pyg_accel's loader batches.

    ``auto_trim`` (default ``True``): given a batch from pyg_accel's ``NeighborLoader`` /
    ``LinkNeighborLoader`` (whose ``edge_index`` carries the per-hop counts), the model
    trims as if called with ``num_sampled_nodes_per_hop`` / ``num_sampled_edges_per_hop``
    and returns the **seed rows only**, ``[batch_size, out_channels]``: equal, in values
    and gradients, to the untrimmed model's ``out[:batch_size]``, which is all a trimmed
    model computes exactly. ``out[:batch.batch_size]`` reads the same either way.

    The model runs untrimmed (every row) where trimming could change the seed outputs or
    is not known to be valid: ``auto_trim=False``, a model with more layers than the batch
    has hops, normalisation layers (batch statistics would cover fewer rows), jumping
    knowledge, a ``batch`` vector, both ``edge_weight`` and ``edge_attr``, batches made
    under ``torch.inference_mode()`` (nothing is recorded on inference tensors; use
    ``torch.no_grad()``), ``torch.compile`` and ``torch.jit.script``. Passing the counts
    yourself trims as PyG does and returns PyG's trimmed shape."""

    def __init__(self, *args, auto_trim: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.auto_trim = auto_trim
        self._trim = _TrustedTrim()

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None,
                edge_attr: Optional[Tensor] = None, batch: Optional[Tensor] = None,
                batch_size: Optional[int] = None, num_sampled_nodes_per_hop: Optional[List[int]] = None,
                num_sampled_edges_per_hop: Optional[List[int]] = None) -> Tensor:
        """PyG's ``BasicGNN.forward``, trimmed by itself on pyg_accel's batches (see the class)."""
        hops = None
        if num_sampled_nodes_per_hop is None and num_sampled_edges_per_hop is None:
            hops = self._hops_to_trim(x, edge_index, edge_weight, edge_attr, batch)
        if hops is None:
            return super().forward(x, edge_index, edge_weight, edge_attr, batch, batch_size,
                                   num_sampled_nodes_per_hop, num_sampled_edges_per_hop)
        return self._forward_trimmed(x, edge_index, edge_weight, edge_attr, *hops)

    def _forward_trimmed(self, x: Tensor, edge_index: Tensor, edge_weight: Optional[Tensor],
                         edge_attr: Optional[Tensor], nodes: List[int], edges: List[int]) -> Tensor:
        """``BasicGNN.forward`` with each layer cut to what the later layers read (the
        blocks of DGL): layer ``i`` of ``L`` reads the nodes of hops ``0..L-i`` over the
        edges of hops ``1..L-i`` and computes only its destinations, the nodes of hops
        ``0..L-i-1``, so the last layer computes the seeds alone. (PyG's ``trim_to_layer``
        computes each layer for one hop more: the first layer for every node of the batch.)
        Returns ``[nodes[0], out_channels]``."""
        num_layers, num_nodes = self.num_layers, x.size(0)
        value = edge_weight if edge_weight is not None else edge_attr
        for i, conv in enumerate(self.convs):
            hops_in = num_layers - i  # the destinations are the nodes of the first hops_in hops
            num_src, num_dst, num_edges = sum(nodes[:hops_in + 1]), sum(nodes[:hops_in]), sum(edges[:hops_in])
            ei = self._layer_edges(edge_index, num_nodes, value, num_edges, num_src, num_dst)
            layer_value = None if value is None else value[:num_edges]
            x = x[:num_src] if x.size(0) != num_src else x
            x = (x, x[:num_dst])  # (the destinations as the first rows of the sources: see is_row_prefix)
            # (as BasicGNN passes them: the one given, to layers that take it; _hops_to_trim: not both)
            if edge_weight is not None and self.supports_edge_weight:
                x = conv(x, ei, edge_weight=layer_value)
            elif edge_attr is not None and self.supports_edge_attr:
                x = conv(x, ei, edge_attr=layer_value)
            else:
                x = conv(x, ei)
            if i < num_layers - 1:  # (the norms are identities here: _hops_to_trim)
                if self.act is not None:
                    x = self.act(x)
                x = self.dropout(x)
        return self.lin(x) if hasattr(self, 'lin') else x

    @staticmethod
    def _layer_edges(edge_index: Tensor, num_nodes: int, value: Optional[Tensor], num_edges: int, num_src: int,
                     num_dst: int) -> Tensor:
        """A layer's edges: a view of the first ``num_edges`` of the batch's (over
        ``num_nodes`` nodes; the hops the layer reads), with what the layers look up on it:
        the batch it was cut from (GCN's degrees), the in-range and sorted marks for
        ``num_src`` x ``num_dst`` nodes, and its destination-sorted graph as a prefix of
        the batch's (no sort, no host sync)."""
        ei = edge_index.narrow(1, 0, num_edges)
        mark_trimmed(ei, edge_index, num_nodes, value)
        if is_trusted_edge_index(edge_index, (num_nodes, num_nodes)):
            dst_sorted = is_trusted_dst_sorted(edge_index)
            trust_edge_index(ei, num_src, num_dst, dst_sorted=dst_sorted)
            graph = coo_graph(edge_index, (num_nodes, num_nodes)) if dst_sorted else None
            if graph is not None and graph.perm is None:  # whole hops go: the 1/deg weights carry over
                memoize_graph(ei, (num_src, num_dst), graph.edge_prefix(num_edges, num_src, num_dst,
                                                                         whole_destinations=True))
        return ei

    def _hops_to_trim(self, x, edge_index, edge_weight, edge_attr, batch) -> Optional[Hops]:
        """The per-hop counts to trim ``edge_index``'s batch by, or ``None`` to run untrimmed."""
        if not (self.auto_trim and isinstance(x, Tensor) and isinstance(edge_index, Tensor) and x.dim() == 2):
            return None  # (also: torch.fx proxies while to_hetero traces)
        if torch.compiler.is_compiling() or torch.jit.is_scripting():
            return None
        if (batch is not None or self.jk_mode is not None or (edge_weight is not None and edge_attr is not None)
                or not all(isinstance(norm, torch.nn.Identity) for norm in self.norms)):
            return None
        hops = sampled_hops(edge_index, x.size(0))
        if hops is None or len(hops[1]) < self.num_layers:
            return None
        return hops

    def __prepare_scriptable__(self):
        """What ``torch.jit.script`` compiles: PyG's model class over the same modules and
        parameters (the automatic trimming reads Python-only marks)."""
        pyg_cls = next(c for c in type(self).__mro__ if c.__module__.startswith('torch_geometric.'))
        twin = pyg_cls.__new__(pyg_cls)
        twin.__dict__.update(self.__dict__, _parameters=dict(self._parameters), _buffers=dict(self._buffers),
                             _modules=dict(self._modules))
        return twin


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


class GIN(_AccelGNN, pyg_models.GIN):
    """:class:`torch_geometric.nn.models.GIN` built from :class:`pyg_accel.nn.GINConv`."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        """One layer: :class:`pyg_accel.nn.GINConv` around the MLP PyG builds."""
        conv = super().init_conv(in_channels, out_channels, **kwargs)  # PyG's MLP, eps and options
        return GINConv(conv.nn, eps=conv.initial_eps, train_eps=isinstance(conv.eps, torch.nn.Parameter),
                       **{k: v for k, v in kwargs.items() if k not in ('eps', 'train_eps')})
