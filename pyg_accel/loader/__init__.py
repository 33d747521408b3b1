"""PyG's ``NeighborLoader`` / ``LinkNeighborLoader`` with pyg_accel's sampler chosen for you.

Same signatures as PyG's; pass ``neighbor_sampler=`` to override. Batches stay on the
device of the graph. Use ``num_workers=0`` with GPU-resident graphs: CUDA cannot run in
forked DataLoader workers, so asking for workers then is an error.

With GPU batches the loaders pipeline by default (``pipeline=True``): batch *i + 1* is
sampled and gathered on a side CUDA stream while batch *i* trains (see
:mod:`pyg_accel.loader.prefetch`; :class:`PrefetchLoader` does the same for PyG's own
loaders). ``pipeline=False`` iterates plainly.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch
import torch_geometric.loader
from torch_geometric.data import HeteroData
from torch_geometric.sampler.base import SubgraphType

from ..data import GraphStore
from ..ops.hops import record_hops
from ..ops.sparse import trust_edge_index
from ..sampler import NeighborSampler
from .edge_features import attach_edge_features, csc_positions
from .index_batches import index_batches
from .prefetch import PrefetchLoader, prefetch_batches
from .store_batches import StoreBatches
from .timing import StageTimer

__all__ = ['NeighborLoader', 'LinkNeighborLoader', 'PrefetchLoader', 'prefetch_batches', 'StageTimer']

_SAMPLER_ARGS = ('subgraph_type', 'replace', 'disjoint', 'temporal_strategy', 'time_attr', 'weight_attr',
                 'directed')


def _uses_gpu(data, sampler) -> bool:
    """Whether batches are sampled or gathered on a GPU (then workers cannot help)."""
    if getattr(sampler, 'device', None) is not None and sampler.device.type == 'cuda':
        return True
    stores = data if isinstance(data, (tuple, list)) else ()
    return any(getattr(getattr(store, 'device', None), 'type', 'cpu') == 'cuda' for store in stores)


def _our_sampler(data, num_neighbors, kwargs: Dict[str, Any], sampler: Optional[NeighborSampler]):
    if sampler is None:
        options = {k: kwargs[k] for k in _SAMPLER_ARGS if k in kwargs}
        sampler = NeighborSampler(data, num_neighbors, **options)
    if kwargs.get('num_workers', 0) > 0 and _uses_gpu(data, sampler):
        raise ValueError('pyg_accel loaders sample and gather on the GPU: use num_workers=0 (CUDA cannot run in '
                         'forked DataLoader workers, and GPU batches need no workers)')
    return sampler


class _Pipelined:
    """Mixin: iterate through :func:`prefetch_batches` when batches live on a GPU."""

    fast_index = True  # False: draw seed indices through the DataLoader (same batches, more host time)
    # pipelined NeighborLoaders over our stores start each batch's sample (on the GPU) before handing out the
    # batch before it, so that building it finds the sample done (False: each batch sampled as it is built)
    sample_ahead = True

    def _setup_pipeline(self, pipeline: bool, on_gpu: bool, sampler) -> None:
        _drop_bound_collate_fn(self)
        self.pipeline, self._on_gpu = pipeline, on_gpu
        self._inverse_perms: Dict = {}  # per edge type, for edge features after transform_sampler_output
        # our sampler's directional output lists each node's edges together, in node order,
        # per edge type too (so does the induced output: edges by destination, then CSC position);
        # sampling backward, it lists them by source instead
        forward = isinstance(sampler, NeighborSampler) and sampler.sample_direction == 'forward'
        self._dst_sorted = forward and sampler.subgraph_type in (SubgraphType.directional, SubgraphType.induced)
        # ... and lists nodes and edges hop by hop, which lets our models trim each layer
        self._by_hop = (isinstance(sampler, NeighborSampler) and sampler.subgraph_type == SubgraphType.directional
                        and self.transform_sampler_output is None)
        # the sampler's edge positions are the store's CSC positions, except backward: there
        # they index the reversed graph the sampler reads
        self._store_positions = forward or not isinstance(sampler, NeighborSampler)

    def __iter__(self):
        direct = self.fast_index and StoreBatches.applies(self)  # (over our stores: without PyG's layers)
        indices = index_batches(self, StoreBatches.positions_device(self) if direct else None) \
            if self.fast_index else None
        pipelined = self.pipeline and self._on_gpu
        if indices is None:
            batches = super().__iter__()
        elif direct:
            batches = StoreBatches.for_loader(self).batches(indices, ahead=pipelined and self.sample_ahead)
        else:
            batches = map(self._batch_at, indices)
        if getattr(self, 'transform', None) is None:  # a transform may rewrite what the sampler made
            batches = _trusted(batches, self._dst_sorted, self._by_hop)
        return prefetch_batches(batches) if pipelined else batches

    def _batch_at(self, index: torch.Tensor):
        """What PyG's iterator yields for the seeds at positions ``index``."""
        out = self.collate_fn(index)
        return out if self.filter_per_worker else self.filter_fn(out)

    def filter_fn(self, out):
        """PyG's batch, plus the per-edge tensors our GraphStore holds (PyG's
        remote-backend path fetches node features only)."""
        batch = super().filter_fn(out)
        graph_store = self.data[1] if isinstance(self.data, (tuple, list)) else None
        if not isinstance(graph_store, GraphStore) or out.edge is None:
            return batch
        return attach_edge_features(batch, graph_store, self._edge_positions(batch, out))

    def _edge_positions(self, batch, out):
        """The CSC positions in our GraphStore of ``batch``'s edges (a dict per edge type
        for heterogeneous batches), sampled as ``out``."""
        if self.transform_sampler_output is None and self._store_positions:
            return out.edge  # the sampler's CSC positions
        # a transform may have changed the edges, or they index the reversed graph: from their input ids
        return csc_positions(batch, self.data[1], self._inverse_perms)


def _drop_bound_collate_fn(loader) -> None:
    """Breaks the reference cycle PyG's loaders make, so that a dropped loader (and its
    sampler and stores, which may hold GBs of GPU memory) is freed at once rather than at
    the next garbage collection.

    PyG's ``NodeLoader`` / ``LinkLoader`` hand their bound ``self.collate_fn`` to
    ``DataLoader``, which keeps it as an instance attribute: loader -> bound method ->
    loader. Dropping that attribute lets ``loader.collate_fn`` resolve to the class's
    method again (bound afresh on each access, as ``DataLoader``'s iterators read it),
    with the same behaviour and pickling."""
    bound = loader.__dict__.get('collate_fn')
    if getattr(bound, '__self__', None) is loader and \
            getattr(bound, '__func__', None) is getattr(type(loader).collate_fn, '__func__', type(loader).collate_fn):
        del loader.__dict__['collate_fn']


def _trusted(batches, dst_sorted: bool, by_hop: bool):
    """Marks each batch's edge indices as in range (our sampler made them), and as
    sorted by destination when ``dst_sorted`` (every edge type's, in a heterogeneous
    batch), so that pyg_accel's layers skip the validating host sync and the sort. With
    ``by_hop``, a homogeneous batch's per-hop counts are recorded on its ``edge_index``
    too: pyg_accel's models then trim each layer to the hops it still needs."""
    for batch in batches:
        if isinstance(batch, HeteroData):
            num_nodes: Dict[str, Any] = {}  # (per node type, read once: num_nodes is inferred on each read)
            for (src, _, dst), store in zip(batch.edge_types, batch.edge_stores):
                edge_index = store.get('edge_index')
                if isinstance(edge_index, torch.Tensor):
                    for t in (src, dst):
                        if t not in num_nodes:
                            num_nodes[t] = batch[t].num_nodes
                    trust_edge_index(edge_index, num_nodes[src], num_nodes[dst], dst_sorted=dst_sorted)
        elif isinstance(getattr(batch, 'edge_index', None), torch.Tensor):
            trust_edge_index(batch.edge_index, batch.num_nodes, batch.num_nodes, dst_sorted=dst_sorted)
            nodes, edges = getattr(batch, 'num_sampled_nodes', None), getattr(batch, 'num_sampled_edges', None)
            if by_hop and nodes is not None and edges is not None:
                record_hops(batch.edge_index, batch.num_nodes, nodes, edges)
        yield batch


class NeighborLoader(_Pipelined, torch_geometric.loader.NeighborLoader):
    """:class:`torch_geometric.loader.NeighborLoader` driving :class:`pyg_accel.sampler.NeighborSampler`
    (``pipeline``: prefetch the next batch on a side CUDA stream; GPU batches only)."""

    def __init__(self, data, num_neighbors, *args, neighbor_sampler=None, pipeline: bool = True, **kwargs):
        sampler = _our_sampler(data, num_neighbors, kwargs, neighbor_sampler)
        if isinstance(data, (tuple, list)) and not args:
            input_nodes = kwargs.get('input_nodes')
            if isinstance(input_nodes, (tuple, list)) and len(input_nodes) == 2 and input_nodes[0] is None:
                input_nodes = input_nodes[1]  # (None, ids): a homogeneous graph's ids, as PyG takes them for a Data
            if input_nodes is None:
                input_nodes = _all_nodes(sampler)  # (PyG's remote-backend path needs them spelled out)
            kwargs['input_nodes'] = input_nodes
        super().__init__(data, num_neighbors, *args, neighbor_sampler=sampler, **kwargs)
        self._setup_pipeline(pipeline, _uses_gpu(data, sampler), sampler)


def _all_nodes(sampler) -> torch.Tensor:
    """Every node id of a homogeneous graph: ``input_nodes=None`` over our stores means
    all nodes, as it does over a ``Data``."""
    num_nodes = getattr(sampler, 'num_nodes', None)
    if not isinstance(num_nodes, int):
        raise ValueError("NeighborLoader: input_nodes=None needs a homogeneous graph; for a heterogeneous one pass "
                         "input_nodes=('node_type', None) or ('node_type', ids)")
    return torch.arange(num_nodes)


class LinkNeighborLoader(_Pipelined, torch_geometric.loader.LinkNeighborLoader):
    """:class:`torch_geometric.loader.LinkNeighborLoader` driving :class:`pyg_accel.sampler.NeighborSampler`
    (``pipeline``: prefetch the next batch on a side CUDA stream; GPU batches only)."""

    def __init__(self, data, num_neighbors, *args, neighbor_sampler=None, pipeline: bool = True, **kwargs):
        sampler = _our_sampler(data, num_neighbors, kwargs, neighbor_sampler)
        if isinstance(data, (tuple, list)) and not args:
            kwargs['edge_label_index'] = _remote_label_edges(data, kwargs.get('edge_label_index'))
        super().__init__(data, num_neighbors, *args, neighbor_sampler=sampler, **kwargs)
        self._setup_pipeline(pipeline, _uses_gpu(data, sampler), sampler)


def _remote_label_edges(data, edge_label_index):
    """``edge_label_index`` as PyG's remote-backend path wants it, ``(edge_type, edges)``.
    Over a homogeneous graph in stores a bare ``[2, k]`` tensor, or ``None`` (every edge,
    in the order they were put), is taken as it is for a ``Data``."""
    if isinstance(edge_label_index, (tuple, list)) and edge_label_index and \
            isinstance(edge_label_index[0], (str, tuple, list)):
        return edge_label_index  # an edge type, or (edge_type, edges): PyG's own spellings
    if isinstance(edge_label_index, (tuple, list)) and len(edge_label_index) == 2 and edge_label_index[0] is None:
        edge_label_index = edge_label_index[1]
    graph_store = data[1]
    edge_types = {attr.edge_type for attr in graph_store.get_all_edge_attrs()}
    if isinstance(edge_label_index, torch.Tensor) and edge_types == {None}:
        return None, edge_label_index
    if edge_label_index is not None or edge_types != {None}:
        raise ValueError('LinkNeighborLoader: edge_label_index must be a [2, k] tensor, (None, tensor) or, for a '
                         f'heterogeneous graph, (edge_type, tensor); got {type(edge_label_index).__name__} over '
                         f'edge types {sorted(map(str, edge_types))}')
    row, col = graph_store.get_edge_index(edge_type=None, layout='coo')
    return None, torch.stack([row, col]).cpu()  # (PyG indexes it with the DataLoader's CPU ids)
