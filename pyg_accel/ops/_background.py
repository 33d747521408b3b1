"""Sampling ops run on a background thread, so that the calling thread goes on while the
op waits for the GPU.

A CUDA sampling op enqueues its kernels and then waits, in C++ and without holding the
GIL, for the per-hop counts that size its outputs. Started through :func:`start` with
``background=True``, the op runs on this module's one worker thread, on the CUDA stream
that was current in the caller when it was started, in the order started; the caller
gets a :class:`Pending` at once and reads the result later (a loader: after building the
previous batch). Everything that draws random numbers or checks arguments stays on the
caller's thread; the worker only calls the op.

:func:`wait_for_background_ops` returns once every op started so far has returned. A
CUDA graph captured in ``'global'`` mode (``torch.cuda.graph``'s default) fails if
another thread makes certain CUDA calls meanwhile, so
:class:`~pyg_accel.training.TrainStep` calls it before each capture, and so should a loop
that captures its own graphs that way while a pyg_accel loader samples ahead
(``torch.compile``'s CUDA graphs capture in ``'thread_local'`` mode and need nothing).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Generic, Optional, Sequence, TypeVar

import torch

__all__ = ['Pending', 'start', 'wait_for_background_ops']

T = TypeVar('T')
U = TypeVar('U')

_executor: Optional[ThreadPoolExecutor] = None
_executor_pid = 0  # (a forked child has the parent's executor but not its thread: it makes its own)
_executor_lock = threading.Lock()


class Pending(Generic[T]):
    """An op's call, started, and how to finish its raw result: :meth:`result` waits for
    the call (re-raising its error) and returns the finished value. Read it once."""

    __slots__ = ('_future', '_raw', '_finish')

    def __init__(self, future: Optional[Future], raw: Any, finish: Callable[[Any], T]) -> None:
        self._future, self._raw, self._finish = future, raw, finish

    def result(self) -> T:
        raw = self._future.result() if self._future is not None else self._raw
        return self._finish(raw)

    @staticmethod
    def done(value: T) -> 'Pending[T]':
        """A call already made: ``value`` is its result."""
        return Pending(None, value, _same)

    def then(self, finish: Callable[[T], U]) -> 'Pending[U]':
        """This call, with ``finish`` applied to its finished value as well."""
        first = self._finish
        return Pending(self._future, self._raw, lambda raw: finish(first(raw)))


def start(op: Callable[..., Any], args: Sequence[Any], finish: Callable[[Any], T], background: bool,
          stream: Optional[torch.cuda.Stream] = None) -> Pending[T]:
    """``op(*args)``, now on this thread (``background=False``) or on the worker thread on
    ``stream`` (the caller's current CUDA stream, which the worker makes its own)."""
    if not background:
        return Pending(None, op(*args), finish)
    return Pending(_worker().submit(_call_on, stream, op, args), None, finish)


def wait_for_background_ops() -> None:
    """Returns once every op started in the background so far has returned and the
    worker has let go of its arguments (their errors are left to their :class:`Pending`):
    it runs an empty call after them and waits for that."""
    executor = _executor
    if executor is not None and _executor_pid == os.getpid():
        executor.submit(_same, None).result()


def _same(value: Any) -> Any:
    return value


def _call_on(stream: Optional[torch.cuda.Stream], op: Callable[..., Any], args: Sequence[Any]) -> Any:
    if stream is not None:
        torch.cuda.set_stream(stream)  # (the worker's own current stream: thread-local)
    return op(*args)


def _worker() -> ThreadPoolExecutor:
    global _executor, _executor_pid
    if _executor is None or _executor_pid != os.getpid():
        with _executor_lock:
            if _executor is None or _executor_pid != os.getpid():
                _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix='pyg_accel_sampling')
                _executor_pid = os.getpid()
    return _executor
