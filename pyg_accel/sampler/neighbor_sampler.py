"""``NeighborSampler``: pyg_accel's multi-hop sampler as a PyG ``BaseSampler``.

It plugs into PyG's own loaders::

    sampler = NeighborSampler((feature_store, graph_store), num_neighbors=[15, 10, 5])
    NeighborLoader((fs, gs), [15, 10, 5], neighbor_sampler=sampler, input_nodes=..., batch_size=...)
    NodeLoader((fs, gs), node_sampler=sampler, input_nodes=..., batch_size=...)
    LinkNeighborLoader((fs, gs), [15, 10, 5], neighbor_sampler=sampler, edge_label_index=...)

and reads the CSC held by a :class:`pyg_accel.data.GraphStore` directly (no copy);
it also takes a plain homogeneous ``Data``.
"""
from __future__ import annotations

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, FeatureStore
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.sampler import BaseSampler, EdgeSamplerInput, NegativeSampling, NodeSamplerInput, SamplerOutput
from torch_geometric.sampler.base import NumNeighbors, SubgraphType
from torch_geometric.sampler.neighbor_sampler import edge_sample, node_sample

from ..data.graph_store import GraphStore
from ..ops.sampling import neighbor_sample

__all__ = ['NeighborSampler']


def _homogeneous_csc(data, weight_attr: Optional[str] = None
                     ) -> Tuple[Tensor, Tensor, Optional[Tensor], int, Optional[Tensor]]:
    """``(colptr, row, perm, num_nodes, edge_weight)`` of a homogeneous graph from our
    GraphStore, another PyG GraphStore, or a ``Data`` object."""
    if isinstance(data, Data):
        if data.edge_index is None:
            raise ValueError("NeighborSampler: the Data object has no 'edge_index'")
        store = GraphStore('cuda' if data.edge_index.is_cuda else 'cpu', device=data.edge_index.device
                           if data.edge_index.is_cuda else None)
        store.put_edge_index(data.edge_index, edge_type=None, layout='coo', size=(data.num_nodes, data.num_nodes))
        if weight_attr is not None:
            if weight_attr not in data:
                raise ValueError(f"NeighborSampler: the Data object has no edge attribute '{weight_attr}'")
            store.put_edge_feature(data[weight_attr], weight_attr)
        data = (None, store)
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[1], PyGGraphStore)):
        raise TypeError('NeighborSampler: expected a Data object or a (FeatureStore, GraphStore) pair, '
                        f'got {type(data).__name__}')
    if data[0] is not None and not isinstance(data[0], FeatureStore):
        raise TypeError(f'NeighborSampler: the first element must be a FeatureStore, got {type(data[0]).__name__}')
    graph_store = data[1]
    edge_attrs = graph_store.get_all_edge_attrs()
    if not edge_attrs:
        raise ValueError('NeighborSampler: the graph store holds no edges')
    if any(attr.edge_type is not None for attr in edge_attrs):
        raise ValueError('NeighborSampler: heterogeneous graphs are not supported by pyg_accel\'s sampler yet; '
                         "use PyG's NeighborSampler for them")
    size = edge_attrs[0].size
    if size is None:
        raise ValueError('NeighborSampler: the EdgeAttr has no size; put the edges with size=(N, N)')
    row, colptr, perm = graph_store.csc()
    num_nodes = max(size)
    if colptr.numel() - 1 < num_nodes:  # nodes without in-edges past the last column
        colptr = torch.cat([colptr, colptr[-1:].expand(num_nodes + 1 - colptr.numel())])
    edge_weight = None
    if weight_attr is not None:
        if not isinstance(graph_store, GraphStore):
            raise ValueError("NeighborSampler: weight_attr needs pyg_accel's GraphStore (put the weights with "
                             'graph_store.put_edge_feature(weights, name))')
        edge_weight = graph_store.get_edge_feature(weight_attr)
    return colptr, row, perm, num_nodes, edge_weight


class NeighborSampler(BaseSampler):
    r"""Multi-hop uniform neighbour sampling with PyG's ``NeighborSampler`` semantics.

    Args:
        data: ``(feature_store, graph_store)`` (our :class:`~pyg_accel.data.GraphStore`
            or any PyG GraphStore with a homogeneous graph) or a homogeneous ``Data``.
        num_neighbors: fanout per hop (``-1`` = all neighbours).
        subgraph_type: ``'directional'`` (sampled edges only) or ``'bidirectional'``
            (each sampled edge also reversed); ``'induced'`` is not supported.
        replace: sample with replacement.
        disjoint: one tree per seed; the output carries ``batch``.
        weight_attr: name of a per-edge weight (``Data`` attribute, or a GraphStore edge
            feature): neighbours are drawn with probability proportional to it.
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
                 seed: Optional[int] = None, **kwargs) -> None:
        if time_attr is not None:
            raise ValueError("NeighborSampler: temporal sampling (time_attr) is not supported by pyg_accel's "
                             'sampler yet')
        self.subgraph_type = SubgraphType(subgraph_type)
        if self.subgraph_type == SubgraphType.induced:
            raise ValueError("NeighborSampler: subgraph_type='induced' is not supported; use 'directional' or "
                             "'bidirectional'")
        self.colptr, self.row, self.perm, self.num_nodes, self.edge_weight = _homogeneous_csc(data, weight_attr)
        self.num_neighbors = num_neighbors if isinstance(num_neighbors, NumNeighbors) else NumNeighbors(num_neighbors)
        values = self.num_neighbors.values
        if isinstance(values, dict):
            raise ValueError('NeighborSampler: per-edge-type num_neighbors needs a heterogeneous graph')
        self.fanouts = list(values)
        self.replace, self.disjoint = bool(replace), bool(disjoint)
        self.temporal_strategy = temporal_strategy
        self._generator = torch.Generator().manual_seed(seed) if seed is not None else None

    @property
    def device(self) -> torch.device:
        return self.colptr.device

    @property
    def edge_permutation(self) -> Optional[Tensor]:
        return self.perm

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs) -> SamplerOutput:
        return node_sample(index, self._sample)

    def sample_from_edges(self, index: EdgeSamplerInput,
                          neg_sampling: Optional[NegativeSampling] = None) -> SamplerOutput:
        return edge_sample(index, self._sample, self.num_nodes, self.disjoint, None, neg_sampling)

    def _sample(self, seed: Tensor, seed_time: Optional[Tensor] = None, **kwargs) -> SamplerOutput:
        if isinstance(seed, dict):
            raise ValueError("NeighborSampler: heterogeneous seeds are not supported by pyg_accel's sampler yet")
        if seed_time is not None:
            raise ValueError("NeighborSampler: temporal sampling (seed_time) is not supported by pyg_accel's "
                             'sampler yet')
        random_seed = int(torch.randint(0, 2**62, (1,), generator=self._generator))
        out = neighbor_sample(self.colptr, self.row, seed.to(self.device), self.fanouts, self.replace,
                              self.disjoint, random_seed, self.edge_weight)
        result = SamplerOutput(node=out.node, row=out.row, col=out.col, edge=out.edge, batch=out.batch,
                               num_sampled_nodes=out.num_sampled_nodes, num_sampled_edges=out.num_sampled_edges)
        if self.subgraph_type == SubgraphType.bidirectional:
            result = result.to_bidirectional()
        return result
