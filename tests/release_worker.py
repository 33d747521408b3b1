"""One process of tests/test_distributed.py's release run (under torchrun, one GPU per
process, three or more processes): twice, every process shares a 32 MB block with all
the others through CUDA IPC, each reads every block, and all let go; each process's GPU
memory must then be back where it started. Writes 'rank R on DEVICE' to
$PYG_ACCEL_WORKER_OUT/rank-R when every check passed."""
import gc

import torch
import torch.distributed as dist

from pyg_accel.data.shards import share_shards
from pyg_accel.ops import gather
from conftest import worker_main

ROWS, WIDTH = 1 << 20, 8  # 32 MB of float32


def check(rank: int, world_size: int, device: torch.device) -> None:
    assert device.type == 'cuda' and world_size >= 3, 'a send opened by several peers needs three processes'
    dist.barrier()  # (NCCL's barrier keeps its 1-element tensor, 512 bytes, for the group's life: made here)
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    for _ in range(2):
        local = torch.full((ROWS, WIDTH), float(rank), device=device)
        shards = share_shards(local)
        index = torch.randint(0, ROWS, (1000,), device=device)
        for owner, shard in enumerate(shards):
            assert torch.equal(gather(shard, index), torch.full((1000, WIDTH), float(owner), device=device))
        torch.cuda.synchronize(device)
        del shards, local, index
        gc.collect()
        dist.barrier()  # every process has let go of the blocks it mapped
        torch.cuda.ipc_collect()  # (frees sent blocks whose every receiver let go)
        dist.barrier()
        held = [None] * world_size  # (every rank's count, so that all fail together rather than some hang)
        dist.all_gather_object(held, torch.cuda.memory_allocated(device) - base)
        assert held == [0] * world_size, f'bytes still held per rank after the peers let go: {held}'


if __name__ == '__main__':
    worker_main(check)
