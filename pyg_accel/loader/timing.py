"""Where a training epoch's time goes: sampling, feature gathering and compute, timed
without a host synchronisation per batch.

Each stage is timed on its own timeline: the host's wall clock for the work the CPU does
(stock PyG's sampler, Python bookkeeping), and CUDA events on the stream the stage runs
on for GPU work (pyg_accel's sampler and gather, which run on the prefetch side stream
when pipelined, and the training kernels). A stage counts the longer of the two. With
pipelining the stages overlap, so their sum exceeds the epoch's wall time; without it
they add up to roughly the epoch. The events are read once, in :meth:`StageTimer.summary`.

    timer = StageTimer(device)
    loader = timer.instrument(NeighborLoader(...))   # times sampling and gathering
    for batch in loader:
        with timer.stage('compute'):
            ...                                      # forward, backward, step
    print(timer.summary())   # {'sampling': s, 'gathering': s, 'compute': s}
"""
from __future__ import annotations

import contextlib
import time
import weakref
from typing import Dict, Iterator, List, Optional, Tuple, Union

import torch

__all__ = ['StageTimer']


def _unbound(method, loader):
    """``method``, called through a weak reference when it is bound to ``loader``: the
    timed wrappers are stored on the loader, and a strong reference back to it would
    keep a dropped loader (and its stores' memory) alive until a garbage collection."""
    if getattr(method, '__self__', None) is not loader:
        return method
    func, owner = method.__func__, weakref.ref(loader)
    return lambda *args: func(owner(), *args)


class StageTimer:
    """Accumulates the time of named stages until :meth:`summary`.

    Args:
        device: the device the GPU stages run on; a CPU device (or ``None``) times with
            the host clock only.
    """

    def __init__(self, device: Union[torch.device, str, None] = None):
        self.cuda = device is not None and torch.device(device).type == 'cuda' and torch.cuda.is_available()
        self._spans: List[Tuple[str, float, Optional[torch.cuda.Event], Optional[torch.cuda.Event]]] = []

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Times the enclosed work as stage ``name`` (on the current CUDA stream)."""
        start = end = None
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        begin = time.perf_counter()
        try:
            yield
        finally:
            host = time.perf_counter() - begin
            if self.cuda:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
            self._spans.append((name, host, start, end))

    def instrument(self, loader):
        """Times ``loader``'s sampling (its ``collate_fn``) and gathering (its
        ``filter_fn``: features and the batch object) as stages. Works on PyG's
        ``NodeLoader`` / ``LinkLoader`` family, pyg_accel's loaders included (batches
        made without PyG's layers, :mod:`pyg_accel.loader.store_batches`, time the same
        two stages), without DataLoader workers (their stages run in other processes);
        returns ``loader``."""
        if getattr(loader, 'filter_fn', None) is None:
            raise TypeError(f'StageTimer.instrument: {type(loader).__name__} has no filter_fn; '
                            f'expected a PyG NodeLoader / LinkLoader (NeighborLoader, LinkNeighborLoader, ...)')
        if getattr(loader, 'num_workers', 0) > 0:
            raise ValueError(f'StageTimer.instrument: the loader samples in {loader.num_workers} DataLoader worker '
                             'processes, whose stages this process cannot time; instrument a loader with '
                             'num_workers=0 (time the whole epoch otherwise)')
        collate, filter_fn = _unbound(loader.collate_fn, loader), _unbound(loader.filter_fn, loader)

        def timed_collate(index):
            with self.stage('sampling'):
                return collate(index)

        def timed_filter(out):
            with self.stage('gathering'):
                return filter_fn(out)

        timed_collate.stage_of = timed_filter.stage_of = self  # (not a hook that needs PyG's layers)
        loader.collate_fn, loader.filter_fn = timed_collate, timed_filter
        loader.stage_timer = self
        return loader

    def summary(self) -> Dict[str, float]:
        """Seconds per stage since the last summary (one synchronisation), then resets."""
        if self.cuda:
            torch.cuda.synchronize()
        seconds: Dict[str, float] = {}
        for name, host, start, end in self._spans:
            gpu = start.elapsed_time(end) / 1e3 if start is not None else 0.0
            seconds[name] = seconds.get(name, 0.0) + max(host, gpu)
        self._spans.clear()
        return seconds
