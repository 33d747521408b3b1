"""Workloads for Nsight Compute: the memory-bound kernels whose bars sit near their
ceilings (the 400/512 B gather against ``index_select``, SpMM/SDDMM at F = 16 and 32),
each run once inside an NVTX range named ``probe`` so that ncu profiles only them.

    scripts/ncu_probe.sh OUT      # ncu over this script, a CSV of DRAM/L2/stall counters

Run alone (no ncu) it checks its own results and prints what it ran.
"""
from __future__ import annotations

import argparse
import contextlib

import torch

from pyg_accel.datasets import synthetic_dataset
from pyg_accel.ops import CooGraph, gather, sddmm, spmm


@contextlib.contextmanager
def probe(name: str):
    """One profiled region; prints its name so the CSV's kernel order can be read."""
    torch.cuda.synchronize()
    print(f'probe: {name}', flush=True)
    torch.cuda.nvtx.range_push('probe')
    try:
        yield
    finally:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def gathers(table_gb: float, rows: int) -> None:
    """Ours and ``index_select`` at 400, 512 and 4096 B rows, and a plain copy of the
    512 B gather's output (the copy ceiling)."""
    for row_bytes in (400, 512, 4096):
        width = row_bytes // 4
        table = torch.empty(int(table_gb * 2**30) // row_bytes, width, device='cuda').normal_()
        index = torch.randint(0, table.size(0), (rows,), device='cuda')
        with probe(f'gather {row_bytes} B: ours, index_select'):
            ours = gather(table, index, check_bounds=False)
            ref = torch.index_select(table, 0, index)
        assert torch.equal(ours, ref)
        if row_bytes == 512:
            with probe('copy of 256 MB'):
                ours.clone()
        del table, ours, ref


def sparse(features) -> None:
    """SpMM (its output zero-fill included) and SDDMM on the products-size graph."""
    data = synthetic_dataset('products', device='cuda').data
    graph = CooGraph.from_edge_index(data.edge_index.cuda(), (data.num_nodes, data.num_nodes))
    weight = torch.rand(graph.num_edges, device='cuda')
    for F in features:
        x = torch.randn(data.num_nodes, F, device='cuda')
        with probe(f'spmm F={F}'):
            spmm(graph, x, weight)
        with probe(f'sddmm F={F}'):
            sddmm(graph, x, x)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--table-gb', type=float, default=4.0)
    p.add_argument('--rows', type=int, default=500_000)
    p.add_argument('--features', type=int, nargs='*', default=[16, 32])
    args = p.parse_args(argv)
    gathers(args.table_gb, args.rows)
    if args.features:
        sparse(args.features)


if __name__ == '__main__':
    main()
