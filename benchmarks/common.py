"""Shared helpers for the side-by-side benchmarks: timing, ceilings, tables, JSON, plots."""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

# One definition of a tuned stock-PyG loader, shared with the examples' --baseline pyg.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'examples'))
from results import default_workers, tuned_loader_options  # noqa: E402,F401

def median_time(fn: Callable[[], object], device: torch.device, reps: int = 20, warmup: int = 3,
                back_to_back: int = 1) -> float:
    """Median seconds of ``fn()``: CUDA events on a GPU, synchronised wall clock else.

    On a GPU each rep starts on an idle device, so the host's launch work for the first
    call is in the time. ``back_to_back=k`` times k calls between the two events and
    divides by k: from the second call on the host enqueues while the GPU works, so this
    is the device time per call, as in a loop that does not wait for each call."""
    for _ in range(warmup):
        fn()
    times = []
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(back_to_back):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / back_to_back)
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def sync(device: torch.device) -> None:
    """Waits for ``device``'s queued work (nothing to wait for on the CPU)."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def run_batches(step, loader, device, limit: int, host: Optional[List[float]] = None) -> int:
    """Trains on up to ``limit`` batches with no host sync; returns how many ran
    (``host``: collects the seconds spent inside each step call)."""
    total, count = torch.zeros((), device=device), 0
    for batch in loader:
        t0 = time.perf_counter()
        total += step(batch)
        if host is not None:
            host.append(time.perf_counter() - t0)
        count += 1
        if count >= limit:
            break
    sync(device)
    return count


def timed_pass(step, loader, device, on_batch: Optional[Callable[[], None]] = None
               ) -> Tuple[float, List[float], List[float]]:
    """One pass of ``step`` over ``loader``: its wall seconds (the device synchronised at
    both ends) and, per batch, the host seconds inside the call for the next batch and
    inside the step call. ``on_batch`` is called as each batch arrives, before its step."""
    loading: List[float] = []
    stepping: List[float] = []
    sync(device)
    start = time.perf_counter()
    batches = iter(loader)
    while True:
        asked = time.perf_counter()
        batch = next(batches, None)
        if batch is None:
            break
        if on_batch is not None:
            on_batch()
        called = time.perf_counter()
        step(batch)
        stepping.append(time.perf_counter() - called)
        loading.append(called - asked)
    sync(device)
    return time.perf_counter() - start, loading, stepping


def gpu_time(step, loader, device, batches: int) -> float:
    """The GPU's ms per batch: the union of its kernel and copy intervals (all streams)
    over a profiled window of ``batches`` batches."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    run_batches(step, loader, device, 2)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        count = run_batches(step, loader, device, batches)
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start)
    busy, cur_start, cur_end = 0.0, None, None
    for s, e in spans:
        if cur_end is None or s > cur_end:
            busy += 0.0 if cur_end is None else cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    busy += 0.0 if cur_end is None else cur_end - cur_start
    return busy / count / 1e3


def wall_time(fn: Callable[[], object], reps: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds, synchronising every GPU before and after each run
    (for paths that mix host and device work)."""
    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_bandwidth(device: torch.device, num_bytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus written."""
    src = torch.empty(num_bytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    seconds = median_time(lambda: dst.copy_(src), device)
    del src, dst
    return 2 * num_bytes / seconds


def gather_floor_bytes(num_edges: int, num_nodes: int, width: int) -> int:
    """The gather-model byte floor of an fp32 SpMM or SDDMM over an int32 COO
    (each byte moved once): per edge its two 4-byte ids, a 4-byte weight (SpMM) or
    output (SDDMM) and one ``width``-wide fp32 row gathered; plus the node-sized output
    written once (SpMM) or ``a[dst]`` read once per destination (SDDMM, whose rows repeat
    along the sorted edges)."""
    return num_edges * (12 + 4 * width) + num_nodes * 4 * width


def pinned_h2d_bandwidth(num_bytes: int = 1 << 30) -> float:
    """Pinned host-to-device copy bandwidth in bytes/s."""
    src = torch.empty(num_bytes // 4, dtype=torch.float32).pin_memory()
    dst = torch.empty(num_bytes // 4, dtype=torch.float32, device='cuda')
    seconds = median_time(lambda: dst.copy_(src, non_blocking=True), torch.device('cuda'))
    return num_bytes / seconds


def stock_pyg_loader(data, num_workers: int, **kwargs):
    """Stock PyG's ``NeighborLoader`` on the CPU ``data`` (its CPU sampler needs pyg-lib
    or torch-sparse), tuned as the examples' ``--baseline pyg`` tunes it
    (:func:`results.tuned_loader_options`): ``num_workers`` processes sampling and
    gathering in parallel, kept across epochs, each batch in pinned memory for the copy
    to the GPU. ``num_workers=0`` is the untuned default (sampling and gathering in the
    training loop's thread)."""
    from torch_geometric.loader import NeighborLoader
    return NeighborLoader(data, **tuned_loader_options(num_workers), **kwargs)


def environment() -> Dict[str, object]:
    return {
        'date': datetime.now(timezone.utc).isoformat(timespec='seconds'),
        'gpu': torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        'torch': torch.__version__,
        'cuda': torch.version.cuda,
        'cpu_threads': torch.get_num_threads(),
        'cpu_cores': len(os.sched_getaffinity(0)),
        'host': platform.node(),
    }


def print_table(rows: List[Dict[str, object]], columns: Sequence[str], title: str) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f'{v:.3g}' if abs(v) < 1000 else f'{v:,.0f}'
        return str(v)
    cells = [[fmt(r.get(c, '')) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = [title, '| ' + ' | '.join(c.ljust(w) for c, w in zip(columns, widths)) + ' |',
             '|' + '|'.join('-' * (w + 2) for w in widths) + '|']
    lines += ['| ' + ' | '.join(v.rjust(w) for v, w in zip(row, widths)) + ' |' for row in cells]
    text = '\n'.join(lines)
    print(text, flush=True)
    return text


def save_json(path: Path, payload: Dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    print(f'wrote {path}')


def add_graph_arguments(parser, device: bool = True) -> None:
    """The options every graph benchmark takes: ``--preset`` and ``--scale`` of the
    synthetic graph, and (with ``device``) ``--device``."""
    parser.add_argument('--preset', default='products')
    parser.add_argument('--scale', type=float, default=1.0)
    if device:
        parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')


def pyplot():
    """``matplotlib.pyplot`` drawing to files (Agg), or ``None`` when matplotlib is not
    installed (the benchmark then skips its plot)."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_figure(fig, path) -> None:
    """Lays out ``fig``, writes it to ``path`` (PNG, 120 dpi; its folder made if need be),
    closes it and says so."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)
    print(f'wrote {path}')


def plot_times(rows, methods, path, title: str, ticks, xlabel: str, labels: Optional[Dict[str, str]] = None) -> None:
    """Bars of ``row['<method> ms']`` per row (log scale), one colour per method timed in
    the first row, ``ticks`` under the rows; nothing without matplotlib."""
    plt = pyplot()
    methods = [m for m in methods if f'{m} ms' in rows[0]]
    if plt is None or not methods:
        return
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(rows) + 3), 4))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        ax.bar([k + i * width for k in range(len(rows))], [r.get(f'{method} ms', float('nan')) for r in rows], width,
               label=(labels or {}).get(method, method))
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(rows))], ticks)
    ax.set(yscale='log', ylabel='ms per batch (median)', xlabel=xlabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.0, 1.0))  # (beside the axes: bars span decades)
    save_figure(fig, path)


def add_speedups(row: Dict[str, object], methods, ours: str = 'ours') -> None:
    """``row['ours vs M'] = row['M ms'] / row['ours ms']`` for every other method M timed."""
    if f'{ours} ms' not in row:
        return
    for method in methods:
        if method != ours and f'{method} ms' in row:
            row[f'{ours} vs {method}'] = row[f'{method} ms'] / row[f'{ours} ms']


STOCK_WORKERS_NOTE = ("stock PyG's sampler is timed per call on one CPU thread; a tuned loader runs it in "
                      'DataLoader workers, which divide its time per batch by at most their number, so '
                      "'vs stock PyG, N workers (bound)' divides the ratio by N (--pyg-workers)")


def add_workers_argument(parser) -> None:
    """``--pyg-workers``: the DataLoader workers a tuned stock PyG loader would use."""
    parser.add_argument('--pyg-workers', type=int, default=default_workers(),
                        help="workers of a tuned stock PyG loader, for the ratio that credits it with perfect "
                             f"scaling over them (default: the cores less two, here {default_workers()})")


def add_worker_bound(row: Dict[str, object], workers: int, stock: str = 'stock PyG (CPU)') -> None:
    """``row['ours vs stock PyG, N workers (bound)']``: our time per batch against stock
    PyG's divided by ``workers``, the most its DataLoader workers could gain (the ratio a
    tuned PyG loader narrows ours to at best)."""
    if workers > 0 and f'{stock} ms' in row and 'ours ms' in row:
        row[f'ours vs stock PyG, {workers} workers (bound)'] = row[f'{stock} ms'] / workers / row['ours ms']

