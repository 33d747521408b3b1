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
* padding seeds (or label edges) are masked out of the loss by :attr:`PaddedBatch.num_targets`.

Shapes: ``x`` ``[sum(padded nodes), F]``, ``edge_index`` ``[2, sum(padded edges)]``,
``y`` ``[padded seeds, ...]``.
"""
from __future__ import annotations

from typing import Dict, Iterable, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..ops.hops import record_hops
from ..ops.padding import pad_hop_edges, pad_hop_rows, pad_hops
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


Links = Tuple[Tuple[int, int], ...]  # per edge type: (source node type, destination node type), as indices
TypedCounts = Tuple[Tuple[int, ...], ...]  # per node (or edge) type: its counts per hop
TypedBucket = Tuple[TypedCounts, TypedCounts]  # (padded nodes per type and hop, padded edges per type and hop)
HOMOGENEOUS: Links = ((0, 0),)  # one node type, one edge type between its nodes


def _spare_nodes(edges: TypedCounts, links: Links, num_types: int, num_hops: int, fan: int) -> list:
    """Padding nodes each node group ``[t][g]`` needs: one, and enough that each takes at
    most ``fan`` of the padding edges of any one edge group around it (edge type ``j``'s
    hop ``k + 1``, ``edges[j][k]`` padding edges, starts at its source type's group
    ``k + 1`` and ends at its destination type's group ``k``)."""
    spare = [[1] * (num_hops + 1) for _ in range(num_types)]
    for (src, dst), per_hop in zip(links, edges):
        into, out_of = spare[dst], spare[src]
        for k, e in enumerate(per_hop):
            need = -(-e // fan)
            if need > into[k]:
                into[k] = need
            if need > out_of[k + 1]:
                out_of[k + 1] = need
    return spare


def _num_hops(nodes: TypedCounts, edges: TypedCounts) -> int:
    return len(edges[0]) if edges else len(nodes[0]) - 1


def typed_bucket_of(nodes: TypedCounts, edges: TypedCounts, links: Links, steps_per_octave: int = 16) -> TypedBucket:
    """:func:`bucket_of` of a batch with several node and edge types: ``nodes[t]`` per hop
    of node type ``t``, ``edges[j]`` per hop of edge type ``j``, which runs between the
    node types ``links[j]``. Each edge count is rounded up alone; each node group gets
    room for the padding edges' endpoints of every edge group around it."""
    padded_edges = tuple(tuple(round_up(e, steps_per_octave, minimum=0) if e else 0 for e in per_hop)
                         for per_hop in edges)
    spare = _spare_nodes(padded_edges, links, len(nodes), _num_hops(nodes, edges), steps_per_octave * PADDING_FAN)
    padded_nodes = tuple(tuple(round_up(n + s, steps_per_octave) for n, s in zip(per_hop, spare_of))
                         for per_hop, spare_of in zip(nodes, spare))
    return padded_nodes, padded_edges


def typed_fits(bucket: TypedBucket, nodes: TypedCounts, edges: TypedCounts, links: Links) -> bool:
    """:func:`fits` for several node and edge types (see :func:`typed_bucket_of`)."""
    padded_nodes, padded_edges = bucket
    if [len(c) for c in nodes] != [len(c) for c in padded_nodes] or \
            [len(c) for c in edges] != [len(c) for c in padded_edges]:
        return False
    padding_edges = []
    for real, padded in zip(edges, padded_edges):
        per_hop = tuple(p - e for e, p in zip(real, padded))
        if min(per_hop, default=0) < 0:
            return False  # (more edges than slots)
        padding_edges.append(per_hop)
    spare = _spare_nodes(padding_edges, links, len(nodes), _num_hops(nodes, padded_edges), PADDING_FAN)
    return all(p - n >= s for real, padded, spare_of in zip(nodes, padded_nodes, spare)
               for n, p, s in zip(real, padded, spare_of))


def typed_covering_bucket(buckets: Iterable[TypedBucket], nodes: TypedCounts, edges: TypedCounts, links: Links,
                          steps_per_octave: int = 16, slack_steps: int = 2,
                          own: Optional[TypedBucket] = None) -> Optional[TypedBucket]:
    """:func:`covering_bucket` for several node and edge types (``own``: the batch's
    :func:`typed_bucket_of`, if the caller has it)."""
    if own is None:
        own = typed_bucket_of(nodes, edges, links, steps_per_octave)
    own_counts = _flat(own)
    limit = 1 + slack_steps / steps_per_octave
    best, best_cost = None, None
    for bucket in buckets:
        if not typed_fits(bucket, nodes, edges, links):
            continue
        counts = _flat(bucket)
        if any(p > limit * o for p, o in zip(counts, own_counts)):
            continue
        cost = sum(p / max(o, 1) for p, o in zip(counts, own_counts))
        if best_cost is None or cost < best_cost:
            best, best_cost = bucket, cost
    return best


# Heterogeneous batches: a new shape gets a whole grid step of headroom (homogeneous: a
# quarter) and a held shape serves batches whose own buckets are up to three steps
# smaller (homogeneous: two). Such a batch has a count per node type and hop and per
# edge type and hop (26 for ogbn-mag's schema at 2 hops, against 7 in a 3-hop homogeneous
# batch), and a held shape serves it only if every count fits, so with the homogeneous
# margins new shapes kept coming for several epochs. Replaying the counts of sampled
# synthetic-mag batches (512 seeds, [10, 10]) through the search, two samplings each
# (scripts/shape_search.py): at a tenth of ogbn-mag's size, 8 epochs, 13-15 shapes (5-7
# made after the first epoch) became 3-5 (1), padding 4.9-5.3% -> 6.0-8.6%; at a
# hundredth 20-22 (13-15) became 11-12 (4-9), 4.1-4.2% -> 7.4-8.2%; link prediction at a
# tenth, 6 epochs, 25-26 (12) became 5 (2), 4.1-4.3% -> 7.3-9.8%. (Past max_graphs=16
# shapes, further ones train eagerly.) A new shape costs an eager warm-up and a capture,
# tens of ms; the 1-5 more points of padding cost up to ~5% of a captured step's GPU time.
HETERO_HEADROOM_STEPS = 1.0
HETERO_SLACK_STEPS = 3


def typed_bucket_with_headroom(nodes: TypedCounts, edges: TypedCounts, links: Links,
                               steps_per_octave: int = 16, headroom_steps: float = 0.25) -> TypedBucket:
    """:func:`bucket_with_headroom` for several node and edge types, the counts
    ``headroom_steps`` grid steps larger."""
    grow = 1 + headroom_steps / steps_per_octave
    return typed_bucket_of(tuple(tuple(int(n * grow) for n in c) for c in nodes),
                           tuple(tuple(int(e * grow) for e in c) for c in edges), links, steps_per_octave)


def _flat(bucket: TypedBucket) -> Tuple[int, ...]:
    return tuple(n for counts in bucket[0] + bucket[1] for n in counts)


def _typed(nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int]) -> Tuple[TypedCounts, TypedCounts]:
    return (tuple(int(n) for n in nodes_per_hop),), (tuple(int(e) for e in edges_per_hop),)


def _untyped(bucket: Optional[TypedBucket]) -> Optional[Bucket]:
    return None if bucket is None else (bucket[0][0], bucket[1][0])


def bucket_of(nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int], steps_per_octave: int = 16) -> Bucket:
    """Padded sizes of a batch with these per-hop counts: edges rounded up alone; nodes
    rounded up with room for the padding edges' endpoints, at least one padding node per
    hop and enough that each takes at most :data:`PADDING_FAN` padding edges of the hops
    on either side (padding edges are at most 1 / ``steps_per_octave`` of a hop's)."""
    return _untyped(typed_bucket_of(*_typed(nodes_per_hop, edges_per_hop), HOMOGENEOUS, steps_per_octave))


def bucket_with_headroom(nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int],
                         steps_per_octave: int = 16) -> Bucket:
    """:func:`bucket_of` counts a quarter of a grid step larger: the shape a step creates
    for a batch that no held shape fits. Counts just under a grid line then take the
    size above it, which the next batches near that line fit too. (Products-size
    batches, 1024 x [15, 10, 5], four epochs: 2 shapes per process instead of 7-9, none
    new after the first epoch, for 1-4% more padding.)"""
    return _untyped(typed_bucket_with_headroom(*_typed(nodes_per_hop, edges_per_hop), HOMOGENEOUS, steps_per_octave))


def fits(bucket: Bucket, nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int]) -> bool:
    """Whether a batch with these per-hop counts pads into ``bucket`` as :func:`bucket_of`
    would pad it: as many hops, every count within the bucket's, and enough padding
    nodes per hop that each takes at most :data:`PADDING_FAN` padding edges."""
    return typed_fits(((tuple(bucket[0]),), (tuple(bucket[1]),)), *_typed(nodes_per_hop, edges_per_hop), HOMOGENEOUS)


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
    typed = [((tuple(b[0]),), (tuple(b[1]),)) for b in buckets]
    return _untyped(typed_covering_bucket(typed, *_typed(nodes_per_hop, edges_per_hop), HOMOGENEOUS,
                                          steps_per_octave, slack_steps))


def pad_hop_edge_rows(values: Tensor, edges_per_hop: Sequence[int], padded_edges: Sequence[int], out: Tensor,
                      name: str = 'values') -> None:
    """Copies hop-ordered per-edge rows (``edge_weight`` ``[E]``, ``edge_attr`` ``[E, D]``)
    into a padded buffer (``[sum(padded_edges), ...]``): hop ``k``'s rows to its padded
    start, as :func:`~pyg_accel.ops.pad_hop_edges` puts its edges. The padding edges'
    rows are zeros (inert: a zero weight adds nothing to a degree, whatever the layer
    makes of it reaches padding nodes only). A copy and a fill per hop, no host sync."""
    if values.size(0) != sum(edges_per_hop) or values.shape[1:] != out.shape[1:]:
        raise ValueError(f'TrainStep: {name} has shape {tuple(values.shape)}, the batch has {sum(edges_per_hop)} edges '
                         f'(rows of shape {tuple(out.shape[1:])} expected)')
    real = padded = 0
    for count, slots in zip(edges_per_hop, padded_edges):
        if count:
            out[padded:padded + count].copy_(values[real:real + count])
        if slots > count:
            out[padded + count:padded + slots].zero_()
        real, padded = real + count, padded + slots


def _buffers_like(templates: Dict[str, Tensor], rows: int, device) -> Dict[str, Tensor]:
    """A zero buffer of ``rows`` rows per template (its trailing shape and dtype)."""
    return {name: torch.zeros((rows,) + tuple(t.shape[1:]), dtype=t.dtype, device=device)
            for name, t in templates.items()}


class _Targets:
    """The loss mask of a padded batch: its first ``num_targets`` (a 0-dim device tensor)
    of ``y``'s slots are real targets."""
    y: Tensor
    num_targets: Tensor

    def target_mask(self) -> Tensor:
        """``[target slots]`` bool, true for real targets (seeds, or label edges; computed
        on the GPU: capturable)."""
        return torch.arange(self.y.size(0), device=self.num_targets.device) < self.num_targets


class PaddedBatch(_Targets):
    """Static input buffers of one bucket (allocated once; a captured graph reads them).

    Args:
        bucket: padded nodes per hop (``[H + 1]``) and edges per hop (``[H]``).
        num_features: width ``F`` of ``x``; ``x_dtype`` its dtype.
        y_shape / y_dtype: trailing shape and dtype of the targets.
        device: where the buffers live.
        label_slots: for link prediction (a ``LinkNeighborLoader``'s binary labels), the
            padded number of label edges: :attr:`edge_label_index` ``[2, label_slots]``
            and one target per label edge in :attr:`y`; ``None`` (node tasks): one target
            per seed slot.
        node_attrs / edge_attrs: further per-node (``n_id``, ...) and per-edge
            (``edge_weight``, ``edge_attr``, ...) tensors the model reads, by name: a
            batch's, for their trailing shapes and dtypes.
        inputs: the names :attr:`inputs` holds, in order (``x``, ``edge_index`` or any of
            the attributes above).
    """

    def __init__(self, bucket: Bucket, num_features: int, x_dtype: torch.dtype, y_shape: Tuple[int, ...],
                 y_dtype: torch.dtype, device: torch.device, label_slots: Optional[int] = None,
                 node_attrs: Optional[Dict[str, Tensor]] = None, edge_attrs: Optional[Dict[str, Tensor]] = None,
                 inputs: Sequence[str] = ('x', 'edge_index')):
        self.bucket = bucket
        nodes, edges = bucket
        self.x = torch.zeros(sum(nodes), num_features, dtype=x_dtype, device=device)
        self.edge_index = torch.zeros(2, sum(edges), dtype=torch.long, device=device)
        self.edge_label_index = None if label_slots is None else \
            torch.zeros(2, label_slots, dtype=torch.long, device=device)
        targets = nodes[0] if label_slots is None else label_slots
        self.y = torch.zeros((targets, ) + tuple(y_shape), dtype=y_dtype, device=device)
        self.num_targets = torch.zeros((), dtype=torch.long, device=device)  # real targets: the loss mask
        self.node_attrs = _buffers_like(node_attrs or {}, sum(nodes), device)
        self.edge_attrs = _buffers_like(edge_attrs or {}, sum(edges), device)
        named = {'x': self.x, 'edge_index': self.edge_index, **self.node_attrs, **self.edge_attrs}
        self.inputs = tuple(named[name] for name in inputs)  # the model's arguments (static buffers)

    def load(self, x: Tensor, edge_index: Tensor, y: Tensor, nodes_per_hop: Sequence[int],
             edges_per_hop: Sequence[int], edge_label_index: Optional[Tensor] = None,
             attrs: Optional[Dict[str, Tensor]] = None) -> None:
        """Copies a batch in (``x`` ``[N, F]``, ``edge_index`` ``[2, E]`` sorted by
        destination within each hop, ``y`` the targets: ``[nodes_per_hop[0], ...]`` of the
        seeds, or ``[L, ...]`` of the label edges ``edge_label_index`` ``[2, L]``, whose
        ends are seeds; ``attrs`` the batch's tensors of :attr:`node_attrs` and
        :attr:`edge_attrs`, by name); its counts must fit the bucket. Padding label edges
        join the first padding seed to itself. A few kernels and fills, no host sync (for
        a batch a pyg_accel loader marked in range)."""
        nodes, edges = self.bucket
        pad_hops(x, edge_index, nodes_per_hop, edges_per_hop, nodes, edges, self.x, self.edge_index)
        for name, buffer in self.node_attrs.items():
            pad_hop_rows(attrs[name], nodes_per_hop, nodes, buffer)
        for name, buffer in self.edge_attrs.items():
            pad_hop_edge_rows(attrs[name], edges_per_hop, edges, buffer, name)
        num_targets = nodes_per_hop[0] if edge_label_index is None else edge_label_index.size(1)
        if edge_label_index is not None:  # (seeds keep their ids: the first group does not shift)
            self.edge_label_index[:, :num_targets].copy_(edge_label_index)
            self.edge_label_index[:, num_targets:].fill_(nodes_per_hop[0])
        self.y[:num_targets].copy_(y[:num_targets])
        self.num_targets.fill_(num_targets)
        # marks for the layers: ids in range, sorted by destination, the padded per-hop counts
        trust_edge_index(self.edge_index, self.x.size(0), self.x.size(0), dst_sorted=True)
        record_hops(self.edge_index, self.x.size(0), nodes, edges)

    def fits(self, nodes_per_hop: Sequence[int], edges_per_hop: Sequence[int]) -> bool:
        """Whether a batch with these per-hop counts fits the buffers (:func:`fits`)."""
        return fits(self.bucket, nodes_per_hop, edges_per_hop)


class PaddedHeteroBatch(_Targets):
    """Static buffers of one bucket of heterogeneous batches: :class:`PaddedBatch` per node
    and edge type. :attr:`data` is a ``HeteroData`` of the buffers, so the model reads
    them as it reads a batch (``data.x_dict``, ``data.edge_index_dict``, ...).

    Args:
        bucket: padded nodes per node type and hop, padded edges per edge type and hop
            (:func:`typed_bucket_of`), in the order of ``node_types`` and ``edge_types``.
        node_types / edge_types: the batch's types; ``links`` each edge type's source and
            destination as indices into ``node_types``.
        batch: a batch of this kind (``HeteroData``): the attributes' trailing shapes and dtypes.
        node_keys: per node type, the node-level attributes padded (rows of a node type's
            groups, like ``x``; padding rows start as zeros and then keep earlier batches'
            rows, so a padding ``n_id`` is always a valid row of an embedding).
        edge_keys: per edge type, the edge-level attributes padded besides ``edge_index``
            (``edge_attr``, ...).
        target: ``(node type, attribute)`` of the seeds' targets, among ``node_keys``; for
            link prediction ``(edge type, attribute)`` of the label edges' targets
            (``edge_label``), whose ``edge_label_index`` is padded too.
        inputs: names of :attr:`data`'s attributes the model is called with
            (``'x_dict'``, ``'edge_index_dict'``, ...): :attr:`inputs` holds them.
        label_slots: for link prediction, the padded number of label edges:
            :attr:`edge_label_index` ``[2, label_slots]`` (its rows index the edge type's
            source and destination node types) and :attr:`y` one target per slot;
            ``None`` for node tasks.
    """

    def __init__(self, bucket: TypedBucket, node_types: Sequence[str], edge_types: Sequence[Tuple[str, str, str]],
                 links: Links, batch, node_keys: dict, target: Tuple[object, str], inputs: Sequence[str] = (),
                 edge_keys: Optional[dict] = None, label_slots: Optional[int] = None):
        from torch_geometric.data import HeteroData
        self.bucket, self.node_types, self.edge_types, self.links = bucket, tuple(node_types), tuple(edge_types), links
        self.node_keys, self.target = {t: tuple(keys) for t, keys in node_keys.items()}, target
        self.edge_keys = {et: tuple(keys) for et, keys in (edge_keys or {}).items()}
        self.data = HeteroData()
        device = None
        for t, counts in zip(self.node_types, bucket[0]):
            store = self.data[t]
            for key in self.node_keys.get(t, ()):
                value = batch[t][key]
                store[key] = torch.zeros((sum(counts),) + tuple(value.shape[1:]), dtype=value.dtype,
                                         device=value.device)
                device = value.device
            store.num_nodes = sum(counts)
        for et, counts in zip(self.edge_types, bucket[1]):
            self.data[et].edge_index = torch.zeros(2, sum(counts), dtype=torch.long,
                                                   device=batch[et].edge_index.device)
            for key in self.edge_keys.get(et, ()):
                value = batch[et][key]
                self.data[et][key] = torch.zeros((sum(counts),) + tuple(value.shape[1:]), dtype=value.dtype,
                                                 device=value.device)
        self.edge_label_index: Optional[Tensor] = None
        self._label_y: Optional[Tensor] = None
        if label_slots is not None:  # (link prediction: the label edges' ends and targets)
            label_type, key = target
            value = batch[label_type][key]
            device = value.device
            self.edge_label_index = torch.zeros(2, label_slots, dtype=torch.long, device=device)
            self._label_y = torch.zeros((label_slots,) + tuple(value.shape[1:]), dtype=value.dtype, device=device)
        self.num_targets = torch.zeros((), dtype=torch.long, device=device)  # real targets: the loss mask
        self.inputs = tuple(getattr(self.data, name) for name in inputs)  # (dicts of the static buffers)
        # what load() copies, looked up once: (type index, type, key, buffer) per padded node
        # attribute; (edge type index, edge type, source and destination type indices, its
        # padded edge_index, (key, buffer) per padded edge attribute) per edge type
        self._row_slots = tuple((i, t, key, self.data[t][key]) for i, t in enumerate(self.node_types)
                                for key in self.node_keys.get(t, ()))
        self._edge_slots = tuple((j, et, src, dst, self.data[et].edge_index,
                                  tuple((key, self.data[et][key]) for key in self.edge_keys.get(et, ())))
                                 for j, (et, (src, dst)) in enumerate(zip(self.edge_types, self.links)))
        self._padded_rows = tuple(sum(counts) for counts in bucket[0])

    @property
    def num_padded_seeds(self) -> int:
        """Seed slots, real and padding: the target type's first group (node tasks)."""
        return self.bucket[0][self.node_types.index(self.target[0])][0]

    @property
    def y(self) -> Tensor:
        """``[padded seeds, ...]`` the seeds' targets (a view of the static buffer), or
        ``[label_slots, ...]`` the label edges'."""
        if self._label_y is not None:
            return self._label_y
        return self.data[self.target[0]][self.target[1]][:self.num_padded_seeds]

    def load(self, batch, nodes: TypedCounts, edges: TypedCounts) -> None:
        """Copies ``batch`` in: each padded node attribute group by group, each edge type's
        ``edge_index`` with its ids remapped (marked in range and sorted by destination
        for the layers), and the number of real seeds, or the label edges and their
        targets (padding label edges join the first padding seed of the source type to
        that of the destination type). One kernel per attribute and edge type, no host
        sync (for a batch a pyg_accel loader marked in range)."""
        padded_nodes, padded_edges = self.bucket
        node_store, edge_store = batch.get_node_store, batch.get_edge_store  # (cheaper than batch[key])
        for i, t, key, buffer in self._row_slots:
            pad_hop_rows(node_store(t)[key], nodes[i], padded_nodes[i], buffer)
        rows = self._padded_rows
        for j, et, src, dst, out, edge_buffers in self._edge_slots:
            store = edge_store(*et)
            pad_hop_edges(store['edge_index'], edges[j], padded_edges[j], nodes[src], padded_nodes[src], nodes[dst],
                          padded_nodes[dst], out)
            trust_edge_index(out, rows[src], rows[dst], dst_sorted=True)
            for key, buffer in edge_buffers:
                pad_hop_edge_rows(store[key], edges[j], padded_edges[j], buffer, f'{et}.{key}')
        if self.edge_label_index is None:
            self.num_targets.fill_(nodes[self.node_types.index(self.target[0])][0])
            return
        label_type, key = self.target
        label_index, targets = batch[label_type].edge_label_index, batch[label_type][key]
        count = label_index.size(1)
        if count > self.edge_label_index.size(1) or targets.size(0) != count:
            raise ValueError(f'PaddedHeteroBatch: {count} label edges of {label_type} with {targets.size(0)} '
                             f"'{key}' entries, for {self.edge_label_index.size(1)} slots")
        # (the label edges' ends are seeds, which keep their ids: a type's first group does not shift)
        src, dst = (self.node_types.index(t) for t in (label_type[0], label_type[-1]))
        self.edge_label_index[:, :count].copy_(label_index)
        self.edge_label_index[0, count:].fill_(nodes[src][0])
        self.edge_label_index[1, count:].fill_(nodes[dst][0])
        self._label_y[:count].copy_(targets)
        self.num_targets.fill_(count)

    def fits(self, nodes: TypedCounts, edges: TypedCounts) -> bool:
        """Whether a batch with these counts fits the buffers (:func:`typed_fits`)."""
        return typed_fits(self.bucket, nodes, edges, self.links)
