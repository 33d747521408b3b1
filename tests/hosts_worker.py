"""One process of tests/test_distributed.py's virtual-host runs (under torchrun): the
processes split into 2 hosts (4 CPU processes with gloo: 2 hosts x 2; 2 GPUs with NCCL:
2 hosts x 1), a table sharded across them, read in place on this host and fetched from
the other through torch.distributed; owner writes; our NeighborLoader over a sharded
feature store spanning both hosts. Writes 'rank R on DEVICE' to
$PYG_ACCEL_WORKER_OUT/rank-R when every check passed."""
import os

import pytest
import torch
import torch.distributed as dist
from torch_geometric.data import Data

from pyg_accel.data import HostLayout, HostShardedTier, from_data
from pyg_accel.distributed import row_partition
from pyg_accel.loader import NeighborLoader
from conftest import check_sharded_generation, worker_main

NUM_ROWS, WIDTH = 1003, 6



def check(rank: int, world_size: int, device: torch.device) -> None:
    per_host = world_size // 2
    hosts = HostLayout.of(ranks_per_host=per_host)
    assert (hosts.num_hosts, hosts.host, hosts.ranks_per_host) == (2, rank // per_host, per_host)
    full = torch.randn(NUM_ROWS, WIDTH, generator=torch.Generator().manual_seed(0))  # the same on every rank
    tier = HostShardedTier(full, hosts, device)
    assert tier.shape == full.shape and tier.shared and tier.collective and tier.device == device
    bounds = row_partition(NUM_ROWS, world_size)
    host_ranks = hosts.ranks_of(hosts.host)
    assert tier.host_rows == range(bounds[host_ranks[0]], bounds[host_ranks[-1] + 1])
    # reads of different sizes on every rank, from both hosts, int64 and int32 ids
    index = torch.randint(0, NUM_ROWS, (300 + 97 * rank,), generator=torch.Generator().manual_seed(rank))
    for dtype in (torch.int64, torch.int32):
        got = tier.read(index.to(dtype).to(device))
        assert got.device == device and torch.equal(got.cpu(), full[index])
    # one rank reads nothing while the others read rows of the other host only
    other = range(0, bounds[per_host]) if hosts.host == 1 else range(bounds[per_host], NUM_ROWS)
    index = torch.tensor([], dtype=torch.long) if rank == 0 else torch.arange(other.start, other.stop, 5)
    assert torch.equal(tier.read(index.to(device)).cpu(), full[index])
    assert torch.equal(tier.whole().cpu(), full)
    assert torch.equal(tier.read_slice(slice(10, 20)).cpu(), full[10:20])
    bad = [NUM_ROWS] if rank == world_size - 1 else [0, 1]  # one rank's bad id: every rank raises, none hangs
    with pytest.raises(IndexError, match=rf'out of range for {NUM_ROWS} rows on rank\(s\) \[{world_size - 1}\]'):
        tier.read(torch.tensor(bad, device=device))
    with pytest.raises(IndexError, match='out of range'):
        tier.read(torch.tensor([-1], device=device))
    # each rank writes its first row; after a barrier every rank reads them all
    tier.write_rows(torch.tensor([bounds[rank]]), torch.full((1, WIDTH), 100.0 + rank))
    if device.type == 'cuda':
        torch.cuda.synchronize()
    dist.barrier()
    firsts = tier.read(torch.tensor(bounds[:world_size], device=device)).cpu()
    assert torch.equal(firsts, (100.0 + torch.arange(world_size, dtype=torch.float)).view(-1, 1).expand(-1, WIDTH))
    with pytest.raises(IndexError, match='rank that holds'):
        tier.write_rows(torch.tensor([bounds[(rank + 1) % world_size]]), torch.zeros(1, WIDTH))
    # the same Data on every rank: features sharded across both hosts, our loader over them
    g = torch.Generator().manual_seed(1)
    data = Data(x=torch.randn(300, 8, generator=g), y=torch.randint(0, 3, (300,), generator=g),
                edge_index=torch.randint(0, 300, (2, 2000), generator=g), num_nodes=300)
    fs, gs = from_data(data, 'sharded', ranks_per_host=per_host)
    assert isinstance(fs.tier('x'), HostShardedTier) and fs.hosts.num_hosts == 2
    seeds = torch.arange(rank * 50, rank * 50 + 50)  # as many batches on every rank: reads are collective
    batches = 0
    for batch in NeighborLoader((fs, gs), [5, 3], input_nodes=seeds, batch_size=16):
        n_id = batch.n_id.cpu()
        assert torch.equal(batch.x.cpu(), data.x[n_id]) and torch.equal(batch.y.cpu(), data.y[n_id])
        batches += 1
    assert batches == 4
    with pytest.raises(ValueError, match='written by other processes'):
        fs.cache_rows('x', rows=torch.arange(5))
    # x and y read together: one exchange of counts, one of ids and one group of row transfers for both
    from pyg_accel.data.tiers import read_together
    exchanges, groups = [], []
    real, real_batch = dist.all_to_all_single, dist.batch_isend_irecv
    dist.all_to_all_single = lambda *args, **kwargs: exchanges.append(1) or real(*args, **kwargs)
    dist.batch_isend_irecv = lambda ops: groups.append(len(ops)) or real_batch(ops)
    try:
        index = torch.randint(0, 300, (77,), generator=torch.Generator().manual_seed(rank)).to(device)
        x, y = read_together([fs.tier('x'), fs.tier('y')], index)
    finally:
        dist.all_to_all_single, dist.batch_isend_irecv = real, real_batch
    assert torch.equal(x.cpu(), data.x[index.cpu()]) and torch.equal(y.cpu(), data.y[index.cpu()])
    assert len(exchanges) == 2  # counts, then ids
    # then x's and y's rows in one group: a send and a receive per table with each rank of the other host
    assert len(groups) == 1 and groups[0] <= 2 * 2 * per_host
    # the environment's virtual hosts, as torchrun's LOCAL_WORLD_SIZE would give real ones
    os.environ['PYG_ACCEL_RANKS_PER_HOST'] = str(per_host)
    assert HostLayout.of().num_hosts == 2
    check_sharded_generation(device)  # (its sharded stores span the 2 hosts: blocks across them)


if __name__ == '__main__':
    worker_main(check)
