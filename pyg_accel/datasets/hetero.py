"""Heterogeneous node classification: ogbn-mag's task (read from OGB's files by
:func:`~pyg_accel.datasets.load_ogb_hetero_node_dataset`) and a synthetic graph of its
shape, :func:`synthetic_mag`.

The synthetic graph follows ogbn-mag's schema (papers, authors, institutions, fields of
study; ``cites``, ``writes``, ``affiliated_with``, ``has_topic``) and its node and edge
counts times ``scale``, with the model of :mod:`~pyg_accel.datasets.synthetic` per type:

1. Papers fall into communities, each carrying a class (the label, with some noise);
   they get power-law degree propensities; ``x = signal * centroid[y] + N(0, 1)``.
2. Authors, institutions and fields of study get a community each (that of a random
   paper) and propensities of their own.
3. Each edge picks its source ``∝`` the source type's propensity; its destination is
   drawn ``∝`` the destination type's propensity, with probability ``homophily``
   among the nodes of the source's community. So a paper's authors, their other
   papers, its citations and its topics all say something about its class, which a
   paper's own features say little of.
4. Papers are split at random in ogbn-mag's proportions (85.5 / 8.8 / 5.7%).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from ..data.location import resolve_device
from .synthetic import (EdgeSampler, SyntheticSpec, communities, degree_propensity, noisy_labels, random_split,
                        sample_by_weight, scale_suffix)

__all__ = ['HeteroNodeDataset', 'synthetic_mag', 'MAG_NUM_NODES', 'MAG_EDGES']

EdgeType = Tuple[str, str, str]

# ogbn-mag's node and edge counts (its four relations, as OGB stores them).
MAG_NUM_NODES: Dict[str, int] = {'paper': 736_389, 'author': 1_134_649, 'institution': 8_740,
                                 'field_of_study': 59_965}
MAG_EDGES: Dict[EdgeType, int] = {('author', 'affiliated_with', 'institution'): 1_043_998,
                                  ('author', 'writes', 'paper'): 7_145_660,
                                  ('paper', 'cites', 'paper'): 5_416_271,
                                  ('paper', 'has_topic', 'field_of_study'): 7_505_078}


@dataclass
class HeteroNodeDataset:
    """A heterogeneous node-classification graph with an OGB-style split of one node type.

    Attributes:
        name: e.g. ``'ogbn-mag'`` or ``'synthetic-mag'``.
        data: ``HeteroData``: ``data[target].x`` ``[N, F]`` float and ``.y`` ``[N]``
            int64 (``-1``: no label); other node types carry ``x`` where the data has
            features, else only ``num_nodes``; ``edge_index`` ``[2, E]`` int64 per
            edge type.
        target: the labelled node type (``'paper'``).
        split: ``{'train', 'valid', 'test'}`` -> int64 ids of ``target`` nodes.
        num_classes: number of label classes.
    """
    name: str
    data: HeteroData
    target: str
    split: Dict[str, Tensor]
    num_classes: int

    @property
    def num_features(self) -> int:
        """Width of the target type's ``x``."""
        return int(self.data[self.target].x.shape[1])

    def to(self, device) -> 'HeteroNodeDataset':
        """The dataset with its graph and split on ``device``."""
        return HeteroNodeDataset(self.name, self.data.to(device), self.target,
                                 {k: v.to(device) for k, v in self.split.items()}, self.num_classes)

    def __repr__(self) -> str:
        d = self.data
        nodes = ', '.join(f'{t} {d[t].num_nodes:,}' for t in d.node_types)
        sizes = ', '.join(f'{k}={v.numel()}' for k, v in self.split.items())
        return (f'HeteroNodeDataset({self.name}: {nodes} nodes; {d.num_edges:,} edges of {len(d.edge_types)} types; '
                f'{self.target}: {self.num_features} features, {self.num_classes} classes; {sizes})')


def _unique_edges(src: Tensor, dst: Tensor, num_dst: int, same_type: bool) -> Tensor:
    """``[2, E']`` the distinct (src, dst) pairs (self-loops dropped within one type), sorted."""
    if same_type:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    keys = torch.unique(src * num_dst + dst)
    return torch.stack([keys // num_dst, keys % num_dst])


def synthetic_mag(scale: float = 0.01, seed: int = 0, device: Union[str, torch.device] = 'cpu',
                  num_features: int = 128, num_classes: int = 32, homophily: float = 0.7,
                  feature_signal: float = 0.25) -> HeteroNodeDataset:
    """A graph of ogbn-mag's schema and counts times ``scale``, by the model in this
    module's docstring.

    Args:
        scale: size factor (1.0: ogbn-mag's 1.9 M nodes and 21 M edges).
        seed: the same seed and device give the same graph.
        device: where to generate; the result stays there.
        num_features, num_classes: the papers' feature width and label classes.
        homophily: the share of edges drawn inside the source's community.
        feature_signal: how far apart the classes' feature centroids are.
    """
    if not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f'synthetic_mag: scale must be a number > 0, got {scale!r}')
    device = resolve_device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    num_nodes = {t: max(int(n * scale), 10) for t, n in MAG_NUM_NODES.items()}
    spec = SyntheticSpec(num_nodes['paper'], 0, num_features, num_classes, split=(0.855, 0.088, 0.057),
                         homophily=homophily, feature_signal=feature_signal)
    num_comm, paper_comm = communities(spec, num_nodes['paper'], gen)
    community = {'paper': paper_comm}
    for t in ('author', 'institution', 'field_of_study'):  # the community of a random paper
        community[t] = paper_comm[torch.randint(num_nodes['paper'], (num_nodes[t],), generator=gen, device=device)]
    weight = {t: degree_propensity(n, spec.degree_exponent, gen, device) for t, n in num_nodes.items()}
    samplers = {t: EdgeSampler(weight[t], community[t], num_comm, homophily, gen) for t in num_nodes}

    data = HeteroData()
    for t, n in num_nodes.items():
        data[t].num_nodes = n
    for (src, rel, dst), count in MAG_EDGES.items():
        count = max(int(count * scale), 10)
        sources = sample_by_weight(samplers[src].cdf, count, gen)
        targets = samplers[dst].members_of(community[src][sources])
        data[src, rel, dst].edge_index = _unique_edges(sources, targets, num_nodes[dst], src == dst)

    y = noisy_labels(spec, paper_comm, num_comm, gen)
    centroids = torch.randn(num_classes, num_features, generator=gen, device=device)
    x = torch.randn(num_nodes['paper'], num_features, generator=gen, device=device)
    data['paper'].x = x.add_(centroids[y], alpha=feature_signal)
    data['paper'].y = y
    split = random_split(spec, num_nodes['paper'], gen)
    return HeteroNodeDataset(f'synthetic-mag{scale_suffix(scale)}', data, 'paper', split, num_classes)
