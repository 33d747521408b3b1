"""A whole mini-batch training step (forward, loss, backward, optimizer step) replayed
as a CUDA graph: one launch instead of hundreds, so the GPU no longer waits for Python.

    step = TrainStep(model, optimizer)              # cross-entropy on the seeds' batch.y
    for batch in loader:                            # pyg_accel's NeighborLoader
        loss = step(batch)                          # instead of zero_grad / forward / loss / backward / step

It trains node classification on ``NeighborLoader`` batches and link prediction on
``LinkNeighborLoader`` batches with binary labels, homogeneous or heterogeneous.

Each batch is padded to one of a few shapes (:mod:`pyg_accel.training.padding`; a shape
already held that is slightly larger serves a batch rather than a new one); the first
batch of a shape trains eagerly on the padded buffers (the warm-up a capture needs), the
second is captured and every later one replays that graph. What the step computes equals
the eager step's on the unpadded batch: padding nodes and edges feed only padding nodes,
padding seeds are masked out of the loss, and dropout draws fresh masks on every replay
(PyTorch's graph-safe RNG).
"""
from __future__ import annotations

import contextlib
import gc
import warnings
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import HeteroData

from ..nn.conv._self_loops import sync_free
from ..ops.hops import sampled_hops
from .padding import (HETERO_HEADROOM_STEPS, HETERO_SLACK_STEPS, Links, PaddedBatch, PaddedHeteroBatch, TypedCounts,
                      bucket_of, bucket_with_headroom, covering_bucket, round_up, typed_bucket_of,
                      typed_bucket_with_headroom, typed_covering_bucket)

__all__ = ['TrainStep']

LossFn = Callable[[Tensor, Tensor], Tensor]
# A batch's padded shape: a padding.Bucket (node tasks), a Bucket and the label-edge
# slots (link prediction), or the node and edge types and their typed bucket (heterogeneous).
Shape = tuple


def _cross_entropy(out: Tensor, target: Tensor) -> Tensor:
    return F.cross_entropy(out, target, reduction='none')


def _binary_cross_entropy(out: Tensor, target: Tensor) -> Tensor:
    return F.binary_cross_entropy_with_logits(out, target.to(out.dtype), reduction='none')


def _dot_product(z: Tensor, edge_label_index: Tensor) -> Tensor:
    """A label edge's score: the dot product of its ends' embeddings (``[L]``)."""
    return (z[edge_label_index[0]] * z[edge_label_index[1]]).sum(-1)


def _is_link(batch) -> bool:
    """Whether ``batch`` is a homogeneous link-prediction batch (a ``LinkNeighborLoader``'s:
    ``edge_label_index`` and no ``batch_size``)."""
    return isinstance(getattr(batch, 'edge_label_index', None), Tensor) and getattr(batch, 'batch_size', None) is None


def _cross_node_norms(model: torch.nn.Module) -> Optional[str]:
    """The class name of a module in ``model`` whose output mixes statistics over the
    rows (batch, instance, graph or pair norms; a graph-mode LayerNorm), or ``None``."""
    import torch_geometric.nn.norm as pyg_norm
    per_node = tuple(getattr(pyg_norm, name) for name in ('LayerNorm', 'HeteroLayerNorm', 'MessageNorm')
                     if hasattr(pyg_norm, name))
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._NormBase):  # (BatchNorm*, InstanceNorm*)
            return type(module).__name__
        if type(module).__module__.startswith('torch_geometric.nn.norm'):
            if isinstance(module, per_node) and getattr(module, 'mode', 'node') == 'node':
                continue
            return type(module).__name__
    return None


def _broadcast_parameters(model: torch.nn.Module, group) -> None:
    """The parameters of the group's first rank on every rank (as DDP starts), in one
    broadcast of them flattened."""
    import torch.distributed as dist
    params = [p for p in model.parameters()]
    if not params:
        return
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        dist.broadcast(flat, src=dist.get_global_rank(group, 0), group=group)
        offset = 0
        for p in params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


_registrations = 0  # submodules and parameters registered on any module since the hooks below went in
_counting = False


def _count_registration(*_) -> None:
    global _registrations
    _registrations += 1


def _count_registrations() -> None:
    """Counts every submodule and parameter registration (``module.name = ...``) from
    now on, in :data:`_registrations`, through PyTorch's global registration hooks
    (installed once; they return ``None``: nothing registered changes)."""
    global _counting
    if not _counting:
        torch.nn.modules.module.register_module_module_registration_hook(_count_registration)
        torch.nn.modules.module.register_module_parameter_registration_hook(_count_registration)
        _counting = True


def _is_hetero(batch) -> bool:
    return isinstance(batch, HeteroData)


def _input_kinds(batch, names: Sequence[str]) -> Union[str, Dict[str, str]]:
    """``{key: 'node' | 'edge'}`` for the inputs besides ``x`` and ``edge_index`` (in a
    ``HeteroData``, ``<key>_dict``s besides ``edge_index_dict``), by PyG's own
    ``is_node_attr`` / ``is_edge_attr``; or why one cannot be padded."""
    hetero = _is_hetero(batch)
    kinds = {}
    for name in names:
        if name in (('edge_index_dict',) if hetero else ('x', 'edge_index')):
            continue
        key = name[:-len('_dict')] if hetero and name.endswith('_dict') else (None if hetero else name)
        stores = [] if key is None else [s for s in (batch.stores if hetero else [batch]) if key in s]
        is_tensor = bool(stores) and all(isinstance(s[key], Tensor) for s in stores)
        node = is_tensor and all(s.is_node_attr(key) for s in stores)
        edge = is_tensor and all(s.is_edge_attr(key) for s in stores)
        if node == edge:  # (neither, both, or absent)
            form = '<key>_dict names of node or edge attributes' if hetero else 'node or edge attributes'
            return f'the captured step pads {form} and edge_index, not input {name!r}: training eagerly'
        kinds[key] = 'node' if node else 'edge'
    return kinds


EdgeType = Tuple[str, str, str]


def _hetero_task(batch) -> Union[str, Tuple[Optional[str], Optional[EdgeType]]]:
    """A heterogeneous batch's task: ``(seed node type, None)`` for a node task (the
    type with ``batch_size``, a ``NeighborLoader``'s), ``(None, label edge type)`` for
    link prediction (the type with ``edge_label_index``, a ``LinkNeighborLoader``'s), or
    why it has neither."""
    seeds = [t for t, store in zip(batch.node_types, batch.node_stores) if isinstance(store.get('batch_size'), int)]
    labels = [et for et, store in zip(batch.edge_types, batch.edge_stores)
              if isinstance(store.get('edge_label_index'), Tensor)]
    if len(seeds) == 1:
        return seeds[0], None
    if not seeds and len(labels) == 1:
        return None, labels[0]
    return ("the heterogeneous batch has neither one node type with batch_size (the seeds of a NeighborLoader) nor "
            "one edge type with edge_label_index (the label edges of a LinkNeighborLoader with "
            "neg_sampling='binary' or none)")


def _label_index(batch) -> Optional[Tensor]:
    """A link-prediction batch's ``edge_label_index`` (in a ``HeteroData``, of its label
    edge type; ``None`` for node tasks)."""
    if not _is_hetero(batch):
        return batch.edge_label_index if _is_link(batch) else None
    task = _hetero_task(batch)
    return None if isinstance(task, str) or task[1] is None else batch[task[1]].edge_label_index


def _group_size(group) -> int:
    import torch.distributed as dist
    return dist.get_world_size(group)


def _release_rng_from_capture(device: torch.device) -> None:
    """After a capture that failed to end, the device's RNG still believes it is being
    captured, and every later random op (dropout) would fail. Its state is replaced by a
    copy (same seed and offset), which is not."""
    generator = torch.cuda.default_generators[device.index if device.index is not None else
                                              torch.cuda.current_device()]
    if hasattr(generator, 'graphsafe_set_state'):
        generator.graphsafe_set_state(generator.clone_state())


class _Hops(NamedTuple):
    """A homogeneous batch's per-hop counts, and its number of label edges (link
    prediction; ``None`` for node tasks)."""
    nodes: List[int]
    edges: List[int]
    labels: Optional[int]


# PyTorch's warning when a backward reaches a parameter's gradient accumulator made on
# another stream (by an earlier graph still alive), and the CUDA error a capture then
# ends with: the accumulator's stream (the default one) would wait on the capture.
_STALE_ACCUMULATOR = "AccumulateGrad node's stream does not match"
_STALE_CAPTURE_ERROR = 'legacy stream depend on a capturing'
_STALE_GRAPH = ('an autograd graph made before this step is still alive (a loss kept without .detach(), e.g. in '
                "a list): the parameters' gradient accumulators it holds run on the default stream, which a "
                'captured graph cannot wait on; training eagerly until it is freed (keep loss.detach() or '
                'loss.item())')


def _capture_error(error: BaseException) -> str:
    """What made a capture fail: ``error`` (ending the capture) and the op's error inside
    it that caused it, one line each. (Read here, so that the caller's frame holds no
    reference to the cause, whose traceback holds the failed step's autograd graph.)"""
    reason = f'{type(error).__name__}: {error}'.splitlines()[0]
    cause = error.__context__
    if cause is not None:
        reason += f' (after {type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ""})'
    return reason


class _HeteroHops(NamedTuple):
    """A heterogeneous batch's per-hop counts: ``nodes[t]`` of ``node_types[t]``,
    ``edges[j]`` of ``edge_types[j]``, which runs between the node types ``links[j]``;
    its seed node type (node tasks) or its label edge type and number of label edges
    (link prediction)."""
    node_types: Tuple[str, ...]
    edge_types: Tuple[EdgeType, ...]
    links: Links
    nodes: TypedCounts
    edges: TypedCounts
    seed_type: Optional[str]
    label_type: Optional[EdgeType]
    labels: Optional[int]


def _hetero_hops(batch) -> Union[str, _HeteroHops]:
    """The per-hop counts PyG's heterogeneous loaders give each node and edge type
    (``num_sampled_nodes``, ``num_sampled_edges``), or why the batch has none."""
    node_types, edge_types = tuple(batch.node_types), tuple(batch.edge_types)
    task = _hetero_task(batch)
    if isinstance(task, str):
        return task
    nodes = tuple(store.get('num_sampled_nodes') for store in batch.node_stores)  # (in node_types' order)
    edges = tuple(store.get('num_sampled_edges') for store in batch.edge_stores)
    if any(not isinstance(c, (list, tuple)) for c in nodes + edges) or not edges:
        return ("the batch carries no per-hop counts (num_sampled_nodes / num_sampled_edges: not from a "
                "NeighborLoader, or a loader with a transform=): training eagerly")
    nodes = tuple(tuple(int(n) for n in c) for c in nodes)
    edges = tuple(tuple(int(e) for e in c) for c in edges)
    num_hops = len(edges[0])
    if not 1 <= num_hops <= 16 or any(len(c) != num_hops + 1 for c in nodes) or \
            any(len(c) != num_hops for c in edges):
        return 'the per-hop counts of the node and edge types do not agree in their number of hops: training eagerly'
    index = {t: i for i, t in enumerate(node_types)}
    links = tuple((index[et[0]], index[et[-1]]) for et in edge_types)
    seed_type, label_type = task
    labels = None if label_type is None else batch[label_type].edge_label_index.size(1)
    return _HeteroHops(node_types, edge_types, links, nodes, edges, seed_type, label_type, labels)


class _Captured(NamedTuple):
    """One batch shape's captured step: ``step`` computes ``loss`` and the gradients (and,
    data-parallel, flattens them into ``flat``, which ``update`` applies after the
    all-reduce; otherwise ``step`` also applies them and ``update`` is ``None``)."""
    step: torch.cuda.CUDAGraph
    loss: Tensor
    flat: Optional[Tensor]
    update: Optional[torch.cuda.CUDAGraph]


class TrainStep:
    """``step(batch)`` runs ``optimizer.zero_grad(); loss = loss_fn(model(batch.x,
    batch.edge_index)[:batch_size], batch.y[:batch_size]).mean(); loss.backward();
    optimizer.step()`` and returns the loss (a 0-dim tensor on the device: no host sync).

    Args:
        model: a model whose ``model(x, edge_index)`` gives the seeds' outputs first, e.g.
            :class:`pyg_accel.nn.models.GraphSAGE` (which trims by itself).
        optimizer: over ``model``'s parameters. Adam / AdamW (and others with a
            ``capturable`` option) are switched to ``capturable=True``.
        loss_fn: ``loss_fn(out, target) -> [batch_size]`` per-seed losses (default:
            cross-entropy, ``reduction='none'``; link prediction: per-label-edge losses,
            default binary cross-entropy on logits); the step averages them over the
            real targets.
        target: the batch attribute holding the targets (default ``'y'``, of which the
            seeds' rows are used; link prediction ``'edge_label'``).
        capture: ``'auto'`` (default): CUDA graphs on a GPU, eager elsewhere; ``False``:
            always eager (the same step, for comparison and debugging).
        amp_dtype: run the forward and loss under ``torch.autocast`` in this dtype.
        steps_per_octave: padding grid (16: at most 1/16 of each count is padding). A
            batch whose shape is new trains on a shape already held that is at most
            two grid steps larger in every count, if there is one
            (:func:`~pyg_accel.training.padding.covering_bucket`), rather than warming up
            and capturing another; a new shape gets a quarter step of headroom.
        max_graphs: captured shapes kept; batches of further shapes train eagerly.
        inputs: the batch attributes the model is called with, in order (default
            ``('x', 'edge_index')``; for a ``HeteroData`` ``('x_dict', 'edge_index_dict')``).
            Any node attribute (``n_id``, ...) or edge attribute (``edge_weight``,
            ``edge_attr``, ...) as PyG tells them apart (``is_node_attr`` /
            ``is_edge_attr``) is padded with the batch; in a ``HeteroData`` their
            ``<key>_dict``. A dict calls the model with keywords instead: the model's
            argument names to the batch attributes, e.g. ``{'x': 'x', 'edge_index':
            'edge_index', 'edge_attr': 'edge_attr'}`` for PyG's ``BasicGNN`` models, whose
            ``edge_attr`` comes after ``edge_weight``.
        decoder: link prediction: ``decoder(out, edge_label_index) -> [L]`` scores of the
            label edges from the model's output (default: the dot product of the two ends'
            rows, PyG's usual decoder; for a dict of outputs per node type, of the label
            edge type's source and destination rows).

    Link prediction (a ``LinkNeighborLoader``'s batches with ``neg_sampling='binary'`` or
    none: ``edge_label_index``, ``edge_label``, no ``batch_size``): the loss is over
    ``decoder(model(x, edge_index), edge_label_index)``. The label edges are padded too
    (to a grid size; padding pairs join a padding seed to itself and are masked out), so a
    batch of another label count (the epoch's last) takes a shape of its own.

    Heterogeneous batches (``HeteroData`` from pyg_accel's ``NeighborLoader`` or
    ``LinkNeighborLoader``): the model is called as ``model(*[batch.<name> for name in
    inputs])`` and gives the seeds' outputs first, as a tensor or as a dict per node type;
    the seeds are the node type with ``batch_size``, their targets its ``target``
    attribute. In link prediction the label edges are the edge type with
    ``edge_label_index`` (its rows index the type's source and destination nodes), their
    targets its ``target`` attribute, and the decoder reads the model's dict. Each node type's
    ``<key>_dict`` inputs (``x_dict``, ``n_id_dict`` for embeddings, ...) and each edge
    type's ``edge_index`` and edge attributes are padded hop by hop
    (:class:`~pyg_accel.training.padding.PaddedHeteroBatch`).

    Data-parallel training: pass the model itself (not wrapped in
    ``DistributedDataParallel``) with ``process_group`` (e.g. ``torch.distributed.group.WORLD``).
    The parameters are broadcast from the group's first rank on construction, and each
    step averages the gradients over the group as DDP would, with one all-reduce of them
    flattened, run between two captured graphs (the gradients, then the optimizer step;
    a group of one process has nothing to average and keeps one graph); every rank must
    call the step equally often, as with DDP. Buffers are not broadcast
    (DDP broadcasts them every step). A ``DistributedDataParallel`` model trains eagerly
    through DDP: its gradient hooks cannot be captured.

    Eager, with a warning saying why, where a step cannot be captured: batches without
    per-hop counts (not from pyg_accel's loaders, or a ``transform=``), an
    input that is neither a node nor an edge attribute, a model in eval mode, a step with an op
    that syncs with the host (found by the warm-up, under CUDA's sync debug mode). GCN
    and GAT keep a graph's own self-loops with no effect rather than compacting them
    away, which would sync (``pyg_accel/nn/conv/_self_loops.py``). A change to the optimizer's hyperparameters
    (an LR scheduler setting a float ``lr``) or to the parameters' storage recaptures;
    a tensor ``lr`` (``Adam(lr=torch.tensor(0.01))``) changes without recapturing.
    Within a captured step, ``param.grad`` is the graph's own buffer: read it between
    steps, but clip or accumulate gradients inside ``loss_fn`` / the optimizer, not by
    hand between backward and step.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Optional[LossFn] = None,
                 target: Optional[str] = None, capture='auto', amp_dtype: Optional[torch.dtype] = None,
                 steps_per_octave: int = 16, max_graphs: int = 16, process_group=None,
                 inputs: Union[Sequence[str], Mapping[str, str], None] = None,
                 decoder: Optional[Callable[[Tensor, Tensor], Tensor]] = None):
        if capture not in ('auto', True, False):
            raise ValueError(f"TrainStep: capture must be 'auto', True or False, got {capture!r}")
        keywords = tuple(inputs) if isinstance(inputs, Mapping) else None
        names = tuple(inputs.values()) if isinstance(inputs, Mapping) else inputs
        if inputs is not None and (isinstance(inputs, str) or not inputs
                                   or not all(isinstance(n, str) for n in tuple(names) + (keywords or ()))
                                   or not all(k.isidentifier() for k in keywords or ())):
            raise ValueError(f"TrainStep: inputs must be a sequence of batch attribute names, e.g. "
                             f"('x_dict', 'edge_index_dict'), or a dict of the model's argument names to them, "
                             f"e.g. {{'x': 'x', 'edge_index': 'edge_index', 'edge_attr': 'edge_attr'}}; got {inputs!r}")
        self.inputs = tuple(names) if inputs is not None else None
        self._keywords = keywords  # the model's argument names for self.inputs (None: positional)
        self._ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel)
        if self._ddp and process_group is not None:
            raise ValueError('TrainStep: pass the module a DistributedDataParallel model wraps (model.module) with '
                             'process_group=, not the DDP model')
        self.model, self.optimizer = model, optimizer
        self._group = process_group  # gradients averaged over it by the step itself
        if process_group is not None and _group_size(process_group) == 1:
            self._group = None  # (nothing to average: one captured graph, no all-reduce between two)
        if self._group is not None:
            _broadcast_parameters(model, process_group)
        self._cross_node = _cross_node_norms(model)
        self.loss_fn, self.decoder = loss_fn, decoder
        self.target, self.capture, self.amp_dtype = target, capture, amp_dtype
        self.steps_per_octave, self.max_graphs = steps_per_octave, max_graphs
        self._buffers: Dict[Shape, PaddedBatch] = {}
        self._warmed: Set[Shape] = set()  # shapes whose eager warm-up step has run
        self._graphs: Dict[Shape, _Captured] = {}  # shape -> its captured step
        self._serves: Dict[Shape, Shape] = {}  # a batch's own bucket -> the larger held shape serving it
        self._uncapturable: Optional[str] = None  # why the step cannot be captured, once found
        self._calls = 0  # padded steps taken
        self._capture_from = 0  # no warm-up or capture before this many (a stale graph is alive)
        self._stale_wait = 1  # steps to wait the next time a stale graph is found
        self._state_key = None
        self._modules: List[torch.nn.Module] = []  # model.modules() as of _modules_at registrations
        self._modules_at = -1
        _count_registrations()
        self._warned = set()
        self._seed_type: Optional[str] = None  # a heterogeneous batch's seed node type (a dict output's key)
        self._label_type: Optional[EdgeType] = None  # a heterogeneous link batch's label edge type
        self._kinds_by_schema: Dict[tuple, Union[str, Dict[str, str]]] = {}  # batch schema -> _input_kinds
        self.stats = {'replayed': 0, 'captured': 0, 'eager': 0}

    # -- the step -------------------------------------------------------------------
    def __call__(self, batch) -> Tensor:
        hops = self._hops(batch)
        if isinstance(hops, str) or self._uncapturable is not None:
            self._warn(hops if isinstance(hops, str) else '')
            return self._eager_step(self._batch_inputs(batch), self._targets(batch), None, _label_index(batch))
        return self._padded_step(batch, hops)

    def _padded_step(self, batch, hops: Union[_Hops, _HeteroHops]) -> Tensor:
        bucket = self._shape_for(hops)
        self._check_state()
        padded = self._buffers.get(bucket)
        if padded is None:
            if len(self._buffers) >= self.max_graphs:  # (buffers and graphs are kept per shape: memory)
                self._warn(f'more than max_graphs={self.max_graphs} batch shapes: further shapes train eagerly')
                return self._eager_step(self._batch_inputs(batch), self._targets(batch), None, _label_index(batch))
            padded = self._buffers[bucket] = self._new_buffers(bucket, batch, hops)
        if isinstance(hops, _HeteroHops):
            padded.load(batch, hops.nodes, hops.edges)
        else:
            attrs = {name: batch[name] for name in padded.node_attrs.keys() | padded.edge_attrs.keys()}
            label_index = None if hops.labels is None else batch.edge_label_index
            padded.load(batch.x, batch.edge_index, self._targets(batch), hops.nodes, hops.edges, label_index, attrs)
        captured = self._graphs.get(bucket)
        if captured is not None:
            self.stats['replayed'] += 1
            return self._replay(captured)
        self._calls += 1
        if self._uncapturable is None and self._calls >= self._capture_from:
            if bucket in self._warmed:
                return self._capture(bucket, padded)
            self._warmed.add(bucket)  # (a shape's first batch: the warm-up)
            return self._warm_up(bucket, padded)
        return self._eager_step(padded.inputs, padded.y, padded, padded.edge_label_index)

    def _shape_for(self, hops: Union[_Hops, _HeteroHops]):
        """The padded shape a batch with these counts trains on: its own bucket if held,
        else a held shape at most slightly larger (remembered for the batch's bucket when
        it holds every count of that bucket), else a new shape with headroom. A
        heterogeneous batch's shape is its types and their typed bucket, with wider
        margins (:data:`~pyg_accel.training.padding.HETERO_HEADROOM_STEPS`); a link batch's
        adds its padded number of label edges (batches of another count take another)."""
        spo = self.steps_per_octave
        labels = () if hops.labels is None else (round_up(hops.labels, spo, minimum=1),)
        if isinstance(hops, _HeteroHops):
            types = (hops.node_types, hops.edge_types)
            own = (types, typed_bucket_of(hops.nodes, hops.edges, hops.links, spo)) + labels
        else:
            own = bucket_of(hops.nodes, hops.edges, spo) + labels
        if own in self._buffers:
            return own
        served = self._serves.get(own)
        if served is not None and served in self._buffers:
            return served
        if isinstance(hops, _HeteroHops):
            held_typed = typed_covering_bucket([b[1] for b in self._buffers if b[0] == types and b[2:] == labels],
                                               hops.nodes, hops.edges, hops.links, spo, HETERO_SLACK_STEPS, own[1])
            if held_typed is None:
                return (types, typed_bucket_with_headroom(hops.nodes, hops.edges, hops.links, spo,
                                                          HETERO_HEADROOM_STEPS)) + labels
            held = (types, held_typed) + labels
            counts = [sum(b[1][0] + b[1][1], ()) for b in (held, own)]
        else:
            same_task = [b[:2] for b in self._buffers if isinstance(b[0][0], int) and b[2:] == labels]
            held = covering_bucket(same_task, hops.nodes, hops.edges, spo)
            if held is None:
                return bucket_with_headroom(hops.nodes, hops.edges, spo) + labels
            held = held + labels
            counts = [held[0] + held[1], own[0] + own[1]]
        if all(p >= q for p, q in zip(*counts)):  # (every batch of `own` fits `held`)
            self._serves[own] = held
        return held

    def _loss(self, inputs: tuple, y: Tensor, padded, label_index: Optional[Tensor] = None) -> Tensor:
        """The mean loss over the real targets: of the seeds' outputs, or of the label
        edges' scores (``decoder(out, label_index)``) in link prediction."""
        # padded (capturable) steps handle self-loops without a host sync (nn/conv/_self_loops.py)
        amp = torch.autocast(y.device.type, dtype=self.amp_dtype or torch.bfloat16, enabled=self.amp_dtype is not None)
        with sync_free() if padded is not None else contextlib.nullcontext(), amp:
            out = self.model(*inputs) if self._keywords is None else self.model(**dict(zip(self._keywords, inputs)))
            if label_index is not None:
                out = self._decode(out, label_index)
            else:
                out = (out[self._seed_type] if isinstance(out, dict) else out)[:y.size(0)]
            loss_fn = self.loss_fn or (_cross_entropy if label_index is None else _binary_cross_entropy)
            losses = loss_fn(out, y)
        if losses.dim() != 1 or losses.size(0) != y.size(0):
            per = 'seed' if label_index is None else 'label edge'
            raise ValueError(f'TrainStep: loss_fn must return one loss per {per} ([{y.size(0)}]), got '
                             f'{tuple(losses.shape)}')
        if padded is None:
            return losses.float().mean()
        losses = torch.where(padded.target_mask(), losses.float(), 0.0)  # (where, not *: a NaN stays out)
        return losses.sum() / padded.num_targets.clamp(min=1)

    def _decode(self, out: Union[Tensor, Dict[str, Tensor]], label_index: Tensor) -> Tensor:
        """The label edges' scores: the user's decoder, or the dot product of the two
        ends' rows (of the label edge type's source and destination types in a dict of
        outputs per node type)."""
        if self.decoder is not None:
            return self.decoder(out, label_index)
        if isinstance(out, dict):
            src, _, dst = self._label_type
            return (out[src][label_index[0]] * out[dst][label_index[1]]).sum(-1)
        return _dot_product(out, label_index)

    def _eager_step(self, inputs: tuple, y: Tensor, padded, label_index: Optional[Tensor] = None) -> Tensor:
        self.stats['eager'] += 1
        self.optimizer.zero_grad(set_to_none=True)
        loss, flat = self._forward_backward(inputs, y, padded, label_index)
        self._all_reduce(flat)
        self._update(flat)
        return loss.detach()

    def _forward_backward(self, inputs: tuple, y: Tensor, padded,
                          label_index: Optional[Tensor] = None) -> Tuple[Tensor, Optional[Tensor]]:
        """The loss and its gradients; with a process group also the gradients flattened
        into one buffer and divided by the world size (``None`` otherwise), for the all-reduce."""
        loss = self._loss(inputs, y, padded, label_index)
        loss.backward()
        if self._group is None:
            return loss, None
        import torch.distributed as dist
        grads = []
        for p in self._params():
            if p.grad is None:  # (an unused parameter: zeros, as DDP sends)
                p.grad = torch.zeros_like(p)
            grads.append(p.grad.reshape(-1))
        return loss, torch.cat(grads).div_(dist.get_world_size(self._group))

    def _all_reduce(self, flat: Optional[Tensor]) -> None:
        """Sums ``flat`` over the process group, in place: outside any captured graph,
        between the one that makes the gradients and the one that applies them (NCCL's
        own streams and watchdog then stay out of the capture)."""
        if flat is not None:
            import torch.distributed as dist
            dist.all_reduce(flat, group=self._group)

    def _update(self, flat: Optional[Tensor]) -> None:
        """The optimizer step, on the averaged gradients copied back from ``flat``."""
        if flat is not None:
            offset = 0
            for p in self._params():
                n = p.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                offset += n
        self.optimizer.step()

    def _params(self) -> List[Tensor]:
        return [p for p in self.model.parameters() if p.requires_grad]

    # -- capture --------------------------------------------------------------------
    def _warm_up(self, bucket: Shape, padded: PaddedBatch) -> Tensor:
        """An eager step on a side stream, which also trains on its batch: the warm-up a
        capture needs (lazy initialisation, cuBLAS workspaces and autograd's stream
        bookkeeping happen outside the graph). It runs with CUDA's sync debug mode set to
        raise, so that a step that would synchronise with the host (which no capture can
        hold) is found here, trains eagerly, and is never captured. An autograd graph
        from before the step that is still alive is found here too (PyTorch warns of its
        gradient accumulators' stream): the capture waits until it is freed."""
        self._make_capturable()
        current = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        side.wait_stream(current)
        mode = torch.cuda.get_sync_debug_mode()
        try:
            with warnings.catch_warnings():  # (torch says the mode is a prototype, every time it is set)
                warnings.filterwarnings('ignore', message='Synchronization debug mode')
                torch.cuda.set_sync_debug_mode('error')
            with torch.cuda.stream(side), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter('always')
                loss = self._eager_step(padded.inputs, padded.y, padded, padded.edge_label_index)
        except RuntimeError as error:
            if 'synchroniz' not in str(error):
                raise
            self._give_up_capture(f'an op synchronises with the host ({str(error).splitlines()[0]})')
            torch.cuda.set_sync_debug_mode(mode)
            current.wait_stream(side)
            return self._eager_step(padded.inputs, padded.y, padded, padded.edge_label_index)
        finally:
            torch.cuda.set_sync_debug_mode(mode)
        current.wait_stream(side)
        loss.record_stream(current)
        stale = False
        for w in caught:  # (the step's own warnings, passed on; PyTorch's about the stale graph, acted on)
            if _STALE_ACCUMULATOR in str(w.message):
                stale = True
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if stale:
            self._wait_for_stale_graph(bucket)
        return loss

    def _wait_for_stale_graph(self, bucket: Shape) -> None:
        """An autograd graph made before the step is alive (see :data:`_STALE_GRAPH`): the
        shape warms up again later, after a number of steps that doubles each time (up
        to 16), trained eagerly meanwhile. Said from the second time on: a plain loop's
        last ``loss``, which the first step's result replaces, is not worth a warning."""
        self._warmed.discard(bucket)
        gc.collect()  # (a failed capture's step graph, in reference cycles through its error's traceback)
        self._capture_from = self._calls + 1 + self._stale_wait
        if self._stale_wait > 1:
            self._warn(_STALE_GRAPH)
        self._stale_wait = min(2 * self._stale_wait, 16)

    def _give_up_capture(self, reason: str) -> None:
        """Trains eagerly from now on, saying why once."""
        self._uncapturable = reason
        self.optimizer.zero_grad(set_to_none=True)
        self._warn(f'the step could not be captured as a CUDA graph: {reason}; training eagerly')

    def _capture(self, bucket: Shape, padded: PaddedBatch) -> Tensor:
        """Captures the step on ``padded`` (recording only), then replays it once to run
        it. A data-parallel step is two graphs, the gradients and then their application,
        with the all-reduce between them run eagerly (no collective inside a capture)."""
        # what this graph bakes in (every graph held was captured under it: _check_state
        # drops them all when it changes, so after a change the key must follow the state)
        self._state_key = self._current_state_key()
        step = torch.cuda.CUDAGraph()
        update = torch.cuda.CUDAGraph() if self._group is not None else None
        self.optimizer.zero_grad(set_to_none=True)
        stream = torch.cuda.current_stream()
        try:
            with torch.cuda.graph(step):
                loss, flat = self._forward_backward(padded.inputs, padded.y, padded, padded.edge_label_index)
                if update is None:
                    self._update(None)
            if update is not None:
                with torch.cuda.graph(update, pool=step.pool()):
                    self._update(flat)
        except Exception as error:  # noqa: BLE001 (any failure to capture: train eagerly, say why)
            reason = _capture_error(error)
            # (a capture that fails to end leaves its stream current: torch.cuda.graph's exit
            # restores the caller's only after the capture ends)
            torch.cuda.set_stream(stream)
            _release_rng_from_capture(padded.y.device)
            if _STALE_CAPTURE_ERROR in reason:  # (a graph from before the step, alive: capture it later)
                self.optimizer.zero_grad(set_to_none=True)
                self._wait_for_stale_graph(bucket)
            else:
                self._give_up_capture(reason)
            torch.cuda.synchronize()
            return self._eager_step(padded.inputs, padded.y, padded, padded.edge_label_index)
        captured = self._graphs[bucket] = _Captured(step, loss.detach(), flat, update)
        self.stats['captured'] += 1
        return self._replay(captured)

    def _replay(self, captured: '_Captured') -> Tensor:
        captured.step.replay()
        if captured.update is not None:
            self._all_reduce(captured.flat)
            captured.update.replay()
        return captured.loss.clone()

    def _make_capturable(self) -> None:
        for group in self.optimizer.param_groups:
            if 'capturable' in group and not group['capturable']:
                group['capturable'] = True
                for p in group['params']:
                    step = self.optimizer.state.get(p, {}).get('step')
                    if isinstance(step, Tensor) and step.device != p.device:
                        self.optimizer.state[p]['step'] = step.to(p.device)

    def _current_state_key(self) -> tuple:
        """What a captured step baked in: the parameters' storage and the optimizer's
        scalar hyperparameters (a tensor lr is read on every replay: its identity only).
        The model's modules are listed again only after a submodule or parameter was
        registered anywhere (``module.name = ...``); each step reads every listed
        module's parameters and counts its submodules, so a parameter swapped in place of
        another (``module._parameters[name] = ...``, ``param.data = ...``,
        ``model.to(...)``) or a deleted submodule is seen too. Walking
        ``model.parameters()`` instead costs ~20-50 µs of host per step."""
        if self._modules_at != _registrations:
            self._modules, self._modules_at = list(self.model.modules()), _registrations
        modules = self._modules
        params = tuple(p.data_ptr() for module in modules for p in module._parameters.values() if p is not None)
        children = tuple(len(module._modules) for module in modules)  # (a deleted submodule registers nothing)
        hyper = tuple(tuple((k, v if not isinstance(v, Tensor) else id(v)) for k, v in group.items() if k != 'params')
                      for group in self.optimizer.param_groups)
        return params, children, hyper

    def _check_state(self) -> None:
        if self._graphs and self._current_state_key() != self._state_key:
            self._graphs.clear()  # stale: recapture (each bucket's warm-up is done)
            self._warn('the optimizer hyperparameters or the parameters changed: the step is captured again '
                       '(a tensor lr changes without recapturing)')

    # -- batches ----------------------------------------------------------------------
    def _hops(self, batch) -> Union[str, _Hops, _HeteroHops]:
        """``batch``'s per-hop counts, or why it trains eagerly (``''``: by choice, nothing
        to say)."""
        if self.capture is False:
            return ''
        hetero = _is_hetero(batch)
        if hetero:
            edge_index = next((store['edge_index'] for store in batch.edge_stores if 'edge_index' in store), None)
            on_gpu = isinstance(edge_index, Tensor) and edge_index.is_cuda
        else:
            x, edge_index = getattr(batch, 'x', None), getattr(batch, 'edge_index', None)
            if not (isinstance(x, Tensor) and isinstance(edge_index, Tensor)):
                return 'the batch has no x / edge_index tensors: training eagerly'
            on_gpu = x.is_cuda
        if not on_gpu:
            return '' if self.capture == 'auto' else 'CUDA graphs need a GPU: training eagerly'
        if self._ddp:
            return ('DistributedDataParallel models train eagerly (their gradient hooks cannot be captured): pass '
                    'model.module and process_group= to capture the step, the all-reduce included')
        if self._cross_node:
            return (f'{self._cross_node} normalises across nodes, so padding nodes would enter its statistics: '
                    'training eagerly')
        if not self.model.training:
            return 'the model is in eval mode: a captured step trains (call model.train())'
        if hetero:
            hops = _hetero_hops(batch)
            if isinstance(hops, str):
                return hops
            self._seed_type, self._label_type = hops.seed_type, hops.label_type
            unpadded = self._input_kinds(batch, (hops.node_types, hops.edge_types))
            return unpadded if isinstance(unpadded, str) else hops
        unpadded = self._input_kinds(batch, ())
        if isinstance(unpadded, str):
            return unpadded
        hops = sampled_hops(edge_index, x.size(0))
        if hops is None:
            return ("the batch carries no per-hop counts (not from pyg_accel's loaders, or a loader with a "
                    'transform=): training eagerly')
        return _Hops(*hops, batch.edge_label_index.size(1) if _is_link(batch) else None)

    def _input_names(self, batch) -> Tuple[str, ...]:
        """The batch attributes the model is called with (default: ``x, edge_index``, or
        in a ``HeteroData`` ``x_dict, edge_index_dict``)."""
        if self.inputs is not None:
            return self.inputs
        return ('x_dict', 'edge_index_dict') if _is_hetero(batch) else ('x', 'edge_index')

    def _batch_inputs(self, batch) -> tuple:
        return tuple(getattr(batch, name) for name in self._input_names(batch))

    def _input_kinds(self, batch, types: tuple) -> Union[str, Dict[str, str]]:
        """Whether each input besides ``x`` / ``edge_index`` (``edge_index_dict``) is a
        node-level or an edge-level attribute (a name's ``<key>_dict`` in a
        ``HeteroData``): ``{key: 'node' | 'edge'}``, or why an input cannot be padded.
        A loader's batches share one schema, so it is worked out once per schema."""
        schema = (self._input_names(batch),) + types
        kinds = self._kinds_by_schema.get(schema)
        if kinds is None:
            kinds = self._kinds_by_schema[schema] = _input_kinds(batch, self._input_names(batch))
        return kinds

    def _targets(self, batch) -> Tensor:
        """The targets: the seeds' ``batch.<target>[:batch.batch_size]`` (default ``y``; in a
        ``HeteroData``, of the node type that has ``batch_size``), or in link prediction
        every label edge's ``batch.<target>`` (default ``edge_label``; in a ``HeteroData``,
        of the edge type that has ``edge_label_index``)."""
        store = batch
        if _is_hetero(batch):
            task = _hetero_task(batch)
            if isinstance(task, str):
                raise ValueError(f'TrainStep: {task}')
            self._seed_type, self._label_type = task
            store = batch[task[0]] if task[0] is not None else batch[task[1]]
            link = task[1] is not None
        else:
            link = _is_link(batch)
        name = self._target_name(link)
        target = getattr(store, name, None)
        if not isinstance(target, Tensor):
            raise ValueError(f"TrainStep: the batch has no '{name}' tensor (target={self.target!r})")
        if link:
            labels = store.edge_label_index.size(1)
            if target.size(0) != labels:
                raise ValueError(f"TrainStep: '{name}' has {target.size(0)} entries for {labels} label edges "
                                 '(edge_label_index)')
            return target
        batch_size = getattr(store, 'batch_size', None)
        if not isinstance(batch_size, int):
            raise ValueError('TrainStep: the batch has no batch_size (the number of seeds, first among its nodes) '
                             "nor edge_label_index: TrainStep trains node-level tasks on NeighborLoader batches and "
                             "link prediction on LinkNeighborLoader batches with neg_sampling='binary' (or none)")
        return target[:batch_size]

    def _target_name(self, link: bool) -> str:
        return self.target or ('edge_label' if link else 'y')

    def _new_buffers(self, bucket, batch, hops: Union[_Hops, _HeteroHops]):
        if isinstance(hops, _HeteroHops):
            kinds = self._input_kinds(batch, (hops.node_types, hops.edge_types))
            node_keys = {t: [k for k, kind in kinds.items() if kind == 'node' and k in batch[t]]
                         for t in hops.node_types}
            edge_keys = {et: [k for k, kind in kinds.items() if kind == 'edge' and k in batch[et]]
                         for et in hops.edge_types}
            link = hops.label_type is not None
            target = self._target_name(link)
            if not link and target not in node_keys[hops.seed_type]:
                node_keys[hops.seed_type].append(target)
            self._targets(batch)  # (its checks, before buffers are made from the batch)
            return PaddedHeteroBatch(bucket[1], hops.node_types, hops.edge_types, hops.links, batch, node_keys,
                                     (hops.label_type if link else hops.seed_type, target), self._input_names(batch),
                                     edge_keys, label_slots=bucket[2] if link else None)
        y = self._targets(batch)
        kinds = self._input_kinds(batch, ())
        return PaddedBatch(bucket[:2], batch.x.size(1), batch.x.dtype, tuple(y.shape[1:]), y.dtype, batch.x.device,
                           label_slots=bucket[2] if len(bucket) == 3 else None,
                           node_attrs={k: batch[k] for k, kind in kinds.items() if kind == 'node'},
                           edge_attrs={k: batch[k] for k, kind in kinds.items() if kind == 'edge'},
                           inputs=self._input_names(batch))

    def _warn(self, reason: str) -> None:
        if reason and reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f'TrainStep: {reason}', stacklevel=3)

    def clear(self) -> None:
        """Releases the captured graphs and the padded buffers (their GPU memory); later
        steps warm up and capture again."""
        self._graphs.clear()
        self._buffers.clear()
        self._serves.clear()
        self._warmed.clear()
        self.optimizer.zero_grad(set_to_none=True)  # (the last graph's gradient buffers)

    @property
    def num_graphs(self) -> int:
        """Captured graphs held (one per batch shape seen twice)."""
        return len(self._graphs)

    def buckets(self) -> List[Shape]:
        """The padded shapes seen so far."""
        return list(self._buffers)
