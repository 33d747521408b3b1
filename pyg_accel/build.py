"""``python -m pyg_accel.build``: compile the C++/CUDA ops now and print what was built.

:func:`ensure_built` does the same from a script, so that a training loop never pays
for the one-time compilation inside a timed epoch.
"""
from __future__ import annotations

import sys
import time

__all__ = ['ensure_built']


def ensure_built(verbose: bool = True) -> float:
    """Compiles the ops (first use on this machine: a few minutes) or loads them from the
    build cache (well under a second), printing one line that says which and how long
    it took when ``verbose``. Returns the seconds spent. Raises
    :class:`pyg_accel._build.BuildError` when they cannot be built."""
    from . import _build
    if _build.is_loaded():
        return 0.0
    cached = _build.build_config().library_path.exists()
    start = time.perf_counter()
    config = _build.load_library()
    seconds = time.perf_counter() - start
    if verbose:
        what = 'C++ and CUDA' if config.with_cuda else 'C++'
        how = 'loaded from the build cache' if cached else 'compiled (first use; cached for later runs)'
        print(f'pyg_accel: {what} ops {how} in {seconds:.1f} s', flush=True)
    return seconds


def main() -> int:
    from . import _build, info
    try:
        _build.load_library()
    except _build.BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    info(build=False)
    return 0


if __name__ == '__main__':
    sys.exit(main())
