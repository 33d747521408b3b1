"""A plain loop of CUDA sampling calls on a synthetic graph, for external tools
(ncu, compute-sanitizer):

    ncu --clock-control none --kernel-name regex:expand --launch-skip 5 --launch-count 1 \
        python3 scripts/sample_loop.py --calls 3
"""
import argparse

import torch

from pyg_accel.data import GraphStore
from pyg_accel.datasets import synthetic_dataset
from pyg_accel.ops import neighbor_sample

p = argparse.ArgumentParser()
p.add_argument('--preset', default='products')
p.add_argument('--batch', type=int, default=1024)
p.add_argument('--fanouts', type=int, nargs='*', default=[15, 10, 5])
p.add_argument('--calls', type=int, default=3)
args = p.parse_args()
ds = synthetic_dataset(args.preset, device='cuda')
gs = GraphStore('cuda')
gs.put_edge_index(ds.data.edge_index, edge_type=None, layout='coo', size=(ds.data.num_nodes,) * 2)
row, colptr, _ = gs.csc()
train = ds.split['train'].cuda()
for i in range(args.calls):
    out = neighbor_sample(colptr, row, train[torch.randperm(train.numel(), device='cuda')[:args.batch]], args.fanouts)
    print(i, out.num_sampled_nodes, out.num_sampled_edges, flush=True)
