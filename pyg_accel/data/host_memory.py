"""Page-locked host memory for large tables, allocated at memory speed.

PyTorch's pinned allocator (``torch.empty(..., pin_memory=True)``: ``cudaHostAlloc``
behind its caching host allocator) faults, zeroes and locks every page inside one
driver call, one thread at a time: ~1 GB/s on the H100 machine, so 57 GB of
papers100M features took most of a minute. It also rounds each request up to a power
of two (57 GB takes 64 GB) and keeps freed blocks in its cache.

For a large table this module instead maps anonymous memory advised to use
transparent huge pages, faults it in parallel (a write by torch's threads), and locks
it in place with ``cudaHostRegister`` (:func:`pyg_accel.ops.host_register`): 24 GiB
in 1.3 s instead of 24 s on that machine, read by the GPU as fast (copies ~55 GB/s,
gathers ~48 GB/s), and unlocked and unmapped when freed.
Small tables keep PyTorch's allocator.
"""
from __future__ import annotations

import math
import mmap
import warnings
from typing import Tuple

import torch
from torch import Tensor

__all__ = ['pinned_empty', 'pinned_copy']

HUGE_PAGE = 2 << 20
_PAGE = mmap.PAGESIZE
# Below this, PyTorch's pinned allocator is fast enough and its cache helps.
LARGE_BYTES = 64 << 20


def pinned_empty(shape: Tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """A page-locked host tensor of ``shape`` and ``dtype`` that the GPU reads directly.
    Large ones are zero-filled (faulting their pages), small ones uninitialised.
    Needs a visible GPU. Where the driver refuses to lock the mapping, this warns once
    and uses PyTorch's allocator."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if nbytes < LARGE_BYTES:
        return _pytorch_pinned(shape, dtype)
    from ..ops import host_register
    span = -(-nbytes // _PAGE) * _PAGE
    buf = mmap.mmap(-1, span + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        buf.madvise(mmap.MADV_HUGEPAGE)  # (a hint: without huge pages it is just slower)
    except (AttributeError, OSError):
        pass
    raw = torch.frombuffer(buf, dtype=torch.uint8)  # (keeps buf mapped while it lives)
    start = -raw.data_ptr() % HUGE_PAGE  # huge-page aligned
    pages = raw[start:start + span]
    pages.zero_()  # fault every page, in parallel over torch's threads
    try:
        locked = host_register(pages)  # (unlocks before the mapping goes)
    except RuntimeError as error:
        global _WARNED
        if not _WARNED:
            _WARNED = True
            warnings.warn(f"pyg_accel: page-locking a mapped table failed ({error}); using PyTorch's pinned "
                          'allocator instead (slower for large tables)', RuntimeWarning, stacklevel=2)
        del raw, pages, buf
        return _pytorch_pinned(shape, dtype)
    return locked[:nbytes].view(dtype).view(shape)


_WARNED = False


def _pytorch_pinned(shape: Tuple[int, ...], dtype: torch.dtype) -> Tensor:
    return torch.empty(shape, dtype=dtype, pin_memory=True)


def pinned_copy(tensor: Tensor) -> Tensor:
    """``tensor`` in page-locked host memory (itself if it is there already)."""
    if tensor.is_cpu and tensor.is_pinned():
        return tensor
    return pinned_empty(tuple(tensor.shape), tensor.dtype).copy_(tensor)
