"""Gather benchmark: pyg_accel's gather against torch.index_select and PyG's default path.

For each row size (64 B to 4 KB, fp32 rows) over a table of several GB and uniformly
random int64 row ids:

* ours, device:   pyg_accel.ops.gather on a GPU table (unchecked; and with the default
                  bounds check, which adds one aminmax and a host sync);
* index_select:   torch.index_select on the same GPU table;
* ours, pinned:   pyg_accel.ops.gather reading a pinned host table from the GPU (UVA);
* PyG default:    what PyG's loader does with CPU features: CPU index_select, then
                  .to('cuda') of the result.

Each device path is timed two ways: per call (each call starts on an idle GPU, so the
host's launch work for it is in the time) and back to back ("device": eight calls
between two events, each launched while the previous one runs, the time per call as in
a training loop that does not wait on each gather).

Bandwidths count bytes read plus bytes written (2 x gathered bytes) against the
device-to-device copy bandwidth measured in the same run, and the pinned path's gathered
bytes per second against the pinned host-to-device copy.

    python benchmarks/gather.py --out bench-out            # on a GPU
    python benchmarks/gather.py --quick                    # CPU smoke run
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (copy_bandwidth, environment, median_time, pinned_h2d_bandwidth, print_table,  # noqa: E402
                    pyplot, save_figure, save_json, wall_time)

from pyg_accel.ops import gather  # noqa: E402

ROW_BYTES = [64, 128, 256, 400, 512, 1024, 4096]


def bench_row_size(row_bytes: int, args, device: torch.device, pinned: bool) -> dict:
    dim = row_bytes // 4
    num_rows = max(int(args.table_gb * 1e9) // row_bytes, 1)
    host = torch.empty(num_rows, dim).uniform_()
    index_cpu = torch.randint(0, num_rows, (args.num_indices,))
    gathered = args.num_indices * row_bytes
    row = {'row_bytes': row_bytes, 'table_gb': num_rows * row_bytes / 1e9}
    if device.type == 'cpu':
        row['ours_ms'] = median_time(lambda: gather(host, index_cpu, check_bounds=False), device, args.reps) * 1e3
        row['index_select_ms'] = median_time(lambda: torch.index_select(host, 0, index_cpu), device, args.reps) * 1e3
        row['speedup_vs_index_select'] = row['index_select_ms'] / row['ours_ms']
        return row

    table = host.to(device)
    index = index_cpu.to(device)
    assert torch.equal(gather(table, index), torch.index_select(table, 0, index)), 'device gather mismatch'
    ours = median_time(lambda: gather(table, index, check_bounds=False), device, args.reps)
    checked = median_time(lambda: gather(table, index), device, args.reps)
    isel = median_time(lambda: torch.index_select(table, 0, index), device, args.reps)
    # Device time: calls back to back, each launched while the previous one runs.
    ours_dev = median_time(lambda: gather(table, index, check_bounds=False), device, args.reps, back_to_back=8)
    isel_dev = median_time(lambda: torch.index_select(table, 0, index), device, args.reps, back_to_back=8)
    del table
    row.update({'ours_ms': ours * 1e3, 'ours_checked_ms': checked * 1e3, 'index_select_ms': isel * 1e3,
                'ours_rw_GBps': 2 * gathered / ours / 1e9, 'index_select_rw_GBps': 2 * gathered / isel / 1e9,
                'speedup_vs_index_select': isel / ours,
                'ours_device_ms': ours_dev * 1e3, 'index_select_device_ms': isel_dev * 1e3,
                'device_speedup': isel_dev / ours_dev, 'ours_device_rw_GBps': 2 * gathered / ours_dev / 1e9,
                'index_select_device_rw_GBps': 2 * gathered / isel_dev / 1e9})
    if pinned:
        table_pinned = host.pin_memory()
        assert torch.equal(gather(table_pinned, index).cpu(), host[index_cpu]), 'pinned gather mismatch'
        uva = median_time(lambda: gather(table_pinned, index, check_bounds=False), device, args.reps)
        pyg = wall_time(lambda: torch.index_select(host, 0, index_cpu).to(device), reps=args.cpu_reps)
        del table_pinned
        row.update({'pinned_ms': uva * 1e3, 'pinned_GBps': gathered / uva / 1e9,
                    'pyg_default_ms': pyg * 1e3, 'pyg_default_GBps': gathered / pyg / 1e9,
                    'pinned_vs_pyg_default': pyg / uva})
    return row


def plot(rows, path: Path, copy_bw: float) -> None:
    plt = pyplot()
    if plt is None:
        return
    x = [r['row_bytes'] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    series = [('ours_rw_GBps', 'ours, device, per call (read+write)'),
              ('index_select_rw_GBps', 'torch.index_select, per call (read+write)'),
              ('ours_device_rw_GBps', 'ours, device, back to back'),
              ('index_select_device_rw_GBps', 'torch.index_select, back to back'),
              ('pinned_GBps', 'ours, pinned host via UVA (gathered)'),
              ('pyg_default_GBps', 'PyG default: CPU + .to(cuda)')]
    for key, label in series:
        if key in rows[0]:
            ax.plot(x, [r[key] for r in rows], marker='o', label=label)
    ax.axhline(copy_bw / 1e9, color='gray', ls='--', label='device copy (read+write)')
    ax.set(xscale='log', yscale='log', xlabel='row bytes', ylabel='GB/s', title=f'gather, {environment()["gpu"]}')
    ax.set_xticks(x, [str(v) for v in x])
    ax.legend(fontsize=8)
    save_figure(fig, path)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--table-gb', type=float, default=4.0)
    p.add_argument('--num-indices', type=int, default=500_000)
    p.add_argument('--reps', type=int, default=30)
    p.add_argument('--cpu-reps', type=int, default=5)
    p.add_argument('--row-bytes', type=int, nargs='*', default=ROW_BYTES)
    p.add_argument('--no-pinned', action='store_true')
    p.add_argument('--quick', action='store_true', help='small CPU-sized run (smoke test)')
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    if args.quick:
        args.table_gb, args.num_indices, args.reps, args.cpu_reps = 0.02, 20_000, 3, 2
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    env = environment()
    result = {'env': env, 'args': vars(args)}
    if device.type == 'cuda':
        result['copy_rw_GBps'] = copy_bandwidth(device) / 1e9
        if not args.no_pinned:
            result['pinned_h2d_GBps'] = pinned_h2d_bandwidth() / 1e9
        print(f"{env['gpu']}: device copy {result['copy_rw_GBps']:.0f} GB/s (read+write)"
              + (f", pinned H2D {result['pinned_h2d_GBps']:.1f} GB/s" if 'pinned_h2d_GBps' in result else ''))
    rows = []
    for row_bytes in args.row_bytes:
        row = bench_row_size(row_bytes, args, device, pinned=not args.no_pinned)
        if device.type == 'cuda':
            row['ours_pct_of_copy'] = 100 * row['ours_rw_GBps'] / result['copy_rw_GBps']
            row['ours_device_pct_of_copy'] = 100 * row['ours_device_rw_GBps'] / result['copy_rw_GBps']
        rows.append(row)
        torch.cuda.empty_cache() if device.type == 'cuda' else None
    result['rows'] = rows
    if device.type == 'cuda':
        cols = ['row_bytes', 'ours_ms', 'ours_checked_ms', 'index_select_ms', 'speedup_vs_index_select',
                'ours_rw_GBps', 'ours_pct_of_copy', 'ours_device_ms', 'index_select_device_ms', 'device_speedup',
                'ours_device_pct_of_copy']
        if not args.no_pinned:
            cols += ['pinned_ms', 'pinned_GBps', 'pyg_default_ms', 'pinned_vs_pyg_default']
    else:
        cols = ['row_bytes', 'ours_ms', 'index_select_ms', 'speedup_vs_index_select']
    result['table'] = print_table(rows, cols, f'gather of {args.num_indices:,} random rows, '
                                              f'{args.table_gb:g} GB tables, medians of {args.reps}')
    out = Path(args.out)
    save_json(out / 'gather.json', result)
    if device.type == 'cuda':
        plot(rows, out / 'gather.png', result['copy_rw_GBps'] * 1e9)
    return result


if __name__ == '__main__':
    main()
