"""Process-group setup and teardown for one process per GPU (``torchrun``)."""
from __future__ import annotations

import gc
import os
from typing import Tuple

import torch
import torch.distributed as dist

__all__ = ['setup', 'teardown']


def setup(backend: str = 'auto') -> Tuple[int, int, torch.device]:
    """Initialises torch.distributed from ``torchrun``'s environment (``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``PORT``) if it is not yet, and
    pins this process to GPU ``LOCAL_RANK`` when there are GPUs.

    ``backend='auto'`` picks NCCL with GPUs, gloo without. Without ``torchrun``'s
    variables it runs as a world of one. Returns ``(rank, world_size, device)``.
    """
    local_rank = int(os.environ.get('LOCAL_RANK', 0))
    if torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(f'pyg_accel.distributed.setup: LOCAL_RANK {local_rank} but only '
                               f'{torch.cuda.device_count()} GPUs are visible')
        torch.cuda.set_device(local_rank)
        device = torch.device('cuda', local_rank)
    else:
        device = torch.device('cpu')
    if not dist.is_initialized() and 'WORLD_SIZE' in os.environ:
        if backend == 'auto':
            backend = 'nccl' if device.type == 'cuda' else 'gloo'
        kwargs = {'device_id': device} if backend == 'nccl' else {}
        dist.init_process_group(backend, **kwargs)
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), device
    return 0, 1, device


def teardown() -> None:
    """Ends a run that :func:`setup` began, every process together (collective): call it
    once the stores, loaders and models are dropped.

    Every process first lets go of the peers' shards it mapped (a collection frees any
    still held in reference cycles) and waits for its GPU; after a barrier, each process
    releases the blocks it shared (``torch.cuda.ipc_collect``), which no peer holds any
    more, and the process group is destroyed. Processes that exit while a peer still
    maps their memory print "Producer process has been terminated before all shared
    CUDA tensors released" at exit. Without torch.distributed initialised this does
    nothing."""
    if not dist.is_initialized():
        return
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    dist.barrier()
    if torch.cuda.is_available():
        torch.cuda.ipc_collect()
    dist.destroy_process_group()
