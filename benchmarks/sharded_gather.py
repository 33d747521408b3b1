"""Sharded feature gather across the GPUs of one host: WholeGraph-style peer reads
against the alternatives, one process per GPU.

Every process holds 1/P of a feature table's rows on its GPU (`ShardedTensor`) and
gathers a batch of random rows (the features of a sampled mini-batch), all processes
at once, as in data-parallel training. Per batch, median over repetitions:

* ours (peer reads):    one gather kernel reads local rows from this GPU and the other
                        rows from the peers' memory over NVLink (CUDA IPC mappings);
* NCCL all-to-all:      the message-passing way (DistDGL, cuGraph's feature stores):
                        ids bucketed by owner, exchanged, gathered by the owner, rows
                        sent back and put in batch order (our ``HostShardedTier`` with
                        every process declared a host of its own);
* 2 hosts:              with 4 or more processes, the same table as if they were 2
                        hosts (``HostShardedTier``): this half's rows by peer reads,
                        the other half's through NCCL, as across real hosts;
* WholeGraph:           with ``--wholegraph``, NVIDIA's pylibwholegraph on the same rows
                        of the same table: its 'chunked' memory (every block mapped by
                        every GPU, as ours) and its 'distributed' memory (fetched by
                        NCCL), ``WholeMemoryTensor.gather``;
* replicated:           the whole table on every GPU, gathered locally (the upper bound,
                        at P times the memory);
* pinned host:          the table in pinned host memory, gathered by the GPU over PCIe.

Floor: the rows in the peers' blocks over the peer link, at the bandwidth of a plain copy
from a peer's block into this GPU (measured here, every rank copying at once).

    torchrun --nproc_per_node 2 benchmarks/sharded_gather.py --out bench-out
    torchrun --nproc_per_node 4 benchmarks/sharded_gather.py --out bench-out     # with the 2-hosts row
    torchrun --nproc_per_node 4 benchmarks/sharded_gather.py --wholegraph --out bench-out
        (pip install pylibwholegraph-cu13: it loads libwholegraph, libraft and librmm)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, print_table, pyplot, save_figure, save_json  # noqa: E402

from pyg_accel.data import HostLayout, HostShardedTier  # noqa: E402
from pyg_accel.distributed import ShardedTensor, row_partition, setup, teardown  # noqa: E402
from pyg_accel.ops import gather  # noqa: E402


def _title(payload: dict) -> str:
    return (f"sharded gather, {payload['world_size']} x {payload['gpus'][0]}, {payload['args']['rows']:,} rows, "
            'every GPU gathering at once')


def time_ms(fn: Callable[[], object], reps: int, warmup: int = 3) -> float:
    """Median ms per call on this GPU; all ranks start each call together."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


METHODS = ['ours (peer reads)', 'NCCL all-to-all', '2 hosts', 'WholeGraph chunked', 'WholeGraph distributed',
           'replicated', 'pinned host']
WHOLEGRAPH_MEMORIES = ('chunked', 'distributed')


def wholegraph_comm(rank: int, world: int):
    """pylibwholegraph set up over this torch.distributed job (one host), and its
    communicator of every process; a clear exit where it is not installed."""
    try:
        import pylibwholegraph.torch as wgth
    except ImportError as error:
        raise SystemExit(f'--wholegraph needs pylibwholegraph (pip install pylibwholegraph-cu13): {error}')
    wgth.init(rank, world, rank, world)  # (world rank, world size, local rank, local size)
    return wgth, wgth.get_global_communicator('nccl')


def wholegraph_table(wholegraph, full: torch.Tensor, memory: str):
    """``full`` as a WholeMemory tensor of ``memory`` type on the GPUs: each process
    fills its own block (collective)."""
    wgth, comm = wholegraph
    table = wgth.create_wholememory_tensor(comm, memory, 'cuda', list(full.shape), full.dtype, None)
    local, start = table.get_local_tensor()
    local.copy_(full[start:start + local.shape[0]])
    comm.barrier()
    return table



def plot(rows: List[dict], path: Path, title: str) -> None:
    """GB/s per method and setting (rank 0's rows), with the peer-link floor."""
    plt = pyplot()
    if plt is None:
        return
    rows = [r for r in rows if r['rank'] == 0]
    labels = [f"{r['row B']} B\n{r['batch rows'] / 1e6:g}M rows" for r in rows]
    fig, ax = plt.subplots(figsize=(10, 5))
    methods = [m for m in METHODS if f'{m} GB/s' in rows[0]]
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        ax.bar([k + i * width for k in range(len(rows))], [r[f'{method} GB/s'] for r in rows], width, label=method)
    floor = [r['batch rows'] * r['row B'] / r['floor ms'] / 1e6 for r in rows if 'floor ms' in r]
    if floor:
        ax.scatter([k + 0.5 * width for k in range(len(rows))], floor, marker='_', s=400, color='black',
                   label='peer-link floor (rows in the peer block at the copy bandwidth)', zorder=3)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(rows))], labels, fontsize=8)
    ax.set(yscale='log', ylabel='GB/s of gathered rows, per GPU')
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc='upper center', bbox_to_anchor=(0.5, -0.16), ncol=3)
    save_figure(fig, path)


def measure(args, row_bytes: int, rank: int, world: int, device: torch.device, wholegraph=None) -> List[dict]:
    """One row size: every method, every batch size, on this rank (collective)."""
    bounds = row_partition(args.rows, world)
    g = torch.Generator(device=device).manual_seed(0)
    full = torch.rand(args.rows, row_bytes // 4, generator=g, device=device)  # the same table on every rank
    table = ShardedTensor.from_full(full)
    exchanged = HostShardedTier(full, HostLayout.of(ranks_per_host=1), device)  # every row of another rank by NCCL
    two_hosts = HostShardedTier(full, HostLayout.of(ranks_per_host=world // 2), device) \
        if world >= 4 and world % 2 == 0 else None
    theirs = {f'WholeGraph {memory}': wholegraph_table(wholegraph, full, memory)
              for memory in (WHOLEGRAPH_MEMORIES if wholegraph is not None else ())}
    host = full.cpu().pin_memory()
    peer = table.shards[(rank + 1) % world]  # (mapped into this GPU's context)
    into = torch.empty_like(peer)
    peer_gbs = peer.numel() * peer.element_size() / time_ms(lambda: into.copy_(peer), 10) / 1e6
    rows = []
    for batch_rows in args.batch_rows:
        gen = torch.Generator(device=device).manual_seed(1 + rank)
        index = torch.randint(0, args.rows, (batch_rows,), generator=gen, device=device)
        expected = full[index]
        assert torch.equal(table.gather(index), expected)
        assert torch.equal(exchanged.read(index), expected)
        methods: Dict[str, Callable[[], object]] = {
            'ours (peer reads)': lambda: table.gather(index, check_bounds=False),
            'NCCL all-to-all': lambda: exchanged.read(index),
        }
        if two_hosts is not None:
            assert torch.equal(two_hosts.read(index), expected)
            methods['2 hosts'] = lambda: two_hosts.read(index)
        for name, wm in theirs.items():
            assert torch.equal(wm.gather(index), expected), name
            methods[name] = lambda wm=wm: wm.gather(index)
        methods['replicated'] = lambda: gather(full, index, check_bounds=False)
        methods['pinned host'] = lambda: gather(host, index, check_bounds=False)
        remote = int(((index < bounds[rank]) | (index >= bounds[rank + 1])).sum())
        row = {'row B': row_bytes, 'batch rows': batch_rows, 'rank': rank, 'peer copy GB/s': peer_gbs,
               'floor ms': remote * row_bytes / peer_gbs / 1e6}
        for name, fn in methods.items():
            ms = time_ms(fn, args.reps)
            row[f'{name} ms'] = ms
            row[f'{name} GB/s'] = batch_rows * row_bytes / ms / 1e6
        row['ours vs all-to-all'] = row['NCCL all-to-all ms'] / row['ours (peer reads) ms']
        if two_hosts is not None:
            row['2 hosts / 1 host'] = row['2 hosts ms'] / row['ours (peer reads) ms']
        for name in theirs:
            row[f'ours vs {name}'] = row[f'{name} ms'] / row['ours (peer reads) ms']
        row['ours vs pinned'] = row['pinned host ms'] / row['ours (peer reads) ms']
        row['ours / replicated'] = row['ours (peer reads) ms'] / row['replicated ms']
        row['ours / floor'] = row['ours (peer reads) ms'] / row['floor ms']
        rows.append(row)
    for wm in theirs.values():
        wholegraph[0].destroy_wholememory_tensor(wm)
    return rows


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--rows', type=int, default=2_449_029, help='table rows (default: ogbn-products nodes)')
    p.add_argument('--row-bytes', type=int, nargs='*', default=[400, 512, 1024])
    p.add_argument('--batch-rows', type=int, nargs='*', default=[274_000, 1_000_000],
                   help='rows gathered per batch (274k: a [15, 10, 5] x 1024 mini-batch)')
    p.add_argument('--reps', type=int, default=20)
    p.add_argument('--out', default='bench-out')
    p.add_argument('--replot', default=None, help='only redraw the plot from a saved JSON (no GPUs needed)')
    p.add_argument('--wholegraph', action='store_true',
                   help="NVIDIA's pylibwholegraph gathering the same rows beside ours (pylibwholegraph-cu13)")
    args = p.parse_args(argv)
    if args.replot:
        saved = json.loads(Path(args.replot).read_text())
        plot(saved['rows'], Path(args.out) / 'sharded_gather.png', _title(saved))
        return saved
    rank, world, device = setup()
    if device.type != 'cuda' or world < 2:
        raise SystemExit('run with torchrun --nproc_per_node >= 2 on a machine with as many GPUs')
    wholegraph = wholegraph_comm(rank, world) if args.wholegraph else None
    results = []
    for row_bytes in args.row_bytes:
        results += measure(args, row_bytes, rank, world, device, wholegraph)
        torch.cuda.empty_cache()  # (this row size's tables are gone)
    every = [None] * world
    dist.all_gather_object(every, results)
    payload = {}
    if rank == 0:
        rows = [r for per_rank in every for r in per_rank]
        rows.sort(key=lambda r: (r['row B'], r['batch rows'], r['rank']))
        columns = list(rows[0])
        payload = {'env': environment(), 'args': vars(args), 'world_size': world, 'rows': rows,
                   'gpus': [torch.cuda.get_device_name(i) for i in range(world)]}
        payload['table'] = print_table(rows, columns, f'sharded gather, {world} GPUs, {args.rows:,} rows, '
                                                      'median ms per batch (every rank gathers at once)')
        save_json(Path(args.out) / 'sharded_gather.json', payload)
        plot(rows, Path(args.out) / 'sharded_gather.png', _title(payload))
    teardown()
    if wholegraph is not None:
        wholegraph[0].finalize()  # (its own communicators; the process group is gone already)
    return payload


if __name__ == '__main__':
    main()
