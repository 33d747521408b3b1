"""Row gather: ``out[i] = table[index[i]]`` from device, pinned-host or sharded tables.

The CUDA kernel reads a CUDA table, a pinned host table directly over PCIe (UVA,
zero-copy), or row shards spread across such memories, with one launch for all tables
that share an index. Index validation happens here, before any kernel runs.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
from torch import Tensor

from .. import _build
from ._library import call, check_cuda_built, ops
from ._marks import record, recorded

__all__ = ['gather', 'multi_gather', 'sharded_gather', 'uva_view', 'host_register']

_INDEX_DTYPES = (torch.int32, torch.int64)


def _check_table(table: object, what: str) -> Tensor:
    if not isinstance(table, Tensor):
        raise TypeError(f'{what} must be a torch.Tensor, got {type(table).__name__}')
    if table.dim() < 1:
        raise ValueError(f'{what} must have at least one dimension (rows), got a 0-d tensor')
    if table.is_sparse:
        raise ValueError(f'{what} must be dense, got a sparse tensor')
    return table


def _check_index(index: object) -> Tensor:
    if not isinstance(index, Tensor):
        raise TypeError(f'gather: index must be a torch.Tensor, got {type(index).__name__}')
    if index.dtype not in _INDEX_DTYPES:
        hint = ' (a boolean mask? use mask.nonzero().view(-1))' if index.dtype == torch.bool else ''
        raise TypeError(f'gather: index must be int64 or int32, got {index.dtype}{hint}')
    if index.dim() != 1:
        raise ValueError(f'gather: index must be 1-D, got shape {tuple(index.shape)}')
    return index


def _target_device(tables: Sequence[Tensor], index: Tensor) -> torch.device:
    """CUDA if the index or any table is on a GPU (pinned host tables are read from it)."""
    if all(t.is_cuda == index.is_cuda and (t.is_cuda or t.is_cpu) for t in tables):  # checked cheaply
        return index.device
    cuda = [t.device for t in (*tables, index) if t.device.type == 'cuda']
    if not cuda:
        for t in tables:
            if t.device.type != 'cpu':
                raise ValueError(f'gather: unsupported table device {t.device}')
        return torch.device('cpu')
    device = index.device if index.is_cuda else cuda[0]
    for t in tables:
        if t.device.type == 'cpu' and not t.is_pinned():
            raise ValueError('gather: a CPU table can be read by the GPU only from pinned memory; '
                             'call table.pin_memory() or gather with a CPU index')
        if t.device.type not in ('cpu', 'cuda'):
            raise ValueError(f'gather: unsupported table device {t.device}')
    return device


def trust_index(index: Tensor, num_rows: int) -> Tensor:
    """Records that ``index`` (as it is now) holds row ids in ``[0, num_rows)``, so that
    gathers from tables of at least ``num_rows`` rows skip the bounds check and its host
    sync. pyg_accel's sampler marks the node ids it returns."""
    record(index, '_pyg_accel_rows', int(num_rows))
    return index


def check_index_bounds(index: Tensor, num_rows: int) -> None:
    """Raises an IndexError unless every id of ``index`` is in ``[0, num_rows)``: one host
    sync for a CUDA index, none for one marked by :func:`trust_index` for that many rows."""
    trusted_rows = recorded(index, '_pyg_accel_rows')
    if trusted_rows is not None and trusted_rows <= num_rows:
        return
    if index.numel() == 0 or torch.compiler.is_compiling():
        return
    lo, hi = torch.aminmax(index)
    lo, hi = int(lo), int(hi)  # one host sync for both
    if lo < 0 or hi >= num_rows:
        bad = lo if lo < 0 else hi
        raise IndexError(f'gather: index {bad} is out of range for a table of {num_rows} rows')


def _prepare(tables: Sequence[Tensor], index: Tensor, what: str, check_bounds: bool,
             num_rows: Sequence[int]) -> Tuple[List[Tensor], Tensor]:
    tables = [_check_table(t, what).contiguous() for t in tables]
    index = _check_index(index)
    device = _target_device(tables, index)
    check_cuda_built(device)
    index = index.to(device, non_blocking=True)
    if check_bounds:
        for n in set(num_rows):
            check_index_bounds(index, n)
    return tables, index


def gather(table: Tensor, index: Tensor, *, check_bounds: bool = True) -> Tensor:
    """Rows of ``table`` at ``index``.

    Args:
        table: ``[N, *]`` tensor of any dtype: on a GPU, in pinned host memory (read by
            the GPU directly when ``index`` is on the GPU) or in ordinary CPU memory.
        index: ``[M]`` int64 or int32 row ids, on the CPU or a GPU.
        check_bounds: verify ``0 <= index < N`` before launching (one host sync for a
            CUDA index). With ``False`` the caller guarantees the range; an
            out-of-range row is then never read and comes back zeroed on the GPU.

    Returns:
        ``[M, *]`` tensor of ``table``'s dtype, on the GPU if ``index`` or ``table`` is
        on one, else on the CPU. Differentiable with respect to ``table``.
    """
    (table,), index = _prepare([table], index, 'gather: table', check_bounds, [_rows(table)])
    return call(ops().gather.default, (table,), table, index)


def multi_gather(tables: Sequence[Tensor], index: Tensor, *, check_bounds: bool = True) -> List[Tensor]:
    """``[gather(t, index) for t in tables]`` in one kernel launch on the GPU.

    The tables may differ in dtype and row shape (e.g. ``x`` and ``y``) but must all
    have at least as many rows as ``index`` addresses.
    """
    tables = list(tables)
    if not tables:
        return []
    tables, index = _prepare(tables, index, 'multi_gather: table', check_bounds,
                             [_rows(t) for t in tables])
    return list(call(ops().multi_gather.default, tables, tables, index))


def sharded_gather(shards: Sequence[Tensor], index: Tensor, *, check_bounds: bool = True) -> Tensor:
    """Rows of the logical table ``torch.cat(shards)`` at ``index``, without concatenating.

    Shards share dtype and row shape and may live in different memories (this GPU,
    pinned host memory, a peer GPU); the GPU kernel reads each through its own base
    pointer in a single launch.
    """
    shards = list(shards)
    if not shards:
        raise ValueError('sharded_gather: expected at least one shard')
    for shard in shards[1:]:
        if isinstance(shard, Tensor) and isinstance(shards[0], Tensor):
            if shard.dtype != shards[0].dtype:
                raise TypeError(f'sharded_gather: all shards must share one dtype, got {shards[0].dtype} '
                                f'and {shard.dtype}')
            if shard.shape[1:] != shards[0].shape[1:]:
                raise ValueError(f'sharded_gather: all shards must share the row shape '
                                 f'{tuple(shards[0].shape[1:])}, got {tuple(shard.shape[1:])}')
    total = sum(_rows(s) for s in shards)
    shards, index = _prepare(shards, index, 'sharded_gather: shard', check_bounds, [total])
    return call(ops().sharded_gather.default, shards, shards, index)


def _rows(t: object) -> int:
    return int(t.shape[0]) if isinstance(t, Tensor) and t.dim() >= 1 else 0


# Fake kernels and autograd ###################################################

def _fake_rows(table: Tensor, index: Tensor) -> Tensor:
    return table.new_empty((index.shape[0], *table.shape[1:]), device=index.device)


def _scatter_grad(grad: Tensor, index: Tensor, shape: torch.Size, device: torch.device) -> Tensor:
    out = torch.zeros(shape, dtype=grad.dtype, device=grad.device)
    out.index_add_(0, index.to(grad.device), grad)  # int32 or int64
    return out.to(device)


def _setup(ctx, inputs, output) -> None:
    tables, index = inputs
    tables = tables if isinstance(tables, (list, tuple)) else [tables]
    ctx.shapes = [t.shape for t in tables]
    ctx.devices = [t.device for t in tables]
    ctx.save_for_backward(index)


def _gather_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    return _scatter_grad(grad, index, ctx.shapes[0], ctx.devices[0]), None


def _multi_gather_backward(ctx, grads):
    (index,) = ctx.saved_tensors
    return [None if g is None else _scatter_grad(g, index, s, d)
            for g, s, d in zip(grads, ctx.shapes, ctx.devices)], None


def _sharded_gather_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    total = sum(s[0] for s in ctx.shapes)
    full = _scatter_grad(grad, index, torch.Size((total, *ctx.shapes[0][1:])), grad.device)
    parts = full.split([s[0] for s in ctx.shapes])
    return [p.to(d) for p, d in zip(parts, ctx.devices)], None


@_build.on_load
def _register() -> None:
    torch.library.register_fake('pyg_accel::gather')(_fake_rows)
    torch.library.register_fake('pyg_accel::multi_gather')(
        lambda tables, index: [_fake_rows(t, index) for t in tables])
    torch.library.register_fake('pyg_accel::sharded_gather')(
        lambda shards, index: _fake_rows(shards[0], index))
    torch.library.register_autograd('pyg_accel::gather', _gather_backward, setup_context=_setup)
    torch.library.register_autograd('pyg_accel::multi_gather', _multi_gather_backward, setup_context=_setup)
    torch.library.register_autograd('pyg_accel::sharded_gather', _sharded_gather_backward,
                                    setup_context=_setup)


def uva_view(tensor: Tensor, device=None) -> Tensor:
    """A CUDA tensor over the memory of a pinned host tensor: kernels on ``device``
    (default: the current GPU) read it in place over the bus (UVA, zero-copy), as the
    gather kernel reads pinned tables. Same shape, dtype and strides; it keeps
    ``tensor`` alive, and writes through either are seen by both. For data larger than
    the GPU's memory, e.g. a graph that pyg_accel's CUDA sampler reads from a
    ``GraphStore('pinned')``: ``neighbor_sample(uva_view(colptr), uva_view(row), seed.cuda(), ...)``.
    Every read crosses the bus, so it suits sparse, random reads, not repeated sweeps."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f'uva_view: expected a torch.Tensor, got {type(tensor).__name__}')
    device = torch.device('cuda', torch.cuda.current_device()) if device is None else torch.device(device)
    if device.type != 'cuda':
        raise ValueError(f'uva_view: device must be a GPU, got {device}')
    if tensor.is_cpu and tensor.numel() == 0:  # (no memory to map; an empty tensor is never pinned)
        return tensor.new_empty(tensor.shape, device=device)
    if not tensor.is_cpu or not tensor.is_pinned():
        where = 'pageable host memory (tensor.pin_memory() pins it)' if tensor.is_cpu else str(tensor.device)
        raise ValueError(f'uva_view: expected a tensor in pinned host memory, got {where}')
    check_cuda_built(device)
    return ops().uva_view(tensor, device.index if device.index is not None else torch.cuda.current_device())


def host_register(tensor: Tensor) -> Tensor:
    """``tensor``'s host memory page-locked in place (``cudaHostRegister``), so that the
    GPU reads it directly (:func:`uva_view`, the gather kernel), without the copy that
    ``pin_memory()`` makes: for memory that must stay where it is, such as a
    shared-memory mapping several processes read. Returns a pinned tensor aliasing
    ``tensor`` (``tensor`` itself if already pinned or empty); the pages are unlocked
    when it is freed. Needs a contiguous CPU tensor and the CUDA build. Anonymous and
    shared (``/dev/shm``) memory can be locked; the driver refused a mapping of a file on
    disk (``torch.from_file`` in a temporary folder on the GPU machine: "invalid
    argument")."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f'host_register: expected a torch.Tensor, got {type(tensor).__name__}')
    if not tensor.is_cpu or not tensor.is_contiguous():
        raise ValueError(f'host_register: expected a contiguous host tensor, got '
                         f'{"a strided view" if tensor.is_cpu else tensor.device}')
    if not torch.cuda.is_available():
        raise RuntimeError('host_register: page-locking host memory for a GPU needs CUDA, and no GPU is visible')
    check_cuda_built(torch.device('cuda'))
    return ops().host_register(tensor)
