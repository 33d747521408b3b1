"""Times the PyTorch primitives the layers lean on (gathers, sorts, histograms) on a
products-size edge list, to decide which to replace. Prints one line per primitive.

    python scripts/primitive_costs.py [--edges 123718280] [--nodes 2449029]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))
from common import median_time  # noqa: E402

from pyg_accel.ops import gather  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--edges', type=int, default=123_718_280)
    p.add_argument('--nodes', type=int, default=2_449_029)
    args = p.parse_args()
    E, N, dev = args.edges, args.nodes, torch.device('cuda')
    dst = torch.randint(0, N, (E,), device=dev).sort().values
    src = torch.randint(0, N, (E,), device=dev)
    dst32, src32 = dst.int(), src.int()
    perm = torch.randperm(E, device=dev)
    a8 = torch.randn(N, 8, device=dev)
    e8 = torch.randn(E, 8, device=dev)
    cases = {
        'index_select [N,8] by int32 dst': lambda: a8.index_select(0, dst32),
        'index_select [N,8] by int64 dst': lambda: a8.index_select(0, dst),
        'index_select [N,8] by int32 src': lambda: a8.index_select(0, src32),
        'a8[src] (advanced indexing)': lambda: a8[src],
        'pyg_accel gather [N,8] by int32 src': lambda: gather(a8, src32, check_bounds=False),
        'e8[perm] (E x 8 by a permutation)': lambda: e8[perm],
        'pyg_accel gather e8 by perm': lambda: gather(e8, perm, check_bounds=False),
        'src64[perm]': lambda: src[perm],
        'src32[perm]': lambda: src32[perm],
        'src32.index_select(0, perm)': lambda: src32.index_select(0, perm),
        'sort int32 keys (stable)': lambda: torch.sort(src32, stable=True),
        'sort int64 keys (stable)': lambda: torch.sort(src, stable=True),
        'bincount int32 sorted': lambda: torch.bincount(dst32, minlength=N),
        'bincount int64 sorted': lambda: torch.bincount(dst, minlength=N),
        'searchsorted ptr int32': lambda: torch.searchsorted(dst32, torch.arange(N + 1, device=dev, dtype=torch.int32)),
        'index_add_ [E,8] into [N,8] by int32 dst': lambda: torch.zeros_like(a8).index_add_(0, dst32, e8),
        'index_add_ [E,8] into [N,8] by int32 src': lambda: torch.zeros_like(a8).index_add_(0, src32, e8),
        'elementwise e8 * 2 (1 GB + 1 GB... )': lambda: e8 * 2,
    }
    for name, fn in cases.items():
        print(f'{name:45s} {median_time(fn, dev, reps=5) * 1e3:8.3f} ms', flush=True)


if __name__ == '__main__':
    main()
