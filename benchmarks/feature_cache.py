"""Feature tiers for graphs larger than the GPU: the per-batch feature gather of a
NeighborLoader-style batch from GPU memory, from pinned host memory (UVA), and from pinned
memory behind a GPU cache of the hottest rows, with the cache's hit rate. Rows are ranked
by degree (``rows_by_degree``) or by measured access frequency (``rows_by_access`` over
``--presample`` batches of other seeds than the timed ones).

Batches are real sampler outputs (pyg_accel's sampler, fanout [15, 10, 5], batch 1024 by
default) on a synthetic graph; only the gather of their node features is timed (CUDA
events, median over the batches), as ``FeatureStore.get_tensor`` serves it to PyG's loader.

    python benchmarks/feature_cache.py --preset products --fractions 0.05 0.1 0.25 --out OUT
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_graph_arguments, environment, median_time, print_table, save_json  # noqa: E402

from pyg_accel.data import FeatureStore, from_data, rows_by_access, rows_by_degree  # noqa: E402
from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.ops import neighbor_sample  # noqa: E402


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_arguments(p, device=False)
    p.add_argument('--fanout', type=int, nargs='*', default=[15, 10, 5])
    p.add_argument('--batch-size', type=int, default=1024)
    p.add_argument('--batches', type=int, default=20)
    p.add_argument('--fractions', type=float, nargs='*', default=[0.05, 0.1, 0.25], help='cached share of rows')
    p.add_argument('--policies', nargs='*', default=['degree', 'access'], choices=['degree', 'access'])
    p.add_argument('--presample', type=int, default=20, help="batches counted for the 'access' ranking")
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit('feature_cache.py measures GPU reads: it needs a GPU')
    dev = torch.device('cuda')
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=dev)
    data = dataset.data.to('cpu')
    _, gs = from_data(data, 'cuda')
    row, colptr, _ = gs.csc()
    train = dataset.split['train'].to(dev)

    def sample(count: int, first_seed: int):  # real batches: the sampled node ids, seeds first
        seeds = [train[torch.randint(0, train.numel(), (args.batch_size,), device=dev)] for _ in range(count)]
        return [neighbor_sample(colptr, row, s, args.fanout, random_seed=first_seed + b).node
                for b, s in enumerate(seeds)]

    node_sets = sample(args.batches, 0)
    x = data.x
    row_bytes = x.shape[1] * x.element_size()
    print(f'{dataset}; {args.batches} batches, mean {sum(n.numel() for n in node_sets) / len(node_sets):,.0f} '
          f'nodes per batch, {row_bytes} B rows', flush=True)

    def measure(fs):
        return median_time(lambda: [fs.get_tensor(None, 'x', n) for n in node_sets], dev, reps=5) \
            / len(node_sets) * 1e3

    rows = []
    device_fs = FeatureStore('cuda')
    device_fs[None, 'x', None] = x
    rows.append({'tier': 'GPU memory', 'cached rows': '—', 'ms/batch': measure(device_fs), 'hit rate': 1.0})
    del device_fs
    pinned_fs = FeatureStore('pinned')
    pinned_fs[None, 'x', None] = x
    rows.append({'tier': 'pinned (UVA)', 'cached rows': 0, 'ms/batch': measure(pinned_fs), 'hit rate': 0.0})
    ranking = {}
    if 'degree' in args.policies:
        ranking['degree'] = rows_by_degree(gs)
    if 'access' in args.policies:  # other batches than the timed ones
        ranking['access'] = rows_by_access(sample(args.presample, 10**6), x.shape[0])
    for policy, ranked in ranking.items():
        for fraction in args.fractions:
            cache = pinned_fs.cache_rows('x', rows=ranked, num_rows=int(fraction * x.shape[0]))
            for n in node_sets:  # check every batch once
                assert torch.equal(pinned_fs.get_tensor(None, 'x', n).cpu(), x[n.cpu()])
            cache.reset_stats()
            ms = measure(pinned_fs)
            rows.append({'tier': f'pinned + GPU cache ({fraction:.0%}, by {policy})', 'cached rows': cache.num_cached,
                         'ms/batch': ms, 'hit rate': cache.hit_rate()})
    base = rows[1]['ms/batch']
    for r in rows:
        r['vs pinned'] = base / r['ms/batch']
        print(r, flush=True)
    payload = {'env': environment(), 'args': vars(args), 'graph': repr(dataset), 'rows': rows}
    payload['table'] = print_table(rows, list(rows[0]), f'feature gather per batch on {dataset.name}, fanout '
                                                        f'{args.fanout}, batch {args.batch_size}')
    save_json(Path(args.out) / 'feature_cache.json', payload)
    return payload


if __name__ == '__main__':
    main()
