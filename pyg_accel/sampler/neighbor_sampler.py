"""``NeighborSampler``: pyg_accel's multi-hop sampler as a PyG ``BaseSampler``.

It plugs into PyG's own loaders::

    sampler = NeighborSampler((feature_store, graph_store), num_neighbors=[15, 10, 5])
    NeighborLoader((fs, gs), [15, 10, 5], neighbor_sampler=sampler, input_nodes=..., batch_size=...)
    NodeLoader((fs, gs), node_sampler=sampler, input_nodes=..., batch_size=...)
    LinkNeighborLoader((fs, gs), [15, 10, 5], neighbor_sampler=sampler, edge_label_index=...)

and reads the CSC held by a :class:`pyg_accel.data.GraphStore` directly (no copy;
a temporal graph's rows are copied once, sorted by time); it also takes a plain
``Data`` or ``HeteroData``.
"""
from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, FeatureStore, HeteroData
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.sampler import (BaseSampler, EdgeSamplerInput, HeteroSamplerOutput, NegativeSampling,
                                     NodeSamplerInput, SamplerOutput)
from torch_geometric.sampler.base import NumNeighbors, SubgraphType
from torch_geometric.sampler.neighbor_sampler import edge_sample, node_sample
from torch_geometric.sampler.utils import reverse_edge_type

from ..data.convert import put_hetero_edges
from ..data.graph_store import GraphStore, _ids_to_ptr, _ptr_to_ids
from ..data.host_memory import pinned_copy
from ..ops.gather import trust_index, uva_view
from ..ops._pending import Pending
from ..ops.sampling import (HeteroSampledSubgraph, SampledSubgraph, cuda_sampling_available, hetero_neighbor_sample,
                            neighbor_sample, sort_columns_by_time, start_hetero_neighbor_sample, start_neighbor_sample)
from .induced import hetero_induced_edges, induced_edges

EdgeType = Tuple[str, str, str]

__all__ = ['NeighborSampler']


@dataclass
class _Graph:
    """The homogeneous graph a sampler reads, in CSC order."""
    colptr: Tensor
    row: Tensor
    perm: Optional[Tensor]  # CSC position -> input edge id (None: identity)
    num_nodes: int
    edge_weight: Optional[Tensor] = None
    node_time: Optional[Tensor] = None
    edge_time: Optional[Tensor] = None


def _sampling_place(graph_store, held_on: torch.device) -> Tuple[torch.device, bool]:
    """``(device, host_resident)``: where a graph is sampled, and whether it stays in
    pinned host memory. A graph is sampled where it is held, except that a pyg_accel
    ``GraphStore('pinned')`` is sampled by its GPU, whose kernels read the graph over the
    bus (UVA, zero-copy), when the CUDA sampler is built: graphs larger than the GPU's
    memory are sampled there without a copy."""
    if (isinstance(graph_store, GraphStore) and graph_store.location.zero_copy
            and graph_store.device.type == 'cuda' and cuda_sampling_available()):
        return graph_store.device, True
    return held_on, False


def _readable_on(t: Optional[Tensor], device: torch.device, host_resident: bool,
                 dtype: Optional[torch.dtype] = None, copy: bool = False) -> Optional[Tensor]:
    """``t`` (in ``dtype``) where the sampling kernels on ``device`` read it: as it is,
    as a GPU view of pinned host memory (``host_resident``: host tensors are pinned and
    stay in host memory, unless ``copy``), or copied to ``device``."""
    if t is None:
        return None
    if host_resident and device.type == 'cuda' and t.is_cpu and not copy:
        t = t if dtype is None else t.to(dtype)
        return uva_view(pinned_copy(t), device)
    return t.to(device, dtype)


# A pinned graph's column pointers are copied to the GPU: every sampled node reads two of
# them before its neighbours, and they are N + 1 ids against E (0.9 of 27 GB at
# papers100M's size). Reading them over the bus made sampling 1.45x slower there (H100,
# 1024 x [15, 10, 5]: 7.0 against 4.9 ms).


def _graph_on(graph: _Graph, device: torch.device, host_resident: bool) -> _Graph:
    """Every tensor of ``graph`` readable by the sampling kernels on ``device`` (the
    column pointers in GPU memory)."""
    put = lambda t, dtype=None: _readable_on(t, device, host_resident, dtype)  # noqa: E731
    colptr = _readable_on(graph.colptr, device, host_resident, torch.long, copy=True)
    return _Graph(colptr, put(graph.row, torch.long), put(graph.perm), graph.num_nodes,
                  put(graph.edge_weight), put(graph.node_time), put(graph.edge_time))


def _stores_of(data, edge_attrs: List[str]) -> Tuple[Optional[FeatureStore], PyGGraphStore, Optional[Data]]:
    """``(feature_store, graph_store, data)``; a ``Data`` object becomes our GraphStore
    with the named per-edge attributes as edge features."""
    if isinstance(data, Data):
        if data.num_nodes is None:
            raise ValueError("NeighborSampler: the Data object has neither 'edge_index' nor 'num_nodes'")
        # (a graph without edges is one whose nodes have no neighbours, as PyG's loaders take it)
        edge_index = data.edge_index if data.edge_index is not None else torch.empty(2, 0, dtype=torch.long)
        cuda = edge_index.is_cuda
        store = GraphStore('cuda' if cuda else 'cpu', device=edge_index.device if cuda else None)
        store.put_edge_index(edge_index, edge_type=None, layout='coo', size=(data.num_nodes, data.num_nodes))
        for name in edge_attrs:
            if name in data and data.is_edge_attr(name):
                store.put_edge_feature(data[name], name)
        return None, store, data
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[1], PyGGraphStore)):
        raise TypeError('NeighborSampler: expected a Data object or a (FeatureStore, GraphStore) pair, '
                        f'got {type(data).__name__}')
    if data[0] is not None and not isinstance(data[0], FeatureStore):
        raise TypeError(f'NeighborSampler: the first element must be a FeatureStore, got {type(data[0]).__name__}')
    return data[0], data[1], None


def _edge_feature(graph_store, name: str, what: str) -> Tensor:
    if not isinstance(graph_store, GraphStore):
        raise NotImplementedError(f"NeighborSampler: {what} needs pyg_accel's GraphStore (put it with "
                                  'graph_store.put_edge_feature(tensor, name)); stock PyG does not support it '
                                  'over a foreign GraphStore either')
    return graph_store.get_edge_feature(name)


def _node_time(feature_store, data: Optional[Data], name: str) -> Optional[Tensor]:
    if data is not None:
        return data[name] if name in data and data.is_node_attr(name) else None
    return _node_time_of_type(feature_store, None, name)


def _times_in_feature_store(feature_store, name: str) -> Dict[object, Tensor]:
    """Every FeatureStore tensor named ``name``, by group, as PyG's sampler finds times in
    a remote backend (any group: ``'default'`` for a homogeneous graph, node types, or
    edge types for edge times)."""
    if feature_store is None:
        return {}
    out = {}
    for attr in feature_store.get_all_tensor_attrs():
        if attr.attr_name == name:
            attr = copy.copy(attr)
            attr.index = None
            out[attr.group_name] = feature_store.get_tensor(attr).reshape(-1)
    return out


def _remote_time(feature_store, name: str, graph: '_Graph') -> bool:
    """Puts the one FeatureStore tensor named ``name`` on ``graph`` as node times (a row
    per node) or edge times (a row per edge, in the order the edges were put, as PyG's
    remote backends hold them); whether there was one."""
    found = _times_in_feature_store(feature_store, name)
    if len(found) != 1:
        return False
    (group, time), = found.items()
    num_edges = graph.row.numel()
    if not isinstance(group, tuple) and time.numel() == graph.num_nodes and \
            (time.numel() != num_edges or name == 'time'):  # (PyG's rule when both fit)
        graph.node_time = time
    elif time.numel() == num_edges:
        graph.edge_time = time if graph.perm is None else time.to(graph.perm.device)[graph.perm]
    else:
        raise ValueError(f"NeighborSampler: the FeatureStore's '{name}' of group {group!r} has {time.numel()} "
                         f'entries, for {graph.num_nodes} nodes and {num_edges} edges')
    return True


def _load_graph(data, weight_attr: Optional[str], time_attr: Optional[str]
                ) -> Tuple[_Graph, Tuple[torch.device, bool]]:
    """The graph of ``data`` as its store holds it, and :func:`_sampling_place`'s answer."""
    feature_store, graph_store, raw = _stores_of(data, [a for a in (weight_attr, time_attr) if a is not None])
    edge_attrs = graph_store.get_all_edge_attrs()
    if not edge_attrs:
        raise ValueError('NeighborSampler: the graph store holds no edges')
    if any(attr.edge_type is not None for attr in edge_attrs):
        raise ValueError('NeighborSampler: expected a homogeneous graph here')
    size = edge_attrs[0].size
    if size is None:
        raise ValueError('NeighborSampler: the EdgeAttr has no size; put the edges with size=(N, N)')
    row, colptr, perm = graph_store.csc()
    num_nodes = max(size)
    if colptr.numel() - 1 < num_nodes:  # nodes without in-edges past the last column
        colptr = torch.cat([colptr, colptr[-1:].expand(num_nodes + 1 - colptr.numel())])
    graph = _Graph(colptr, row, perm, num_nodes)
    if weight_attr is not None:
        if raw is not None and weight_attr not in raw:
            raise ValueError(f"NeighborSampler: the Data object has no edge attribute '{weight_attr}'")
        graph.edge_weight = _edge_feature(graph_store, weight_attr, 'weight_attr')
    if time_attr is not None:
        graph.node_time = _node_time(feature_store, raw, time_attr)
        if graph.node_time is None and not (raw is None and _remote_time(feature_store, time_attr, graph)):
            if raw is not None and time_attr not in raw:
                raise ValueError(f"NeighborSampler: the Data object has no attribute '{time_attr}'")
            graph.edge_time = _edge_feature(graph_store, time_attr, 'time_attr')
    return graph, _sampling_place(graph_store, colptr.device)


@dataclass
class _HeteroGraph:
    """A heterogeneous graph in CSC order per edge type, with the per-type weights and
    times that some types may have."""
    colptr: Dict[EdgeType, Tensor]
    row: Dict[EdgeType, Tensor]
    perm: Dict[EdgeType, Optional[Tensor]]
    num_nodes: Dict[str, int]
    edge_weight: Dict[EdgeType, Tensor] = field(default_factory=dict)
    node_time: Dict[str, Tensor] = field(default_factory=dict)
    edge_time: Dict[EdgeType, Tensor] = field(default_factory=dict)


def _is_hetero(data) -> bool:
    if isinstance(data, HeteroData):
        return True
    if isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[1], PyGGraphStore):
        return any(attr.edge_type is not None for attr in data[1].get_all_edge_attrs())
    return False


def _load_hetero_graph(data, weight_attr: Optional[str] = None,
                       time_attr: Optional[str] = None) -> Tuple[_HeteroGraph, Tuple[torch.device, bool]]:
    """The heterogeneous graph of ``data`` as its store holds it, and
    :func:`_sampling_place`'s answer."""
    raw = data if isinstance(data, HeteroData) else None
    edge_attrs = [a for a in (weight_attr, time_attr) if a is not None]
    fs, gs = (None, _hetero_graph_store(raw, edge_attrs)) if raw is not None else data
    num_nodes: Dict[str, int] = {} if raw is None else {t: int(raw[t].num_nodes) for t in raw.node_types}
    for attr in gs.get_all_edge_attrs():
        if attr.size is None:
            raise ValueError(f'NeighborSampler: edge type {attr.edge_type} has no size')
        src, _, dst = attr.edge_type
        num_nodes[src] = max(num_nodes.get(src, 0), int(attr.size[0]))
        num_nodes[dst] = max(num_nodes.get(dst, 0), int(attr.size[1]))
    if fs is not None:  # node types with features but no edges still get seeds
        for attr in fs.get_all_tensor_attrs():
            if isinstance(attr.group_name, str):
                rows = fs.get_tensor_size(attr)[0]
                num_nodes[attr.group_name] = max(num_nodes.get(attr.group_name, 0), int(rows))
    # (no edge types: every node type's nodes have no neighbours, as PyG's loaders take it)
    rows, colptrs, perms = gs.csc() if gs.get_all_edge_attrs() else ({}, {}, {})
    for et, colptr in colptrs.items():
        missing = num_nodes[et[-1]] + 1 - colptr.numel()
        if missing > 0:
            colptrs[et] = torch.cat([colptr, colptr[-1:].expand(missing)])
    graph = _HeteroGraph(colptrs, rows, perms, num_nodes)
    if weight_attr is not None:
        graph.edge_weight = _edge_features_by_type(gs, list(colptrs), weight_attr, 'weight_attr')
    if time_attr is not None:
        graph.node_time = {t: nt for t in num_nodes if (nt := _node_time_of_type(fs, t, time_attr, raw)) is not None}
        if not graph.node_time:
            remote = {g: t for g, t in _times_in_feature_store(fs, time_attr).items() if isinstance(g, tuple)}
            if remote:  # edge times in the FeatureStore, by edge type (PyG's remote layout), in put order
                graph.edge_time = {et: t if perms.get(et) is None else t.to(perms[et].device)[perms[et]]
                                   for et, t in remote.items() if et in colptrs}
            else:
                graph.edge_time = _edge_features_by_type(gs, list(colptrs), time_attr, 'time_attr')
        _sort_hetero_columns_by_time(graph)
    held_on = next(iter(colptrs.values())).device if colptrs else torch.device('cpu')
    return graph, _sampling_place(gs, held_on)


def _hetero_graph_store(data: HeteroData, edge_attrs: List[str]) -> GraphStore:
    """Our GraphStore of ``data``'s edges, and of the per-edge tensors named in
    ``edge_attrs``, where the edges are: a HeteroData held on a GPU is sampled on that
    GPU, as a ``Data`` is. Nothing else is copied (PyG's loader gathers node features
    and other edge tensors from ``data``)."""
    devices = {data[et].edge_index.device for et in data.edge_types if 'edge_index' in data[et]}
    if len(devices) > 1:
        raise ValueError('NeighborSampler: the edge types of the HeteroData are on different devices: '
                         f'{sorted(map(str, devices))}')
    device = devices.pop() if devices else torch.device('cpu')
    store = GraphStore('cuda', device=device) if device.type == 'cuda' else GraphStore('cpu')
    return put_hetero_edges(store, data, edge_attrs)


def _edge_features_by_type(graph_store, edge_types: List[EdgeType], name: str, what: str) -> Dict[EdgeType, Tensor]:
    """The per-edge tensor ``name`` of each edge type that has it (CSC order)."""
    if not isinstance(graph_store, GraphStore):
        raise NotImplementedError(f"NeighborSampler: {what} needs pyg_accel's GraphStore (put it with "
                                  'graph_store.put_edge_feature(tensor, name, edge_type))')
    found = {et: graph_store.get_edge_feature(name, et) for et in edge_types
             if name in graph_store.edge_feature_names(et)}
    if not found:
        also = ' (nor any node type a node attribute of that name)' if what == 'time_attr' else ''
        raise KeyError(f'NeighborSampler: no edge type has an edge feature {name!r}{also}')
    return found


def _node_time_of_type(feature_store, node_type: Optional[str], name: str,
                       data: Optional[HeteroData] = None) -> Optional[Tensor]:
    """The node-level tensor ``name`` of a FeatureStore group (or of ``data``'s node
    type), or ``None``."""
    if data is not None:
        store = data[node_type]
        return store[name] if name in store and store.is_node_attr(name) else None
    if feature_store is None:
        return None
    try:
        return feature_store.get_tensor(group_name=node_type, attr_name=name, index=None)
    except KeyError:
        return None


def _sort_hetero_columns_by_time(graph: _HeteroGraph) -> None:
    """Each edge type's columns in ascending time (see :func:`_sort_columns_by_time`)."""
    for et in graph.colptr:
        node_time, edge_time = graph.node_time.get(et[0]), graph.edge_time.get(et)
        if node_time is None and edge_time is None:
            continue  # an edge type without times: every edge is eligible, order is kept
        one = _sort_columns_by_time(_Graph(graph.colptr[et], graph.row[et], graph.perm.get(et),
                                           graph.num_nodes[et[-1]], None, node_time, edge_time))
        graph.row[et], graph.perm[et] = one.row, one.perm
        if edge_time is not None:
            graph.edge_time[et] = one.edge_time


def _weight_dtype(weight: Tensor) -> torch.dtype:
    """The dtype the sampling kernels read ``weight`` in: float32 and float64 as they are
    (a float32 weight is widened exactly as it is read: the same samples as its float64
    copy, at half the bytes), any other dtype as float64."""
    return weight.dtype if weight.dtype in (torch.float32, torch.float64) else torch.float64


def _kernel_graph(graph: _HeteroGraph, device: torch.device, host_resident: bool) -> _HeteroGraph:
    """The graph as the sampling kernels take it on ``device`` (:func:`_readable_on`):
    int64 ids, float32 or float64 weights (:func:`_weight_dtype`) and int64 times,
    converted here once rather than with every batch (tensors already in those dtypes
    and there are used as they are). The
    column pointers of a pinned graph are copied to the GPU (see :func:`_graph_on`)."""
    def convert(tensors, dtype=None, copy=False):
        return {key: _readable_on(t, device, host_resident, dtype(t) if callable(dtype) else dtype, copy)
                for key, t in tensors.items()}
    return _HeteroGraph(convert(graph.colptr, torch.long, copy=True), convert(graph.row, torch.long),
                        convert(graph.perm),
                        graph.num_nodes, convert(graph.edge_weight, _weight_dtype),
                        convert(graph.node_time, torch.long), convert(graph.edge_time, torch.long))


def _sort_columns_by_time(graph: _Graph) -> _Graph:
    """:func:`~pyg_accel.ops.sort_columns_by_time` of ``graph`` (its perm composed)."""
    row, edge_time, order = sort_columns_by_time(graph.colptr, graph.row, graph.node_time, graph.edge_time)
    perm = order if graph.perm is None else graph.perm[order]
    return _Graph(graph.colptr, row, perm, graph.num_nodes, None, graph.node_time, edge_time)


def _reversed(graph: _Graph) -> _Graph:
    """The reversed graph in CSC order, for ``sample_direction='backward'``: node ``v``'s
    column lists the destinations of its out-edges (the input's CSR), in CSC order within
    each source; ``perm`` still maps positions to input edge ids and the weights follow
    their edges. Costs one stable sort and a copy of the edges."""
    row = graph.row
    dst = _ptr_to_ids(graph.colptr.to(row.device), row.numel())
    order = torch.sort(row, stable=True).indices  # CSC positions grouped by source (as GraphStore's CSR)
    perm = order if graph.perm is None else graph.perm.to(order.device)[order]
    weight = None if graph.edge_weight is None else graph.edge_weight[order]
    return _Graph(_ids_to_ptr(row[order], graph.num_nodes), dst[order], perm, graph.num_nodes, weight)


def _reversed_hetero(graph: _HeteroGraph) -> _HeteroGraph:
    """The reversed heterogeneous graph: each edge type ``(src, rel, dst)`` becomes
    ``(dst, rel, src)`` (PyG's ``reverse_edge_type``, an involution, so keys stay
    distinct), its CSC the input type's CSR (:func:`_reversed`), with its perm and
    weights."""
    out = _HeteroGraph({}, {}, {}, graph.num_nodes)
    for et, colptr in graph.colptr.items():
        one = _reversed(_Graph(colptr, graph.row[et], graph.perm.get(et), graph.num_nodes[et[0]],
                               graph.edge_weight.get(et)))
        rev = reverse_edge_type(et)
        out.colptr[rev], out.row[rev], out.perm[rev] = one.colptr, one.row, one.perm
        if one.edge_weight is not None:
            out.edge_weight[rev] = one.edge_weight
    return out


def _restore_types(by_type: Optional[Dict[EdgeType, Any]]) -> Optional[Dict[EdgeType, Any]]:
    """Per-edge-type values of the reversed graph (tensors, fanouts, counts) keyed by the
    graph's own edge types."""
    return None if by_type is None else {reverse_edge_type(et): v for et, v in by_type.items()}


class NeighborSampler(BaseSampler):
    r"""Multi-hop neighbour sampling (uniform, weighted or temporal; homogeneous or
    heterogeneous) with PyG's ``NeighborSampler`` semantics.

    Args:
        data: ``(feature_store, graph_store)`` (our :class:`~pyg_accel.data.GraphStore`
            or any PyG GraphStore), a ``Data`` or a ``HeteroData``.
        num_neighbors: fanout per hop (``-1`` = all neighbours); for heterogeneous
            graphs also a dict of such lists per edge type.
        subgraph_type: ``'directional'`` (sampled edges only), ``'bidirectional'``
            (each sampled edge also reversed) or ``'induced'`` (every edge of the graph
            between sampled nodes, ordered by destination then CSC position as stock
            PyG's; ``num_sampled_edges`` is then ``None``; needs ``disjoint=False``).
        replace: sample with replacement.
        disjoint: one tree per seed; the output carries ``batch``.
        weight_attr: name of a per-edge weight (``Data`` attribute, or a GraphStore edge
            feature): neighbours are drawn with probability proportional to it.
        time_attr: name of a node time (``Data`` / FeatureStore attribute) or edge time
            (``Data`` attribute / GraphStore edge feature): temporal sampling, where each
            seed's tree only reaches neighbours not later than the seed's time (the
            loader's ``input_time``, else the seed's node time). Implies ``disjoint``.
            Heterogeneous graphs: a weight or time per edge type (and node times per
            node type) where present; types without one are drawn uniformly / always
            eligible. As stock PyG, the sampler keeps its own copy of a temporal graph's
            rows with each column sorted by time (:func:`~pyg_accel.ops.sort_columns_by_time`),
            so each node's eligible neighbours are found by binary search.
        temporal_strategy: ``'uniform'`` or ``'last'`` (the most recent neighbours).
        is_sorted, share_memory: accepted for PyG compatibility and ignored: the graph
            is read from the store's CSC, and forked DataLoader workers read a CPU graph
            copy-on-write.
        directed: ``False`` is PyG's deprecated spelling of ``subgraph_type='induced'``.
        sample_direction: ``'forward'`` samples in-neighbours (PyG's default);
            ``'backward'`` samples out-neighbours, as stock PyG: the sampler keeps the
            reversed graph (one sort and a copy of the edges, made once), and each sampled
            edge comes out in the graph's direction, ``row`` being the node it was sampled
            from. Heterogeneous graphs are sampled over each edge type reversed, and
            their fanouts and outputs keyed by the graph's own edge types, as stock PyG's.
            Not temporal (stock PyG has no temporal backward sampling either).
        seed: fixes the sampler's random stream (each batch still differs); ``None``
            follows ``torch.manual_seed``.

    Output: PyG's ``SamplerOutput`` — seeds first in input order, nodes grouped by hop,
    edges grouped by hop with ``row`` = neighbour and ``col`` = the node sampled from,
    ``edge`` = CSC positions mapped to input edge ids through :attr:`edge_permutation`,
    ``num_sampled_nodes`` / ``num_sampled_edges`` per hop. Batches stay on the device of
    the graph.
    """

    def __init__(self, data: Union[Data, Tuple[FeatureStore, PyGGraphStore]],
                 num_neighbors: Union[List[int], NumNeighbors], subgraph_type: Union[str, SubgraphType] = 'directional',
                 replace: bool = False, disjoint: bool = False, temporal_strategy: str = 'uniform',
                 time_attr: Optional[str] = None, weight_attr: Optional[str] = None,
                 is_sorted: bool = False, share_memory: bool = False, directed: bool = True,
                 sample_direction: str = 'forward', seed: Optional[int] = None) -> None:
        if not directed:  # as PyG: the deprecated spelling of an induced subgraph
            subgraph_type = SubgraphType.induced
            warnings.warn("The usage of the 'directed' argument in 'NeighborSampler' is deprecated. Use "
                          "`subgraph_type='induced'` instead.", stacklevel=2)
        if sample_direction not in ('forward', 'backward'):
            raise ValueError(f"NeighborSampler: sample_direction must be 'forward' or 'backward', got "
                             f'{sample_direction!r}')
        if sample_direction == 'backward' and time_attr is not None:
            raise NotImplementedError("NeighborSampler: sample_direction='backward' does not take time_attr "
                                      '(stock PyG has no temporal backward sampling either)')
        self.sample_direction = sample_direction
        if time_attr is not None and weight_attr is not None:
            raise ValueError('NeighborSampler: weighted temporal sampling is not supported')
        if temporal_strategy not in ('uniform', 'last'):
            raise ValueError(f"NeighborSampler: temporal_strategy must be 'uniform' or 'last', got "
                             f'{temporal_strategy!r}')
        self.subgraph_type = SubgraphType(subgraph_type)
        self.num_neighbors = num_neighbors if isinstance(num_neighbors, NumNeighbors) else NumNeighbors(num_neighbors)
        self.hetero: Optional[_HeteroGraph] = None
        self.edge_weight = self.node_time = self.edge_time = None
        if _is_hetero(data):
            self.hetero, place = _load_hetero_graph(data, weight_attr, time_attr)
            edge_types = list(self.hetero.colptr)  # the graph's own (num_neighbors and outputs are keyed by them)
            fanouts = self.num_neighbors.get_values(edge_types)
            if sample_direction == 'backward':  # sampled forward over the reversed types
                self.hetero, fanouts = _reversed_hetero(self.hetero), _restore_types(fanouts)
            self._hetero_kernel = _kernel_graph(self.hetero, *place)
            if place[1]:  # a pinned graph sampled on the GPU: edge ids map through views of its perms
                self.hetero.perm = self._hetero_kernel.perm
            self.edge_weight = self.hetero.edge_weight or None
            self.node_time, self.edge_time = self.hetero.node_time or None, self.hetero.edge_time or None
            self.fanouts_dict = {et: list(v) for et, v in fanouts.items()}
            self.num_nodes = dict(self.hetero.num_nodes)
        else:
            graph, place = _load_graph(data, weight_attr, time_attr)
            if time_attr is not None:
                graph = _sort_columns_by_time(graph)
            if sample_direction == 'backward':
                graph = _reversed(graph)
            if place[1]:  # a pinned graph sampled on the GPU
                graph = _graph_on(graph, *place)
            self.colptr, self.row, self.perm, self.num_nodes = graph.colptr, graph.row, graph.perm, graph.num_nodes
            self.edge_weight, self.node_time, self.edge_time = graph.edge_weight, graph.node_time, graph.edge_time
            if isinstance(self.num_neighbors.values, dict):
                raise ValueError('NeighborSampler: per-edge-type num_neighbors needs a heterogeneous graph')
            self.fanouts = list(self.num_neighbors.values)
        self.replace = bool(replace)
        self.disjoint = bool(disjoint) or self.is_temporal  # as PyG: one tree per seed and time
        if self.subgraph_type == SubgraphType.induced and self.disjoint:
            raise ValueError("NeighborSampler: subgraph_type='induced' needs disjoint=False (and no time_attr, "
                             'which implies disjoint trees): an induced subgraph is one node set')
        self.temporal_strategy = temporal_strategy
        self._seed = seed
        self._generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self._generator_worker: Optional[int] = None  # the DataLoader worker the generator is for (None: main)

    def _random_seed(self) -> Optional[int]:
        """The next sample's RNG key from the sampler's own generator (``seed=``); ``None``
        lets the op draw it from torch's default generator. In a DataLoader worker the
        stream is the worker's own, derived from ``seed`` and the worker's id (every
        worker starts with a copy of the sampler, and would otherwise draw the same
        stream), so runs stay reproducible for a given number of workers."""
        if self._generator is None:
            return None
        info = torch.utils.data.get_worker_info()
        worker = None if info is None else info.id
        if worker != self._generator_worker:
            key = self._seed if worker is None else (self._seed * 0x9E3779B97F4A7C15 + worker + 1) % 2**63
            self._generator = torch.Generator().manual_seed(key)
            self._generator_worker = worker
        return int(torch.randint(0, 2**62, (1,), generator=self._generator))

    @property
    def is_temporal(self) -> bool:
        """Whether node or edge times restrict the sampled neighbours."""
        return self.node_time is not None or self.edge_time is not None

    @property
    def device(self) -> torch.device:
        """Where the graph is read (and so where batches are sampled): the graph's
        device, or the GPU of a ``GraphStore('pinned')``."""
        if self.hetero is not None:
            return next(iter(self._hetero_kernel.colptr.values()), torch.empty(0)).device
        return self.colptr.device

    @property
    def edge_permutation(self):
        """PyG's ``BaseSampler.edge_permutation``: CSC position -> input edge id (``None``
        when they coincide), so that loaders map sampled edge ids back to edge features."""
        if self.hetero is None:
            return self.perm
        return _restore_types(self.hetero.perm) if self.sample_direction == 'backward' else self.hetero.perm

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs) -> SamplerOutput:
        return self._metadata_on_device(node_sample(index, self._sample))

    def sample_from_edges(self, index: EdgeSamplerInput,
                          neg_sampling: Optional[NegativeSampling] = None) -> SamplerOutput:
        out = edge_sample(index, self._sample, self.num_nodes, self.disjoint, self.node_time, neg_sampling)
        return self._metadata_on_device(out)

    def _metadata_on_device(self, out):
        """``out`` with its metadata on the batch's device. PyG builds it on the CPU: the
        seeds' ids and times, and for seed edges their labels and label indices
        (negatives included). Moved without waiting, so that a training step's
        ``batch.to(device)`` finds nothing to copy (a blocking copy there would wait for
        every kernel queued before it)."""
        out.metadata = tuple(t.to(self.device, non_blocking=True) if isinstance(t, Tensor) else t
                             for t in out.metadata)
        return out

    def _sample(self, seed, seed_time=None, **kwargs):
        return self._start_sample(seed, seed_time, started=False).result()

    def _start_sample(self, seed, seed_time=None,
                      started: bool = True) -> Pending[Union[SamplerOutput, HeteroSamplerOutput]]:
        """:meth:`_sample`, started: on a GPU the sampling op returns once its kernels are
        enqueued, and ``.result()`` waits for it and finishes the output
        (:func:`~pyg_accel.ops.start_neighbor_sample`); ``started=False`` samples now."""
        if self.hetero is not None:
            return self._start_hetero(seed, seed_time, started)
        if isinstance(seed, dict):
            raise ValueError('NeighborSampler: heterogeneous seeds for a homogeneous graph')
        if seed_time is not None and not self.is_temporal:
            raise ValueError('NeighborSampler: seed times were given but the sampler has no time_attr')
        seed_time = None if seed_time is None else seed_time.to(self.device, non_blocking=True)
        sample = start_neighbor_sample if started else _made_now(neighbor_sample)
        return sample(self.colptr, self.row, seed.to(self.device, non_blocking=True), self.fanouts, self.replace,
                      self.disjoint, self._random_seed(), self.edge_weight, self.node_time, self.edge_time, seed_time,
                      self.temporal_strategy).then(self._homogeneous_output)

    def _homogeneous_output(self, out: SampledSubgraph) -> SamplerOutput:
        trust_index(out.node, self.num_nodes)  # feature gathers by these ids skip the bounds check's sync
        if self.subgraph_type == SubgraphType.induced:  # every edge among the sampled nodes
            row, col, edge = induced_edges(self.colptr, self.row, out.node, out.node)
            out = out._replace(row=row, col=col, edge=edge, num_sampled_edges=None)
        if self.sample_direction == 'backward':  # edges of the reversed graph, back in the graph's direction
            out = out._replace(row=out.col, col=out.row)
        result = SamplerOutput(node=out.node, row=out.row, col=out.col, edge=out.edge, batch=out.batch,
                               num_sampled_nodes=out.num_sampled_nodes, num_sampled_edges=out.num_sampled_edges)
        if self.subgraph_type == SubgraphType.bidirectional:
            result = result.to_bidirectional()
        return result

    def _start_hetero(self, seed: Dict[str, Tensor], seed_time, started: bool) -> Pending[HeteroSamplerOutput]:
        if not isinstance(seed, dict):
            raise ValueError("NeighborSampler: a heterogeneous graph needs seeds keyed by node type (pass "
                             "input_nodes=('node_type', ids))")
        if seed_time is not None and not self.is_temporal:
            raise ValueError('NeighborSampler: seed times were given but the sampler has no time_attr')
        graph = self._hetero_kernel
        sample = start_hetero_neighbor_sample if started else _made_now(hetero_neighbor_sample)
        return sample(graph.colptr, graph.row, seed, self.fanouts_dict, self.hetero.num_nodes, self.replace,
                      self.disjoint, self._random_seed(), graph.edge_weight, graph.node_time, graph.edge_time,
                      seed_time, self.temporal_strategy).then(self._hetero_output)

    def _hetero_output(self, out: HeteroSampledSubgraph) -> HeteroSamplerOutput:
        colptr, row = self._hetero_kernel.colptr, self._hetero_kernel.row
        if self.subgraph_type == SubgraphType.induced:  # every edge among the sampled nodes
            induced_row, induced_col, induced_edge = hetero_induced_edges(colptr, row, out.node)
            out = out._replace(row=induced_row, col=induced_col, edge=induced_edge, num_sampled_edges=None)
        if self.sample_direction == 'backward':  # edges of the reversed types, back in the graph's types and direction
            out = out._replace(row=_restore_types(out.col), col=_restore_types(out.row), edge=_restore_types(out.edge),
                               num_sampled_edges=_restore_types(out.num_sampled_edges))
        for node_type, node in out.node.items():
            trust_index(node, self.hetero.num_nodes[node_type])
        result = HeteroSamplerOutput(node=out.node, row=out.row, col=out.col, edge=out.edge, batch=out.batch,
                                     num_sampled_nodes=out.num_sampled_nodes,
                                     num_sampled_edges=out.num_sampled_edges)
        if self.subgraph_type == SubgraphType.bidirectional:
            result = result.to_bidirectional()
        return result


def _made_now(sample: Callable[..., Any]) -> Callable[..., Pending[Any]]:
    """``sample``, its result returned as a :class:`Pending` already made."""
    return lambda *args: Pending.done(sample(*args))
