"""Synthetic OGB-like datasets generated straight into pyg_accel's stores.

:func:`~pyg_accel.datasets.synthetic_dataset` returns a ``Data`` with an ``edge_index``,
which the stores then convert. At ogbn-papers100M's size that edge list (52 GB), its
sort and the features (57 GB) do not fit one GPU together. :func:`synthetic_stores`
generates the same kind of task there without them:

* the graph column by column into CSC (:func:`~pyg_accel.datasets.topology.generate_csc`),
  with :func:`synthetic_graph`'s communities, homophily and power-law degrees: node
  ``v`` gets ``E * w_v / sum(w)`` in-edges, each source drawn ``∝ w``, inside ``v``'s
  community with probability ``homophily``. The edges are directed; in- and
  out-degrees follow the same law.
* labels and features as in :func:`synthetic_graph` (``x = signal * centroid[y] +
  N(0, 1)``), features written a block of rows at a time into their tier (pinned host
  memory for graphs larger than the GPU), so the full matrix never exists twice.

The result is a :class:`StoredNodeDataset`: a ``FeatureStore`` with ``x`` and ``y``, a
``GraphStore`` with the CSC, the split and the sizes, ready for
``NeighborLoader((feature_store, graph_store), ...)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Union

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..data import FeatureStore, GraphStore
from ..data.location import LocationLike, resolve_device
from ..data.shards import row_partition
from .synthetic import (PRESETS, EdgeSampler, check_preset, communities, degree_propensity, noisy_labels,
                        random_split, scale_suffix)
from .topology import generate_csc, in_degrees

__all__ = ['StoredNodeDataset', 'synthetic_stores']

_FEATURE_ROWS_PER_BLOCK = 1 << 22  # rows generated at once (2 GB of fp32 at 128 features)


@dataclass
class StoredNodeDataset:
    """A node-classification task held in pyg_accel's stores, with no ``edge_index``.

    Attributes:
        name: e.g. ``'synthetic-papers100M-stored'``.
        feature_store: ``x`` ``[N, F]`` float32 and ``y`` ``[N]`` int64 (group ``None``).
        graph_store: the graph as CSC (edge type ``None``), ``N`` nodes both ways.
        split: ``{'train', 'valid', 'test'}`` -> int64 node ids, on the generating device.
        num_classes: number of label classes.
    """
    name: str
    feature_store: FeatureStore
    graph_store: GraphStore
    split: Dict[str, Tensor]
    num_classes: int

    @property
    def num_nodes(self) -> int:
        """N."""
        return self.graph_store.graph(None).size[1]

    @property
    def num_edges(self) -> int:
        """E."""
        return self.graph_store.graph(None).num_edges

    @property
    def num_features(self) -> int:
        """F, the width of ``x``."""
        return int(self.feature_store.get_tensor_size(group_name=None, attr_name='x')[1])

    def __repr__(self) -> str:
        sizes = ', '.join(f'{k}={v.numel()}' for k, v in self.split.items())
        return (f'StoredNodeDataset({self.name}: {self.num_nodes} nodes, {self.num_edges} edges, '
                f'{self.num_features} features, {self.num_classes} classes; {sizes}; '
                f'features {self.feature_store.location}, graph {self.graph_store.location})')


def synthetic_stores(preset: str = 'papers100M', scale: float = 1.0, seed: int = 0,
                     device: Union[str, torch.device] = 'cpu', feature_location: LocationLike = 'cpu',
                     graph_location: LocationLike = 'cpu', progress: bool = False,
                     float_dtype: Optional[torch.dtype] = None) -> StoredNodeDataset:
    """A preset's task (see :data:`~pyg_accel.datasets.PRESETS`) at ``scale`` times its
    size, generated on ``device`` by the model in this module's docstring into a
    ``FeatureStore(feature_location)`` and a ``GraphStore(graph_location)``.

    Args:
        preset, scale: size; the average degree is the preset's at any scale.
        seed: the same seed and device give the same dataset.
        device: where to generate (a GPU makes papers100M's size in about a minute).
        feature_location: where ``x`` and ``y`` live: ``'pinned'`` writes the features
            straight into page-locked host memory (57 GB at papers100M's size);
            ``'sharded'`` (collective: every process of the run calls this with the same
            arguments) keeps only this process's block of ``x``, so that no process holds
            the whole table.
        float_dtype: the dtype ``x`` is stored in (e.g. ``torch.bfloat16``: half the
            bytes); float32 by default.
        graph_location: where the CSC lives (no copy when it is ``device``).
        progress: progress bars over the graph's and the features' blocks.
    """
    check_preset(preset, scale, 'synthetic_stores')
    spec = PRESETS[preset]
    n, num_edges, width = max(int(spec.num_nodes * scale), 2), int(spec.num_edges * scale), spec.num_features
    device = resolve_device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    num_comm, community = communities(spec, n, gen)
    weight = degree_propensity(n, spec.degree_exponent, gen, device)
    sources = EdgeSampler(weight, community, num_comm, spec.homophily, gen)
    colptr, row = generate_csc(in_degrees(weight, num_edges, gen), sources.partners, progress=progress,
                               desc=f'graph of {preset}')
    del sources, weight
    graph_store = GraphStore(graph_location)
    graph_store.put_edge_index((row, colptr), edge_type=None, layout='csc', size=(n, n))
    del row, colptr

    y = noisy_labels(spec, community, num_comm, gen)
    del community
    centroids = torch.randn(spec.num_classes, width, generator=gen, device=device)
    feature_store = FeatureStore(feature_location, float_dtype=float_dtype)
    location, dtype = feature_store.location, float_dtype or torch.float32
    # rows [lo, hi) of x kept here: all of them, or this process's block of a sharded table
    if location.sharded:
        bounds = row_partition(n, feature_store.hosts.world_size)
        keep = range(bounds[feature_store.hosts.rank], bounds[feature_store.hosts.rank + 1])
        x = torch.empty((len(keep), width), dtype=dtype, device=location.device)
    else:
        keep, x = range(0, n), location.empty((n, width), dtype)
    for lo in tqdm(range(0, n, _FEATURE_ROWS_PER_BLOCK), desc=f'features of {preset}', unit='block',
                   disable=not progress):
        hi = min(lo + _FEATURE_ROWS_PER_BLOCK, n)
        block = torch.randn(hi - lo, width, generator=gen, device=device)  # (every block drawn: one random stream)
        a, b = max(lo, keep.start), min(hi, keep.stop)
        if a < b:
            x[a - keep.start:b - keep.start] = block[a - lo:b - lo].add_(centroids[y[a:b]], alpha=spec.feature_signal)
    if location.sharded:
        feature_store.put_block(x, n, attr_name='x')
    else:
        feature_store.put_tensor(x, group_name=None, attr_name='x', index=None)
    feature_store.put_tensor(y, group_name=None, attr_name='y', index=None)

    return StoredNodeDataset(f'synthetic-{preset}{scale_suffix(scale)}-stored', feature_store, graph_store,
                             random_split(spec, n, gen), spec.num_classes)
