"""pyg_accel.data.host_memory: page-locked tables allocated by mapping, faulting in
parallel and cudaHostRegister, against PyTorch's pinned allocator."""
import gc
import warnings

import pytest
import torch

from pyg_accel.data import Location, host_memory, pinned_copy, pinned_empty
from pyg_accel.ops import gather

from conftest import requires_cuda


@pytest.fixture
def large_from_1mb(monkeypatch):
    """Takes the mapped path for tables from 1 MiB on (64 MiB by default), so the tests
    stay small."""
    monkeypatch.setattr(host_memory, 'LARGE_BYTES', 1 << 20)


def rss_bytes() -> int:
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith('VmRSS:'))


@requires_cuda
@pytest.mark.parametrize('shape,dtype', [((100, 3), torch.float32),  # small: PyTorch's allocator
                                         ((123_457, 3), torch.float32),  # not a whole number of pages
                                         ((170_001,), torch.int64), ((2049, 257), torch.bfloat16),
                                         ((0, 4), torch.float32)])
def test_pinned_empty_is_pinned_and_read_by_the_gpu(large_from_1mb, shape, dtype):
    t = pinned_empty(shape, dtype)
    assert t.shape == shape and t.dtype == dtype and t.is_cpu and t.is_contiguous()
    if t.numel() == 0:
        return
    assert t.is_pinned()
    values = torch.randn(shape).to(dtype) if dtype.is_floating_point else torch.randint(-9, 9, shape, dtype=dtype)
    t.copy_(values)
    assert torch.equal(t, values)
    assert torch.equal(t.to('cuda', non_blocking=True).cpu(), values)  # a DMA copy
    index = torch.randint(0, shape[0], (999,), device='cuda')
    assert torch.equal(gather(t, index).cpu(), values[index.cpu()])  # the GPU reading it in place (UVA)


@requires_cuda
def test_pinned_copy(large_from_1mb):
    values = torch.randn(100_000, 8)
    for source in (values, values.cuda()):
        copy = pinned_copy(source)
        assert copy.is_pinned() and torch.equal(copy, values)
    assert pinned_copy(copy) is copy  # already there


@requires_cuda
def test_location_pinned_uses_it(large_from_1mb):
    pinned = Location('pinned', torch.device('cuda'))
    values = torch.randn(100_000, 8)
    for placed in (pinned.place(values), pinned.place(values.cuda()), pinned.empty((100_000, 8), torch.float32)):
        assert placed.is_pinned() and placed.shape == (100_000, 8)
    assert torch.equal(pinned.place(values), values)


@requires_cuda
def test_freed_tables_go_back_to_the_system():
    """Unlike PyTorch's pinned blocks, which stay in its cache, a large table is unlocked
    and unmapped as soon as nothing holds it."""
    nbytes = host_memory.LARGE_BYTES * 4
    gc.collect()
    before = rss_bytes()
    t = pinned_empty((nbytes // 4,), torch.float32)
    view = t[10:20]  # a view keeps the table alive
    del t
    gc.collect()
    assert rss_bytes() - before > 0.9 * nbytes  # faulted in, not lazily mapped
    view.fill_(1)
    del view
    gc.collect()
    assert rss_bytes() - before < 0.1 * nbytes


def test_falls_back_to_pytorch_when_locking_fails(monkeypatch, large_from_1mb):
    """Where the driver refuses to lock the mapping, PyTorch's allocator serves the
    table, with one warning."""
    import pyg_accel.ops

    def refuse(tensor):
        raise RuntimeError('CUDA error: invalid argument')
    monkeypatch.setattr(pyg_accel.ops, 'host_register', refuse)
    monkeypatch.setattr(host_memory, '_WARNED', False)
    if not torch.cuda.is_available():  # (PyTorch's pinned allocator needs a GPU)
        monkeypatch.setattr(host_memory, '_pytorch_pinned', lambda shape, dtype: torch.zeros(shape, dtype=dtype))
    with pytest.warns(RuntimeWarning, match='page-locking a mapped table failed'):
        t = pinned_empty((300_000, 2), torch.float32)
    assert t.shape == (300_000, 2) and t.dtype == torch.float32 and t.is_pinned() == torch.cuda.is_available()
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # once
        pinned_empty((300_000,), torch.int64)
