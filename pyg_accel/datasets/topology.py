"""Graph-only synthetic topologies of any preset's size, generated straight into CSC.

:func:`~pyg_accel.datasets.synthetic_graph` builds an OGB-like dataset (features,
labels, communities, an undirected ``edge_index``); at ogbn-papers100M's size its edge
list, features and sorts need several times the 80 GB of one GPU. Sampling benchmarks
need only the topology, so this module generates it column by column, in the layout
the sampler reads, with memory little above the CSC itself (~27 GB of int64 at
papers100M's 111 M nodes and 3.2 G edges).

Model (directed Chung-Lu, seeded, vectorised on any device):

1. Each node gets the same Pareto degree propensity ``w`` as :func:`synthetic_graph`
   (power-law degrees with the preset's exponent).
2. Node ``v``'s in-degree is ``E * w_v / sum(w)``, rounded up or down at random so the
   total is ``E`` in expectation.
3. Each in-edge's source is drawn with probability ``∝ w``: out-degrees follow the same
   law. Self-loops and duplicate edges are dropped and drawn again (a few rounds), so
   the graph has no multi-edges and close to ``E`` edges.
4. Each column's rows come out sorted; node ids carry no locality (as in OGB's graphs).
5. The training nodes are a random share of the nodes, the preset's training fraction.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Tuple, Union

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..data.location import resolve_device
from .synthetic import PRESETS, check_preset, degree_propensity, random_split, sample_by_weight, scale_suffix

__all__ = ['SyntheticTopology', 'synthetic_topology']

_DEFAULT_CHUNK_EDGES = 1 << 26  # edges generated at once: ~2 GB of scratch on top of the CSC
_TOP_UP_ROUNDS = 4  # draws per chunk to replace self-loops and duplicates


@dataclass
class SyntheticTopology:
    """A directed graph in CSC and its training nodes.

    Attributes:
        name: e.g. ``'synthetic-papers100M-topology'``.
        colptr: ``[N + 1]`` int64 column pointers (in-edges of each node).
        row: ``[E]`` int64 source of each edge, sorted within each column.
        train: ``[T]`` int64 sorted training node ids.
    """
    name: str
    colptr: Tensor
    row: Tensor
    train: Tensor

    @property
    def num_nodes(self) -> int:
        """N."""
        return self.colptr.numel() - 1

    @property
    def num_edges(self) -> int:
        """E."""
        return self.row.numel()

    def __repr__(self) -> str:
        return (f'SyntheticTopology({self.name}: {self.num_nodes} nodes, {self.num_edges} edges, '
                f'{self.train.numel()} training nodes, on {self.row.device})')


def in_degrees(weight: Tensor, num_edges: int, gen: torch.Generator) -> Tensor:
    """``[N]`` int64 in-degrees ``∝ weight`` summing to ``num_edges`` in expectation."""
    expected = weight.double() * (num_edges / weight.double().sum())
    degree = expected.floor()
    degree += torch.rand(degree.shape, generator=gen, device=degree.device, dtype=torch.double) < expected - degree
    return degree.long().clamp_(max=weight.numel() - 1)


def _chunk_bounds(planned_ptr: Tensor, chunk_edges: int) -> list:
    """Column boundaries ``0 = b_0 < ... < b_k = N``: a chunk ends at the column holding
    the next multiple of ``chunk_edges`` planned edges, so it holds at most
    ``chunk_edges`` plus its first column's edges."""
    n, total = planned_ptr.numel() - 1, int(planned_ptr[-1])
    if total <= chunk_edges:
        return [0, n]
    marks = torch.arange(chunk_edges, total, chunk_edges, device=planned_ptr.device, dtype=planned_ptr.dtype)
    cuts = torch.searchsorted(planned_ptr, marks, right=True) - 1  # the column each mark falls in
    return sorted({0, n, *cuts.clamp_(1, max(n - 1, 1)).tolist()})


def _column_keys(planned: Tensor, lo: int, n: int, draw_sources: Callable[[Tensor], Tensor],
                 rounds: int = _TOP_UP_ROUNDS) -> Tensor:
    """Sorted unique keys ``col * n + row`` of the in-edges of columns ``lo, lo + 1, ...``
    (``planned[i]`` for column ``lo + i``): one source per edge from ``draw_sources``
    (given each edge's column), self-loops and duplicates dropped and drawn again, up
    to ``rounds`` times."""
    cols = torch.arange(lo, lo + planned.numel(), device=planned.device)
    key, missing = torch.empty(0, dtype=torch.long, device=planned.device), planned
    for _ in range(rounds):
        dst = torch.repeat_interleave(cols, missing)
        if dst.numel() == 0:
            break
        src = draw_sources(dst)
        keep = src != dst
        key = torch.unique(torch.cat([key, dst[keep] * n + src[keep]]))  # sorted by column, then row
        del dst, src, keep
        missing = planned - torch.bincount(key // n - lo, minlength=planned.numel())
    return key


def generate_csc(in_degree: Tensor, draw_sources: Callable[[Tensor], Tensor], chunk_edges: int = _DEFAULT_CHUNK_EDGES,
                 progress: bool = False, desc: str = 'generating') -> Tuple[Tensor, Tensor]:
    """``(colptr, row)`` int64 of a graph whose node ``v`` gets ``in_degree[v]`` in-edges
    (fewer where drawing again left duplicates), each source drawn by ``draw_sources``
    (``[k]`` columns -> ``[k]`` sources), generated ``chunk_edges`` at a time on
    ``in_degree``'s device; rows sorted within each column, no self-loops or duplicates."""
    if not isinstance(chunk_edges, int) or chunk_edges < 1:
        raise ValueError(f'generate_csc: chunk_edges must be a positive int, got {chunk_edges!r}')
    n, device = in_degree.numel(), in_degree.device
    planned_ptr = torch.cat([in_degree.new_zeros(1), in_degree.cumsum(0)])
    row = torch.empty(int(planned_ptr[-1]), dtype=torch.long, device=device)
    colptr = torch.zeros(n + 1, dtype=torch.long, device=device)
    written = 0
    bounds = _chunk_bounds(planned_ptr, chunk_edges)
    del planned_ptr
    for lo, hi in tqdm(list(zip(bounds[:-1], bounds[1:])), desc=desc, unit='chunk', disable=not progress):
        key = _column_keys(in_degree[lo:hi], lo, n, draw_sources)
        col = key // n
        row[written:written + key.numel()] = key - col * n
        kept = torch.bincount(col - lo, minlength=hi - lo)
        colptr[lo + 1:hi + 1] = written + kept.cumsum(0)
        written += key.numel()
    return colptr, row[:written]


def synthetic_topology(preset: str = 'papers100M', scale: float = 1.0, seed: int = 0,
                       device: Union[str, torch.device] = 'cpu', chunk_edges: int = _DEFAULT_CHUNK_EDGES,
                       progress: bool = False) -> SyntheticTopology:
    """The topology of a preset (``'tiny'`` … ``'papers100M'``, see
    :data:`~pyg_accel.datasets.PRESETS`) at ``scale`` times its nodes and edges, by
    the model in this module's docstring.

    Args:
        preset, scale: size; the average degree is the preset's at any scale.
        seed: the same seed, device and ``chunk_edges`` give the same graph.
        device: where to generate; the result stays there. A GPU generates papers100M's
            size in seconds (4.3 s on an H100); its arrays peak at ~1.2x the CSC.
        chunk_edges: edges drawn at once (bounds the scratch memory).
        progress: a progress bar over the chunks.
    """
    check_preset(preset, scale, 'synthetic_topology')
    spec = PRESETS[preset]
    n, num_edges = max(int(spec.num_nodes * scale), 2), int(spec.num_edges * scale)
    device = resolve_device(device)
    gen = torch.Generator(device=device).manual_seed(seed)

    weight = degree_propensity(n, spec.degree_exponent, gen, device)
    cdf = weight.double().cumsum(0)
    degree = in_degrees(weight, num_edges, gen)
    del weight
    colptr, row = generate_csc(degree, lambda dst: sample_by_weight(cdf, dst.numel(), gen), chunk_edges, progress,
                               f'generating {preset}')
    train = random_split(spec, n, gen)['train']
    return SyntheticTopology(f'synthetic-{preset}{scale_suffix(scale)}-topology', colptr, row, train)
