"""``from_data``: a PyG ``Data`` / ``HeteroData`` into a (FeatureStore, GraphStore) pair."""
from __future__ import annotations

import warnings
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from .feature_store import FeatureStore
from .graph_store import GraphStore
from .location import Location, LocationLike, resolve_location

__all__ = ['from_data']


def _put_node_attrs(fs: FeatureStore, store, group) -> None:
    for key, value in store.items():
        if isinstance(value, Tensor) and key not in ('edge_index', 'adj', 'adj_t') and store.is_node_attr(key):
            fs.put_tensor(value, group_name=group, attr_name=key, index=None)


def _put_edges(gs: GraphStore, store, edge_type, size: Tuple[int, int], edge_attrs: Optional[List[str]] = None) -> None:
    """``store``'s edges, and its per-edge tensors (those named in ``edge_attrs`` only,
    if given), into ``gs``."""
    if 'edge_index' not in store:
        raise ValueError(f'edge type {edge_type!r} has no edge_index '
                         "(SparseTensor 'adj_t' inputs: convert with data.adj_t.t().coo() first)")
    gs.put_edge_index(store.edge_index, edge_type=edge_type, layout='coo', size=size)
    for key, value in store.items():
        if key != 'edge_index' and isinstance(value, Tensor) and store.is_edge_attr(key) and \
                (edge_attrs is None or key in edge_attrs):
            gs.put_edge_feature(value, key, edge_type)


def put_hetero_edges(gs: GraphStore, data: HeteroData, edge_attrs: Optional[List[str]] = None) -> GraphStore:
    """Puts every edge type of ``data`` (its ``edge_index``, sized by its node types, and
    its per-edge tensors, or those named in ``edge_attrs``) into ``gs``; returns ``gs``."""
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        _put_edges(gs, data[edge_type], edge_type, (data[src].num_nodes, data[dst].num_nodes), edge_attrs)
    return gs


def _warn_skipped(store, used) -> None:
    skipped = [k for k, v in store.items() if isinstance(v, Tensor) and k not in used
               and not store.is_node_attr(k) and not store.is_edge_attr(k)]
    if skipped:
        warnings.warn(f'from_data: tensors that are neither node- nor edge-level were not stored: {skipped}')


def from_data(data: Union[Data, HeteroData], location: LocationLike = 'auto', device=None,
              graph_location: Optional[LocationLike] = None, group=None,
              float_dtype: Optional[torch.dtype] = None,
              ranks_per_host: Optional[int] = None) -> Tuple[FeatureStore, GraphStore]:
    """Copies ``data`` into a :class:`FeatureStore` and a :class:`GraphStore`.

    Node-level tensors (``x``, ``y``, masks, ...) go to the feature store under
    ``group_name=None`` (homogeneous) or the node type; each ``edge_index`` goes to the
    graph store with its ``size`` set; edge-level tensors (``edge_attr``, ``edge_weight``,
    ``time``, ...) are kept in the graph store (:meth:`GraphStore.get_edge_feature`),
    since PyG's loader would otherwise index them with node ids.

    Args:
        data: the graph.
        location: ``'auto'``, ``'cuda'``, ``'pinned'`` or ``'cpu'`` for both stores, or
            ``'sharded'`` for features split across the GPUs of a host, or of several
            hosts (a collective call: every process of ``group`` passes the same
            ``data``); the graph is then on this process's GPU (or CPU) unless
            ``graph_location`` says otherwise.
        device: the GPU for ``'cuda'`` / ``'pinned'`` / ``'sharded'``; with ``'auto'``,
            where the stores go (``'cpu'`` or a GPU).
        graph_location: a different location for the graph store (e.g. features on the
            GPU, graph in pinned memory for a CPU sampler); default: ``location``.
        group: the process group of a ``'sharded'`` feature store (default: the world).
        float_dtype: store the floating-point node features in this dtype (e.g.
            ``torch.bfloat16``: half the bytes per gather; see :class:`FeatureStore`).
        ranks_per_host: processes per host of a ``'sharded'`` store (see :class:`FeatureStore`).

    Returns:
        ``(feature_store, graph_store)``, ready for
        ``NeighborLoader((feature_store, graph_store), ...)``.
    """
    location = resolve_location(location, device)
    fs = FeatureStore(location, group=group, float_dtype=float_dtype, ranks_per_host=ranks_per_host)
    if graph_location is None:
        graph_location = Location(location.memory, location.device)  # (a sharded store's graph: whole)
    gs = GraphStore(resolve_location(graph_location, device))
    if isinstance(data, HeteroData):
        for node_type in data.node_types:
            _put_node_attrs(fs, data[node_type], node_type)
        put_hetero_edges(gs, data)
        return fs, gs
    if not isinstance(data, Data):
        raise TypeError(f'from_data: expected a torch_geometric Data or HeteroData, got {type(data).__name__}')
    if data.num_nodes is None:
        raise ValueError('from_data: cannot infer the number of nodes; set data.num_nodes')
    _put_node_attrs(fs, data, None)
    n = int(data.num_nodes)
    if 'edge_index' in data:
        _put_edges(gs, data, None, (n, n))
    else:
        gs.put_edge_index((torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)),
                          edge_type=None, layout='coo', size=(n, n))
    _warn_skipped(data, {'edge_index'})
    return fs, gs
