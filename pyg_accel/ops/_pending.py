"""A result still being made: what a started sampling op returns
(:func:`~pyg_accel.ops.sampling.start_neighbor_sample`)."""
from __future__ import annotations

from typing import Callable, Generic, Optional, TypeVar

__all__ = ['Pending']

T = TypeVar('T')
U = TypeVar('U')


class Pending(Generic[T]):
    """A result still being made: :meth:`result` finishes it (e.g. waits for the GPU)
    and returns it, once."""

    __slots__ = ('_finish',)

    def __init__(self, finish: Callable[[], T]) -> None:
        self._finish: Optional[Callable[[], T]] = finish

    def result(self) -> T:
        """The result (finished now if it was not); raises if it was already read."""
        finish, self._finish = self._finish, None
        if finish is None:
            raise RuntimeError('pyg_accel: a pending result can be read once')
        return finish()

    @staticmethod
    def done(value: T) -> 'Pending[T]':
        """A result already made."""
        return Pending(lambda: value)

    def then(self, finish: Callable[[T], U]) -> 'Pending[U]':
        """This result, with ``finish`` applied to it as well (this one is consumed)."""
        first, self._finish = self._finish, None
        if first is None:
            raise RuntimeError('pyg_accel: a pending result can be read once')
        return Pending(lambda: finish(first()))
