"""Pinned-host gather bandwidth in one quick pass (500k random rows of 400 and 512 B from a
4 GB pinned table, medians of 10), for checking a gather change without the full
benchmark (``benchmarks/gather.py`` is the reference).

    python scripts/pinned_gather_check.py
"""
import statistics

import torch

from pyg_accel.ops import gather


def main():
    floats = 4 * 2**30 // 4
    storage = torch.empty(floats, dtype=torch.float32).pin_memory()
    for row_bytes in (400, 512):
        width = row_bytes // 4
        table = storage[: floats // width * width].view(-1, width)
        index = torch.randint(0, table.size(0), (500_000,), device='cuda')
        times = []
        for _ in range(12):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            gather(table, index, check_bounds=False)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        t = statistics.median(times[2:])
        print(f'pinned gather, {row_bytes} B rows: {t * 1e3:.2f} ms, {index.numel() * row_bytes / t / 1e9:.1f} GB/s')


if __name__ == '__main__':
    main()
