"""Synthetic graphs that look like OGB's: power-law degrees, community structure, and
features and labels tied to communities, so that a GNN learns the task and an MLP
learns it worse.

Model (all vectorised, on any device, seeded):

1. Nodes fall into communities of log-normal sizes; each community carries a class.
2. Each node gets a Pareto-distributed degree propensity ``w`` (Chung-Lu).
3. Each undirected edge picks its first end with probability ``∝ w``; with
   probability ``homophily`` its second end is drawn ``∝ w`` inside the first end's
   community, else ``∝ w`` from the whole graph. Self-loops and duplicates are
   dropped and both directions are stored, topped up to the requested edge count.
4. A fraction ``label_noise`` of the nodes gets a random class instead of their
   community's (the part a GNN cannot recover from neighbours).
5. ``x = signal * centroid[y] + N(0, 1)``: one node's features say little about its
   class; averaging over its (mostly same-class) neighbours says much more.
6. A random split with OGB's proportions.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data

from ..data.location import resolve_device
from .base import NodeDataset

__all__ = ['SyntheticSpec', 'PRESETS', 'synthetic_graph', 'synthetic_dataset']


@dataclass(frozen=True)
class SyntheticSpec:
    """Size and shape of a synthetic graph. ``num_edges`` counts directed edges (both
    directions of each undirected edge), as OGB's ``edge_index`` does."""
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    split: Tuple[float, float, float] = (0.1, 0.1, 0.8)
    communities_per_class: int = 4
    homophily: float = 0.7
    degree_exponent: float = 2.2
    feature_signal: float = 0.25
    label_noise: float = 0.1


PRESETS: Dict[str, SyntheticSpec] = {
    'tiny': SyntheticSpec(1_000, 10_000, 16, 4),
    'small': SyntheticSpec(20_000, 400_000, 64, 10),
    # ogbn-arxiv as PyG users train it (made undirected), its time-based split's proportions.
    'arxiv': SyntheticSpec(169_343, 2_315_598, 128, 40, split=(0.537, 0.176, 0.287)),
    # ogbn-products as PyG loads it: OGB lists its 61,859,140 undirected edges once and adds
    # their inverses on load (master.csv: add_inverse_edge), so edge_index holds 123,718,280.
    # Sales-rank split, 8% / 1.6% / 90.4%.
    'products': SyntheticSpec(2_449_029, 123_718_280, 100, 47, split=(0.08, 0.016, 0.904)),
    # ogbn-papers100M: 1.1% / 0.1% / 0.2% of the nodes are labelled (scale it down to fit).
    'papers100M': SyntheticSpec(111_059_956, 3_231_371_744, 128, 172, split=(0.0109, 0.0011, 0.0019)),
}


# Above this many edges a CPU takes minutes to generate a graph, so the user is told.
SLOW_ON_CPU_EDGES = 20_000_000


def degree_propensity(n: int, exponent: float, gen: torch.Generator, device: torch.device) -> Tensor:
    """``[n]`` float32 Chung-Lu weights: Pareto with tail ``exponent`` (degrees follow a
    power law of that exponent), capped at ``4 sqrt(n)``."""
    u = torch.rand(n, generator=gen, device=device)
    return (1.0 - u).pow(-1.0 / (exponent - 1.0)).clamp_(max=math.sqrt(n) * 4)


def sample_by_weight(cdf: Tensor, n: int, gen: torch.Generator) -> Tensor:
    """``n`` ids drawn with probability proportional to the weights whose running sum is ``cdf``."""
    u = torch.rand(n, generator=gen, device=cdf.device, dtype=cdf.dtype) * cdf[-1]
    return torch.searchsorted(cdf, u, right=True).clamp_(max=cdf.numel() - 1)


class EdgeSampler:
    """Draws edges by the Chung-Lu-with-communities model above: node pairs
    (:meth:`pairs`, for :func:`synthetic_graph`) or one partner per given node
    (:meth:`partners`, the sources of :func:`~pyg_accel.datasets.synthetic_stores`)."""

    def __init__(self, weight: Tensor, community: Tensor, num_communities: int, homophily: float,
                 gen: torch.Generator) -> None:
        self.gen, self.homophily, self.community = gen, homophily, community
        self.cdf = weight.double().cumsum(0)
        self.order = torch.argsort(community, stable=True)  # nodes grouped by community
        self.sorted_cdf = weight[self.order].double().cumsum(0)
        counts = torch.bincount(community, minlength=num_communities)
        self.end = counts.cumsum(0)
        self.start = self.end - counts

    def pairs(self, n: int) -> Tuple[Tensor, Tensor]:
        """``n`` pairs: the first end drawn ``∝ w``, the second by :meth:`partners`."""
        src = sample_by_weight(self.cdf, n, self.gen)
        return src, self.partners(src)

    def partners(self, nodes: Tensor) -> Tensor:
        """One partner per node, drawn ``∝ w``: with probability ``homophily`` inside the
        node's community, else from the whole graph."""
        return self.members_of(self.community[nodes])

    def members_of(self, community: Tensor) -> Tensor:
        """One node per entry of ``community`` (ids in ``[0, C)``), drawn ``∝ w``: with
        probability ``homophily`` among that community's nodes (when it has any), else
        from the whole graph. It draws, for instance, the paper an author of that
        community writes (:func:`~pyg_accel.datasets.synthetic_mag`)."""
        n = community.numel()
        out = sample_by_weight(self.cdf, n, self.gen)
        local = torch.rand(n, generator=self.gen, device=community.device) < self.homophily
        local &= self.end[community] > self.start[community]
        c = community[local]
        lo, hi = self.start[c], self.end[c]
        base = torch.where(lo > 0, self.sorted_cdf[(lo - 1).clamp(min=0)], torch.zeros_like(lo, dtype=torch.double))
        span = self.sorted_cdf[hi - 1] - base
        u = base + torch.rand(c.numel(), generator=self.gen, device=community.device, dtype=torch.double) * span
        pos = torch.searchsorted(self.sorted_cdf, u, right=True)
        out[local] = self.order[torch.minimum(torch.maximum(pos, lo), hi - 1)]
        return out


def communities(spec: SyntheticSpec, n: int, gen: torch.Generator) -> Tuple[int, Tensor]:
    """``(C, community)``: the number of communities and ``[n]`` int64 the community of
    each node, drawn ``∝`` log-normal community sizes."""
    num_comm = max(spec.num_classes * spec.communities_per_class, 1)
    comm_weight = torch.exp(0.7 * torch.randn(num_comm, generator=gen, device=gen.device))
    return num_comm, sample_by_weight(comm_weight.double().cumsum(0), n, gen)


def noisy_labels(spec: SyntheticSpec, community: Tensor, num_comm: int, gen: torch.Generator) -> Tensor:
    """``[n]`` int64 labels: each community's class, redrawn at random for a
    ``spec.label_noise`` share of the nodes."""
    device = community.device
    class_of_comm = torch.randperm(num_comm, generator=gen, device=device) % spec.num_classes
    y = class_of_comm[community]
    relabel = torch.rand(y.numel(), generator=gen, device=device) < spec.label_noise
    y[relabel] = torch.randint(spec.num_classes, (int(relabel.sum()),), generator=gen, device=device)
    return y


def random_split(spec: SyntheticSpec, n: int, gen: torch.Generator) -> Dict[str, Tensor]:
    """``{'train', 'valid', 'test'}`` -> sorted int64 node ids, disjoint random shares of
    the ``n`` nodes by ``spec.split``."""
    order = torch.randperm(n, generator=gen, device=gen.device)
    n_train, n_valid, n_test = (int(round(f * n)) for f in spec.split)
    return {'train': order[:n_train].sort().values,
            'valid': order[n_train:n_train + n_valid].sort().values,
            'test': order[n_train + n_valid:n_train + n_valid + n_test].sort().values}


def _unique_undirected(src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """Sorted unique keys ``lo * N + hi`` of the undirected pairs, self-loops dropped."""
    keep = src != dst
    lo, hi = torch.minimum(src[keep], dst[keep]), torch.maximum(src[keep], dst[keep])
    return torch.unique(lo * num_nodes + hi)


def synthetic_graph(spec: SyntheticSpec, seed: int = 0, device: Union[str, torch.device] = 'cpu',
                    name: str = 'synthetic') -> NodeDataset:
    """Generates a graph by the model in this module's docstring.

    Args:
        spec: sizes (see :data:`PRESETS`).
        seed: the same seed and device give the same graph.
        device: where to generate (a GPU makes products-size graphs in seconds); the
            result stays there.

    Returns:
        A :class:`NodeDataset` with ``x`` ``[N, F]`` float32, ``y`` ``[N]`` int64 and an
        undirected, coalesced ``edge_index``.
    """
    device = resolve_device(device)
    n, num_classes = spec.num_nodes, spec.num_classes
    if n < 2 or num_classes < 1 or spec.num_edges < 0 or spec.num_features < 1:
        raise ValueError(f'synthetic_graph: invalid spec {spec}')
    if device.type == 'cpu' and spec.num_edges > SLOW_ON_CPU_EDGES:
        warnings.warn(f'synthetic_graph: generating {spec.num_edges:,} edges on the CPU takes minutes and '
                      f'~{spec.num_edges * 80 / 1e9:.0f} GB of memory; a GPU (device=\'cuda\' or \'auto\') takes '
                      'seconds, and scale=0.01 gives a graph of the same shape in a hundredth of the time',
                      stacklevel=3)
    gen = torch.Generator(device=device).manual_seed(seed)
    num_comm, community = communities(spec, n, gen)
    weight = degree_propensity(n, spec.degree_exponent, gen, device)

    sampler = EdgeSampler(weight, community, num_comm, spec.homophily, gen)
    wanted = spec.num_edges // 2
    keys = torch.empty(0, dtype=torch.long, device=device)
    for _ in range(8):  # top up what duplicates and self-loops took away
        missing = wanted - keys.numel()
        if missing <= max(wanted // 1000, 0):
            break
        src, dst = sampler.pairs(int(missing * 1.2) + 16)
        keys = torch.unique(torch.cat([keys, _unique_undirected(src, dst, n)]))
    if keys.numel() > wanted:  # drop a random surplus, keeping the graph undirected
        keys = keys[torch.randperm(keys.numel(), generator=gen, device=device)[:wanted]].sort().values
    lo, hi = keys // n, keys % n
    edge_index = torch.stack([torch.cat([lo, hi]), torch.cat([hi, lo])])
    perm = torch.argsort(edge_index[1] * n + edge_index[0])  # coalesced: sorted by (dst, src)
    edge_index = edge_index[:, perm]

    y = noisy_labels(spec, community, num_comm, gen)
    centroids = torch.randn(num_classes, spec.num_features, generator=gen, device=device)
    x = torch.randn(n, spec.num_features, generator=gen, device=device)
    x.add_(centroids[y], alpha=spec.feature_signal)

    split = random_split(spec, n, gen)
    data = Data(x=x, y=y, edge_index=edge_index, num_nodes=n)
    return NodeDataset(name, data, split, num_classes)


def synthetic_dataset(preset: str = 'small', scale: float = 1.0, seed: int = 0,
                      device: Union[str, torch.device] = 'cpu', num_features: Optional[int] = None) -> NodeDataset:
    """A preset graph (``'tiny'``, ``'small'``, ``'arxiv'``, ``'products'``,
    ``'papers100M'``), optionally scaled: ``scale=0.1`` keeps a tenth of the nodes and
    edges (same average degree)."""
    check_preset(preset, scale, 'synthetic_dataset')
    base = PRESETS[preset]
    spec = SyntheticSpec(**{**base.__dict__,
                            'num_nodes': max(int(base.num_nodes * scale), 2),
                            'num_edges': int(base.num_edges * scale),
                            'num_features': num_features or base.num_features})
    return synthetic_graph(spec, seed=seed, device=device, name=f'synthetic-{preset}{scale_suffix(scale)}')


def check_preset(preset: str, scale: float, caller: str) -> None:
    """Raises unless ``preset`` is in :data:`PRESETS` and ``scale`` is a number > 0."""
    if preset not in PRESETS:
        raise KeyError(f"unknown synthetic preset '{preset}'; choose one of {sorted(PRESETS)}")
    if not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f'{caller}: scale must be a number > 0, got {scale!r}')


def scale_suffix(scale: float) -> str:
    """``''`` at scale 1, else ``'@<scale>'`` (a dataset name's suffix)."""
    return '' if scale == 1.0 else f'@{scale:g}'
