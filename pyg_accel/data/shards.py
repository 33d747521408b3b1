"""Row shards of one logical table, one per process of a host, each readable by all.

WholeGraph's layout (NVIDIA's multi-GPU distributed shared memory): every process of a host
(one per GPU, e.g. under ``torchrun``) holds a contiguous block of rows in its own GPU's
memory and maps the other processes' blocks into its address space, so one gather
kernel reads any row, local or remote, through a table of base pointers: peer GPU
memory over NVLink (CUDA IPC handles), with no copy and no collective per read.

CPU shards (no GPU, e.g. CI) live in shared memory files mapped by every process, and
the CPU gather reads them the same way.
"""
from __future__ import annotations

import numbers
import os
import socket
import tempfile
import uuid
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist
from torch import Tensor

from ..ops import sharded_gather
from ._rows import slice_ids

__all__ = ['ShardedTensor', 'share_shards', 'row_partition']


def _world(group) -> Tuple[int, int]:
    """(rank, world size) in ``group``; (0, 1) when torch.distributed is not initialised."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def row_partition(num_rows: int, world_size: int) -> List[int]:
    """The first row of every rank's block and the end: ``world_size + 1`` bounds of
    near-equal contiguous blocks (the first ranks get one row more)."""
    for name, value, least in (('num_rows', num_rows, 0), ('world_size', world_size, 1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            raise ValueError(f'row_partition: {name} must be an int >= {least}, got {value!r}')
    base, extra = divmod(int(num_rows), int(world_size))
    bounds = [0]
    for r in range(world_size):
        bounds.append(bounds[-1] + base + (1 if r < extra else 0))
    return bounds


def _all_gather(obj, group, world_size: int) -> list:
    out = [None] * world_size
    dist.all_gather_object(out, obj, group=group)
    return out


def _shm_dir() -> str:
    return '/dev/shm' if os.path.isdir('/dev/shm') else tempfile.gettempdir()


def _share_cpu(local: Tensor, rank: int, world_size: int, group) -> List[Tensor]:
    """Every rank's CPU shard, through shared-memory files mapped by every process (the
    local shard is copied into its file once; the files are unlinked once mapped)."""
    token = _all_gather(uuid.uuid4().hex if rank == 0 else None, group, world_size)[0]
    path = os.path.join(_shm_dir(), f'pyg_accel_{token}_{rank}')
    flat = local.contiguous().view(-1)
    mine = torch.from_file(path, shared=True, size=max(flat.numel(), 1), dtype=local.dtype)
    mine[:flat.numel()].copy_(flat)
    metas = _all_gather((path, tuple(local.shape), flat.numel()), group, world_size)
    shards = []
    for r, (peer_path, shape, numel) in enumerate(metas):
        if r == rank:
            shards.append(mine[:numel].view(shape))
        else:
            shards.append(torch.from_file(peer_path, shared=True, size=max(numel, 1),
                                          dtype=local.dtype)[:numel].view(shape))
    dist.barrier(group=group)  # every process has mapped every file
    os.unlink(path)
    return shards


def _open_on(device: torch.device, rebuild, args: tuple) -> Tensor:
    """A peer's shard, its IPC handle opened in *this* GPU's context.

    ``torch.multiprocessing``'s rebuild opens a handle on the device that allocated it
    (a second CUDA context in this process), where this GPU's kernels cannot read it:
    peer access enabled afterwards does not cover memory imported that way (measured: an
    illegal address on 2 x H200). Opened with this GPU current, the driver maps the
    peer's memory for this GPU (``cudaIpcMemLazyEnablePeerAccess``), so the returned
    tensor is labelled with this GPU while its bytes stay on the peer; only the gather
    kernels read it."""
    import inspect
    names = list(inspect.signature(rebuild).parameters)
    if 'storage_device' not in names:
        raise RuntimeError('share_shards: this PyTorch rebuilds shared CUDA tensors in an unknown way')
    args = list(args)
    args[names.index('storage_device')] = device.index
    return rebuild(*args)


def _share_cuda(local: Tensor, rank: int, world_size: int, group) -> List[Tensor]:
    """Every rank's GPU shard: the others' mapped into this process through CUDA IPC
    handles (peer memory, read over NVLink/PCIe by this GPU's kernels).

    Each peer gets a send of its own (``reduce_tensor`` once per peer). PyTorch counts
    the references to a sent block per send: one counter set to 1, which the receiver
    decrements when it lets go. One send opened by several peers would be decremented
    below zero (the counter is unsigned): the producer's block then stays in PyTorch's
    limbo for good, its GPU memory held until exit, where it warns that the "producer
    process has been terminated before all shared CUDA tensors released"."""
    from torch.multiprocessing.reductions import reduce_tensor
    device = local.device
    sends = [None if r == rank else reduce_tensor(local) for r in range(world_size)]  # [peer] -> (rebuild, args)
    uuid_of = lambda d: str(torch.cuda.get_device_properties(d).uuid)  # noqa: E731
    entries = _all_gather((socket.gethostname(), device.index, uuid_of(device), sends), group, world_size)
    shards = []
    for r, (host, index, gpu_uuid, peer_sends) in enumerate(entries):
        if r == rank:
            shards.append(local)
            continue
        if host != socket.gethostname():
            raise RuntimeError(f'share_shards: rank {r} runs on host {host!r}, not {socket.gethostname()!r}; GPU '
                               'shards are shared between the processes of one host (CUDA IPC)')
        if index == device.index:
            raise RuntimeError(f'share_shards: ranks {rank} and {r} both put their shards on cuda:{index} (this '
                               f'process: current device cuda:{torch.cuda.current_device()}); give each process '
                               'its own GPU (torch.cuda.set_device(local_rank))')
        if index >= torch.cuda.device_count() or uuid_of(index) != gpu_uuid:
            raise RuntimeError(f'share_shards: rank {r} put its shard on its cuda:{index}, which is another GPU '
                               'in this process; every process must see the same GPUs in the same order '
                               '(do not restrict CUDA_VISIBLE_DEVICES per process)')
        if not torch.cuda.can_device_access_peer(device, index):
            raise RuntimeError(f'share_shards: cuda:{device.index} cannot read cuda:{index} peer-to-peer')
        shards.append(_open_on(device, *peer_sends[rank]))  # (the send made for this process)
    dist.barrier(group=group)  # every process holds its handles before any shard can go
    return shards


def share_shards(local: Tensor, group=None) -> List[Tensor]:
    """Collective over ``group`` (default: the world): every process passes its shard
    (rows of one logical table, in rank order) and gets back all the shards as tensors it
    can read without copies: its own, and the others mapped into its address space (GPU
    shards through CUDA IPC; CPU shards through shared memory).

    GPU shards must be on each process's own GPU, and all processes must see the same
    GPUs (as under ``torchrun``, which leaves ``CUDA_VISIBLE_DEVICES`` alone). Shards
    must share dtype and row shape. Keep the returned list (and ``local``) alive while
    the shards are read.
    """
    if not isinstance(local, Tensor) or local.dim() < 1:
        raise TypeError('share_shards: expected a tensor with a row dimension')
    rank, world_size = _world(group)
    kinds = _all_gather((local.device.type, local.dtype, tuple(local.shape[1:])), group, world_size) \
        if world_size > 1 else [(local.device.type, local.dtype, tuple(local.shape[1:]))]
    if len(set(kinds)) > 1:
        raise ValueError(f'share_shards: the ranks passed shards of different kinds (device type, dtype, row '
                         f'shape): {kinds}')
    if world_size == 1:
        return [local]
    if local.is_cuda:
        return _share_cuda(local.contiguous(), rank, world_size, group)
    if local.device.type != 'cpu':
        raise ValueError(f'share_shards: unsupported device {local.device}')
    return _share_cpu(local, rank, world_size, group)


class ShardedTensor:
    """A ``[N, *]`` table split by rows across the processes of a host, readable in full
    by every one of them (WholeGraph-style).

    Rank ``r`` holds rows ``bounds[r]:bounds[r + 1]`` in its own memory (its GPU, or
    shared host memory without GPUs) and reads every other block in place: a gather is
    one kernel launch over the table of all shards, local and peer, with no collective.

    Build it collectively (every rank of ``group`` calls the same constructor):
    :meth:`from_full` when every process can load the whole tensor (each keeps its
    block), :meth:`from_local` when each loads only its own rows.
    """

    def __init__(self, shards: Sequence[Tensor], rank: int) -> None:
        self.shards: List[Tensor] = list(shards)
        self.rank = int(rank)
        bounds = [0]
        for s in self.shards:
            bounds.append(bounds[-1] + s.shape[0])
        self.bounds: List[int] = bounds

    @classmethod
    def from_local(cls, local: Tensor, group=None) -> 'ShardedTensor':
        """Collective: this rank's block of rows (on its GPU, or on the CPU), in rank
        order across ``group``."""
        rank, _ = _world(group)
        return cls(share_shards(local, group), rank)

    @classmethod
    def from_full(cls, full: Tensor, group=None, device: Optional[Union[str, torch.device]] = None
                  ) -> 'ShardedTensor':
        """Collective: every rank passes the same ``[N, *]`` tensor (e.g. loaded from the
        same file) and keeps its block of near-equal contiguous rows, moved to ``device``
        (default: its current GPU, or the CPU without one)."""
        if not isinstance(full, Tensor) or full.dim() < 1:
            raise TypeError('ShardedTensor.from_full: expected a tensor with a row dimension')
        rank, world_size = _world(group)
        if device is None:
            device = torch.device('cuda', torch.cuda.current_device()) if torch.cuda.is_available() else 'cpu'
        if world_size > 1:
            rows = _all_gather(full.shape[0], group, world_size)
            if len(set(rows)) > 1:
                raise ValueError(f'ShardedTensor.from_full: the ranks passed tensors of different lengths: {rows}')
        bounds = row_partition(full.shape[0], world_size)
        # (a copy: the shard must own its memory, which is shared with the other processes)
        local = full[bounds[rank]:bounds[rank + 1]].to(device, copy=True).contiguous()
        return cls.from_local(local, group)

    @property
    def local(self) -> Tensor:
        """This rank's own block."""
        return self.shards[self.rank]

    @property
    def local_rows(self) -> range:
        """The global row ids of this rank's block."""
        return range(self.bounds[self.rank], self.bounds[self.rank + 1])

    @property
    def shape(self) -> torch.Size:
        """``[N, *]``: all rows, every block together."""
        return torch.Size((self.bounds[-1], *self.local.shape[1:]))

    @property
    def dtype(self) -> torch.dtype:
        """The blocks' dtype (one for all)."""
        return self.local.dtype

    @property
    def device(self) -> torch.device:
        """Where this process's reads land (its own shard's device)."""
        return self.local.device

    def size(self, dim: Optional[int] = None):
        """As ``Tensor.size``: :attr:`shape`, or its entry ``dim``."""
        return self.shape if dim is None else self.shape[dim]

    def element_size(self) -> int:
        """Bytes per element."""
        return self.local.element_size()

    def __len__(self) -> int:
        """The number of rows, every block together."""
        return self.bounds[-1]

    def gather(self, index: Tensor, check_bounds: bool = True) -> Tensor:
        """Rows at ``index`` (``[M]`` int32/int64, any device), on :attr:`device`: one
        launch reads local and peer shards."""
        return sharded_gather(self.shards, index.to(self.device, non_blocking=True), check_bounds=check_bounds)

    def __getitem__(self, index) -> Tensor:
        """Rows by id tensor, slice or int (gathered onto :attr:`device`)."""
        if isinstance(index, int):
            return self.gather(torch.tensor([index % len(self)] if -len(self) <= index < len(self) else [index]))[0]
        if isinstance(index, slice):
            index = slice_ids(index, len(self))
        return self.gather(torch.as_tensor(index))

    def to_dense(self) -> Tensor:
        """The whole table, copied onto :attr:`device`."""
        return self.gather(torch.arange(len(self), device=self.device), check_bounds=False)

    def write_local_rows(self, rows: Tensor, values: Tensor) -> None:
        """Writes ``values`` into rows ``rows`` (global ids, all in :attr:`local_rows`):
        each process updates its own block, and the others see the new values."""
        rows = rows.long().cpu()
        lo, hi = self.local_rows.start, self.local_rows.stop
        if rows.numel() and (int(rows.min()) < lo or int(rows.max()) >= hi):
            raise IndexError(f'ShardedTensor: rank {self.rank} holds rows [{lo}, {hi}); a row update must be '
                             'made by the rank that holds the rows')
        self.local[(rows - lo).to(self.device)] = values.to(self.device, self.dtype)

    def __repr__(self) -> str:
        return (f'ShardedTensor(shape={tuple(self.shape)}, dtype={self.dtype}, rank {self.rank} of '
                f'{len(self.shards)}, rows {self.local_rows.start}:{self.local_rows.stop} on {self.device})')
