"""Probe: does splitting the graph's edges into source tiles make SpMM faster at narrow F?

At F = 16 (64-byte rows) SpMM on the products-size graph runs at 1.33-1.44x its gather
floor on an H200: ~124 M random 64-byte reads from a 157 MB feature matrix that does not
fit the 50 MB L2. If the edges are grouped by source tile (rows [t * n / K, (t+1) * n / K)),
each tile's rows can stay in L2 while its edges run, at the price of reading and writing
the output once per tile. This script measures that trade with the existing kernels: one
``spmm_add_`` per tile (each tile sorted by destination) into one zeroed output, against
one ``spmm`` over the whole graph and cuSPARSE, in one process on the same data.

    python scripts/tiling_probe.py --features 16 32 --tiles 1 2 4 8 16 32 --out OUT
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))
from common import copy_bandwidth, environment, gather_floor_bytes, median_time, print_table, save_json  # noqa: E402

from pyg_accel.datasets import synthetic_dataset  # noqa: E402
from pyg_accel.ops import CooGraph, sddmm, spmm, spmm_add_  # noqa: E402


def source_tiles(graph: CooGraph, weight: torch.Tensor, tiles: int):
    """The graph's edges split by source tile, each part sorted by destination: a list of
    (CooGraph over all nodes, its weights)."""
    n = graph.num_src
    rows = (n + tiles - 1) // tiles
    tile = graph.src.long() // rows
    key = tile * graph.num_dst + graph.dst.long()
    order = torch.sort(key, stable=True).indices
    counts = torch.bincount(tile, minlength=tiles).tolist()
    src, dst, w = graph.src[order], graph.dst[order], weight[order]
    parts, start = [], 0
    for c in counts:  # (each part is already sorted by destination; from_edge_index keeps that order)
        part = CooGraph.from_edge_index(torch.stack([src[start:start + c], dst[start:start + c]]), (n, graph.num_dst))
        parts.append((part, w[start:start + c]))
        start += c
    return parts


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--preset', default='products')
    p.add_argument('--scale', type=float, default=1.0)
    p.add_argument('--features', type=int, nargs='*', default=[16, 32])
    p.add_argument('--tiles', type=int, nargs='*', default=[1, 2, 4, 8, 16, 32])
    p.add_argument('--reps', type=int, default=10)
    p.add_argument('--device', default='cuda')
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    device = torch.device(args.device)
    dataset = synthetic_dataset(args.preset, scale=args.scale, device=device)
    n, ei = dataset.data.num_nodes, dataset.data.edge_index.to(device)
    graph = CooGraph.from_edge_index(ei, (n, n))
    E = graph.num_edges
    weight = torch.rand(E, device=device)
    csr = torch.sparse_csr_tensor(graph.ptr, graph.src.long(), weight, (n, n))
    copy_bps = copy_bandwidth(device, 1 << 30) if device.type == 'cuda' else float('nan')
    print(f'{dataset}: {E} edges; copy bandwidth {copy_bps / 1e9:.0f} GB/s', flush=True)
    rows = []
    for F in args.features:
        x = torch.randn(n, F, device=device)
        a = torch.randn(n, F, device=device)
        want = spmm(graph, x, weight)
        floor_ms = gather_floor_bytes(E, n, F) / copy_bps * 1e3
        base = {'F': F, 'floor ms': floor_ms,
                'spmm ms': median_time(lambda: spmm(graph, x, weight), device, reps=args.reps) * 1e3,
                'cuSPARSE ms': median_time(lambda: torch.sparse.mm(csr, x), device, reps=args.reps) * 1e3,
                'sddmm ms': median_time(lambda: sddmm(graph, a, x), device, reps=args.reps) * 1e3}
        for K in args.tiles:
            parts = source_tiles(graph, weight, K)
            out = torch.empty(n, F, device=device)

            def tiled():
                out.zero_()
                for g, w in parts:
                    spmm_add_(out, g, x, w)
                return out

            torch.testing.assert_close(tiled(), want, atol=1e-3, rtol=1e-3)
            r = dict(base, tiles=K, slice_MB=n / K * F * 4 / 1e6)
            r['tiled spmm ms'] = median_time(tiled, device, reps=args.reps) * 1e3
            r['tiled sddmm ms'] = median_time(lambda: [sddmm(g, a, x) for g, _ in parts], device, reps=args.reps) * 1e3
            r['tiled / floor'] = r['tiled spmm ms'] / floor_ms
            r['spmm / floor'] = r['spmm ms'] / floor_ms
            r['tiled vs cuSPARSE'] = r['cuSPARSE ms'] / r['tiled spmm ms']
            rows.append(r)
            print(r, flush=True)
            del parts
    payload = {'env': environment(), 'args': vars(args), 'graph': repr(dataset), 'copy_GBps': copy_bps / 1e9,
               'rows': rows}
    payload['table'] = print_table(rows, list(rows[0]), f'SpMM by source tiles on {dataset.name}, median ms')
    save_json(Path(args.out) / 'tiling_probe.json', payload)
    return payload


if __name__ == '__main__':
    main()
