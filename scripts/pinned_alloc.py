"""Diagnosis: why is page-locked host memory slow to allocate, and what is faster?

Placing papers100M's features in pinned memory (57 GB) took most of the example's
68.6 s of loading: PyTorch's pinned allocator (``cudaHostAlloc`` through its caching
host allocator, which also rounds every request up to a power of two) pinned ~1.2 GB/s.
Hypothesis: the kernel faults, zeroes and locks the pages one thread at a time inside
one driver call. Faulting them first with many threads, then locking them with
``cudaHostRegister`` (whole, or in chunks from several threads), should be faster.

``pyg_accel`` is what ``Location('pinned')`` now allocates (the ``thp_register``
recipe, ``pyg_accel.data.pinned_empty``). Each mode allocates ``--gib`` GiB, writes
every byte once (as a loader fills it), and is then read by the GPU two ways: a 1 GiB
copy to the GPU and a random row gather (``pyg_accel.ops.gather``, 512 B rows), to
check the memory is as fast to read.

    python scripts/pinned_alloc.py --gib 24 --out OUT
"""
from __future__ import annotations

import argparse
import gc
import json
import mmap
import os
import statistics
import threading
import time
from pathlib import Path

import torch

from pyg_accel.data import pinned_empty
from pyg_accel.ops import gather, host_register


def seconds(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def pageable(nbytes: int, huge: bool) -> torch.Tensor:
    if not huge:
        return torch.empty(nbytes, dtype=torch.uint8)
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf.madvise(mmap.MADV_HUGEPAGE)
    return torch.frombuffer(buf, dtype=torch.uint8, count=nbytes)


def in_threads(nbytes: int, threads: int, work) -> None:
    step = -(-nbytes // threads)
    step = -(-step // (2 << 20)) * (2 << 20)  # whole 2 MB pages per thread
    pool = [threading.Thread(target=work, args=(lo, min(lo + step, nbytes))) for lo in range(0, nbytes, step)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def allocate(mode: str, nbytes: int, threads: int):
    """(tensor, keep-alive list, {phase: seconds})."""
    phases, keep = {}, []
    if mode == 'pyg_accel':  # what Location('pinned') allocates (pyg_accel.data.pinned_empty)
        t, phases['allocate+lock'] = seconds(lambda: pinned_empty((nbytes,), torch.uint8))
        _, phases['fill'] = seconds(lambda: t.fill_(1))
        return t, keep, phases
    if mode == 'torch_pinned':
        t, phases['allocate+lock'] = seconds(lambda: torch.empty(nbytes, dtype=torch.uint8, pin_memory=True))
        _, phases['fill'] = seconds(lambda: t.fill_(1))
        return t, keep, phases
    huge = mode.startswith('thp')
    t, phases['allocate'] = seconds(lambda: pageable(nbytes, huge))
    torch.set_num_threads(threads)
    if mode.endswith('chunks'):  # each thread faults and locks its own chunk
        def work(lo, hi):
            t[lo:hi].fill_(1)
            keep.append(host_register(t[lo:hi]))
        _, phases['fill+lock'] = seconds(lambda: in_threads(nbytes, threads, work))
        return t, keep, phases
    _, phases['fill'] = seconds(lambda: t.fill_(1))  # (parallel over torch's threads)
    locked, phases['lock'] = seconds(lambda: host_register(t))
    return locked, keep, phases


def read_rates(t: torch.Tensor) -> dict:
    one_gib = 1 << 30
    dev = torch.empty(one_gib, dtype=torch.uint8, device='cuda')
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dev.copy_(t[:one_gib], non_blocking=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    table = t.view(-1, 512)  # 512 B rows
    idx = torch.randint(0, table.shape[0], (1 << 20,), device='cuda')
    gtimes = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        gather(table, idx, check_bounds=False)
        torch.cuda.synchronize()
        gtimes.append(time.perf_counter() - t0)
    return {'copy GB/s': one_gib / statistics.median(times) / 1e9,
            'gather GB/s': idx.numel() * 512 / statistics.median(gtimes) / 1e9}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--gib', type=float, default=24)
    p.add_argument('--threads', type=int, default=min(16, os.cpu_count() or 1))
    p.add_argument('--modes', nargs='*',
                   default=['torch_pinned', 'pyg_accel', 'register', 'register_chunks', 'thp_register',
                            'thp_register_chunks'])
    p.add_argument('--out', default='.')
    args = p.parse_args(argv)
    nbytes = int(args.gib * (1 << 30)) // (2 << 20) * (2 << 20)
    torch.cuda.init()
    results = []
    for mode in args.modes:
        t, keep, phases = allocate(mode, nbytes, args.threads)
        total = sum(phases.values())
        rates = read_rates(t)
        held = [t, keep]
        del t, keep

        def free():
            held.clear()
            gc.collect()
            torch._C._host_emptyCache()  # (PyTorch's pinned blocks go back to its cache first)
        _, free_s = seconds(free)
        row = {'mode': mode, 'GiB': nbytes / (1 << 30), 'threads': args.threads, **phases, 'total s': total,
               'GB/s': nbytes / total / 1e9, **rates, 'free s': free_s}
        results.append(row)
        print(' | '.join(f'{k} {v:.3f}' if isinstance(v, float) else f'{k} {v}' for k, v in row.items()), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, 'pinned_alloc.json').write_text(json.dumps(results, indent=1))


if __name__ == '__main__':
    main()
