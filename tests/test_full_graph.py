"""Full-graph training on a graph partitioned across processes: the partition's
structure (every edge once, halo plans that agree between ranks, global GCN
normalisation), layers on a partition equal to the whole graph's rows, and a two-process
run (tests/full_graph_worker.py) whose outputs and gradients equal one process's."""
import pytest
import torch
import torch_geometric.nn as pyg_nn
from torch_geometric.data import Data

import pyg_accel.nn as accel_nn
from pyg_accel.distributed import HaloGraph, PartitionedGNN, balanced_bounds, partition_data, partition_graph
from pyg_accel.ops import CooGraph, spmm

from conftest import DEVICES, requires_two_gpus, run_torchrun_worker


def messy_graph(num_nodes=80, num_edges=400, seed=0):
    """Random edges with self-loops and duplicates; the last five nodes are isolated."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, num_nodes - 5, (2, num_edges), generator=g)
    return torch.cat([ei, torch.tensor([[4, 9, 9], [4, 9, 9]]), ei[:, :7]], dim=1)


def ext_ids(part):
    """Global ids of a partition's local rows, then its halo rows."""
    return torch.cat([torch.arange(part.lo, part.hi, device=part.halo_ids.device), part.halo_ids])


def test_balanced_bounds():
    ei = torch.tensor([[0, 0, 0, 0, 1, 2], [1, 1, 1, 1, 2, 3]])
    assert balanced_bounds(ei, 4, 1) == [0, 4]
    assert balanced_bounds(ei, 4, 2, 'nodes') == [0, 2, 4]
    bounds = balanced_bounds(ei, 4, 2, 'edges')  # node 1 carries most in-edges
    assert bounds[0] == 0 and bounds[-1] == 4 and bounds[1] == 2
    assert balanced_bounds(torch.empty(2, 0, dtype=torch.long), 0, 3) == [0, 0, 0, 0]
    with pytest.raises(ValueError, match='balance'):
        balanced_bounds(ei, 4, 2, 'flops')


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('world_size', [1, 3])
@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
def test_partitions_cover_the_graph(device, world_size, dtype):
    n = 80
    ei = messy_graph(n).to(device, dtype)
    parts = [partition_graph(ei, n, r, world_size) for r in range(world_size)]
    assert all(p.bounds == parts[0].bounds for p in parts)
    edge_ids = torch.cat([p.edge_id for p in parts]).sort().values
    assert torch.equal(edge_ids.cpu(), torch.arange(ei.size(1)))  # every edge exactly once
    for p in parts:
        src, dst = p.edge_index
        assert p.edge_index.device.type == device and int(dst.max()) < p.num_local
        assert torch.equal(ext_ids(p)[src], ei[0, p.edge_id].long())  # local ids map back
        assert torch.equal(dst + p.lo, ei[1, p.edge_id].long())
        key = dst * (p.num_local + p.num_halo) + src
        assert (key[1:] >= key[:-1]).all()  # sorted by destination, then source
        assert not ((p.halo_ids >= p.lo) & (p.halo_ids < p.hi)).any()
        assert sum(p.recv_counts) == p.num_halo and sum(p.send_counts) == p.send_index.numel()
    # what q receives from r is exactly what r sends to q, in the same order
    for r, pr in enumerate(parts):
        send = torch.split(pr.send_index + pr.lo, pr.send_counts)
        for q, pq in enumerate(parts):
            recv = torch.split(pq.halo_ids, pq.recv_counts)
            assert torch.equal(send[q], recv[r]), (r, q)
    assert parts[0].num_halo == 0 if world_size == 1 else sum(p.num_halo for p in parts) > 0


def test_isolated_block_and_empty_graph():
    """A block with no edges, and a graph with none at all."""
    ei = torch.tensor([[0, 1], [1, 0]])
    part = partition_graph(ei, 6, 1, 2, bounds=[0, 3, 6])
    assert part.edge_index.shape == (2, 0) and part.num_halo == 0 and part.num_local == 3
    assert part.send_counts == [0, 0]
    empty = partition_graph(torch.empty(2, 0, dtype=torch.long), 4, 0, 2)
    assert empty.edge_index.shape == (2, 0) and empty.num_local == empty.bounds[1]
    edge_index, weight = empty.gcn_norm()
    assert torch.equal(edge_index[0], torch.arange(empty.num_local)) and torch.allclose(weight, torch.ones(2))


def full_conv_rows(conv_kind, x, ei, world_size, **kwargs):
    """Our layer on every partition (halo rows taken from the whole x, as the exchange
    delivers them) against PyG's layer with the same parameters on the whole graph."""
    torch.manual_seed(0)
    n = x.size(0)
    if conv_kind == 'gcn':
        ours = accel_nn.GCNConv(x.size(1), 6, normalize=False, **kwargs)
        ref = pyg_nn.GCNConv(x.size(1), 6, **kwargs)
    elif conv_kind == 'sage':
        ours, ref = accel_nn.SAGEConv(x.size(1), 6, **kwargs), pyg_nn.SAGEConv(x.size(1), 6, **kwargs)
    else:
        ours, ref = accel_nn.GATConv(x.size(1), 3, heads=2, **kwargs), pyg_nn.GATConv(x.size(1), 3, heads=2, **kwargs)
    ref.load_state_dict(ours.state_dict())
    ours, ref = ours.to(x.device), ref.to(x.device)
    expected = ref(x, ei)
    for r in range(world_size):
        part = partition_graph(ei, n, r, world_size)
        x_ext = x[ext_ids(part)]
        if conv_kind == 'gcn':
            edge_index, weight = part.gcn_norm(improved=kwargs.get('improved', False))
            got = ours(x_ext, edge_index, weight)[:part.num_local]
        else:
            got = ours((x_ext, x_ext[:part.num_local]), part.edge_index)
        torch.testing.assert_close(got, expected[part.lo:part.hi], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('conv_kind,kwargs', [('gcn', {}), ('gcn', {'improved': True}), ('sage', {}),
                                              ('sage', {'aggr': 'max'}), ('gat', {})])
def test_layers_on_partitions_equal_the_whole_graph(device, conv_kind, kwargs):
    n = 80
    x = torch.randn(n, 5, generator=torch.Generator().manual_seed(1)).to(device)
    full_conv_rows(conv_kind, x, messy_graph(n).to(device), 3, **kwargs)


def test_gcn_norm_without_self_loops_and_weighted():
    n = 30
    ei = messy_graph(n, 100, seed=4)
    weight = torch.rand(ei.size(1), generator=torch.Generator().manual_seed(0)) + 0.1
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    for add_self_loops, improved in ((False, False), (True, False), (True, True)):
        ref_ei, ref_w = gcn_norm(ei, weight, n, improved=improved, add_self_loops=add_self_loops)
        dense = torch.zeros(n, n).index_put_((ref_ei[1], ref_ei[0]), ref_w, accumulate=True)
        for r in range(2):
            part = partition_graph(ei, n, r, 2, edge_weight=weight)
            got_ei, got_w = part.gcn_norm(improved=improved, add_self_loops=add_self_loops)
            index = (got_ei[1], ext_ids(part)[got_ei[0]])
            rows = torch.zeros(part.num_local, n).index_put_(index, got_w, accumulate=True)
            torch.testing.assert_close(rows, dense[part.lo:part.hi])


def test_partition_data_in_one_process():
    n = 50
    g = torch.Generator().manual_seed(2)
    data = Data(x=torch.randn(n, 4, generator=g), y=torch.randint(0, 3, (n,), generator=g),
                train_mask=torch.rand(n, generator=g) < 0.5, edge_index=messy_graph(n, 200, 2))
    part, local = partition_data(data, reorder='rcm')
    assert part.world_size == 1 and part.num_local == n and part.num_halo == 0
    assert sorted(local.global_id.tolist()) == list(range(n))
    assert torch.equal(local.x, data.x[local.global_id]) and torch.equal(local.y, data.y[local.global_id])
    assert torch.equal(local.train_mask, data.train_mask[local.global_id])
    x = torch.randn(n, 3)
    assert part.exchange(x) is x  # a world of one has no halo
    with pytest.raises(ValueError, match='local rows'):
        part.exchange(x[:3])
    with pytest.raises(ValueError, match='node-level'):
        part.local(x[:3])


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('kind', ['gcn', 'sage', 'gat'])
@pytest.mark.parametrize('width', [3, 16])  # GCN exchanges x W (narrower) or x (narrower)
@pytest.mark.parametrize('overlap', [True, False])
def test_partitioned_gnn_equals_pyg_stack(device, kind, width, overlap):
    """PartitionedGNN on a world of one (the whole graph, no halo) against PyG's layers."""
    n = 80
    x = torch.randn(n, 5, generator=torch.Generator().manual_seed(1)).to(device)
    ei = messy_graph(n).to(device)
    part = partition_graph(ei, n, 0, 1)
    torch.manual_seed(0)
    model = PartitionedGNN(kind, part, 5, 8, width, num_layers=2, heads=2, overlap=overlap).to(device)
    if kind == 'gcn':
        ref = [pyg_nn.GCNConv(5, 8), pyg_nn.GCNConv(8, width)]
    elif kind == 'sage':
        ref = [pyg_nn.SAGEConv(5, 8), pyg_nn.SAGEConv(8, width)]
    else:
        ref = [pyg_nn.GATConv(5, 4, heads=2), pyg_nn.GATConv(8, width, heads=1)]
    ref = torch.nn.ModuleList(ref).to(device)
    ref.load_state_dict(model.convs.state_dict())
    expected = ref[1](ref[0](x, ei).relu(), ei)
    torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match='kind'):
        PartitionedGNN('gin', part, 5, 8, 3, 2)
    with pytest.raises(ValueError, match='multiple of heads'):
        PartitionedGNN('gat', part, 5, 6, 3, 2, heads=4)
    with pytest.raises(ValueError, match='dropout must be in'):
        PartitionedGNN(kind, part, 5, 8, 3, 2, dropout=1.5)
    with pytest.raises(ValueError, match='x must have 80 rows'):
        model(x[:79])


@pytest.mark.parametrize('device', DEVICES)
def test_halo_graph_splits_edges_by_source(device):
    """A block's edges split into inner (local sources) and boundary (halo sources) edges
    with their weights; in a world of one, aggregate is the plain weighted SpMM / mean."""
    n = 60
    ei = messy_graph(n).to(device)
    weight = torch.rand(ei.size(1), device=device)
    for rank in (0, 1):
        part = partition_graph(ei, n, rank, 2, edge_weight=weight)
        halo = HaloGraph(part, edge_weight=part.edge_weight)
        src, dst = part.edge_index
        local = src < part.num_local
        assert halo.inner.num_edges == int(local.sum()) and halo.boundary.num_edges == int((~local).sum())
        assert (halo.inner.num_src, halo.boundary.num_src) == (part.num_local, part.num_halo)
        for graph, w, mask, shift in ((halo.inner, halo.inner_weight, local, 0),
                                      (halo.boundary, halo.boundary_weight, ~local, part.num_local)):
            size = (part.num_local, graph.num_src)
            got = torch.sparse_coo_tensor(torch.stack([graph.dst, graph.src]).long(), w, size,
                                          check_invariants=True).to_dense()
            want = torch.sparse_coo_tensor(torch.stack([dst[mask], src[mask] - shift]), part.edge_weight[mask], size,
                                           check_invariants=True).to_dense()
            torch.testing.assert_close(got, want)
    part = partition_graph(ei, n, 0, 1, edge_weight=weight)
    x = torch.randn(n, 4, device=device, requires_grad=True)
    whole = CooGraph.from_edge_index(ei, (n, n))
    torch.testing.assert_close(HaloGraph(part, reduce='mean').aggregate(x), spmm(whole, x, reduce='mean'))
    got = HaloGraph(part, edge_weight=part.edge_weight).aggregate(x)  # (the partition's edge order)
    torch.testing.assert_close(got, spmm(whole, x, whole.sort_edges(weight)))
    assert 'boundary_edges=0' in repr(HaloGraph(part))
    with pytest.raises(ValueError, match='reduce'):
        HaloGraph(part, reduce='max')
    with pytest.raises(ValueError, match='edge_weight'):
        HaloGraph(part, edge_weight=weight[:3])
    with pytest.raises(ValueError, match='constant'):
        HaloGraph(part, edge_weight=part.edge_weight.clone().requires_grad_())
    with pytest.raises(ValueError, match='local rows'):
        HaloGraph(part).aggregate(x[:5])


def test_bad_input():
    ei = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match='rank 2'):
        partition_graph(ei, 3, 2, 2)
    with pytest.raises(ValueError, match='bounds'):
        partition_graph(ei, 3, 0, 2, bounds=[0, 3])
    with pytest.raises(ValueError, match='outside'):
        partition_graph(ei, 2, 0, 1)
    with pytest.raises(ValueError, match='edge_weight'):
        partition_graph(ei, 3, 0, 1, edge_weight=torch.ones(5))
    with pytest.raises(ValueError, match='exchange_dtype must be None or a floating dtype'):
        partition_graph(ei, 3, 0, 1, exchange_dtype=torch.int16)


def test_exchange_dtype_narrows_floating_rows_only():
    """Rows travel in exchange_dtype only when it is a narrower floating type than
    theirs; one process has no halo and returns its rows as they are."""
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    part = partition_graph(ei, 3, 0, 1, exchange_dtype=torch.bfloat16)
    assert [part.wire_dtype(t) for t in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64)] \
        == [torch.bfloat16, torch.bfloat16, torch.float16, torch.bfloat16, torch.int64]
    assert partition_graph(ei, 3, 0, 1).wire_dtype(torch.float32) == torch.float32
    x = torch.randn(3, 4)
    assert part.exchange(x) is x


@pytest.mark.slow  # processes under torchrun
def test_two_processes_on_the_cpu(tmp_path):
    """Halo exchange over gloo: forward, backward and a DDP step equal one process's."""
    run_torchrun_worker('full_graph_worker.py', tmp_path, gpus=False)


@requires_two_gpus
def test_two_processes_on_two_gpus(tmp_path):
    """The same over NCCL on two GPUs."""
    run_torchrun_worker('full_graph_worker.py', tmp_path, gpus=True)
