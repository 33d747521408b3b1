"""How many padded shapes a captured heterogeneous step makes, epoch by epoch.

Samples ``--epochs`` epochs of the heterogeneous benchmark's batches (synthetic-mag at
``--scale``, 512 seeds, [10, 10]; ``--task link``: its link-prediction batches), then
replays their per-hop counts through ``TrainStep``'s shape search, once with each pair of
margins (headroom of a new shape, slack of a held one, in grid steps): the margins
heterogeneous batches take and those of homogeneous batches. Prints the shapes made in
each epoch and the mean padded / real count. Every new shape costs the step an eager
warm-up and a capture; shapes past ``max_graphs`` (16) train eagerly.

    python scripts/shape_search.py --scale 0.1 [--task link] [--epochs 8] [--device cpu]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch_geometric.transforms as T

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'examples'))
import hetero_end_to_end as bench  # noqa: E402
import hetero_node_classification as example  # noqa: E402

import pyg_accel.training.step as step_module  # noqa: E402
from pyg_accel.datasets import load_hetero_dataset  # noqa: E402
from pyg_accel.training import padding  # noqa: E402


def replay(epochs, headroom: float, slack: int, steps_per_octave: int = 16):
    """``(new shapes per epoch, mean padded / real count)`` of the search over these
    batches' counts with the given heterogeneous margins."""
    saved = step_module.HETERO_HEADROOM_STEPS, step_module.HETERO_SLACK_STEPS
    step_module.HETERO_HEADROOM_STEPS, step_module.HETERO_SLACK_STEPS = headroom, slack
    try:
        state = SimpleNamespace(_buffers={}, _serves={}, steps_per_octave=steps_per_octave)  # (a step's search state)
        made, ratios = [], []
        for hops_of_epoch in epochs:
            new = 0
            for hops in hops_of_epoch:
                shape = step_module.TrainStep._shape_for(state, hops)
                if shape not in state._buffers:
                    state._buffers[shape], new = True, new + 1
                padded_nodes, padded_edges = shape[1]
                real = sum(map(sum, hops.nodes)) + sum(map(sum, hops.edges))
                ratios.append((sum(map(sum, padded_nodes)) + sum(map(sum, padded_edges))) / real)
            made.append(new)
        return made, sum(ratios) / len(ratios)
    finally:
        step_module.HETERO_HEADROOM_STEPS, step_module.HETERO_SLACK_STEPS = saved


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--scale', type=float, default=0.1)
    p.add_argument('--task', choices=['node', 'link'], default='node')
    p.add_argument('--epochs', type=int, default=8)
    p.add_argument('--device', default='cpu')
    args = p.parse_args(argv)
    device = example.prepare(args.device)
    dataset = load_hetero_dataset('synthetic-mag', scale=args.scale, seed=0)
    data = T.ToUndirected()(dataset.data).to(device)
    if args.task == 'link':
        loader = bench.link_loader('accel', bench.parse_args(['--task', 'link']), data)
    else:
        ex_args = example.parse_args(['--batch-size', '512', '--num-neighbors', '10,10'])
        loader = example.make_loader(ex_args, data, (dataset.target, dataset.split['train'].to(device)), shuffle=True)
    start = time.perf_counter()
    epochs = [[step_module._hetero_hops(batch) for batch in loader] for _ in range(args.epochs)]
    print(f'{args.task} task, synthetic-mag at {args.scale:g}: {args.epochs} epochs of {len(loader)} batches '
          f'sampled in {time.perf_counter() - start:.0f} s')
    results = {}
    for name, margins in (('heterogeneous margins', (padding.HETERO_HEADROOM_STEPS, padding.HETERO_SLACK_STEPS)),
                          ('homogeneous margins', (0.25, 2))):
        made, ratio = replay(epochs, *margins)
        results[name] = {'headroom steps': margins[0], 'slack steps': margins[1], 'new shapes per epoch': made,
                         'padded / real': ratio}
        print(f'{name} (headroom {margins[0]:g}, slack {margins[1]} steps): new shapes per epoch {made}, '
              f'{sum(made)} in all, padded / real {ratio:.3f}')
    return results


if __name__ == '__main__':
    main()
