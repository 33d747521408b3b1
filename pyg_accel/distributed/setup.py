"""Process-group setup for one process per GPU (``torchrun``)."""
from __future__ import annotations

import os
from typing import Tuple

import torch
import torch.distributed as dist

__all__ = ['setup']


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
