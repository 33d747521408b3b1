"""Accuracy parity: the main example's model and loop on pyg_accel (our sampler, stores and
layers) and on stock PyG (its loader and layers; ``--baseline pyg``), same data, seeds
and hyper-parameters; mean test accuracy over seeds per model, and the gap.

    python scripts/accuracy_parity.py --models sage gcn gat --seeds 0 1 2 3 4 --epochs 20 --out OUT
    python scripts/accuracy_parity.py --dataset synthetic-products --scale 0.1 ...

Stock PyG's loader needs pyg-lib or torch-sparse (``../shared/cpu-wheels`` /
``../shared/gpu-wheels``). Writes ``parity.json`` and ``parity.md`` to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'examples'))
import node_classification  # noqa: E402


def run(model: str, seed: int, baseline: str, args, extra) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        argv = ['--model', model, '--seed', str(seed), '--epochs', str(args.epochs), '--dataset', args.dataset,
                '--scale', str(args.scale), '--baseline', baseline, '--out', tmp, *extra]
        return float(node_classification.main(argv)['test_acc'])


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', nargs='*', default=['sage', 'gcn', 'gat'])
    p.add_argument('--seeds', type=int, nargs='*', default=[0, 1, 2, 3, 4])
    p.add_argument('--epochs', type=int, default=20)
    p.add_argument('--dataset', default='default')
    p.add_argument('--scale', type=float, default=1.0)
    p.add_argument('--tolerance', type=float, default=0.005, help='allowed gap of the means (0.005 = 0.5 points)')
    p.add_argument('--out', default='parity-out')
    args, extra = p.parse_known_args(argv)  # anything else goes to the example (e.g. --hidden 256)
    rows = []
    for model in args.models:
        accs = {b: [run(model, s, b, args, extra) for s in args.seeds] for b in ('none', 'pyg')}
        ours, pyg = statistics.mean(accs['none']), statistics.mean(accs['pyg'])
        rows.append({'model': model, 'seeds': len(args.seeds), 'pyg_accel': ours, 'stock PyG': pyg,
                     'pyg_accel std': statistics.pstdev(accs['none']), 'stock PyG std': statistics.pstdev(accs['pyg']),
                     'gap (points)': 100 * (ours - pyg), 'within tolerance': abs(ours - pyg) <= args.tolerance,
                     'runs': accs})
    lines = ['| model | seeds | pyg_accel test acc | stock PyG test acc | gap (points) | within ±%.1f |' %
             (100 * args.tolerance), '|---|---:|---:|---:|---:|---|']
    for r in rows:
        lines.append(f"| {r['model']} | {r['seeds']} | {100 * r['pyg_accel']:.2f} ± {100 * r['pyg_accel std']:.2f} | "
                     f"{100 * r['stock PyG']:.2f} ± {100 * r['stock PyG std']:.2f} | {r['gap (points)']:+.2f} | "
                     f"{'yes' if r['within tolerance'] else 'no'} |")
    table = '\n'.join(lines)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'parity.json').write_text(json.dumps({'args': vars(args), 'extra': extra, 'rows': rows}, indent=1))
    (out / 'parity.md').write_text(table + '\n')
    return {'rows': rows, 'table': table}


if __name__ == '__main__':
    main()
