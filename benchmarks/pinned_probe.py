"""Probe: what bounds the GPU's random reads of pinned host memory (UVA)?

Gathers 500k random 512-byte rows from pinned tables of growing size, allocated
(a) by torch's pin_memory() and (b) as 2 MB-aligned anonymous memory advised for
transparent huge pages, then cudaHostRegister'ed. If rows/s falls with the table size
and huge pages lift it, GPU address translation (TLB reach) is the bound.

    python benchmarks/pinned_probe.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_time, print_table  # noqa: E402

from pyg_accel.data.pinned import pinned_empty  # noqa: E402
from pyg_accel.ops import gather  # noqa: E402


def main():
    thp = Path('/sys/kernel/mm/transparent_hugepage/enabled')
    print('transparent_hugepage:', thp.read_text().strip() if thp.exists() else 'absent')
    device = torch.device('cuda')
    rows_out = []
    n_idx, row_bytes = 500_000, 512
    for gb in [0.25, 1, 4, 8]:
        num_rows = int(gb * 1e9) // row_bytes
        index = torch.randint(0, num_rows, (n_idx,), device=device)
        for alloc in ['pin_memory', 'hugepage']:
            if alloc == 'pin_memory':
                table = torch.empty(num_rows, row_bytes // 4).pin_memory()
            else:
                table = pinned_empty((num_rows, row_bytes // 4), torch.float32, huge_pages=True)
            table.view(-1)[:: 1 << 16].fill_(1.0)
            seconds = median_time(lambda: gather(table, index, check_bounds=False), device, reps=10)
            rows_out.append({'table_gb': gb, 'alloc': alloc, 'ms': seconds * 1e3,
                             'Mrows_per_s': n_idx / seconds / 1e6, 'GBps': n_idx * row_bytes / seconds / 1e9})
            del table
    print_table(rows_out, ['table_gb', 'alloc', 'ms', 'Mrows_per_s', 'GBps'], 'pinned-host gather, 512 B rows')


if __name__ == '__main__':
    main()
