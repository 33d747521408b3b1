"""Where one mini-batch training step of ``benchmarks/end_to_end.py`` spends its time:
the host's time to enqueue the step (no sync) against the step's time to finish, the
host-synchronising CUDA runtime calls it makes, and the profiler's top operators by
host time and by GPU time. A step whose enqueue time is close to its finish time is
host-bound: the GPU waits for Python. ``--loop`` times whole loops instead: the step
alone over batches made beforehand, the loader alone, and the two together, pipelined
and not; under ``torchrun`` (``--loop --graph`` only) with the features sharded across
the GPUs and the step data-parallel, as ``examples/multi_gpu.py`` trains. ``--host``
splits a pipelined epoch's host time per batch over the functions of the loader and the
step it passes through (timers around each, inclusive).

    torchrun --nproc_per_node 4 scripts/profile_step.py --loop --graph --tf32

    python scripts/profile_step.py [--model sage|gat] [--layers-from pyg_accel|pyg] [--no-trim] [--graph] [--tf32]
                                   [--amp] [--scale 1.0] [--fanout 15 10 5] [--batch-size 1024] [--layers 3]
                                   [--loader | --host | --loop [--trace DIR]]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))
import end_to_end  # noqa: E402

import pyg_accel.nn.models as accel_models  # noqa: E402
import torch_geometric.nn.models as pyg_models  # noqa: E402
from pyg_accel.data import from_data  # noqa: E402
from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.loader import NeighborLoader  # noqa: E402
from pyg_accel.training import TrainStep  # noqa: E402

SYNCING_CALLS = ('cudaStreamSynchronize', 'cudaDeviceSynchronize', 'cudaEventSynchronize', 'cudaMemcpy',
                 'cudaMemcpyAsync', 'cudaMalloc', 'cudaFree', 'cudaHostAlloc')


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--preset', default='products')
    p.add_argument('--scale', type=float, default=1.0)
    p.add_argument('--model', choices=['sage', 'gat'], default='sage', help='GraphSAGE 3x256, or GAT 3x(4 heads x 64)')
    p.add_argument('--layers-from', choices=['pyg_accel', 'pyg'], default='pyg_accel')
    p.add_argument('--no-trim', action='store_true', help='every layer on every node of the batch')
    p.add_argument('--tf32', action='store_true')
    p.add_argument('--graph', action='store_true', help='the step replayed as a CUDA graph (TrainStep)')
    p.add_argument('--amp', action='store_true', help='forward and loss under bfloat16 autocast')
    p.add_argument('--steps', type=int, default=10)
    p.add_argument('--rows', type=int, default=25, help='operators listed per table')
    p.add_argument('--fanout', type=int, nargs='*', default=[15, 10, 5])
    p.add_argument('--batch-size', type=int, default=1024)
    p.add_argument('--layers', type=int, default=3)
    p.add_argument('--loader', action='store_true', help="profile the loader's host time (cProfile) instead")
    p.add_argument('--host', action='store_true', help='split a pipelined epoch\'s host time per batch by function')
    p.add_argument('--features', choices=['sharded', 'replicated'], default='sharded',
                   help='under torchrun: the features split across the GPUs (read peer-to-peer) or a copy on each')
    p.add_argument('--loop', action='store_true', help='time loops of steps, loading and both (see above) instead')
    p.add_argument('--trace', metavar='DIR', help='with --loop: one pipelined epoch under torch.profiler, each '
                                                  "rank's Chrome trace saved as DIR/rank<r>.json.gz (read them "
                                                  'with scripts/trace_summary.py)')
    args = p.parse_args()
    end_to_end.TRIM, end_to_end.AMP = not args.no_trim, args.amp
    torch.set_float32_matmul_precision('high' if args.tf32 else 'highest')
    group, rank, world = None, 0, 1
    if 'WORLD_SIZE' in os.environ:  # under torchrun: features sharded, the step data-parallel
        if not (args.loop and args.graph):
            p.error('under torchrun only --loop --graph runs (every rank steps equally often)')
        from pyg_accel.distributed import setup
        rank, world, device = setup()
        group = torch.distributed.group.WORLD
    else:
        device = torch.device('cuda')
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device).to('cpu')
    train = dataset.split['train']
    if group is not None:  # each rank its share of one permutation, as examples/multi_gpu.py
        torch.manual_seed(0)
        per_rank = train.numel() // world
        train = train[torch.randperm(train.numel())][rank * per_rank:(rank + 1) * per_rank]
    stores = from_data(dataset.data, 'sharded' if group is not None and args.features == 'sharded' else 'cuda')
    loader = NeighborLoader(stores, num_neighbors=args.fanout, input_nodes=train, batch_size=args.batch_size,
                            shuffle=True, pipeline=False)
    module = accel_models if args.layers_from == 'pyg_accel' else pyg_models
    torch.manual_seed(0)
    options = {'auto_trim': not args.no_trim} if module is accel_models else {}
    if args.model == 'gat':
        options['heads'] = 4
    model = getattr(module, end_to_end.MODELS[args.model])(dataset.num_features, 256, args.layers,
                                                         dataset.num_classes, **options).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.003, fused=True)
    step = TrainStep(model, opt, process_group=group) if args.graph else end_to_end.eager_step(model, opt, device)
    batches = iter(loader)
    for _ in range(3):
        step(next(batches))
    if args.loader:
        return profile_loader(batches, args)
    if args.host:
        return host_split(step, loader)
    if args.loop:
        time_loops(step, loader, batches, args, group)
        return  # (under torchrun the caller tears down once this frame's stores and loaders are gone)

    enqueue, finish = [], []
    for _ in range(args.steps):
        batch = next(batches)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(batch)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        enqueue.append(t1 - t0)
        finish.append(time.perf_counter() - t0)
    setting = ' untrimmed' * args.no_trim + ' CUDA graph' * args.graph + ' TF32' * args.tf32 + ' bf16' * args.amp
    print(f'{args.layers_from} layers{setting}: '
          f'host enqueues a step in {statistics.median(enqueue) * 1e3:.2f} ms, it finishes after '
          f'{statistics.median(finish) * 1e3:.2f} ms (medians of {args.steps})', flush=True)
    if not args.graph:  # (a replayed graph has no phases on the host)
        print_phases(model, opt, batches, device, args.steps)

    from torch.profiler import ProfilerActivity, profile
    steps = [next(batches) for _ in range(args.steps)]
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for batch in steps:
            step(batch)
        torch.cuda.synchronize()
    print_profile(prof, args.steps, args.rows)


def print_profile(prof, steps: int, rows: int) -> None:
    """The host-synchronising CUDA calls per step (and where they come from), then the
    top ``rows`` operators by host time and by GPU time, of a profile of ``steps`` steps."""
    events = prof.key_averages()
    for name in SYNCING_CALLS:
        count = sum(e.count for e in events if e.key == name)
        if count:
            print(f'{name}: {count / steps:.1f} per step, called from {callers_of(prof, name)}')
    print(events.table(sort_by='self_cpu_time_total', row_limit=rows))
    print(events.table(sort_by='self_device_time_total', row_limit=rows))


def callers_of(prof, name: str) -> str:
    """The operators (outermost first) under which ``name`` runs, with counts."""
    from collections import Counter
    chains = Counter()
    for event in prof.events():
        if event.name != name:
            continue
        chain, parent = [], event.cpu_parent
        while parent is not None:
            chain.append(parent.name)
            parent = parent.cpu_parent
        chains[' > '.join(reversed(chain[:4]))] += 1
    return '; '.join(f'{count}x {chain or "(top level)"}' for chain, count in chains.most_common(4))


def print_phases(model, opt, batches, device, steps: int) -> None:
    """Host enqueue time of the step's phases (forward, loss, backward, optimizer)."""
    phases = {'to(device)+zero_grad': [], 'forward': [], 'loss': [], 'backward': [], 'optimizer': []}
    for _ in range(steps):
        batch = next(batches)
        torch.cuda.synchronize()
        t = [time.perf_counter()]
        batch = batch.to(device, non_blocking=True)
        opt.zero_grad()
        t.append(time.perf_counter())
        out = model(batch.x, batch.edge_index, **end_to_end.trim_arguments(model, batch))[:batch.batch_size]
        t.append(time.perf_counter())
        loss = torch.nn.functional.cross_entropy(out, batch.y[:batch.batch_size])
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        torch.cuda.synchronize()
        for (name, times), a, b in zip(phases.items(), t, t[1:]):
            times.append(b - a)
    print('host enqueue per phase (ms): ' + ', '.join(f'{name} {statistics.median(v) * 1e3:.2f}'
                                                      for name, v in phases.items()), flush=True)


class Pipelined:
    """``loader``'s own pipelined batches, as the examples iterate it (the next batch made
    on a side stream, its sample started ahead), from a loader made with
    ``pipeline=False`` for the unpipelined loops."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        self.loader.pipeline = True
        try:
            yield from self.loader
        finally:
            self.loader.pipeline = False


def time_loops(step, loader, batches, args, group=None) -> None:
    """Milliseconds per batch (medians of 3 runs of ``4 * steps`` batches) of: the step
    over batches made beforehand (the GPU-bound pace), the loader alone, and loading and
    training together, pipelined and not. Pipelined loading that keeps up gives the
    step's pace; one that does not overlap gives the sum. Under torchrun every rank
    times the same loops (in step, barriers between runs) and the first prints all."""
    count = 4 * args.steps
    made = [next(batches) for _ in range(count)]
    for batch in loader:  # a whole epoch: every batch shape seen (and captured) before timing
        step(batch)

    def pace(run) -> float:
        times = []
        for _ in range(3):
            torch.cuda.synchronize()
            if group is not None:
                torch.distributed.barrier(group)
            t0 = time.perf_counter()
            run()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / count * 1e3)
        return statistics.median(times)

    def loop(iterable, train: bool):
        def run():
            for i, batch in enumerate(iterable):
                if train:
                    step(batch)
                if i + 1 == count:
                    break
        return run

    rows = {'step alone (batches made beforehand)': pace(loop(made, True)),
            'loader alone': pace(loop(loader, False)),
            'both, pipelined (one batch ahead)': pace(loop(Pipelined(loader), True)),
            'both, not pipelined': pace(loop(loader, True))}
    everyone = [rows]
    if group is not None:
        everyone = [None] * torch.distributed.get_world_size(group)
        torch.distributed.all_gather_object(everyone, rows, group=group)
    if args.trace:
        trace_epoch(step, loader, args.trace, 0 if group is None else torch.distributed.get_rank(group))
    if group is not None and torch.distributed.get_rank(group) != 0:
        return
    for rank, ranks_rows in enumerate(everyone):
        for name, ms in ranks_rows.items():
            print(f'{"" if group is None else f"rank {rank}: "}{name:45s} {ms:6.3f} ms/batch', flush=True)


def trace_epoch(step, loader, folder: str, rank: int) -> None:
    """One pipelined epoch under torch.profiler (host calls and GPU kernels and copies),
    saved as ``folder/rank<rank>.json.gz`` (Chrome trace format)."""
    import gzip
    import shutil
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for batch in Pipelined(loader):
            step(batch)
        torch.cuda.synchronize()
    Path(folder).mkdir(parents=True, exist_ok=True)
    plain = Path(folder) / f'rank{rank}.json'
    prof.export_chrome_trace(str(plain))
    with open(plain, 'rb') as src, gzip.open(f'{plain}.gz', 'wb') as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()


# (module, attribute path) of the functions --host times, outermost first
HOST_FUNCTIONS = (
    ('pyg_accel.loader.store_batches', 'StoreBatches.start'),  # batches made over our stores: sampling started
    ('pyg_accel.loader.store_batches', 'StoreBatches.build'),  # ... and finished, the batch built
    ('pyg_accel.sampler.neighbor_sampler', 'start_neighbor_sample'),
    ('pyg_accel.loader.store_batches', 'StoreBatches.values'),
    ('pyg_accel.loader.store_batches', 'attach_edge_features'),
    ('pyg_accel.loader', '_Pipelined._batch_at'),  # batches through PyG's layers
    ('pyg_accel.sampler.neighbor_sampler', 'NeighborSampler.sample_from_nodes'),
    ('pyg_accel.sampler.neighbor_sampler', 'neighbor_sample'),
    ('pyg_accel.loader', '_Pipelined.filter_fn'),
    ('torch_geometric.loader.node_loader', 'filter_custom_store'),
    ('pyg_accel.data.feature_store', 'FeatureStore.multi_get_tensor'),
    ('pyg_accel.loader', 'attach_edge_features'),
    ('pyg_accel.loader', 'trust_edge_index'),
    ('pyg_accel.loader', 'record_hops'),
    ('pyg_accel.loader.prefetch', '_record_stream'),
    ('pyg_accel.training.step', 'TrainStep.__call__'),
    ('pyg_accel.training.step', 'TrainStep._hops'),
    ('pyg_accel.training.step', 'TrainStep._shape_for'),
    ('pyg_accel.training.step', 'TrainStep._check_state'),
    ('pyg_accel.training.padding', 'PaddedBatch.load'),
    ('pyg_accel.training.step', 'TrainStep._replay'),
)


def host_split(step, loader, epochs: int = 2) -> None:
    """Host µs per batch inside each of :data:`HOST_FUNCTIONS` (inclusive: a function's
    time holds its callees'; a batch goes through one of the two loader paths), over
    pipelined epochs after a warm-up one, beside the wall time per batch. What no listed function holds is the loop's own (iteration,
    the prefetch generator's events)."""
    import functools
    import importlib
    from collections import defaultdict
    spent = defaultdict(float)
    patched = []
    for module_name, path in HOST_FUNCTIONS:
        owner = importlib.import_module(module_name)
        *outer, name = path.split('.')
        for part in outer:
            owner = getattr(owner, part)
        original = owner.__dict__[name]

        def timed(*a, __f=original, __key=(module_name, path), **k):
            t0 = time.perf_counter()
            try:
                return __f(*a, **k)
            finally:
                spent[__key] += time.perf_counter() - t0
        setattr(owner, name, functools.wraps(original)(timed))
        patched.append((owner, name, original))
    try:
        for batch in Pipelined(loader):  # every batch shape warmed up and captured
            step(batch)
        spent.clear()
        batches = 0
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(epochs):
            for batch in Pipelined(loader):
                step(batch)
                batches += 1
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
    print(f'host time per batch over {batches} batches, pipelined (wall {wall / batches * 1e6:.0f} us per batch):')
    for module_name, path in HOST_FUNCTIONS:
        label = f'{module_name.removeprefix("pyg_accel.").removeprefix("torch_geometric.")}: {path}'
        print(f'  {label:60s} {spent[module_name, path] / batches * 1e6:8.1f} us', flush=True)


def profile_loader(batches, args) -> None:
    """Host time of producing one batch (synchronised: nothing else queued), then the
    Python functions it spends it in."""
    import cProfile
    import pstats
    walls, cpus = [], []
    for _ in range(args.steps):
        torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.thread_time()
        next(batches)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.thread_time() - c0)
    print(f'loader: a batch takes {statistics.median(walls) * 1e3:.2f} ms, '
          f'{statistics.median(cpus) * 1e3:.2f} ms of host CPU (medians of {args.steps})', flush=True)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.steps):
        next(batches)
    torch.cuda.synchronize()
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats('tottime').print_stats(args.rows)
    stats.sort_stats('cumtime').print_stats(args.rows)


if __name__ == '__main__':
    main()
    if 'WORLD_SIZE' in os.environ:  # after main's stores are dropped: no peer still maps another's shards
        from pyg_accel.distributed import teardown
        teardown()
