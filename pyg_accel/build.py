"""``python -m pyg_accel.build``: compile the C++/CUDA ops now and print what was built."""
from __future__ import annotations

import sys


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
