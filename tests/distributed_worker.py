"""One process of tests/test_distributed.py's two-process runs (under torchrun): shards,
peer reads, owner writes, our NeighborLoader / LinkNeighborLoader over sharded
feature stores (homogeneous and heterogeneous), and one host copy of a graph shared by
both processes. Writes
'rank R on DEVICE' to $PYG_ACCEL_WORKER_OUT/rank-R when every check passed."""
import pytest
import torch
import torch.distributed as dist
from torch_geometric.data import Data

from pyg_accel.data import from_data
from pyg_accel.distributed import ShardedTensor, row_partition, share_graph_store, share_host_tensor
from pyg_accel.loader import LinkNeighborLoader, NeighborLoader
from pyg_accel.sampler import NeighborSampler
from conftest import check_sharded_generation, paper_author_graph, worker_main

NUM_ROWS, WIDTH = 1003, 24



def check(rank: int, world_size: int, device: torch.device) -> None:
    assert world_size == 2
    full = torch.randn(NUM_ROWS, WIDTH, generator=torch.Generator().manual_seed(0))  # the same on every rank
    table = ShardedTensor.from_full(full)
    bounds = row_partition(NUM_ROWS, world_size)
    assert len(table.shards) == world_size and table.local_rows == range(bounds[rank], bounds[rank + 1])
    assert table.device == device  # every block is read through this GPU (the peer's mapped into it)
    assert all(s.device == device for s in table.shards)
    index = torch.randint(0, NUM_ROWS, (5000,), generator=torch.Generator().manual_seed(rank))
    for dtype in (torch.int64, torch.int32):
        out = table.gather(index.to(dtype).to(device))
        assert out.device == device and torch.equal(out.cpu(), full[index])
    assert torch.equal(table.to_dense().cpu(), full)
    half = ShardedTensor.from_full(full.bfloat16())
    assert torch.equal(half.gather(index).cpu(), full.bfloat16()[index])
    with pytest.raises(IndexError, match='out of range'):
        table.gather(torch.tensor([NUM_ROWS]))
    # each rank writes its first row; after a barrier every rank reads the others'
    table.write_local_rows(torch.tensor([bounds[rank]]), torch.full((1, WIDTH), float(100 + rank)))
    if device.type == 'cuda':
        torch.cuda.synchronize()
    dist.barrier()
    for r in range(world_size):
        assert (table[bounds[r]] == 100 + r).all()
    with pytest.raises(IndexError, match='rank that holds'):
        table.write_local_rows(torch.tensor([bounds[(rank + 1) % world_size]]), torch.zeros(1, WIDTH))
    # the same Data on every rank: features sharded, graph per rank, our loader
    g = torch.Generator().manual_seed(1)
    data = Data(x=torch.randn(300, 8, generator=g), y=torch.randint(0, 3, (300,), generator=g),
                edge_index=torch.randint(0, 300, (2, 2000), generator=g), num_nodes=300)
    fs, gs = from_data(data, 'sharded')
    seeds = torch.arange(300)[rank::world_size]  # each rank trains on its share of the seeds
    batches = 0
    for batch in NeighborLoader((fs, gs), [4, 3], input_nodes=seeds, batch_size=32):
        n_id = batch.n_id.cpu()
        assert torch.equal(batch.x.cpu(), data.x[n_id]) and torch.equal(batch.y.cpu(), data.y[n_id])
        assert batch.x.device == device
        batches += 1
    assert batches == 5
    # link prediction over the same sharded store (negatives drawn per batch)
    pairs = data.edge_index[:, rank::world_size][:, :64]
    links = LinkNeighborLoader((fs, gs), [3, 2], edge_label_index=pairs, batch_size=32, neg_sampling_ratio=1.0)
    for batch in links:
        assert torch.equal(batch.x.cpu(), data.x[batch.n_id.cpu()]) and batch.edge_label_index.shape[1] == 64
    # a heterogeneous graph: every node type's features sharded
    torch.manual_seed(2)  # (the same HeteroData on every rank)
    hetero = paper_author_graph(200, 120, 900)
    hetero['paper', 'written_by', 'author'].edge_index = hetero['author', 'writes', 'paper'].edge_index.flip(0)
    fs, gs = from_data(hetero, 'sharded')
    papers = torch.arange(200)[rank::world_size]
    for batch in NeighborLoader((fs, gs), [3, 2], input_nodes=('paper', papers), batch_size=25):
        for node_type in ('paper', 'author'):
            n_id = batch[node_type].n_id.cpu()
            assert torch.equal(batch[node_type].x.cpu(), hetero[node_type].x[n_id])
            assert batch[node_type].x.device == device
    check_host_copy(rank, device)
    check_sharded_generation(device)
    check_train_step(rank, device)


def check_train_step(rank: int, device: torch.device) -> None:
    """TrainStep over the process group (captured on GPUs, the gradient all-reduce
    between its graphs) trains as DDP's own loop: each rank on its own batches, the
    same parameters on both ranks and in both runs."""
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel
    import pyg_accel.nn.models as accel_models
    from pyg_accel.training import TrainStep
    g = torch.Generator().manual_seed(3)
    data = Data(x=torch.randn(400, 8, generator=g), y=torch.randint(0, 3, (400,), generator=g),
                edge_index=torch.randint(0, 400, (2, 3000), generator=g), num_nodes=400)
    fs, gs = from_data(data, device)
    loader = NeighborLoader((fs, gs), [4, 3], input_nodes=torch.arange(400)[rank::2], batch_size=40, shuffle=True,
                            pipeline=False)
    torch.manual_seed(0)
    torch.manual_seed(rank)  # (different initial weights: both runs start from rank 0's)
    models = [accel_models.GraphSAGE(8, 16, 2, 3).to(device) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    models[0] = DistributedDataParallel(models[0], device_ids=[device] if device.type == 'cuda' else None)
    opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in models]
    step = TrainStep(models[1], opts[1], process_group=dist.group.WORLD)
    for run in range(2):
        torch.manual_seed(10 + rank)  # (both runs see the same batches; the ranks different ones)
        for _ in range(3):
            for batch in loader:
                if run == 1:
                    step(batch)
                    continue
                opts[0].zero_grad()
                F.cross_entropy(models[0](batch.x, batch.edge_index)[:batch.batch_size],
                                batch.y[:batch.batch_size]).backward()
                opts[0].step()
    if device.type == 'cuda':
        assert step.num_graphs >= 1 and step.stats['replayed'] >= 1
    params = torch.cat([p.detach().reshape(-1) for p in models[1].parameters()])
    expected = torch.cat([p.detach().reshape(-1) for p in models[0].parameters()])
    torch.testing.assert_close(params, expected, atol=1e-4, rtol=1e-3)
    other = params.clone()
    dist.broadcast(other, src=0)
    assert torch.equal(params, other)  # (one model on both ranks)


def check_host_copy(rank: int, device: torch.device) -> None:
    """One host copy for both processes: a write by rank 1 is seen by rank 0; a shared
    graph store (pinned with GPUs: each GPU's sampler reads the one copy in place) gives
    the sample of an unshared one."""
    cuda = device.type == 'cuda'
    shared = share_host_tensor(torch.arange(10) if rank == 0 else torch.zeros(10, dtype=torch.long))
    assert torch.equal(shared, torch.arange(10)) and shared.is_pinned() == cuda
    dist.barrier()
    if rank == 1:
        shared[3] = -1
    dist.barrier()
    assert int(shared[3]) == -1
    g = torch.Generator().manual_seed(3)  # the same graph on every rank
    data = Data(x=torch.randn(400, 4, generator=g), edge_index=torch.randint(0, 400, (2, 3000), generator=g),
                w=torch.rand(3000, generator=g), num_nodes=400)
    location = 'cuda' if cuda else 'cpu'
    seeds = torch.arange(40)
    samples = []
    for share in ('no', 'every rank loads', 'rank 0 loads'):
        fs, gs = from_data(data, location, graph_location='pinned' if cuda else 'cpu')
        if share == 'rank 0 loads':  # the other ranks pass None and get a new store
            gs = share_graph_store(gs if rank == 0 else None)
            assert gs.location.kind == ('pinned' if cuda else 'cpu') and gs.device.type == device.type
        elif share == 'every rank loads':
            assert share_graph_store(gs) is gs
        if share != 'no':
            row, colptr, perm = gs.csc()
            assert row.is_pinned() == cuda and gs.get_edge_feature('w').is_pinned() == cuda
        sampler = NeighborSampler((fs, gs), [4, 3], seed=0, weight_attr='w')
        assert sampler.device.type == device.type
        samples.append(sampler._sample(seeds))
    for key in ('node', 'row', 'col', 'edge'):
        assert all(torch.equal(getattr(samples[0], key), getattr(s, key)) for s in samples[1:]), key
    # another graph on rank 1: every rank raises (none is left waiting in a collective)
    other = Data(edge_index=data.edge_index[:, :1000 if rank else 2000], num_nodes=400)
    with pytest.raises(ValueError, match='ranks \\[1\\] hold another graph'):
        share_graph_store(from_data(other, location, graph_location='pinned' if cuda else 'cpu')[1])
    # rank 0 without a store: every rank raises
    with pytest.raises(ValueError, match='rank 0 must pass its GraphStore'):
        share_graph_store(None if rank == 0 else gs)


if __name__ == '__main__':
    worker_main(check)
