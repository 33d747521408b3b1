"""A whole mini-batch training step (forward, loss, backward, optimizer step) replayed
as a CUDA graph: one launch instead of hundreds, so the GPU no longer waits for Python.

    step = TrainStep(model, optimizer)              # cross-entropy on the seeds' batch.y
    for batch in loader:                            # pyg_accel's NeighborLoader
        loss = step(batch)                          # instead of zero_grad / forward / loss / backward / step

Each batch is padded to one of a few shapes (:mod:`pyg_accel.training.padding`); the first
batch of a shape trains eagerly on the padded buffers (the warm-up a capture needs), the
second is captured and every later one replays that graph. What the step computes equals
the eager step's on the unpadded batch: padding nodes and edges feed only padding nodes,
padding seeds are masked out of the loss, and dropout draws fresh masks on every replay
(PyTorch's graph-safe RNG).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Callable, Dict, List, Optional, Set, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from ..nn.conv._self_loops import sync_free
from ..ops.hops import Hops, sampled_hops
from .padding import Bucket, PaddedBatch, bucket_of

__all__ = ['TrainStep']

LossFn = Callable[[Tensor, Tensor], Tensor]


def _cross_entropy(out: Tensor, target: Tensor) -> Tensor:
    return F.cross_entropy(out, target, reduction='none')


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
            cross-entropy, ``reduction='none'``); the step averages them over real seeds.
        target: the batch attribute holding the targets (the seeds' rows are used).
        capture: ``'auto'`` (default): CUDA graphs on a GPU, eager elsewhere; ``False``:
            always eager (the same step, for comparison and debugging).
        amp_dtype: run the forward and loss under ``torch.autocast`` in this dtype.
        steps_per_octave: padding grid (16: at most 1/16 of each count is padding).
        max_graphs: captured shapes kept; batches of further shapes train eagerly.

    Eager, with a warning saying why, where a step cannot be captured: batches without
    per-hop counts (not from pyg_accel's loaders, or a ``transform=``), heterogeneous
    batches, ``DistributedDataParallel`` models, a model in eval mode, a step with an op
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
                 target: str = 'y', capture='auto', amp_dtype: Optional[torch.dtype] = None,
                 steps_per_octave: int = 16, max_graphs: int = 16):
        if capture not in ('auto', True, False):
            raise ValueError(f"TrainStep: capture must be 'auto', True or False, got {capture!r}")
        self.model, self.optimizer = model, optimizer
        self.loss_fn = loss_fn or _cross_entropy
        self.target, self.capture, self.amp_dtype = target, capture, amp_dtype
        self.steps_per_octave, self.max_graphs = steps_per_octave, max_graphs
        self._buffers: Dict[Bucket, PaddedBatch] = {}
        self._warmed: Set[Bucket] = set()  # shapes whose eager warm-up step has run
        self._graphs: Dict[Bucket, Tuple[torch.cuda.CUDAGraph, Tensor]] = {}  # shape -> (graph, its loss)
        self._uncapturable: Optional[str] = None  # why the step cannot be captured, once found
        self._state_key = None
        self._warned = set()
        self.stats = {'replayed': 0, 'captured': 0, 'eager': 0}

    # -- the step -------------------------------------------------------------------
    def __call__(self, batch) -> Tensor:
        hops = self._hops(batch)
        if isinstance(hops, str) or self._uncapturable is not None:
            self._warn(hops if isinstance(hops, str) else '')
            return self._eager_step(batch.x, batch.edge_index, self._targets(batch), None)
        return self._padded_step(batch, *hops)

    def _padded_step(self, batch, nodes: List[int], edges: List[int]) -> Tensor:
        bucket = bucket_of(nodes, edges, self.steps_per_octave)
        self._check_state()
        padded = self._buffers.get(bucket)
        if padded is None:
            if len(self._buffers) >= self.max_graphs:  # (buffers and graphs are kept per shape: memory)
                self._warn(f'more than max_graphs={self.max_graphs} batch shapes: further shapes train eagerly')
                return self._eager_step(batch.x, batch.edge_index, self._targets(batch), None)
            padded = self._buffers[bucket] = self._new_buffers(bucket, batch)
        padded.load(batch.x, batch.edge_index, self._targets(batch), nodes, edges)
        graph = self._graphs.get(bucket)
        if graph is not None:
            graph[0].replay()
            self.stats['replayed'] += 1
            return graph[1].clone()
        if self._uncapturable is None and bucket in self._warmed:
            return self._capture(bucket, padded)
        if self._uncapturable is None:  # a shape's first batch: the warm-up
            self._warmed.add(bucket)
            return self._warm_up(padded)
        return self._eager_step(padded.x, padded.edge_index, padded.y, padded)

    def _loss(self, x: Tensor, edge_index: Tensor, y: Tensor, padded: Optional[PaddedBatch]) -> Tensor:
        # padded (capturable) steps handle self-loops without a host sync (nn/conv/_self_loops.py)
        amp = torch.autocast(x.device.type, dtype=self.amp_dtype or torch.bfloat16, enabled=self.amp_dtype is not None)
        with sync_free() if padded is not None else contextlib.nullcontext(), amp:
            out = self.model(x, edge_index)[:y.size(0)]
            losses = self.loss_fn(out, y)
        if losses.dim() != 1 or losses.size(0) != y.size(0):
            raise ValueError(f'TrainStep: loss_fn must return one loss per seed ([{y.size(0)}]), got '
                             f'{tuple(losses.shape)}')
        if padded is None:
            return losses.float().mean()
        losses = torch.where(padded.seed_mask(), losses.float(), 0.0)  # (where, not *: a NaN stays out)
        return losses.sum() / padded.num_seeds.clamp(min=1)

    def _eager_step(self, x, edge_index, y, padded) -> Tensor:
        self.stats['eager'] += 1
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(x, edge_index, y, padded)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    # -- capture --------------------------------------------------------------------
    def _warm_up(self, padded: PaddedBatch) -> Tensor:
        """An eager step on a side stream, which also trains on its batch: the warm-up a
        capture needs (lazy initialisation, cuBLAS workspaces and autograd's stream
        bookkeeping happen outside the graph). It runs with CUDA's sync debug mode set to
        raise, so that a step that would synchronise with the host (which no capture can
        hold) is found here, trains eagerly, and is never captured."""
        self._make_capturable()
        current = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        side.wait_stream(current)
        mode = torch.cuda.get_sync_debug_mode()
        try:
            with warnings.catch_warnings():  # (torch says the mode is a prototype, every time it is set)
                warnings.filterwarnings('ignore', message='Synchronization debug mode')
                torch.cuda.set_sync_debug_mode('error')
            with torch.cuda.stream(side):
                loss = self._eager_step(padded.x, padded.edge_index, padded.y, padded)
        except RuntimeError as error:
            if 'synchroniz' not in str(error):
                raise
            self._give_up_capture(f'an op synchronises with the host ({str(error).splitlines()[0]})')
            torch.cuda.set_sync_debug_mode(mode)
            current.wait_stream(side)
            return self._eager_step(padded.x, padded.edge_index, padded.y, padded)
        finally:
            torch.cuda.set_sync_debug_mode(mode)
        current.wait_stream(side)
        loss.record_stream(current)
        return loss

    def _give_up_capture(self, reason: str) -> None:
        """Trains eagerly from now on, saying why once."""
        self._uncapturable = reason
        self.optimizer.zero_grad(set_to_none=True)
        self._warn(f'the step could not be captured as a CUDA graph: {reason}; training eagerly')

    def _capture(self, bucket: Bucket, padded: PaddedBatch) -> Tensor:
        """Captures the step on ``padded`` (recording only), then replays it once to run it."""
        graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        try:
            with torch.cuda.graph(graph):
                loss = self._loss(padded.x, padded.edge_index, padded.y, padded)
                loss.backward()
                self.optimizer.step()
        except Exception as error:  # noqa: BLE001 (any failure to capture: train eagerly, say why)
            self._give_up_capture(f'{type(error).__name__}: {error}'.splitlines()[0])
            torch.cuda.synchronize()
            return self._eager_step(padded.x, padded.edge_index, padded.y, padded)
        self._graphs[bucket] = (graph, loss.detach())
        self.stats['captured'] += 1
        graph.replay()
        return loss.detach().clone()

    def _make_capturable(self) -> None:
        for group in self.optimizer.param_groups:
            if 'capturable' in group and not group['capturable']:
                group['capturable'] = True
                for p in group['params']:
                    step = self.optimizer.state.get(p, {}).get('step')
                    if isinstance(step, Tensor) and step.device != p.device:
                        self.optimizer.state[p]['step'] = step.to(p.device)
        self._state_key = self._current_state_key()

    def _current_state_key(self) -> tuple:
        """What a captured step baked in: the parameters' storage and the optimizer's
        scalar hyperparameters (a tensor lr is read on every replay: its identity only)."""
        params = tuple(p.data_ptr() for p in self.model.parameters())
        hyper = tuple(tuple((k, v if not isinstance(v, Tensor) else id(v)) for k, v in sorted(group.items())
                            if k != 'params') for group in self.optimizer.param_groups)
        return params, hyper

    def _check_state(self) -> None:
        if self._graphs and self._current_state_key() != self._state_key:
            self._graphs.clear()  # stale: recapture (each bucket's warm-up is done)
            self._warn('the optimizer hyperparameters or the parameters changed: the step is captured again '
                       '(a tensor lr changes without recapturing)')

    # -- batches ----------------------------------------------------------------------
    def _hops(self, batch) -> Union[str, Hops]:
        """``batch``'s per-hop counts, or why it trains eagerly (``''``: by choice, nothing
        to say)."""
        x, edge_index = getattr(batch, 'x', None), getattr(batch, 'edge_index', None)
        if self.capture is False:
            return ''
        if not (isinstance(x, Tensor) and isinstance(edge_index, Tensor)):
            return 'the batch has no x / edge_index tensors (heterogeneous batches train eagerly)'
        if not x.is_cuda:
            return '' if self.capture == 'auto' else 'CUDA graphs need a GPU: training eagerly'
        if isinstance(self.model, torch.nn.parallel.DistributedDataParallel):
            return 'DistributedDataParallel models train eagerly (their gradient all-reduce is not captured)'
        if not self.model.training:
            return 'the model is in eval mode: a captured step trains (call model.train())'
        hops = sampled_hops(edge_index, x.size(0))
        if hops is None:
            return ("the batch carries no per-hop counts (not from pyg_accel's loaders, or a loader with a "
                    'transform=): training eagerly')
        return hops

    def _targets(self, batch) -> Tensor:
        """The seeds' targets: ``batch.<target>[:batch.batch_size]``."""
        target = getattr(batch, self.target, None)
        if not isinstance(target, Tensor):
            raise ValueError(f"TrainStep: the batch has no '{self.target}' tensor (target={self.target!r})")
        batch_size = getattr(batch, 'batch_size', None)
        if not isinstance(batch_size, int):
            raise ValueError('TrainStep: the batch has no batch_size (the number of seeds, first among its nodes): '
                             'TrainStep trains node-level tasks on NeighborLoader batches')
        return target[:batch_size]

    def _new_buffers(self, bucket: Bucket, batch) -> PaddedBatch:
        y = self._targets(batch)
        return PaddedBatch(bucket, batch.x.size(1), batch.x.dtype, tuple(y.shape[1:]), y.dtype, batch.x.device)

    def _warn(self, reason: str) -> None:
        if reason and reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f'TrainStep: {reason}', stacklevel=3)

    def clear(self) -> None:
        """Releases the captured graphs and the padded buffers (their GPU memory); later
        steps warm up and capture again."""
        self._graphs.clear()
        self._buffers.clear()
        self._warmed.clear()
        self.optimizer.zero_grad(set_to_none=True)  # (the last graph's gradient buffers)

    @property
    def num_graphs(self) -> int:
        """Captured graphs held (one per batch shape seen twice)."""
        return len(self._graphs)

    def buckets(self) -> List[Bucket]:
        """The padded shapes seen so far."""
        return list(self._buffers)
