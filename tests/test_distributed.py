"""pyg_accel.distributed: row-sharded tables read in place by every process of a host.

Multi-process tests run tests/distributed_worker.py under torchrun with two processes: on
the CPU (gloo, shards in shared memory) in CI, and on two GPUs (NCCL, shards mapped
through CUDA IPC and read peer-to-peer) where there are two.
"""
import os

import pytest
import torch
from torch_geometric.data import Data

from pyg_accel.data import GraphStore, from_data
from pyg_accel.distributed import ShardedTensor, row_partition, share_shards

from conftest import DEVICES, HAS_CUDA, requires_two_gpus, run_torchrun_worker

NUM_ROWS, WIDTH = 1003, 24


def full_table(dtype=torch.float32):
    return torch.randn(NUM_ROWS, WIDTH, generator=torch.Generator().manual_seed(0)).to(dtype)


def test_row_partition():
    assert row_partition(10, 3) == [0, 4, 7, 10]
    assert row_partition(2, 4) == [0, 1, 2, 2, 2]
    assert row_partition(0, 2) == [0, 0, 0]
    with pytest.raises(ValueError, match='world_size must be an int >= 1'):
        row_partition(10, 0)
    with pytest.raises(ValueError, match='num_rows must be an int >= 0'):
        row_partition(-1, 2)
    from pyg_accel.distributed import partition_graph
    with pytest.raises(ValueError, match='num_nodes must be an int >= 0'):
        partition_graph(torch.tensor([[0, 1], [1, 2]]), num_nodes=-3, rank=0, world_size=1)


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
    assert isinstance(fs.tier('x').sharded, ShardedTensor) and fs.tier('x').shared
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


def test_host_copy_in_one_process():
    """A world of one: share_host_tensor is the tensor on the host (pinned with a GPU);
    share_graph_store leaves a host store's values alone and refuses other stores."""
    from torch_geometric.data import Data

    from pyg_accel.data import GraphStore, from_data
    from pyg_accel.distributed import share_graph_store, share_host_tensor
    t = share_host_tensor(torch.arange(5))
    assert torch.equal(t, torch.arange(5)) and t.is_pinned() == torch.cuda.is_available()
    assert not share_host_tensor(torch.arange(5), pin=False).is_pinned()
    data = Data(edge_index=torch.randint(0, 30, (2, 100)), num_nodes=30)
    _, gs = from_data(data, 'cpu')
    before = gs.csc()
    after = share_graph_store(gs).csc()
    assert all(torch.equal(a, b) for a, b in zip(before, after) if a is not None)
    with pytest.raises(TypeError, match="pyg_accel's GraphStore"):
        share_graph_store(object())
    with pytest.raises(ValueError, match='rank 0 must pass its GraphStore'):
        share_graph_store(None)
    with pytest.raises(TypeError, match='torch.Tensor'):
        share_host_tensor([1, 2])
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match='host memory'):
            share_graph_store(GraphStore('cuda'))


def _shared_memory_files() -> set:
    from pyg_accel.data.shards import _shm_dir
    return {name for name in os.listdir(_shm_dir()) if name.startswith('pyg_accel_')}


@pytest.mark.slow  # processes under torchrun
def test_two_processes_on_the_cpu(tmp_path):
    """Shards in shared memory, read in place by both processes (gloo for the setup);
    no shared-memory file outlives the run."""
    before = _shared_memory_files()
    run_torchrun_worker('distributed_worker.py', tmp_path, gpus=False)
    assert _shared_memory_files() - before == set()


@requires_two_gpus
def test_two_processes_on_two_gpus(tmp_path):
    """Each process's block on its GPU, the other's mapped through CUDA IPC and read
    peer-to-peer by the gather kernel; the processes part without IPC warnings, and two
    runs in a row give every GPU's memory back."""
    free = lambda: [torch.cuda.mem_get_info(i)[0] for i in range(2)]  # noqa: E731
    before = free()
    for run in range(2):
        (tmp_path / str(run)).mkdir()
        run_torchrun_worker('distributed_worker.py', tmp_path / str(run), gpus=True)
    assert all(after >= was - (64 << 20) for after, was in zip(free(), before)), (before, free())


@pytest.mark.slow  # processes under torchrun
def test_two_virtual_hosts_of_two_processes_on_the_cpu(tmp_path):
    """4 gloo processes declared as 2 hosts x 2: rows of this host read in place (shared
    memory), the other host's fetched through torch.distributed, by tiers and by our
    loader over a sharded feature store."""
    run_torchrun_worker('hosts_worker.py', tmp_path, gpus=False, nproc=4)


@requires_two_gpus
def test_two_virtual_hosts_on_two_gpus(tmp_path):
    """2 GPUs declared as 2 hosts x 1: every remote row crosses NCCL, none through IPC."""
    run_torchrun_worker('hosts_worker.py', tmp_path, gpus=True, nproc=2)


@pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 3, reason='needs 3 GPUs')
def test_blocks_shared_with_several_peers_are_released(tmp_path):
    """Three or more processes share GPU blocks with every other one (one IPC send per
    receiver): once all let go, every process's GPU memory is back where it started,
    twice over, and no process warns at exit that a peer still held its memory."""
    run_torchrun_worker('release_worker.py', tmp_path, gpus=True, nproc=min(4, torch.cuda.device_count()), timeout=180)


def test_host_layouts_in_one_process(monkeypatch):
    from pyg_accel.data import HostLayout
    from pyg_accel.data.hosts import _ranks_per_host
    assert HostLayout.of().num_hosts == 1
    assert _ranks_per_host(None, 8) == 8
    monkeypatch.setenv('LOCAL_WORLD_SIZE', '4')
    assert _ranks_per_host(None, 8) == 4
    monkeypatch.setenv('PYG_ACCEL_RANKS_PER_HOST', '2')  # virtual hosts win over torchrun's
    assert _ranks_per_host(None, 8) == 2 and _ranks_per_host(8, 8) == 8
    for bad in (3, 0, 16, True):
        with pytest.raises(ValueError, match='ranks_per_host must be a positive int that divides the 8'):
            _ranks_per_host(bad, 8)
    monkeypatch.setenv('PYG_ACCEL_RANKS_PER_HOST', 'two')
    with pytest.raises(ValueError, match="PYG_ACCEL_RANKS_PER_HOST must be .* got 'two'"):
        _ranks_per_host(None, 8)
    from pyg_accel.data.hosts import _check_torchrun_numbering
    monkeypatch.delenv('PYG_ACCEL_RANKS_PER_HOST')
    monkeypatch.setenv('GROUP_RANK', '1')  # torchrun: this process on the second host
    _check_torchrun_numbering(None, 5, 4, None)  # ranks 4-7: host 1
    with pytest.raises(ValueError, match='rank 2 runs on host GROUP_RANK=1, but hosts of 4 processes'):
        _check_torchrun_numbering(None, 2, 4, None)
    _check_torchrun_numbering(None, 2, 4, 4)  # (the caller said how ranks map to hosts)
