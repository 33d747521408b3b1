"""pyg_accel.distributed: row-sharded tables read in place by every process of a host.

Multi-process tests spawn two processes: on the CPU (gloo, shards in shared memory) in
CI, and on two GPUs (NCCL, shards mapped through CUDA IPC and read peer-to-peer) where
there are two.
"""
import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch_geometric.data import Data

from pyg_accel.data import FeatureStore, GraphStore, from_data
from pyg_accel.distributed import ShardedTensor, row_partition, share_shards

from conftest import DEVICES, requires_two_gpus

NUM_ROWS, WIDTH = 1003, 24


def full_table(dtype=torch.float32):
    return torch.randn(NUM_ROWS, WIDTH, generator=torch.Generator().manual_seed(0)).to(dtype)


def test_row_partition():
    assert row_partition(10, 3) == [0, 4, 7, 10]
    assert row_partition(2, 4) == [0, 1, 2, 2, 2]
    assert row_partition(0, 2) == [0, 0, 0]


@pytest.mark.parametrize('device', DEVICES)
def test_one_process_is_a_world_of_one(device):
    full = full_table()
    table = ShardedTensor.from_full(full, device=device)
    assert len(table.shards) == 1 and table.local.device.type == device and table.shape == full.shape
    assert table.local_rows == range(0, NUM_ROWS) and len(table) == NUM_ROWS
    index = torch.randint(0, NUM_ROWS, (500,))
    for dtype in (torch.int64, torch.int32):
        assert torch.equal(table.gather(index.to(dtype)).cpu(), full[index])
    assert torch.equal(table[3:9].cpu(), full[3:9]) and torch.equal(table[-1].cpu(), full[-1])
    assert torch.equal(table.to_dense().cpu(), full)
    table.write_local_rows(torch.tensor([0, 5]), torch.ones(2, WIDTH))
    assert (table[torch.tensor([0, 5])] == 1).all()
    assert full[0].ne(1).any()  # the shard is a copy, not a view of the input
    with pytest.raises(IndexError, match='out of range'):
        table.gather(torch.tensor([NUM_ROWS]))
    with pytest.raises(TypeError, match='row dimension'):
        ShardedTensor.from_full(torch.tensor(1.0))
    with pytest.raises(TypeError, match='row dimension'):
        share_shards(torch.tensor(1.0))


@pytest.mark.parametrize('device', DEVICES)
def test_sharded_feature_store_in_one_process(device):
    data = Data(x=torch.randn(50, 4), y=torch.arange(50), edge_index=torch.randint(0, 50, (2, 200)), num_nodes=50)
    fs, gs = from_data(data, 'sharded')
    assert fs.location.kind == 'sharded' and gs.location.kind in ('cuda', 'cpu')
    assert isinstance(fs._stored(fs._tensor_attr_cls.cast(None, 'x')), ShardedTensor)
    index = torch.tensor([4, 0, 49, 4])
    x, y = fs.multi_get_tensor([fs._tensor_attr_cls.cast(None, 'x', index), fs._tensor_attr_cls.cast(None, 'y', index)])
    assert torch.equal(x.cpu(), data.x[index]) and torch.equal(y.cpu(), data.y[index])
    assert torch.equal(fs.get_tensor(None, 'x', None).cpu(), data.x)
    assert torch.equal(fs.get_tensor(None, 'x', slice(2, 5)).cpu(), data.x[2:5])
    assert fs.get_tensor_size(None, 'x', None) == (50, 4)
    fs.put_tensor(torch.zeros(2, 4), group_name=None, attr_name='x', index=torch.tensor([1, 2]))
    assert (fs.get_tensor(None, 'x', torch.tensor([1, 2])) == 0).all()
    with pytest.raises(ValueError, match='already in GPU memory'):
        fs.cache_rows('x', rows=torch.arange(5))
    with pytest.raises(ValueError, match='graph is not sharded'):
        GraphStore('sharded')
    assert 'x' in repr(fs)


def _worker(rank: int, world_size: int, init_file: str, device_type: str) -> None:
    """One process of a two-process world: shards, peer reads, owner writes, and a
    NeighborLoader over a sharded feature store."""
    cuda = device_type == 'cuda'
    device = torch.device('cuda', rank) if cuda else torch.device('cpu')
    if cuda:
        torch.cuda.set_device(device)
    kwargs = {'device_id': device} if cuda else {}
    dist.init_process_group('nccl' if cuda else 'gloo', init_method=f'file://{init_file}', rank=rank,
                            world_size=world_size, **kwargs)
    if cuda:  # (diagnosis, shown if the test fails: whether the current device held)
        print(f'rank {rank}: current device cuda:{torch.cuda.current_device()} after init', flush=True)
    try:
        full = full_table()
        table = ShardedTensor.from_full(full, device=device)
        bounds = row_partition(NUM_ROWS, world_size)
        assert len(table.shards) == world_size and table.local_rows == range(bounds[rank], bounds[rank + 1])
        assert table.local.device.type == device_type
        if cuda:  # every block is read through this GPU (the peer's mapped into its context)
            assert table.device == torch.device('cuda', rank)
            assert all(s.device == table.device for s in table.shards)
        index = torch.randint(0, NUM_ROWS, (5000,), generator=torch.Generator().manual_seed(rank))
        for dtype in (torch.int64, torch.int32):
            out = table.gather(index.to(dtype).to(table.device))
            assert out.device == table.device and torch.equal(out.cpu(), full[index])
        assert torch.equal(table.to_dense().cpu(), full)
        half = ShardedTensor.from_full(full.bfloat16(), device=device)
        assert torch.equal(half.gather(index).cpu(), full.bfloat16()[index])
        with pytest.raises(IndexError, match='out of range'):
            table.gather(torch.tensor([NUM_ROWS]))
        # each rank writes its first row; after a barrier every rank reads the others'
        table.write_local_rows(torch.tensor([bounds[rank]]), torch.full((1, WIDTH), float(100 + rank)))
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        for r in range(world_size):
            assert (table[bounds[r]] == 100 + r).all()
        with pytest.raises(IndexError, match='rank that holds'):
            table.write_local_rows(torch.tensor([bounds[(rank + 1) % world_size]]), torch.zeros(1, WIDTH))
        # the same Data on every rank: features sharded, graph per rank, our loader
        from pyg_accel.loader import NeighborLoader
        g = torch.Generator().manual_seed(1)
        data = Data(x=torch.randn(300, 8, generator=g), y=torch.randint(0, 3, (300,), generator=g),
                    edge_index=torch.randint(0, 300, (2, 2000), generator=g), num_nodes=300)
        fs, gs = from_data(data, 'sharded', device=device if cuda else None)
        seeds = torch.arange(300)[rank::world_size]  # each rank trains on its share of the seeds
        loader = NeighborLoader((fs, gs), [4, 3], input_nodes=seeds, batch_size=32)
        batches = 0
        for batch in loader:
            n_id = batch.n_id.cpu()
            assert torch.equal(batch.x.cpu(), data.x[n_id]) and torch.equal(batch.y.cpu(), data.y[n_id])
            assert batch.x.device.type == device_type
            batches += 1
        assert batches == 5
    finally:
        dist.destroy_process_group()


def _spawn(device_type: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(2, os.path.join(tmp, 'init'), device_type), nprocs=2, join=True)


def test_two_processes_on_the_cpu():
    """Shards in shared memory, read in place by both processes (gloo for the setup)."""
    _spawn('cpu')


@requires_two_gpus
def test_two_processes_on_two_gpus():
    """Each process's block on its GPU, the other's mapped through CUDA IPC and read
    peer-to-peer by the gather kernel."""
    _spawn('cuda')
