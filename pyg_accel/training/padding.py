"""Sampled batches padded to a few fixed shapes, so that one captured CUDA graph serves
every batch of a shape.

A batch of an ``H``-hop neighbour sample lists its nodes hop by hop (``nodes_per_hop``,
the seeds first) and its edges hop by hop (hop ``k``'s edges end at hop ``k - 1``'s
nodes), sorted by destination. :func:`bucket_of` rounds each count up to a coarse grid;
:class:`PaddedBatch` holds static buffers of those sizes and :meth:`PaddedBatch.load`
copies a batch in:

* each hop's nodes keep their order and get padding nodes after them (at least one per
  hop), so every node id shifts by the padding of the hops before its own;
* each hop's edges are followed by padding edges from the padding nodes of that hop to
  those of the hop before, spread evenly (a padding node gets at most
  :data:`PADDING_FAN` of them: no long row for a row-parallel kernel to wait on); they
  stay sorted by destination and feed only padding nodes, whose rows no real node reads
  (padding is inert);
* padding seeds are masked out of the loss by :attr:`PaddedBatch.num_seeds`.

Shapes: ``x`` ``[sum(padded nodes), F]``, ``edge_index`` ``[2, sum(padded edges)]``,
``y`` ``[padded seeds, ...]``.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..ops.hops import record_hops
from ..ops.padding import pad_hops
from ..ops.sparse import trust_edge_index

Bucket = Tuple[Tuple[int, ...], Tuple[int, ...]]  # (padded nodes per hop, padded edges per hop)
PADDING_FAN = 64  # most padding edges into (or out of) one padding node


def round_up(count: int, steps_per_octave: int = 16, minimum: int = 32) -> int:
    """The smallest size ``>= count`` on a grid of ``steps_per_octave`` sizes per power of
    two (padding <= 1 / ``steps_per_octave`` of the size), and at least ``minimum``."""
    if count <= minimum:
        return minimum
    step = max(1, (1 << (count.bit_length() - 1)) // steps_per_octave)
    return -(-count // step) * step


def bucket_of(nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int], steps_per_octave: int = 16) -> Bucket:
    """Padded sizes of a batch with these per-hop counts: edges rounded up alone; nodes
    rounded up with room for the padding edges' endpoints, at least one padding node per
    hop and enough that each takes at most :data:`PADDING_FAN` padding edges of the hops
    on either side (padding edges are at most 1 / ``steps_per_octave`` of a hop's)."""
    edges = tuple(round_up(e, steps_per_octave, minimum=0) if e else 0 for e in edges_per_hop)
    around = (0,) + edges + (0,)  # hop g's nodes end hop g + 1's edges and start hop g's
    spare = [max(1, -(-max(around[g], around[g + 1]) // (steps_per_octave * PADDING_FAN)))
             for g in range(len(nodes_per_hop))]
    nodes = tuple(round_up(n + s, steps_per_octave) for n, s in zip(nodes_per_hop, spare))
    return nodes, edges


def bucket_with_headroom(nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int],
                         steps_per_octave: int = 16) -> Bucket:
    """:func:`bucket_of` counts a quarter of a grid step larger: the shape a step creates
    for a batch that no held shape fits. Counts just under a grid line then take the
    size above it, which the next batches near that line fit too. (Products-size
    batches, 1024 x [15, 10, 5], four epochs: 2 shapes per process instead of 7-9, none
    new after the first epoch, for 1-4% more padding.)"""
    grow = 1 + 1 / (4 * steps_per_octave)
    return bucket_of([int(n * grow) for n in nodes_per_hop], [int(e * grow) for e in edges_per_hop], steps_per_octave)


def fits(bucket: Bucket, nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int]) -> bool:
    """Whether a batch with these per-hop counts pads into ``bucket`` as :func:`bucket_of`
    would pad it: as many hops, every count within the bucket's, and enough padding
    nodes per hop that each takes at most :data:`PADDING_FAN` padding edges."""
    nodes, edges = bucket
    if len(nodes_per_hop) != len(nodes) or len(edges_per_hop) != len(edges):
        return False
    if any(e > p for e, p in zip(edges_per_hop, edges)):
        return False
    around = (0,) + tuple(p - e for e, p in zip(edges_per_hop, edges)) + (0,)
    return all(p - n >= max(1, -(-max(around[g], around[g + 1]) // PADDING_FAN))
               for g, (n, p) in enumerate(zip(nodes_per_hop, nodes)))


def covering_bucket(buckets: Iterable[Bucket], nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int],
                    steps_per_octave: int = 16, slack_steps: int = 2) -> Optional[Bucket]:
    """Of ``buckets`` (shapes already captured or warming up), the one that a batch with
    these counts fits with the least padding, provided no count of it exceeds the
    batch's own bucket (:func:`bucket_of`) by more than ``slack_steps`` grid steps
    (``slack_steps / steps_per_octave`` of the size); ``None`` if there is none.

    A new shape costs an eager warm-up and a capture (tens of ms, and on a
    data-parallel step every process waits for them at the next all-reduce); a step
    on a slightly larger shape costs a few per cent of one step. Batch counts drift
    across a grid line now and then for many epochs, so without reuse new shapes keep
    appearing long after the first epoch."""
    own_nodes, own_edges = bucket_of(nodes_per_hop, edges_per_hop, steps_per_octave)
    limit = 1 + slack_steps / steps_per_octave
    best, best_cost = None, None
    for bucket in buckets:
        nodes, edges = bucket
        if not fits(bucket, nodes_per_hop, edges_per_hop):
            continue
        if any(p > limit * own for p, own in zip(nodes + edges, own_nodes + own_edges)):
            continue
        cost = sum(p / max(own, 1) for p, own in zip(nodes + edges, own_nodes + own_edges))
        if best_cost is None or cost < best_cost:
            best, best_cost = bucket, cost
    return best


class PaddedBatch:
    """Static input buffers of one bucket (allocated once; a captured graph reads them).

    Args:
        bucket: padded nodes per hop (``[H + 1]``) and edges per hop (``[H]``).
        num_features: width ``F`` of ``x``; ``x_dtype`` its dtype.
        y_shape / y_dtype: trailing shape and dtype of the seeds' targets.
        device: where the buffers live.
    """

    def __init__(self, bucket: Bucket, num_features: int, x_dtype: torch.dtype, y_shape: Tuple[int, ...],
                 y_dtype: torch.dtype, device: torch.device):
        self.bucket = bucket
        nodes, edges = bucket
        self.x = torch.zeros(sum(nodes), num_features, dtype=x_dtype, device=device)
        self.edge_index = torch.zeros(2, sum(edges), dtype=torch.long, device=device)
        self.y = torch.zeros((nodes[0], ) + tuple(y_shape), dtype=y_dtype, device=device)
        self.num_seeds = torch.zeros((), dtype=torch.long, device=device)  # real seeds: the loss mask

    @property
    def num_padded_seeds(self) -> int:
        """Seed slots, real and padding (the rows of the model's output)."""
        return self.bucket[0][0]

    def seed_mask(self) -> Tensor:
        """``[padded seeds]`` bool, true for real seeds (computed on the GPU: capturable)."""
        return torch.arange(self.num_padded_seeds, device=self.y.device) < self.num_seeds

    def load(self, x: Tensor, edge_index: Tensor, y: Tensor, nodes_per_hop: Sequence[int],
             edges_per_hop: Sequence[int]) -> None:
        """Copies a batch in (``x`` ``[N, F]``, ``edge_index`` ``[2, E]`` sorted by
        destination within each hop, ``y`` the seeds' targets ``[nodes_per_hop[0], ...]``);
        its counts must fit the bucket. Three kernels and a fill, no host sync (for a
        batch a pyg_accel loader marked in range)."""
        nodes, edges = self.bucket
        pad_hops(x, edge_index, nodes_per_hop, edges_per_hop, nodes, edges, self.x, self.edge_index)
        self.y[:nodes_per_hop[0]].copy_(y[:nodes_per_hop[0]])
        self.num_seeds.fill_(nodes_per_hop[0])
        # marks for the layers: ids in range, sorted by destination, the padded per-hop counts
        trust_edge_index(self.edge_index, self.x.size(0), self.x.size(0), dst_sorted=True)
        record_hops(self.edge_index, self.x.size(0), nodes, edges)

    def fits(self, nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int]) -> bool:
        """Whether a batch with these per-hop counts fits the buffers (:func:`fits`)."""
        return fits(self.bucket, nodes_per_hop, edges_per_hop)
