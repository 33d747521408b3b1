"""pyg_accel.ops.gather / multi_gather / sharded_gather against ``table[index]``."""
import contextlib
import gc

import pytest
import torch

from pyg_accel.ops import gather, host_register, multi_gather, sharded_gather, uva_view

from conftest import HAS_CUDA, poison_cuda_allocator, requires_cuda

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.uint8]


def random_table(shape, dtype, device='cpu'):
    if dtype.is_floating_point:
        return torch.randn(shape, device=device).to(dtype)
    return torch.randint(0, 100, shape, device=device).to(dtype)


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('index_dtype', [torch.int32, torch.int64])
@pytest.mark.parametrize('width', [1, 3, 16, 100, 128, 1000])
def test_gather_matches_indexing(device, dtype, index_dtype, width):
    table = random_table((257, width), dtype, device)
    index = torch.randint(0, 257, (1000,), device=device, dtype=index_dtype)  # with repeats
    poison_cuda_allocator()
    out = gather(table, index)
    assert out.device == table.device and out.dtype == dtype
    assert torch.equal(out, table[index.long()])


@pytest.mark.parametrize('shape', [(50,), (50, 2, 3), (50, 0), (50, 7, 1)])
def test_gather_any_row_shape(device, shape):
    table = random_table(shape, torch.float32, device)
    index = torch.randint(0, 50, (33,), device=device)
    assert torch.equal(gather(table, index), table[index])


def test_gather_empty(device):
    table = torch.randn(10, 4, device=device)
    empty = torch.empty(0, dtype=torch.long, device=device)
    assert gather(table, empty).shape == (0, 4)
    assert gather(torch.randn(0, 4, device=device), empty).shape == (0, 4)


def test_gather_unaligned_rows_and_offsets(device):
    # A view starting 1 element in: base pointer not 16-byte aligned; row of 3 halves.
    base = torch.randn(301, 3, device=device).half()
    table = base[1:]
    index = torch.randint(0, 300, (500,), device=device)
    assert torch.equal(gather(table, index), table[index])


def test_gather_noncontiguous_table(device):
    table = torch.randn(64, 40, device=device)[:, ::2]
    index = torch.randint(0, 64, (20,), device=device)
    assert torch.equal(gather(table, index), table[index])


def test_gather_large(device):
    table = torch.randn(100_000, 100, device=device)
    index = torch.randint(0, 100_000, (200_000,), device=device)
    poison_cuda_allocator()
    assert torch.equal(gather(table, index), torch.index_select(table, 0, index))


def test_multi_gather_mixed_tables(device):
    n = 300
    tables = [random_table((n, 100), torch.float32, device), random_table((n,), torch.int64, device),
              random_table((n, 7), torch.float16, device), random_table((n + 5, 2), torch.uint8, device)]
    index = torch.randint(0, n, (777,), device=device, dtype=torch.int32)
    poison_cuda_allocator()
    outs = multi_gather(tables, index)
    assert len(outs) == len(tables)
    for out, table in zip(outs, tables):
        assert torch.equal(out, table[index.long()])
    assert multi_gather([], index) == []


def test_multi_gather_more_tables_than_one_launch(device):
    tables = [torch.randn(40, i + 1, device=device) for i in range(19)]
    index = torch.randint(0, 40, (25,), device=device)
    for out, table in zip(multi_gather(tables, index), tables):
        assert torch.equal(out, table[index])


@pytest.mark.parametrize('sizes', [[10], [3, 0, 7, 1], [1] * 8])
def test_sharded_gather_matches_concatenation(device, sizes):
    shards = [torch.randn(s, 5, device=device) for s in sizes]
    full = torch.cat(shards)
    index = torch.randint(0, full.shape[0], (200,), device=device)
    assert torch.equal(sharded_gather(shards, index), full[index])


def test_gather_cpu_index_cuda_table_lands_on_gpu():
    if not HAS_CUDA:
        pytest.skip('needs a CUDA GPU')
    table = torch.randn(100, 8, device='cuda')
    index = torch.randint(0, 100, (50,))
    out = gather(table, index)
    assert out.is_cuda and torch.equal(out, table[index.cuda()])


@requires_cuda
@pytest.mark.parametrize('width', [16, 100, 128, 1024])
def test_gather_pinned_host_table_read_by_gpu(width):
    table = torch.randn(5000, width).pin_memory()
    index = torch.randint(0, 5000, (20_000,), device="cuda")  # above the sort threshold too
    poison_cuda_allocator()
    out = gather(table, index)
    assert out.is_cuda
    assert torch.equal(out.cpu(), table[index.cpu()])


@requires_cuda
def test_sharded_gather_across_device_and_pinned_memory():
    shards = [torch.randn(100, 16, device='cuda'), torch.randn(50, 16).pin_memory(), torch.randn(30, 16, device='cuda')]
    full = torch.cat([s.cuda() for s in shards])
    index = torch.randint(0, 180, (40_000,), device='cuda')
    assert torch.equal(sharded_gather(shards, index), full[index])


@requires_cuda
def test_multi_gather_is_one_kernel_launch():
    tables = [torch.randn(1000, 64, device='cuda'), torch.randint(0, 9, (1000,), device='cuda'),
              torch.randn(1000, 3, device='cuda').half()]
    index = torch.randint(0, 1000, (512,), device='cuda')
    multi_gather(tables, index)  # warm up
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        multi_gather(tables, index, check_bounds=False)
        torch.cuda.synchronize()
    launches = [e for e in prof.events() if 'gather_kernel' in e.name]
    assert len(launches) == 1


@requires_cuda
def test_unchecked_out_of_range_rows_are_zero_not_a_fault():
    table = torch.randn(10, 4, device='cuda')
    out = gather(table, torch.tensor([0, 10, -1, 9], device='cuda'), check_bounds=False)
    torch.cuda.synchronize()
    assert torch.equal(out[0], table[0]) and torch.equal(out[3], table[9])
    assert torch.all(out[1:3] == 0)


# Errors ########################################################################

def test_gather_rejects_bad_index(device):
    table = torch.randn(10, 4, device=device)
    with pytest.raises(TypeError, match='int64 or int32'):
        gather(table, torch.tensor([0.0, 1.0], device=device))
    with pytest.raises(TypeError, match='nonzero'):
        gather(table, torch.ones(10, dtype=torch.bool, device=device))
    with pytest.raises(ValueError, match='1-D'):
        gather(table, torch.zeros(2, 2, dtype=torch.long, device=device))
    with pytest.raises(IndexError, match='out of range'):
        gather(table, torch.tensor([0, 10], device=device))
    with pytest.raises(IndexError, match='out of range'):
        gather(table, torch.tensor([-1, 3], device=device))
    with pytest.raises(TypeError, match='torch.Tensor'):
        gather(table, [0, 1])


def test_gather_rejects_bad_table(device):
    index = torch.tensor([0], device=device)
    with pytest.raises(ValueError, match='at least one dimension'):
        gather(torch.tensor(1.0, device=device), index)
    with pytest.raises(TypeError, match='torch.Tensor'):
        gather([[1.0]], index)
    with pytest.raises(TypeError, match='share one dtype'):
        sharded_gather([torch.randn(2, 3, device=device), torch.randn(2, 3, device=device).double()], index)
    with pytest.raises(ValueError, match=r'row shape \(3,\), got \(4,\)'):
        sharded_gather([torch.randn(2, 3, device=device), torch.randn(2, 4, device=device)], index)
    with pytest.raises(IndexError, match='out of range'):
        multi_gather([torch.randn(5, 2, device=device), torch.randn(2, 2, device=device)],
                     torch.tensor([4], device=device))


def test_kernels_validate_shards_themselves(device):
    """The C++ entry points check what the Python wrapper checks (direct torch.ops calls)."""
    import pyg_accel.ops._library as lib
    index = torch.tensor([0], device=device)
    with pytest.raises(RuntimeError, match='share one dtype'):
        lib.ops().sharded_gather([torch.randn(2, 3, device=device), torch.randn(2, 3, device=device).double()], index)
    with pytest.raises(RuntimeError, match=r'row shape \[3\], got \[4\]'):
        lib.ops().sharded_gather([torch.randn(2, 3, device=device), torch.randn(2, 4, device=device)], index)
    with pytest.raises(RuntimeError, match='1-D'):
        lib.ops().gather(torch.randn(2, 3, device=device), index.view(1, 1))


@requires_cuda
def test_gpu_index_on_pageable_cpu_table_is_refused():
    with pytest.raises(ValueError, match='pinned'):
        gather(torch.randn(10, 4), torch.tensor([1], device='cuda'))


def test_cpu_kernel_checks_range_even_unchecked():
    with pytest.raises(RuntimeError, match='out of range'):
        gather(torch.randn(10, 4), torch.tensor([11]), check_bounds=False)


# Autograd, opcheck, torch.compile ################################################

def test_gather_gradients(device):
    table = torch.randn(20, 3, dtype=torch.double, device=device, requires_grad=True)
    index = torch.randint(0, 20, (30,), device=device)
    torch.autograd.gradcheck(lambda t: gather(t, index), (table,))
    a = torch.randn(20, 3, dtype=torch.double, device=device, requires_grad=True)
    b = torch.randn(20, dtype=torch.double, device=device, requires_grad=True)
    torch.autograd.gradcheck(lambda x, y: tuple(multi_gather([x, y], index)), (a, b))
    s1 = torch.randn(8, 3, dtype=torch.double, device=device, requires_grad=True)
    s2 = torch.randn(12, 3, dtype=torch.double, device=device, requires_grad=True)
    torch.autograd.gradcheck(lambda x, y: sharded_gather([x, y], index), (s1, s2))


@pytest.mark.parametrize('mode', ['no_grad', 'inference_mode', 'grad_but_no_input_needs_it', 'grad'])
def test_gathers_skip_autograd_only_when_no_gradient_can_flow(device, mode):
    """The per-batch gathers bypass the op's Python autograd kernel when nothing needs a
    gradient; values are the same in every mode, and a gradient flows where one must."""
    table = torch.randn(20, 3, device=device, requires_grad=mode != 'grad_but_no_input_needs_it')
    other = torch.randn(20, device=device)
    index = torch.randint(0, 20, (9,), device=device)
    context = {'no_grad': torch.no_grad, 'inference_mode': torch.inference_mode}.get(mode, contextlib.nullcontext)
    with context():
        outs = [gather(table, index), *multi_gather([table, other], index),
                sharded_gather([table[:5], table[5:]], index)]
    for out, ref in zip(outs, [table[index], table[index], other[index], table[index]]):
        assert torch.equal(out, ref.detach())
    grad_flows = mode == 'grad'
    assert [outs[k].requires_grad for k in (0, 1, 3)] == [grad_flows] * 3
    if grad_flows:
        sum(o.sum() for o in outs if o.requires_grad).backward()
        expected = 3 * torch.zeros(20, device=device).index_add_(0, index, torch.ones(9, device=device))
        assert torch.equal(table.grad, expected.unsqueeze(1).expand(20, 3))


@pytest.mark.slow  # (PyTorch's op-registration checks, ~17 s: the slow tier; the quick one runs the kernels)
def test_opcheck(device):
    import pyg_accel.ops._library as lib
    ops = lib.ops()
    table = torch.randn(20, 3, device=device, requires_grad=True)
    index = torch.randint(0, 20, (9,), device=device)
    torch.library.opcheck(ops.gather.default, (table, index))
    torch.library.opcheck(ops.multi_gather.default, ([table, torch.randn(20, device=device)], index))
    torch.library.opcheck(ops.sharded_gather.default, ([table[:5].detach(), table[5:].detach()], index))


def test_torch_compile_fullgraph(device):
    table = torch.randn(50, 8, device=device, requires_grad=True)
    index = torch.randint(0, 50, (20,), device=device)
    gather(table, index)  # load the library eagerly first

    def f(t, i):
        return (gather(t, i) * 2).sum()

    compiled = torch.compile(f, fullgraph=True, backend='aot_eager')
    out = compiled(table, index)
    out.backward()
    expected = torch.zeros_like(table).index_add_(0, index, torch.full((20, 8), 2.0, device=device))
    assert torch.allclose(out, f(table, index)) and torch.allclose(table.grad, expected)


def test_trusted_index_skips_only_the_checks_it_covers(monkeypatch):
    from pyg_accel.ops.gather import trust_index
    table = torch.randn(10, 4)
    index = trust_index(torch.tensor([9, 0, 3]), 10)
    checks = []
    real = torch.aminmax
    monkeypatch.setattr(torch, 'aminmax', lambda t: checks.append(1) or real(t))
    assert torch.equal(gather(table, index), table[index]) and not checks  # marked for 10 rows: no check
    with pytest.raises(IndexError, match='out of range'):
        gather(table[:5], index)  # a smaller table than the mark covers: checked
    index[0] = 4  # changed after the mark: checked again
    checks.clear()
    gather(table, index)
    assert checks


def test_sampler_marks_the_node_ids_it_returns():
    from pyg_accel.sampler import NeighborSampler
    from torch_geometric.sampler import NodeSamplerInput
    from pyg_accel.datasets import load_dataset
    data = load_dataset('default').data
    out = NeighborSampler(data, [3, 2]).sample_from_nodes(NodeSamplerInput(None, torch.arange(8)))
    from pyg_accel.ops._marks import recorded
    assert recorded(out.node, '_pyg_accel_rows') == data.num_nodes


@requires_cuda
def test_uva_view_reads_and_writes_pinned_memory_in_place():
    """uva_view: a CUDA tensor over pinned host memory (same values, shape, strides;
    writes seen both ways), alive after the host tensor's name is gone; clear errors."""
    host = torch.arange(60, dtype=torch.float32).view(6, 10).pin_memory()
    view = uva_view(host)
    assert view.is_cuda and view.shape == host.shape and torch.equal(view.cpu(), host)
    view[1].fill_(-1)
    torch.cuda.synchronize()
    assert bool((host[1] == -1).all())
    host[2] = 7
    assert bool((view[2] == 7).all())
    part = uva_view(host[:, 2:5])  # a strided slice keeps its strides
    assert part.stride() == host[:, 2:5].stride() and torch.equal(part.cpu(), host[:, 2:5])
    index = torch.tensor([5, 0, 3], device='cuda')
    assert torch.equal(view[index].cpu(), host[index.cpu()])
    ids = uva_view(torch.arange(1000).pin_memory())
    del host
    gc.collect()
    assert int(ids.sum()) == 999 * 1000 // 2 and view.cpu().shape == (6, 10)
    assert uva_view(torch.empty(0).pin_memory()).numel() == 0


def test_uva_view_bad_input():
    with pytest.raises(ValueError, match='pinned host memory'):
        uva_view(torch.zeros(3), 'cuda')
    with pytest.raises(ValueError, match='must be a GPU'):
        uva_view(torch.zeros(3), 'cpu')
    with pytest.raises(TypeError, match='torch.Tensor'):
        uva_view([1, 2], 'cuda')
    if HAS_CUDA:
        with pytest.raises(ValueError, match='pinned host memory, got cuda'):
            uva_view(torch.zeros(3, device='cuda'))


@requires_cuda
def test_host_register_pins_memory_in_place():
    """host_register page-locks a tensor where it is (a shared-memory mapping, as
    share_host_tensor makes): the result aliases it, is pinned, and the GPU reads it in
    place."""
    import os
    import uuid

    from pyg_accel.data.shards import _shm_dir
    path = os.path.join(_shm_dir(), f'pyg_accel_test_{uuid.uuid4().hex}')
    mapped = torch.from_file(path, shared=True, size=4096, dtype=torch.float32)
    os.unlink(path)
    mapped.copy_(torch.arange(4096, dtype=torch.float32))
    assert not mapped.is_pinned()
    pinned = host_register(mapped)
    assert pinned.is_pinned() and pinned.data_ptr() == mapped.data_ptr()
    index = torch.randint(0, 4096, (100,), device='cuda')
    assert torch.equal(gather(pinned.view(-1, 1), index).view(-1).cpu(), mapped[index.cpu()])
    view = uva_view(pinned)
    view[7] = -1.0
    torch.cuda.synchronize()
    assert float(mapped[7]) == -1.0
    assert host_register(pinned) is pinned  # already pinned
    empty = torch.empty(0)
    assert host_register(empty) is empty


def test_host_register_bad_input():
    with pytest.raises(ValueError, match='contiguous host tensor'):
        host_register(torch.zeros(4, 4).t())
    with pytest.raises(TypeError, match='torch.Tensor'):
        host_register([1])
    if not HAS_CUDA:
        with pytest.raises(RuntimeError, match='no GPU'):
            host_register(torch.zeros(3))
