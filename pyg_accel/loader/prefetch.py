"""Pipelined loading: batch *i + 1* is sampled and gathered on a side CUDA stream while
the caller's stream runs batch *i*.

The loop below, with GPU-resident stores, overlaps the sampler's and the feature
gather's kernels (side stream) with the model's (current stream)::

    for batch in PrefetchLoader(loader):      # or pyg_accel.loader.NeighborLoader(..., pipeline=True)
        loss = F.cross_entropy(model(batch.x, batch.edge_index)[:batch.batch_size], ...)
        loss.backward(); opt.step()           # keep host syncs (loss.item()) out of the loop

Ordering and lifetime:

* every batch is produced inside ``torch.cuda.stream(side)``; an event recorded after it
  is waited on by the consumer's stream (on the GPU: the host never blocks on it);
* every CUDA tensor of a batch is marked ``record_stream(consumer)``, so the caching
  allocator does not hand its memory to the side stream before the consumer's work on it
  has run;
* the side stream first waits for the consumer's stream as it was when iteration began,
  so batches see the graph and features as the caller left them before the loop. (It
  does not wait again per batch: that would serialise sampling behind training. A
  store changed inside the loop may reach the next batch unchanged.)

The host still waits for each batch's own sampling (pyg_accel's sampler reads its per-hop
counts once per batch), but that wait runs while the GPU works through the previous
batch's training kernels; the side stream has high priority, so the sampler's kernels
are scheduled ahead of the training blocks already queued and the wait stays short.
With CPU batches (or no GPU) iteration is plain.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, Optional, Union

import torch

__all__ = ['PrefetchLoader', 'prefetch_batches']


def _record_stream(batch: Any, stream: torch.cuda.Stream) -> Any:
    """Marks every CUDA tensor reachable in ``batch`` (Data / HeteroData / tensors /
    tuples / lists / dicts) as used on ``stream``. (Leaves are handled in the loop, not
    by a call each: a heterogeneous batch holds dozens of tensors and per-hop counts.)"""
    if isinstance(batch, torch.Tensor):
        if batch.is_cuda:
            batch.record_stream(stream)
        return batch
    if isinstance(batch, (list, tuple)):
        items = batch
    elif isinstance(batch, dict):
        items = batch.values()
    elif hasattr(batch, 'stores'):  # torch_geometric Data / HeteroData
        items = [item for store in batch.stores for item in store.values()]
    else:
        return batch
    for item in items:
        if isinstance(item, torch.Tensor):
            if item.is_cuda:
                item.record_stream(stream)
        elif isinstance(item, (list, tuple, dict)) or hasattr(item, 'stores'):
            _record_stream(item, stream)
    return batch


def _side_priority() -> int:
    """The side stream's priority: -1 (high), or ``PYG_ACCEL_PREFETCH_PRIORITY`` (0 or -1)."""
    value = os.environ.get('PYG_ACCEL_PREFETCH_PRIORITY', '-1')
    if value not in ('0', '-1'):
        raise ValueError(f"PYG_ACCEL_PREFETCH_PRIORITY must be '0' (normal) or '-1' (high), got {value!r}")
    return int(value)


def prefetch_batches(batches: Iterable[Any], device: Union[torch.device, str, None] = None) -> Iterator[Any]:
    """Yields the items of ``batches`` one ahead, each produced on a side stream of
    ``device`` (default: the current CUDA device); plain iteration without CUDA."""
    if not torch.cuda.is_available() or (device is not None and torch.device(device).type != 'cuda'):
        yield from batches
        return
    device = torch.device(device) if device is not None else torch.device('cuda', torch.cuda.current_device())
    # High priority: the GPU schedules the sampler's small kernels ahead of the blocks of
    # the training step already queued, so the host's wait for the per-hop counts (and
    # with it the enqueueing of the next step) does not sit behind the whole step.
    # (PYG_ACCEL_PREFETCH_PRIORITY=0 gives the side stream normal priority, to measure
    # whether a gather reading peer GPUs at high priority starves the step.)
    side = torch.cuda.Stream(device, priority=_side_priority())
    side.wait_stream(torch.cuda.current_stream(device))  # what the caller prepared before the loop
    iterator = iter(batches)

    def produce():
        with torch.cuda.stream(side):
            try:
                batch = next(iterator)
            except StopIteration:
                return None
        ready = torch.cuda.Event()
        ready.record(side)
        return batch, ready

    pending = produce()
    while pending is not None:
        batch, ready = pending
        consumer = torch.cuda.current_stream(device)
        consumer.wait_event(ready)
        _record_stream(batch, consumer)
        del pending
        yield batch  # resumed once the caller has enqueued its work on this batch
        del batch
        pending = produce()


class PrefetchLoader:
    """Wraps a loader (PyG's ``NeighborLoader`` / ``LinkNeighborLoader`` / ``NodeLoader``
    over pyg_accel's GPU stores, or any iterable of GPU batches) so that the next batch
    is produced on a side CUDA stream while the current one trains.

    Args:
        loader: the iterable of batches.
        enabled: ``False`` iterates plainly (the same batches, no side stream).
        device: the CUDA device the batches live on (default: the current device).
    """

    def __init__(self, loader: Iterable[Any], enabled: bool = True, device: Optional[Union[torch.device, str]] = None):
        self.loader, self.enabled, self.device = loader, enabled, device

    def __iter__(self) -> Iterator[Any]:
        return prefetch_batches(self.loader, self.device) if self.enabled else iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:  # batch_size, dataset, … of the wrapped loader
        if name == 'loader':
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __repr__(self) -> str:
        return f'PrefetchLoader({self.loader!r}, enabled={self.enabled})'
