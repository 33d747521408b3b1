"""One process of tests/test_full_graph.py's two-process runs (under torchrun): GCN,
GraphSAGE and GAT trained full-graph on a partitioned graph (halo exchange) give this
process's rows of the whole graph's outputs, the input gradients of its rows, and,
summed over the processes, the whole graph's weight gradients; a DDP step agrees too,
with the exchange overlapped behind the local edges (HaloGraph) and not.
Writes 'rank R on DEVICE' to $PYG_ACCEL_WORKER_OUT/rank-R when every check passed."""
import torch
import torch.distributed as dist
import torch_geometric.nn as pyg_nn
from torch_geometric.data import Data

import pyg_accel.nn as accel_nn
from pyg_accel.distributed import ExchangeTimer, HaloGraph, PartitionedGNN, partition_data, partition_graph
from pyg_accel.ops import CooGraph, spmm
from conftest import worker_main

NUM_NODES, WIDTH = 300, 8



def make_layers(kind: str):
    """Two layers of ours and PyG's with the same parameters."""
    torch.manual_seed(0)
    if kind == 'gcn':
        ours = [accel_nn.GCNConv(WIDTH, 16, normalize=False), accel_nn.GCNConv(16, 4, normalize=False)]
        ref = [pyg_nn.GCNConv(WIDTH, 16), pyg_nn.GCNConv(16, 4)]
    elif kind == 'sage':
        ours = [accel_nn.SAGEConv(WIDTH, 16), accel_nn.SAGEConv(16, 4)]
        ref = [pyg_nn.SAGEConv(WIDTH, 16), pyg_nn.SAGEConv(16, 4)]
    else:
        ours = [accel_nn.GATConv(WIDTH, 8, heads=2), accel_nn.GATConv(16, 4, heads=1)]
        ref = [pyg_nn.GATConv(WIDTH, 8, heads=2), pyg_nn.GATConv(16, 4, heads=1)]
    ours, ref = torch.nn.ModuleList(ours), torch.nn.ModuleList(ref)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def forward_partitioned(layers, part, x, kind):
    graph = part.gcn_norm() if kind == 'gcn' else None
    for i, conv in enumerate(layers):
        x_ext = part.exchange(x)
        x = conv(x_ext, *graph)[:part.num_local] if kind == 'gcn' else conv((x_ext, x), part.edge_index)
        x = x.relu() if i == 0 else x
    return x


def forward_whole(layers, x, edge_index):
    for i, conv in enumerate(layers):
        x = conv(x, edge_index)
        x = x.relu() if i == 0 else x
    return x


def check_halo_graph(data: Data, device: torch.device) -> None:
    """HaloGraph.aggregate (weighted sum and mean, [N, F] and [N, H, C], fp32 and fp64)
    equals the whole graph's SpMM on this process's rows, values and input gradients."""
    n = data.num_nodes
    weight = torch.rand(data.edge_index.size(1), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    whole = CooGraph.from_edge_index(data.edge_index.to(device), (n, n))
    part = partition_graph(data.edge_index.to(device), n, dist.get_rank(), 2, edge_weight=weight.to(device),
                           group=dist.new_group())
    for reduce, shape, dtype in (('sum', (5,), torch.float64), ('mean', (2, 3), torch.float32)):
        h_all = torch.randn(n, *shape, dtype=dtype, device=device, requires_grad=True)
        w = whole.sort_edges(weight.to(device, dtype)) if reduce == 'sum' else None
        want = spmm(whole, h_all, w, reduce=reduce)
        grad_out = torch.randn_like(want)
        want.backward(grad_out)
        halo = HaloGraph(part, edge_weight=part.edge_weight.to(dtype) if reduce == 'sum' else None, reduce=reduce)
        h = part.local(h_all).detach().clone().requires_grad_()
        got = halo.aggregate(h)
        got.backward(part.local(grad_out))
        tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else {}
        torch.testing.assert_close(got, part.local(want), **tol)
        torch.testing.assert_close(h.grad, part.local(h_all.grad), **tol)


def check_exchange_dtype(data: Data, device: torch.device) -> None:
    """Halo rows and their gradients in bfloat16 (exchange_dtype): rows bfloat16 holds
    exactly arrive exactly; others arrive rounded once, so outputs and gradients stay
    within bfloat16's precision of the exact exchange's, and differ from them (the rows
    did travel narrower), through both exchange paths."""
    n = data.num_nodes
    exact = partition_graph(data.edge_index.to(device), n, dist.get_rank(), 2, group=dist.new_group())
    narrow = partition_graph(data.edge_index.to(device), n, dist.get_rank(), 2, group=dist.new_group(),
                             exchange_dtype=torch.bfloat16)
    assert narrow.wire_dtype(torch.float32) == torch.bfloat16 and narrow.wire_dtype(torch.bfloat16) == torch.bfloat16
    h_all = torch.randn(n, 6, generator=torch.Generator().manual_seed(2)).to(device)
    local = exact.local(h_all)
    representable = local.bfloat16().float()
    torch.testing.assert_close(narrow.exchange(representable), exact.exchange(representable), rtol=0, atol=0)
    got, want = narrow.exchange(local), exact.exchange(local)
    torch.testing.assert_close(got[:narrow.num_local], want[:narrow.num_local], rtol=0, atol=0)  # (local rows stay)
    torch.testing.assert_close(got[narrow.num_local:], want[narrow.num_local:].bfloat16().float(), rtol=0, atol=0)
    grad_out = torch.randn(n, 6, generator=torch.Generator().manual_seed(3)).to(device)
    for path in ('exchange', 'overlapped'):
        results = []
        for part in (exact, narrow):
            h = local.clone().requires_grad_()
            if path == 'exchange':
                out = spmm(CooGraph.from_edge_index(part.edge_index, (part.num_local + part.num_halo, part.num_local)),
                           part.exchange(h))
            else:
                out = HaloGraph(part).aggregate(h)
            out.backward(part.local(grad_out))
            results.append((out.detach(), h.grad))
        (out_exact, grad_exact), (out_narrow, grad_narrow) = results
        for a, b in ((out_narrow, out_exact), (grad_narrow, grad_exact)):
            torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2 * float(b.abs().max()), msg=path)
            assert not torch.equal(a, b), f'{path}: bfloat16 rows gave the exact values'


def check_input_halo(data: Data, device: torch.device) -> None:
    """PartitionedGNN given its input's halo rows (part.exchange(x), once) equals it given
    the block's rows, outputs and weight gradients, every kind and exchange path; with
    dropout in training every block drops a halo node's features as its owner does, and
    boolean rows (the mask) travel exactly."""
    part, local = partition_data(data, device=device)  # (not renumbered: partition ids are data's)
    for shape in ((13,), (16,), (2, 5)):
        mask = torch.rand(part.num_local, *shape, device=device) < 0.5
        assert torch.equal(part.exchange(mask), part.exchange(mask.float()).bool())
    x_ext = part.exchange(local.x)
    assert part.num_halo > 0 and torch.equal(x_ext, data.x.to(device)[part.ext_ids()])
    for kind, overlap in (('gcn', True), ('gcn', False), ('sage', True), ('sage', False), ('gat', False)):
        grads = []
        for inputs in (local.x, x_ext):
            torch.manual_seed(0)
            model = PartitionedGNN(kind, part, WIDTH, 16, 4, num_layers=2, overlap=overlap).to(device)
            out = model(inputs)
            out.pow(2).sum().backward()
            grads.append((out.detach(), [p.grad for p in model.parameters()]))
        (out_a, grad_a), (out_b, grad_b) = grads
        torch.testing.assert_close(out_b, out_a, atol=1e-5, rtol=1e-5, msg=f'{kind} {overlap}')
        for a, b in zip(grad_a, grad_b):
            torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4, msg=f'{kind} {overlap}')
    model = PartitionedGNN('gcn', part, WIDTH, 16, 4, num_layers=2, dropout=0.5).to(device).train()
    dropped = model._input_dropout(x_ext)  # [num_local + num_halo, WIDTH]
    kept = dropped[:part.num_local] != 0
    assert 0.4 < float(kept.float().mean()) < 0.6
    torch.testing.assert_close(dropped[:part.num_local][kept], local.x[kept] * 2)
    rows = [None] * dist.get_world_size()
    dist.all_gather_object(rows, (part.ext_ids()[:part.num_local].cpu(), dropped[:part.num_local].cpu()))
    whole = torch.zeros(data.num_nodes, WIDTH)
    for ids, values in rows:
        whole[ids] = values
    assert torch.equal(dropped[part.num_local:].cpu(), whole[part.halo_ids.cpu()])  # the owners' masks


def check(rank: int, world_size: int, device: torch.device) -> None:
    assert world_size == 2
    g = torch.Generator().manual_seed(0)  # the same graph on every rank
    ei = torch.randint(0, NUM_NODES - 10, (2, 3000), generator=g)  # 10 isolated nodes
    ei = torch.cat([ei, torch.tensor([[5, 6], [5, 6]]), ei[:, :20]], dim=1)  # self-loops, duplicates
    data = Data(x=torch.randn(NUM_NODES, WIDTH, generator=g), edge_index=ei, num_nodes=NUM_NODES)
    target = torch.randn(NUM_NODES, 4, generator=g)
    for kind, reorder in (('gcn', None), ('sage', 'rcm'), ('gat', 'cluster')):
        ours, ref = make_layers(kind)
        ours, ref = ours.to(device), ref.to(device)
        x_all = data.x.to(device, copy=True).requires_grad_()
        expected = forward_whole(ref, x_all, ei.to(device))
        (expected * target.to(device)).sum().backward()

        part, local = partition_data(data, reorder=reorder, device=device)
        assert part.world_size == 2 and part.num_halo > 0 and local.x.device == device
        rows = local.global_id
        x = local.x.clone().requires_grad_()
        out = forward_partitioned(ours, part, x, kind)
        (out * target.to(device)[rows]).sum().backward()
        torch.testing.assert_close(out, expected[rows], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(x.grad, x_all.grad[rows], atol=1e-4, rtol=1e-4)
        for (name, p), q in zip(ours.named_parameters(), ref.parameters()):
            grad = p.grad.clone()
            dist.all_reduce(grad)
            torch.testing.assert_close(grad, q.grad, atol=1e-4, rtol=1e-4, msg=f'{kind} {name}')

    check_halo_graph(data, device)
    check_exchange_dtype(data, device)
    check_input_halo(data, device)

    # PartitionedGNN under DDP, beside the exchange (its own communicator), with the
    # exchange overlapped and not: averaged gradients = the whole graph's / 2
    for kind, overlap in (('sage', True), ('gcn', True), ('sage', False), ('gcn', False)):
        _, ref = make_layers(kind)
        ref = ref.to(device)
        forward_whole(ref, data.x.to(device), ei.to(device)).mul(target.to(device)).sum().backward()
        part, local = partition_data(data, reorder='cluster', device=device)
        part.timer = ExchangeTimer() if overlap else None
        ours = PartitionedGNN(kind, part, WIDTH, 16, 4, num_layers=2, overlap=overlap).to(device)
        ours.convs.load_state_dict(ref.state_dict())
        model = torch.nn.parallel.DistributedDataParallel(ours)
        for _ in range(2):  # twice: the second step reuses DDP's buckets
            model.zero_grad()
            out = model(local.x)
            (out * target.to(device)[local.global_id]).sum().backward()
        for p, q in zip(ours.convs.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad * world_size, q.grad, atol=1e-4, rtol=1e-4, msg=f'{kind} {overlap}')
        if part.timer is not None:
            assert part.timer.seconds() >= 0.0
        del model


if __name__ == '__main__':
    worker_main(check)
