"""``GCNConv`` on pyg_accel's SpMM: PyG's layer, same signature, parameters and
``state_dict``, with the neighbourhood sum done without an ``E x F`` message tensor."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch_geometric.nn as pyg_nn
from torch import Tensor
from torch_geometric.typing import OptTensor
from torch_geometric.utils import add_remaining_self_loops, scatter

from ...ops import CooGraph, spmm
from ...ops.sparse import check_edge_index, is_trusted_edge_index, trust_edge_index
from ._graph import (PyGPropagate, accelerated, cached_on, coo_graph, is_row_prefix, looped_graph, plain_edge_index,
                     trimmed_from)
from ._self_loops import gcn_self_loops, sync_free_mode


class GCNConv(PyGPropagate, pyg_nn.GCNConv):
    r"""PyG's :class:`torch_geometric.nn.conv.GCNConv` (every argument and option as
    there), computed as ``spmm(D^-1/2 (A + I) D^-1/2, X W) + b``. The normalised graph
    is built once per call, or once for good with ``cached=True``. ``SparseTensor`` /
    ``torch.sparse`` inputs and explain mode run PyG's own code (same results).

    Trimmed layers (PyG's ``trim_to_layer``, which our models apply by themselves to a
    loader's batches) normalise with the degrees of the untrimmed batch, so that the seed
    outputs equal the untrimmed model's. (PyG's own ``GCNConv`` normalises a trimmed
    layer by the trimmed graph's degrees, and its seed outputs then differ from its
    untrimmed ones.)"""

    _cached_graph = None
    # PyG's fallback path: the signature of the `propagate` PyG generates for this class
    # (its inspector reads sources by class name, so it would find ours, not PyG's).
    propagate_type = {'x': Tensor, 'edge_weight': OptTensor}

    def reset_parameters(self) -> None:
        super().reset_parameters()
        self._cached_graph = None

    def forward(self, x, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        """``x`` ``[N, F]``, or ``(x, x[:num_dst])`` for the first ``num_dst`` output rows
        only (a trimmed layer's destinations: every edge must end below ``num_dst``);
        returns ``[N, out_channels]`` or ``[num_dst, out_channels]``."""
        num_dst = None
        if isinstance(x, (tuple, list)) and len(x) == 2 and isinstance(x[0], Tensor) and is_row_prefix(x[1], x[0]):
            x, num_dst = x[0], x[1].size(0)
        ei = plain_edge_index(edge_index)
        if ei is None or isinstance(x, (tuple, list)) or not accelerated(self, x):
            out = super().forward(x, edge_index, edge_weight)  # (PyG's layer: every row, then the first ones)
            return out if num_dst is None else out[:num_dst]
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
            if edge_weight is None:  # shared by the layers that see this edge_index
                graph, weight, _ = cached_on(ei, _GCN_SLOT, self._key(n, x.dtype),
                                             lambda: self._normalized_graph(ei, None, n, x.dtype))
            else:
                graph, weight, _ = self._normalized_graph(ei, edge_weight, n, x.dtype)
            if self.cached:
                self._cached_edge_index = (ei, edge_weight)  # (PyG's slot: the edge_index the cache is of)
                self._cached_graph = (graph, weight, self._cached_edge_index)
        if num_dst is not None and num_dst < graph.num_dst:
            graph, weight = self._first_rows(graph, weight, ei, num_dst)
        out = spmm(graph, self.lin(x), weight)
        if self.bias is not None:
            out = out + self.bias
        return out

    def _first_rows(self, graph: CooGraph, weight: Optional[Tensor], edge_index: Tensor, num_dst: int
                    ) -> Tuple[CooGraph, Optional[Tensor]]:
        """The normalised graph's edges into its first ``num_dst`` nodes: all of them but
        the self-loops added for the nodes past ``num_dst`` (the last edges after sorting
        by destination, once every input edge is known to end below ``num_dst``)."""
        n = graph.num_src
        if not is_trusted_edge_index(edge_index, (n, num_dst)):
            check_edge_index(edge_index, (n, num_dst))  # (a clear error: an edge into a row not computed)
        looped = self.normalize and self.add_self_loops
        kept = graph.num_edges - (n - num_dst if looped else 0)
        return graph.edge_prefix(kept, n, num_dst), (None if weight is None else weight[:kept])

    def _key(self, num_nodes: int, dtype: torch.dtype) -> tuple:
        return num_nodes, self.improved, self.add_self_loops, self.normalize, dtype, sync_free_mode()

    def _normalized_graph(self, edge_index: Tensor, edge_weight: Optional[Tensor], num_nodes: int,
                          dtype: torch.dtype) -> Tuple[CooGraph, Optional[Tensor], Optional[Tensor]]:
        """The graph this layer aggregates over, its sorted edge weights and the
        ``D^-1/2`` it was normalised with (``None`` without ``normalize``)."""
        n = num_nodes
        if not self.normalize:
            graph = coo_graph(edge_index, (n, n))
            return graph, (None if edge_weight is None else graph.sort_edges(edge_weight)), None
        if not is_trusted_edge_index(edge_index, (n, n)):  # a clear error before PyG's self-loop code indexes
            check_edge_index(edge_index, (n, n))
        e, w, deg_inv_sqrt = gcn_normalize(edge_index, edge_weight, n, self.improved, self.add_self_loops, dtype,
                                           self._untrimmed_deg_inv_sqrt(edge_index, edge_weight is not None, dtype))
        if is_trusted_edge_index(edge_index, (n, n)):  # self-loops stay inside [0, n)
            trust_edge_index(e, n, n)
        # (sync-free loops are appended to the edges: merged into a sorted batch's graph)
        graph = looped_graph(edge_index, e, (n, n), n) if self.add_self_loops and sync_free_mode() else \
            coo_graph(e, (n, n))
        return graph, graph.sort_edges(w), deg_inv_sqrt

    def _untrimmed_deg_inv_sqrt(self, edge_index: Tensor, weighted: bool, dtype: torch.dtype) -> Optional[Tensor]:
        """``D^-1/2`` (``[N_0]``) of the batch ``edge_index`` was trimmed from (with the
        weights it was trimmed with if this layer is ``weighted``), memoised on the batch's
        ``edge_index`` when it has no edge weights (the degrees alone: no layer aggregates
        over the untrimmed graph, so none builds it); ``None`` if ``edge_index`` was not
        trimmed."""
        root = trimmed_from(edge_index)
        if root is None:
            return None
        root_index, root_nodes, root_weight = root
        if not is_trusted_edge_index(root_index, (root_nodes, root_nodes)):  # (the edges past the trimmed ones)
            check_edge_index(root_index, (root_nodes, root_nodes))
        root_weight = root_weight if weighted else None  # (a model's edge_attr is trimmed beside, unused here)

        def degrees() -> Tensor:
            return gcn_normalize(root_index, root_weight, root_nodes, self.improved, self.add_self_loops, dtype)[2]
        if root_weight is None:
            return cached_on(root_index, _GCN_DEG_SLOT, self._key(root_nodes, dtype), degrees)
        return degrees()


_GCN_SLOT = '_pyg_accel_gcn'
_GCN_DEG_SLOT = '_pyg_accel_gcn_degrees'


def gcn_normalize(edge_index: Tensor, edge_weight: Optional[Tensor], num_nodes: int, improved: bool,
                  add_self_loops: bool, dtype: torch.dtype, deg_inv_sqrt: Optional[Tensor] = None
                  ) -> Tuple[Tensor, Tensor, Tensor]:
    """PyG's ``gcn_norm`` (flow ``source_to_target``), the same operations in the same
    order: self-loops added as ``add_remaining_self_loops`` adds them, then each edge
    weighted ``d_src^-1/2 w d_dst^-1/2`` with ``d`` the weighted in-degree.

    ``deg_inv_sqrt`` (``[N_0]``, N_0 >= ``num_nodes``) supplies the degrees instead: those
    of the graph a trimmed ``edge_index`` was cut from, whose nodes it numbers the same.

    Returns ``edge_index`` ``[2, E']``, the normalised ``edge_weight`` ``[E']`` and the
    ``D^-1/2`` used (``[num_nodes]`` or ``[N_0]``).
    """
    fill_value = 2. if improved else 1.
    if add_self_loops and sync_free_mode():  # the graph's own loops stay, weighted 0: no host sync
        edge_index, edge_weight = gcn_self_loops(edge_index, edge_weight, fill_value, num_nodes, dtype)
    elif add_self_loops:
        edge_index, edge_weight = add_remaining_self_loops(edge_index, edge_weight, fill_value, num_nodes)
    if edge_weight is None:
        edge_weight = torch.ones((edge_index.size(1), ), dtype=dtype, device=edge_index.device)
    row, col = edge_index[0], edge_index[1]
    if deg_inv_sqrt is None:
        deg = scatter(edge_weight, col, dim=0, dim_size=num_nodes, reduce='sum')
        deg_inv_sqrt = deg.pow_(-0.5)
        deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float('inf'), 0)
    return edge_index, deg_inv_sqrt[row] * edge_weight * deg_inv_sqrt[col], deg_inv_sqrt
