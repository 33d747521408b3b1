"""Where one training step of ``examples/hetero_node_classification.py`` spends its time
(a synthetic_mag graph, our loader, the example's HeteroSAGE): the host's time to enqueue
a step against its time to finish (close: the step is host-bound), operators and kernel
launches per step, the host-synchronising CUDA calls, and the profiler's top operators
by host time and by GPU time.

    python scripts/profile_hetero_step.py [--scale 0.1] [--layers-from pyg_accel|pyg] [--steps 10]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T

root = Path(__file__).resolve().parent
sys.path[:0] = [str(root), str(root.parent / 'examples')]
import hetero_node_classification as example  # noqa: E402
from profile_step import print_profile  # noqa: E402

from pyg_accel.datasets import synthetic_mag  # noqa: E402
from pyg_accel.loader import NeighborLoader  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--scale', type=float, default=0.1)
    p.add_argument('--layers-from', choices=['pyg_accel', 'pyg'], default='pyg_accel')
    p.add_argument('--steps', type=int, default=10)
    p.add_argument('--rows', type=int, default=25, help='operators listed per table')
    p.add_argument('--device', default='cuda')
    args = p.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
    dataset = synthetic_mag(args.scale)
    data = T.ToUndirected()(dataset.data).to(device)
    target = dataset.target
    loader = NeighborLoader(data, [10, 10], input_nodes=(target, dataset.split['train'].to(device)), batch_size=512,
                            shuffle=True, pipeline=False)
    conv_cls = example.torch_geometric_sage if args.layers_from == 'pyg' else example.pyg_accel.nn.SAGEConv
    torch.manual_seed(0)
    in_types = [t for t in data.node_types if 'x' in data[t]]
    model = example.HeteroSAGE(data.metadata(), {t: data[t].num_nodes for t in data.node_types}, in_types, target,
                               64, dataset.num_classes, 2, 0.3, conv_cls).to(device)
    batches = iter(loader)
    with torch.no_grad():
        example.forward(model, next(batches), target, device)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, fused=device.type == 'cuda')  # as the example

    def step(batch, marks=None):
        opt.zero_grad()
        logits, y = example.forward(model, batch, target, device)
        loss = F.cross_entropy(logits, y)
        marks is None or marks.append(time.perf_counter())
        loss.backward()
        marks is None or marks.append(time.perf_counter())
        opt.step()

    for _ in range(3):
        step(next(batches))
    elsewhere = sorted({f'{store._key or "graph"}.{k}' for store in next(batches).stores for k, v in store.items()
                        if isinstance(v, torch.Tensor) and v.device.type != device.type})
    print(f'batch tensors not on {device}: {", ".join(elsewhere) or "none"}')
    enqueue, finish, phases = [], [], []
    for _ in range(args.steps):
        batch = next(batches)
        sync()
        marks = [time.perf_counter()]
        step(batch, marks)
        marks.append(time.perf_counter())
        sync()
        enqueue.append(marks[-1] - marks[0])
        finish.append(time.perf_counter() - marks[0])
        phases.append([b - a for a, b in zip(marks, marks[1:])])
    print(f'{args.layers_from} layers: host enqueues a step in {statistics.median(enqueue) * 1e3:.2f} ms, it '
          f'finishes after {statistics.median(finish) * 1e3:.2f} ms (medians of {args.steps}); host time of '
          + ', '.join(f'{name} {statistics.median(p[i] for p in phases) * 1e3:.2f} ms'
                      for i, name in enumerate(('forward+loss', 'backward', 'optimizer'))), flush=True)

    from torch.profiler import ProfilerActivity, profile
    steps = [next(batches) for _ in range(args.steps)]
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
    with profile(activities=activities) as prof:
        for batch in steps:
            step(batch)
        sync()
    events = prof.key_averages()
    ops = sum(e.count for e in events if e.key.startswith('aten::'))
    launches = sum(e.count for e in events if e.key in ('cudaLaunchKernel', 'cudaLaunchKernelExC', 'cuLaunchKernel'))
    print(f'per step: {ops / args.steps:.0f} aten operators (nested included), '
          f'{launches / args.steps:.0f} kernel launches')
    print_profile(prof, args.steps, args.rows)


if __name__ == '__main__':
    main()
