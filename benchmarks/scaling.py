"""Scaling over processes (one per GPU): the multi-process examples run at each process
count on the same data, each count a torchrun run of its own. Per example and count:
the median epoch, the speed-up over the smallest count (one process by default) and the
parallel efficiency (the speed-up over the ideal one), and the test accuracy (the same
task at every count). Table, JSON and a plot of epoch time against processes with the
ideal line.

* ``multi_gpu``: data-parallel mini-batch training, features sharded across the GPUs
  (``examples/multi_gpu.py``);
* ``full_graph_multi_gpu``: full-graph training, the graph partitioned across the GPUs
  (``examples/full_graph_multi_gpu.py``).

Arguments after ``--`` go to every example run (each gets its own ``--out``):

    python benchmarks/scaling.py --nprocs 1 2 4 --out OUT -- --dataset synthetic-products --hidden 256 \\
        --layers 3 --num-neighbors 15,10,5 --epochs 4 --tf32
    python benchmarks/scaling.py --examples full_graph_multi_gpu --nprocs 1 2 4 --out OUT -- --epochs 50
    python benchmarks/scaling.py --nprocs 1 2 --out OUT -- --epochs 2      # on the CPU (gloo): a smoke test

Without GPUs the processes run on the CPU; with GPUs each count needs as many.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import textwrap
import sys
from pathlib import Path
from typing import List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, print_table, pyplot, save_figure, save_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ('multi_gpu', 'full_graph_multi_gpu')


def run_example(example: str, processes: int, extra: List[str], out: Path) -> dict:
    """``examples/EXAMPLE.py`` under torchrun with ``processes`` processes; its summary,
    with every epoch's seconds added (``epoch_s``)."""
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')])}
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', str(processes),
           str(ROOT / 'examples' / f'{example}.py'), *extra, '--out', str(out)]
    print('$ ' + ' '.join(cmd), flush=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f'{example} on {processes} processes failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}')
    metrics = json.loads((out / 'metrics.json').read_text())
    return {**metrics['summary'], 'epoch_s': [h['seconds'] for h in metrics['history'] if 'seconds' in h]}


def measure(examples, counts: List[int], extra: List[str], out: Path) -> List[dict]:
    rows = []
    for example in examples:
        base = None
        for processes in counts:
            summary = run_example(example, processes, extra, out / f'{example}-{processes}p')
            row = {'example': example, 'processes': processes, 'device': summary.get('device', ''),
                   'epoch ms': summary['median_epoch_s'] * 1e3, 'test acc': summary['test_acc'],
                   'first epoch ms': summary['epoch_s'][0] * 1e3 if summary['epoch_s'] else float('nan')}
            base = row['epoch ms'] if processes == counts[0] else base
            row['speed-up'] = base / row['epoch ms']  # (over the smallest count)
            row['efficiency'] = row['speed-up'] / (processes / counts[0])
            rows.append(row)
            print(row, flush=True)
    return rows


def plot(rows: List[dict], path: Path, title: str) -> None:
    """Epoch time against processes per example, with the ideal (linear) scaling."""
    plt = pyplot()
    if plt is None:
        return
    from matplotlib.ticker import NullLocator
    fig, ax = plt.subplots(figsize=(6, 4))
    for example in dict.fromkeys(r['example'] for r in rows):
        mine = [r for r in rows if r['example'] == example]
        counts = [r['processes'] for r in mine]
        line, = ax.plot(counts, [r['epoch ms'] for r in mine], marker='o', label=example)
        first = mine[0]
        ax.plot(counts, [first['epoch ms'] * first['processes'] / c for c in counts], linestyle=':',
                color=line.get_color(), label=f'{example}, ideal')
        for r in mine:
            ax.annotate(f"{r['speed-up']:.2f}x", (r['processes'], r['epoch ms']), textcoords='offset points',
                        xytext=(4, 4), fontsize=8)
    ax.set(xscale='log', yscale='log', xlabel='processes (GPUs)', ylabel='median epoch, ms')
    ax.set_xticks(sorted({r['processes'] for r in rows}), [str(c) for c in sorted({r['processes'] for r in rows})])
    ax.xaxis.set_minor_locator(NullLocator())  # (no log-scale minor ticks between the counts)
    ax.set_title('\n'.join(textwrap.wrap(title, 70)), fontsize=9)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def main(argv=None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index('--') + 1:] if '--' in argv else []
    own = argv[:argv.index('--')] if '--' in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--examples', nargs='*', choices=EXAMPLES, default=['multi_gpu'])
    p.add_argument('--nprocs', type=int, nargs='*', default=[1, 2, 4], help='process counts, smallest first')
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(own)
    counts = sorted(set(args.nprocs))
    if not counts or counts[0] < 1:
        p.error('--nprocs: positive process counts')
    if torch.cuda.is_available() and counts[-1] > torch.cuda.device_count():
        p.error(f'--nprocs {counts[-1]}: this machine has {torch.cuda.device_count()} GPUs (one process each)')
    out = Path(args.out) / 'scaling'
    rows = measure(args.examples, counts, extra, out)
    title = f"scaling over processes: {', '.join(args.examples)} {' '.join(extra)}".strip()
    payload = {'env': environment(), 'args': {**vars(args), 'example_args': extra}, 'rows': rows,
               'table': print_table(rows, list(rows[0]), title)}
    save_json(out / 'scaling.json', payload)
    plot(rows, out / 'scaling.png', title)
    return payload


if __name__ == '__main__':
    main()
