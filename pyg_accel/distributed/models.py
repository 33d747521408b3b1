"""A GNN over one partition of a graph split across processes (full-graph training)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import nn as accel_nn
from ..ops import CooGraph, spmm
from .full_graph import GraphPartition
from .overlap import HaloGraph

__all__ = ['PartitionedGNN']


class PartitionedGNN(torch.nn.Module):
    """A stack of pyg_accel's GCN, GraphSAGE or GAT layers over one
    :class:`GraphPartition`: before each layer, :meth:`GraphPartition.exchange` appends
    the halo's rows to the local ones; the layer reads both and writes the local rows.
    GCN normalises with the whole graph's degrees (:meth:`GraphPartition.gcn_norm`).
    Every process of the partition's group runs it on its own block (wrap it in
    ``DistributedDataParallel`` to average the weight gradients).

    With ``overlap`` (the default), GCN and GraphSAGE aggregate through a
    :class:`~pyg_accel.distributed.HaloGraph`: each layer's halo rows travel while the
    edges between local rows are aggregated, and their gradients travel back while the
    local rows' gradient is computed. GAT, and every model without ``overlap``, appends
    the halo's rows by :meth:`GraphPartition.exchange` before each layer. Either way the
    rows GCN and SAGE exchange and aggregate are the layer's input or its input times
    the weight, whichever is narrower (the same sum: the aggregation is linear), and only
    the local rows are aggregated into.

    Args:
        kind: ``'gcn'``, ``'sage'`` or ``'gat'``.
        part: this process's partition.
        in_channels, hidden_channels, out_channels, num_layers: the stack's shape.
        dropout: dropout before every layer.
        heads: attention heads of GAT's hidden layers (its last layer has one).
        overlap: hide the halo exchange behind the local edges' aggregation (GCN, SAGE).

    ``forward(x)``: ``[num_local, in_channels] -> [num_local, out_channels]``; or ``x``
    ``[num_local + num_halo, in_channels]``, the block's rows followed by the halo's
    (``part.exchange(local.x)``, once, for inputs that do not change between steps): the
    first layer then reads the halo's input rows from ``x`` instead of exchanging them,
    and with dropout in training exchanges only its mask, one bit per entry, so that a
    node's input is dropped the same way in every block that reads it, as on one GPU.
    """

    def __init__(self, kind: str, part: GraphPartition, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, dropout: float = 0.0, heads: int = 4, overlap: bool = True) -> None:
        super().__init__()
        if kind not in ('gcn', 'sage', 'gat'):
            raise ValueError(f"kind must be 'gcn', 'sage' or 'gat', got {kind!r}")
        if num_layers < 1:
            raise ValueError(f'num_layers must be at least 1, got {num_layers}')
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f'dropout must be in [0, 1], got {dropout}')
        self.kind, self.part, self.dropout = kind, part, dropout
        self.overlap = overlap and kind != 'gat'
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
        self._gcn_graph = None  # (GCN: the normalised graph ext rows -> local rows, built on first use)
        if kind == 'gcn' and self.overlap:
            self.halo_graph = HaloGraph(part, *part.gcn_norm())
        elif kind == 'sage' and self.overlap:
            self.halo_graph = HaloGraph(part, reduce='mean')

    def forward(self, x: Tensor) -> Tensor:
        part = self.part
        with_halo = part.num_halo > 0 and x.size(0) == part.num_local + part.num_halo
        if not with_halo and x.size(0) != part.num_local:
            raise ValueError(f'PartitionedGNN: x must have {part.num_local} rows (the block) or '
                             f'{part.num_local + part.num_halo} (the block and its halo), got {tuple(x.shape)}')
        for i, conv in enumerate(self.convs):
            ext = i == 0 and with_halo  # x holds the halo's rows: nothing to exchange
            x = self._input_dropout(x) if ext else F.dropout(x, self.dropout, self.training)
            if self.kind == 'gcn':
                x = self._gcn_layer(conv, x, ext)
            elif ext or not self.overlap:  # [num_local + num_halo, F] -> [num_local, F']
                x = conv((x if ext else part.exchange(x), x[:part.num_local]), part.edge_index)
            else:
                x = self._sage_layer(conv, x)
            if i < len(self.convs) - 1:
                x = x.relu()
        return x

    def _input_dropout(self, x: Tensor) -> Tensor:
        """Dropout of ``[num_local + num_halo, F]`` input rows: each process draws its own
        rows' mask and the halo's comes from their owners, so that every block drops a node's
        features as its owner does."""
        if not self.training or self.dropout == 0.0:
            return x
        if self.dropout == 1.0:
            return torch.zeros_like(x)
        keep = torch.rand((self.part.num_local, *x.shape[1:]), device=x.device) >= self.dropout
        return x * self.part.exchange(keep) / (1.0 - self.dropout)

    def _gcn_graph_ext(self):
        """``(graph, weight)``: the normalised bipartite graph ext rows -> local rows,
        its weights in its edge order (sorted once, on first use)."""
        if self._gcn_graph is None:
            part = self.part
            edge_index, weight = part.gcn_norm()
            graph = CooGraph.from_edge_index(edge_index, (part.num_local + part.num_halo, part.num_local))
            self._gcn_graph = (graph, graph.sort_edges(weight))
        return self._gcn_graph

    def _gcn_layer(self, conv, x: Tensor, ext: bool = False) -> Tensor:
        """``A_norm (x W) + b`` as GCNConv computes it, over the local rows, with the
        aggregation over the narrower of ``x`` and ``x W`` (``A (x W) = (A x) W``); ``ext``:
        ``x`` holds the halo's rows after the block's."""
        narrow_input = conv.in_channels < conv.out_channels
        if self.overlap and not ext:
            aggregate = self.halo_graph.aggregate
        else:
            graph, weight = self._gcn_graph_ext()
            aggregate = lambda h: spmm(graph, h if ext else self.part.exchange(h), weight)  # noqa: E731
        out = conv.lin(aggregate(x)) if narrow_input else aggregate(conv.lin(x))
        return out + conv.bias if conv.bias is not None else out

    def _sage_layer(self, conv, x: Tensor) -> Tensor:
        """``lin_l(mean over in-edges) + lin_r(x)`` as SAGEConv computes it, the mean
        taken over the narrower of ``x`` and ``x W_l`` (equal: the mean is linear)."""
        weight, bias = conv.lin_l.weight, conv.lin_l.bias
        if weight.size(0) < weight.size(1):
            out = self.halo_graph.aggregate(F.linear(x, weight))
            out = out if bias is None else out + bias
        else:
            out = F.linear(self.halo_graph.aggregate(x), weight, bias)
        return out + conv.lin_r(x)
