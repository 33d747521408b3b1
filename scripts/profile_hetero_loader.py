"""Where a heterogeneous loader's batch time goes (examples/hetero_node_classification.py's
setting): our NeighborLoader over a synthetic_mag HeteroData, iterated without training,
against the bare sampling op on the same graph; then a cProfile of the loader.

    python scripts/profile_hetero_loader.py [--scale 0.1] [--batches 30] [--device cuda]
"""
import argparse
import cProfile
import pstats
import time

import torch
import torch_geometric.transforms as T

from pyg_accel.datasets import synthetic_mag
from pyg_accel.loader import NeighborLoader


def timed_batches(loader, count: int, device) -> float:
    """Mean seconds per batch over ``count`` batches (after one warm-up batch)."""
    it = iter(loader)
    next(it)
    if device.type == 'cuda':
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        next(it)
    if device.type == 'cuda':
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / count


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--scale', type=float, default=0.1)
    p.add_argument('--batches', type=int, default=30)
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    args = p.parse_args()
    device = torch.device(args.device)
    d = synthetic_mag(args.scale)
    data = T.ToUndirected()(d.data).to(device)
    seeds = ('paper', d.split['train'].to(device))
    for pipeline in (False, True):
        loader = NeighborLoader(data, [10, 10], input_nodes=seeds, batch_size=512, shuffle=True, pipeline=pipeline)
        print(f'loader, pipeline={pipeline}: {timed_batches(loader, args.batches, device) * 1e3:.2f} ms per batch')
    sampler = loader.node_sampler
    ids = d.split['train'][:512].to(device)
    for _ in range(3):
        sampler._sample({'paper': ids})
    if device.type == 'cuda':
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.batches):
        sampler._sample({'paper': ids})
    print(f'sampler alone: {(time.perf_counter() - start) / args.batches * 1e3:.2f} ms per batch')
    loader = NeighborLoader(data, [10, 10], input_nodes=seeds, batch_size=512, shuffle=True, pipeline=False)
    profile = cProfile.Profile()
    profile.enable()
    timed_batches(loader, args.batches, device)
    profile.disable()
    pstats.Stats(profile).sort_stats('tottime').print_stats(14)


if __name__ == '__main__':
    main()
