"""Where a store keeps its tensors, and where reads land: two independent axes.

**Memory** (where the bytes live):

* ``'cuda'`` (alias ``'device'``, or ``'cuda:N'``): GPU memory; reads run on that GPU.
* ``'pinned'``: page-locked host memory that the GPU reads directly (UVA, zero-copy);
  reads run on the GPU and return GPU tensors. For data larger than the GPU.
* ``'cpu'``: ordinary host memory; reads run on the CPU.

**Distribution**: the whole table in this process's memory, or ``'sharded'``: rows split
across the processes, one per GPU (``torchrun``), each block in its process's GPU
memory (or in shared host memory without GPUs); the blocks of this host read in place
(:class:`pyg_accel.data.shards.ShardedTensor`), those of other hosts fetched through
torch.distributed (:class:`pyg_accel.data.tiers.HostShardedTier`); feature stores only.

``'auto'`` is ``'cuda'`` when a GPU is visible, else ``'cpu'``. A resolved
:class:`Location` makes the :mod:`tier <pyg_accel.data.tiers>` that holds a table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple, Union

import torch
from torch import Tensor

from .host_memory import pinned_copy, pinned_empty

if TYPE_CHECKING:
    from .hosts import HostLayout
    from .tiers import Tier

__all__ = ['Location', 'resolve_location', 'resolve_device']

LocationLike = Union[str, torch.device, 'Location']
DeviceLike = Union[str, int, torch.device]
MEMORIES = ('cuda', 'pinned', 'cpu')


@dataclass(frozen=True)
class Location:
    """A resolved place for tables: ``memory`` in {'cuda', 'pinned', 'cpu'}, ``device``
    (where reads land: the GPU for 'cuda' and 'pinned'; this process's GPU, or the CPU,
    for a sharded location) and ``sharded`` (rows split across the processes, of one
    host or of several; the blocks in 'cuda' memory, or in shared 'cpu' memory without
    GPUs)."""
    memory: str
    device: torch.device
    sharded: bool = False

    def __post_init__(self) -> None:
        if self.memory not in MEMORIES:
            raise ValueError(f"Location: memory must be one of {', '.join(MEMORIES)}, got {self.memory!r} "
                             "(resolve_location('sharded') gives a sharded location)")
        if self.sharded and self.memory == 'pinned':
            raise ValueError("Location: sharded blocks live in GPU memory ('cuda') or shared host memory ('cpu')")

    @property
    def kind(self) -> str:
        """The location as its name: ``'sharded'`` or the memory."""
        return 'sharded' if self.sharded else self.memory

    @property
    def zero_copy(self) -> bool:
        """Host memory that the GPU reads in place ('pinned')."""
        return self.memory == 'pinned'

    @property
    def storage_device(self) -> torch.device:
        """Where the stored bytes live ('pinned' memory is host memory)."""
        return self.device if self.memory == 'cuda' else torch.device('cpu')

    def tier(self, tensor: Tensor, hosts: Optional['HostLayout'] = None) -> 'Tier':
        """A :class:`~pyg_accel.data.tiers.Tier` holding ``tensor`` here (collective
        when sharded: every process of ``hosts.group`` passes the same tensor; default
        the default group's :class:`~pyg_accel.data.hosts.HostLayout`)."""
        from .tiers import tier_for
        return tier_for(self, tensor, hosts)

    def empty(self, shape: Tuple[int, ...], dtype: torch.dtype) -> Tensor:
        """An uninitialised tensor in this location's memory (page-locked for 'pinned',
        where tables of 64 MiB or more come zero-filled: :func:`pyg_accel.data.pinned_empty`),
        to be filled in place, e.g. block by block from a GPU, without a second copy."""
        self._whole_only()
        if self.memory == 'pinned':
            return pinned_empty(shape, dtype)
        return torch.empty(shape, dtype=dtype, device=self.storage_device)

    def place(self, tensor: Tensor) -> Tensor:
        """``tensor`` moved into this location's memory (no copy when it is there already).
        (Sharded tables are built collectively: :meth:`tier`.)"""
        self._whole_only()
        if self.memory == 'cuda':
            return tensor.to(self.device)
        if self.memory == 'pinned':  # (from a GPU: one DMA copy, not pageable then pinned)
            return pinned_copy(tensor)
        return tensor.cpu()

    def _whole_only(self) -> None:
        if self.sharded:
            raise ValueError("pyg_accel: a 'sharded' tensor is built collectively by every process "
                             '(pyg_accel.distributed.ShardedTensor.from_full); only FeatureStore holds them')

    def __str__(self) -> str:
        return self.kind if self.kind != 'cuda' else str(self.device)


def _require_gpu(what: str, argument: str) -> None:
    """Raises the one clear error for a GPU asked for on a machine without one (rather
    than PyTorch's message about missing CUDA libraries, raised deep inside a kernel)."""
    if not torch.cuda.is_available():
        raise RuntimeError(f"pyg_accel: {what} needs a CUDA GPU and none is visible; use {argument}='cpu' "
                           "(or 'auto')")


def _cuda_device(device: Optional[Union[int, str, torch.device]]) -> torch.device:
    _require_gpu("location 'cuda'/'pinned'", 'location')
    if device is None:
        return torch.device('cuda', torch.cuda.current_device())
    device = torch.device(device) if not isinstance(device, int) else torch.device('cuda', device)
    if device.type != 'cuda':
        raise ValueError(f"pyg_accel: expected a CUDA device, got '{device}'")
    return torch.device('cuda', device.index if device.index is not None else torch.cuda.current_device())


def resolve_location(location: LocationLike = 'auto',
                     device: Optional[Union[int, str, torch.device]] = None) -> Location:
    """Turns ``'auto' | 'cuda' | 'cuda:N' | 'device' | 'pinned' | 'cpu'`` (or a
    :class:`torch.device`) into a :class:`Location`. ``'auto'`` is where ``device`` is
    when one is given (``'cpu'`` or a GPU), else the current GPU when there is one."""
    if isinstance(location, Location):
        return location
    if isinstance(location, torch.device):
        location = str(location)
    if not isinstance(location, str):
        raise TypeError(f'pyg_accel: location must be a string, got {type(location).__name__}')
    name = location.lower()
    if name == 'auto' and device is not None:
        name = 'cuda' if isinstance(device, int) else torch.device(device).type
        if name not in ('cpu', 'cuda'):
            raise ValueError(f"pyg_accel: device must be 'cpu' or a CUDA device, got '{device}'")
    elif name == 'auto':
        name = 'cuda' if torch.cuda.is_available() else 'cpu'
    if name == 'device':
        name = 'cuda'
    if name.startswith('cuda'):
        if ':' in name:
            device = name
        return Location('cuda', _cuda_device(device))
    if name == 'pinned':
        return Location('pinned', _cuda_device(device))
    if name == 'cpu':
        return Location('cpu', torch.device('cpu'))
    if name == 'sharded':
        if torch.cuda.is_available():
            return Location('cuda', _cuda_device(device), sharded=True)
        return Location('cpu', torch.device('cpu'), sharded=True)
    raise ValueError(f"pyg_accel: unknown location '{location}'; expected 'auto', 'cuda', 'pinned', 'cpu' or "
                     "'sharded'")


def resolve_device(device: DeviceLike = 'auto', argument: str = 'device') -> torch.device:
    """Turns ``'auto'`` (the current GPU when one is visible, else the CPU), ``'cpu'``,
    ``'cuda[:N]'``, a GPU index or a :class:`torch.device` into a device, raising a clear
    error (naming ``argument``) for a GPU on a machine without one."""
    if isinstance(device, str) and device.lower() == 'auto':
        return torch.device('cuda', torch.cuda.current_device()) if torch.cuda.is_available() else torch.device('cpu')
    try:
        resolved = torch.device('cuda', device) if isinstance(device, int) else torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"pyg_accel: {argument} must be 'auto', 'cpu', 'cuda[:N]' or a torch.device, "
                         f'got {device!r}') from exc
    if resolved.type == 'cuda':
        _require_gpu(f"{argument}='{resolved}'", argument)
    return resolved
