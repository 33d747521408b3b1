"""Pinned host memory for the 'pinned' storage tier.

:func:`pinned_empty` allocates page-locked host memory that the GPU reads directly. With
``huge_pages=True`` the memory is 2 MB aligned and advised for transparent huge pages
before it is registered with CUDA, so the GPU can map it in large pages: random row
reads over tables of many GB then miss the GPU's TLB far less
(``benchmarks/pinned_probe.py`` measures the difference).
"""
from __future__ import annotations

from typing import Sequence

import math

import torch
from torch import Tensor

from .. import _build

__all__ = ['pinned_empty', 'pin']


def pinned_empty(shape: Sequence[int], dtype: torch.dtype, huge_pages: bool = True) -> Tensor:
    """An uninitialised pinned CPU tensor of ``shape`` and ``dtype``."""
    if not torch.cuda.is_available():
        raise RuntimeError('pyg_accel: pinned memory needs a CUDA GPU and none is visible')
    shape = tuple(int(s) for s in shape)
    if not huge_pages:
        return torch.empty(shape, dtype=dtype, pin_memory=True)
    config = _build.load_library()
    if not config.with_cuda:
        raise RuntimeError(f'pyg_accel: huge-page pinned memory needs the CUDA ops ({config.reason_no_cuda})')
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = torch.ops.pyg_accel.huge_pinned_empty(math.prod(shape) * itemsize)
    return raw.view(dtype).view(shape)


def pin(tensor: Tensor, huge_pages: bool = True) -> Tensor:
    """A pinned copy of ``tensor`` (the tensor itself if it is pinned already)."""
    if tensor.device.type == 'cpu' and tensor.is_pinned():
        return tensor
    out = pinned_empty(tensor.shape, tensor.dtype, huge_pages=huge_pages)
    out.copy_(tensor)
    return out
