"""pyg_accel.ops.spmm / sddmm / edge_softmax and CooGraph against PyTorch references."""
import pytest
import torch
from torch_geometric.utils import softmax as pyg_softmax

from pyg_accel.ops import CooGraph, edge_softmax, sddmm, spmm
from pyg_accel.ops.sparse import spmm_add_, spmm_adjoint

from conftest import poison_cuda_allocator

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-4), torch.float64: dict(atol=1e-10, rtol=1e-9),
       torch.bfloat16: dict(atol=3e-2, rtol=3e-2), torch.float16: dict(atol=5e-3, rtol=5e-3)}


def random_edges(num_src=40, num_dst=30, num_edges=300, seed=0, device='cpu', dtype=torch.int64):
    """Random bipartite edges with duplicates and self-loops; the last 5 destinations and
    sources are isolated."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src - 5, (num_edges,), generator=g)
    dst = torch.randint(0, num_dst - 5, (num_edges,), generator=g)
    k = min(10, num_src - 5, num_dst - 5)
    src[:k] = dst[:k] = torch.arange(k)  # self-loops (ids shared by both sides)
    ei = torch.stack([torch.cat([src, src[:20]]), torch.cat([dst, dst[:20]])])  # duplicate edges
    return ei.to(device=device, dtype=dtype)


def ref_spmm(ei, x, w, reduce, num_dst):
    """x [N, H, C], w [E, H] in edge_index order."""
    msg = x[ei[0].long()] * (w.unsqueeze(-1) if w is not None else 1)
    out = torch.zeros(num_dst, *x.shape[1:], dtype=x.dtype, device=x.device).index_add_(0, ei[1].long(), msg)
    if reduce == 'mean':
        deg = torch.bincount(ei[1].long(), minlength=num_dst).clamp(min=1)
        out = out / deg.view(-1, 1, 1).to(out.dtype)
    return out


@pytest.mark.parametrize('index_dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('heads', [None, 1, 3])
@pytest.mark.parametrize('weighted', [False, 'edge', 'edge-head'])
@pytest.mark.parametrize('reduce', ['sum', 'mean'])
def test_spmm_values_and_gradients(device, index_dtype, heads, weighted, reduce):
    ei = random_edges(device=device, dtype=index_dtype)
    g = CooGraph.from_edge_index(ei, (40, 30))
    H = heads or 1
    x = torch.randn(40, H, 8 if heads else 37, device=device, dtype=torch.float64, requires_grad=True)
    w = None
    if weighted:
        w = torch.rand(ei.size(1), *((H,) if weighted == 'edge-head' else ()), device=device, dtype=torch.float64,
                       requires_grad=True)
    xin = x if heads else x[:, 0]
    out = spmm(g, xin, None if w is None else g.sort_edges(w), reduce=reduce)
    w_ref = None if w is None else (w if w.dim() == 2 else w.unsqueeze(1).expand(-1, H))
    ref = ref_spmm(ei, x, w_ref, reduce, 30)
    ref = ref if heads else ref[:, 0]
    assert out.shape == ref.shape and out.dtype == x.dtype
    torch.testing.assert_close(out, ref, **TOL[torch.float64])
    grad = torch.randn_like(ref)
    got = torch.autograd.grad(out, [x] + ([w] if w is not None else []), grad)
    want = torch.autograd.grad(ref, [x] + ([w] if w is not None else []), grad)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL[torch.float64])


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16, torch.float16])
def test_spmm_low_precision_accumulates_in_fp32(device, dtype):
    ei = random_edges(200, 200, 5000, device=device)
    g = CooGraph.from_edge_index(ei, (200, 200))
    x = torch.randn(200, 64, device=device)
    w = torch.rand(ei.size(1), device=device)
    x, w = x.to(dtype), w.to(dtype)
    poison_cuda_allocator()
    out = spmm(g, x, g.sort_edges(w))
    # The reference sums the same rounded inputs in fp64: what is left is the fp32
    # accumulation and the output's one rounding (the inputs' own rounding, up to ~1% of
    # a cancelling sum, would otherwise make the check depend on the random draw).
    ref = ref_spmm(ei, x.double().unsqueeze(1), w.double().unsqueeze(1), 'sum', 200)[:, 0]
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), ref, **TOL[dtype])


@pytest.mark.parametrize('heads', [None, 4])
def test_sddmm_dot_values_and_gradients(device, heads):
    ei = random_edges(device=device)
    g = CooGraph.from_edge_index(ei, (40, 30))
    H = heads or 1
    a = torch.randn(30, H, 33, device=device, dtype=torch.float64, requires_grad=True)
    b = torch.randn(40, H, 33, device=device, dtype=torch.float64, requires_grad=True)
    poison_cuda_allocator()
    out = sddmm(g, a if heads else a[:, 0], b if heads else b[:, 0])
    ref = (a[ei[1].long()] * b[ei[0].long()]).sum(-1)  # [E, H] in edge_index order
    ref = g.sort_edges(ref if heads else ref[:, 0])
    torch.testing.assert_close(out, ref, **TOL[torch.float64])
    grad = torch.randn_like(ref)
    for x, y in zip(torch.autograd.grad(out, [a, b], grad), torch.autograd.grad(ref, [a, b], grad)):
        torch.testing.assert_close(x, y, **TOL[torch.float64])


def hub_graph(num_nodes=3000, num_edges=40000, hub_edges=3000, device='cpu'):
    """Random edges plus one destination with ``hub_edges`` in-edges (runs that span
    several warp chunks) and isolated nodes at the end."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(0, num_nodes - 10, (num_edges + hub_edges,), generator=g)
    dst = torch.cat([torch.randint(0, num_nodes - 10, (num_edges,), generator=g), torch.full((hub_edges,), 7)])
    return torch.stack([src, dst]).to(device)


# (heads, channels): one head of every width class, heads narrower than a group, heads
# that fill groups, widths that take two vectors per lane, and layouts that fall back.
KERNEL_LAYOUTS = [(1, 4), (1, 16), (1, 64), (1, 96), (1, 128), (1, 256), (1, 512), (8, 8), (8, 16), (4, 32),
                  (3, 8), (2, 256), (1, 6)]


@pytest.mark.parametrize('kernel', ['vec', 'generic'])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
@pytest.mark.parametrize('layout', KERNEL_LAYOUTS, ids=[f'{h}x{c}' for h, c in KERNEL_LAYOUTS])
def test_kernel_layouts_match_reference(device, kernel, dtype, layout, monkeypatch):
    """Every feature layout through both CUDA kernel families (the two-stage vectorised
    one and the generic one), against fp64 references, with poisoned outputs."""
    if device.type == 'cpu' and kernel == 'generic':
        pytest.skip('one CPU kernel')
    monkeypatch.setenv('PYG_ACCEL_SPARSE_KERNEL', kernel)
    H, C = layout
    ei = hub_graph(device=device)
    n = 3000
    g = CooGraph.from_edge_index(ei, (n, n))
    x = torch.randn(n, H, C, device=device).to(dtype)
    a = torch.randn(n, H, C, device=device).to(dtype)
    w = torch.rand(ei.size(1), H, device=device).to(dtype)
    poison_cuda_allocator()
    out = spmm(g, x, g.sort_edges(w))
    ref = ref_spmm(ei, x.double(), w.double(), 'sum', n)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else TOL[dtype]  # a 3000-edge hub row
    torch.testing.assert_close(out.double(), ref, **tol)
    poison_cuda_allocator()
    dots = sddmm(g, a, x)
    ref = g.sort_edges((a.double()[ei[1]] * x.double()[ei[0]]).sum(-1))
    torch.testing.assert_close(dots.double(), ref, atol=TOL[dtype]['atol'] * C, rtol=TOL[dtype]['rtol'] * 4)


@pytest.mark.parametrize('kernel', ['vec', 'generic'])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('index_dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('layout', [(1, 64), (1, 6), (4, 8), (1, 1024)], ids=['64', '6', '4x8', '1024'])
def test_spmm_add_adds_into_the_rows_with_edges(device, kernel, dtype, index_dtype, layout, monkeypatch):
    """spmm_add_ = out + spmm on every layout and kernel; rows without edges (isolated
    destinations, a hub row cut by many edge groups, rows at group boundaries) keep or
    get exactly their sums, and the output tensor is updated in place (its version bumped)."""
    if device.type == 'cpu' and kernel == 'generic':
        pytest.skip('one CPU kernel')
    monkeypatch.setenv('PYG_ACCEL_SPARSE_KERNEL', kernel)
    H, C = layout
    ei = torch.cat([hub_graph(device=device), torch.tensor([[0] * 300, [2999] * 300], device=device)], 1)
    ei = ei.to(index_dtype)
    n = 3000
    g = CooGraph.from_edge_index(ei, (n, n))
    x = torch.randn(n, H, C, device=device).to(dtype)
    w = torch.rand(ei.size(1), H, device=device).to(dtype)
    before = torch.randn(n, H, C, device=device).to(dtype)
    out = before.clone()
    version = out._version
    assert spmm_add_(out, g, x, g.sort_edges(w)) is out
    assert out._version > version  # (facts recorded on out must see the write)
    ref = before.double() + ref_spmm(ei.long(), x.double(), w.double(), 'sum', n)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype in (torch.float32, torch.float64) else TOL[dtype]
    torch.testing.assert_close(out.double(), ref, **tol)
    untouched = torch.bincount(ei[1].long(), minlength=n) == 0
    assert untouched.any() and torch.equal(out[untouched], before[untouched])
    flat = before[:, 0].clone()  # [N, F] too, unweighted
    spmm_add_(flat, g, x[:, 0])
    want = before[:, 0].double() + ref_spmm(ei.long(), x[:, :1].double(), None, 'sum', n)[:, 0]
    torch.testing.assert_close(flat.double(), want, **tol)


def test_spmm_add_degenerate_and_bad_input(device):
    g = CooGraph.from_edge_index(torch.empty(2, 0, dtype=torch.long, device=device), (4, 3))
    out = torch.randn(3, 5, device=device)
    kept = out.clone()  # no edges: nothing to add
    spmm_add_(kept, g, torch.randn(4, 5, device=device))
    assert torch.equal(kept, out)
    g = CooGraph.from_edge_index(random_edges(device=device), (40, 30))
    x = torch.randn(40, 4, device=device)
    with pytest.raises(ValueError, match='out must be'):
        spmm_add_(torch.zeros(29, 4, device=device), g, x)
    with pytest.raises(ValueError, match='out must be'):
        spmm_add_(torch.zeros(30, 4, device=device, dtype=torch.float64), g, x)
    with pytest.raises(ValueError, match='out must be'):
        spmm_add_(torch.zeros(4, 30, device=device).t(), g, x)
    with pytest.raises(ValueError, match='source nodes'):
        spmm_add_(torch.zeros(30, 4, device=device), g, x[:39])
    with pytest.raises(RuntimeError, match='no autograd'):
        spmm_add_(torch.zeros(30, 4, device=device), g, x.clone().requires_grad_())
    with torch.no_grad():  # (allowed there)
        spmm_add_(torch.zeros(30, 4, device=device), g, x.clone().requires_grad_())
    with pytest.raises(ValueError, match=r'\[E\] or \[E, H\]'):
        spmm_add_(torch.zeros(30, 4, device=device), g, x, torch.rand(7, device=device))


# Row lengths around the CUDA SpMM's groups of 64 / 128 consecutive edges: rows that
# fill a group exactly (not cut), rows one edge longer or shorter (cut), single edges,
# rows spanning several groups, and empty rows first, between and last.
BOUNDARY_DEGREES = [0, 64, 64, 128, 63, 65, 1, 0, 0, 127, 129, 1, 1, 62, 300, 64, 0, 64, 1, 0]


@pytest.mark.parametrize('fill', ['default', 'rows', 'all'])
@pytest.mark.parametrize('width', [4, 16, 64, 128, 512])
def test_spmm_rows_at_group_boundaries(device, fill, width, monkeypatch):
    """Every output row written once whether or not a group boundary cuts it, with the
    default zero fill and each one forced (PYG_ACCEL_SPMM_ZERO_FILL: the whole output,
    or only shared and empty rows), on a poisoned allocator."""
    if device.type == 'cpu' and fill != 'default':
        pytest.skip('the fill mode is a CUDA kernel setting')
    if fill != 'default':
        monkeypatch.setenv('PYG_ACCEL_SPMM_ZERO_FILL', fill)
    deg = torch.tensor(BOUNDARY_DEGREES)
    num_dst, num_src = deg.numel(), 97
    dst = torch.repeat_interleave(torch.arange(num_dst), deg)
    src = torch.randint(0, num_src, (dst.numel(),), generator=torch.Generator().manual_seed(3))
    ei = torch.stack([src, dst]).to(device)
    g = CooGraph.from_edge_index(ei, (num_src, num_dst))
    x = torch.randn(num_src, width, device=device)
    w = torch.rand(ei.size(1), device=device)
    poison_cuda_allocator()
    out = spmm(g, x, g.sort_edges(w))
    ref = ref_spmm(ei, x.double().unsqueeze(1), w.double().unsqueeze(1), 'sum', num_dst)[:, 0]
    torch.testing.assert_close(out.double(), ref, atol=1e-4, rtol=1e-4)
    assert out[deg == 0].eq(0).all()



# (heads, channels): every group width of the two-stage kernels (1 to 32 lanes; groups of
# 1 lane stage the most edges), several heads, and the generic kernel's layout (47).
CHUNK_LAYOUTS = [(1, 4), (1, 8), (1, 16), (1, 64), (1, 128), (1, 256), (4, 8), (1, 47)]


@pytest.mark.parametrize('chunk', ['auto', 'long', 'short'])
@pytest.mark.parametrize('layout', CHUNK_LAYOUTS, ids=[f'{h}x{c}' for h, c in CHUNK_LAYOUTS])
def test_chunk_lengths_give_the_same_sums(device, chunk, layout, monkeypatch):
    """However many edges each warp takes (PYG_ACCEL_SPARSE_CHUNK: the kernels' long runs,
    their shortest chunks, or picked by the graph's size, which is short for graphs this
    small), SpMM (weighted sum, mean), spmm_add_, SDDMM and the adjoint over the graph's
    own edges give the reference's values, on rows at every group boundary, empty rows
    and a hub row, with poisoned outputs."""
    if device.type == 'cpu' and chunk != 'auto':
        pytest.skip('the chunk length is a CUDA kernel setting')
    monkeypatch.setenv('PYG_ACCEL_SPARSE_CHUNK', chunk)
    monkeypatch.setenv('PYG_ACCEL_SPMM_ADJOINT', 'scatter')  # (the adjoint on the generic kernel)
    H, C = layout
    deg = torch.tensor(BOUNDARY_DEGREES * 3 + [2000])
    num_dst, num_src = deg.numel(), 211
    dst = torch.repeat_interleave(torch.arange(num_dst), deg)
    src = torch.randint(0, num_src, (dst.numel(),), generator=torch.Generator().manual_seed(5))
    ei = torch.stack([src, dst]).to(device)
    g = CooGraph.from_edge_index(ei, (num_src, num_dst))
    x = torch.randn(num_src, H, C, device=device)
    w = torch.rand(ei.size(1), H, device=device)
    tol = dict(atol=1e-4, rtol=1e-4)
    poison_cuda_allocator()
    for reduce in ('sum', 'mean'):
        out = spmm(g, x, g.sort_edges(w), reduce=reduce)
        torch.testing.assert_close(out.double(), ref_spmm(ei, x.double(), w.double(), reduce, num_dst), **tol)
    before = torch.randn(num_dst, H, C, device=device)
    added = spmm_add_(before.clone(), g, x)
    torch.testing.assert_close(added.double(), before.double() + ref_spmm(ei, x.double(), None, 'sum', num_dst), **tol)
    a = torch.randn(num_dst, H, C, device=device)
    dots = sddmm(g, a, x)
    torch.testing.assert_close(dots.double(), g.sort_edges((a.double()[ei[1]] * x.double()[ei[0]]).sum(-1)), **tol)
    grad = torch.randn(num_dst, H, C, device=device)
    back = spmm_adjoint(g, grad, weight=g.sort_edges(w))
    want = torch.zeros(num_src, H, C, dtype=torch.float64, device=device).index_add_(
        0, ei[0], grad.double()[ei[1]] * w.double().unsqueeze(-1))
    torch.testing.assert_close(back.double(), want, **tol)


def test_chunk_setting_is_checked(monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip('the chunk length is a CUDA kernel setting')
    monkeypatch.setenv('PYG_ACCEL_SPARSE_CHUNK', 'medium')
    g = CooGraph.from_edge_index(random_edges(device='cuda'), (40, 30))
    with pytest.raises(RuntimeError, match="PYG_ACCEL_SPARSE_CHUNK must be 'auto', 'long' or 'short'"):
        spmm(g, torch.randn(40, 16, device='cuda'))

EXTREMES = {'max': 'amax', 'min': 'amin'}  # our reduce: torch.scatter_reduce's, as PyG's scatter uses it


@pytest.mark.parametrize('index_dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize('heads', [None, 3])
@pytest.mark.parametrize('reduce', list(EXTREMES))
def test_spmm_max_matches_pyg_scatter_max(device, index_dtype, dtype, heads, reduce):
    """Max (and min) aggregation against PyG's scatter max (``torch.scatter_reduce``
    'amax' / 'amin' into zeros): values, and gradients with ties (ReLU zeros, duplicate
    edges: the gradient is split among them, and an extreme of 0 counts the initial
    zero as one more tie); destinations without edges are 0; outputs on a poisoned
    allocator."""
    ei = random_edges(device=device, dtype=index_dtype)
    g = CooGraph.from_edge_index(ei, (40, 30))
    shape = (40, heads, 8) if heads else (40, 37)
    x = torch.randn(*shape, device=device).relu() * (1 if reduce == 'max' else -1)  # half the values 0: ties
    x = x.to(dtype).requires_grad_()
    poison_cuda_allocator()
    out = spmm(g, x, reduce=reduce)
    index = ei[1].long().view(-1, *([1] * (x.dim() - 1))).expand(-1, *x.shape[1:])
    ref = x.new_zeros(30, *x.shape[1:]).scatter_reduce(0, index, x[ei[0].long()], EXTREMES[reduce],
                                                       include_self=False)
    assert out.shape == ref.shape and out.dtype == dtype
    torch.testing.assert_close(out, ref, rtol=0, atol=0)  # a maximum is one of the values
    grad = torch.randn_like(ref)
    got, = torch.autograd.grad(out, x, grad)
    want, = torch.autograd.grad(ref, x, grad)
    torch.testing.assert_close(got.double(), want.double(), **TOL[dtype])
    isolated = torch.ones(30, dtype=torch.bool, device=device)
    isolated[ei[1].long()] = False
    assert isolated.any() and out[isolated].eq(0).all()


# Max aggregation's CUDA paths: the default (a small graph: the vectorised kernel's
# 64-edge runs), its 256- and 1,024-edge runs, and the row reductions.
MAX_PATHS = {'default': {}, 'runs256': {'PYG_ACCEL_MAX_RUN_EDGES': '256'}, 'vec': {'PYG_ACCEL_SPARSE_KERNEL': 'vec'},
             'generic': {'PYG_ACCEL_SPARSE_KERNEL': 'generic'}}


def force_max_kernel(kernel: str, device: torch.device, monkeypatch) -> None:
    """On the GPU, sends max aggregation down one of MAX_PATHS. The CPU has one kernel:
    skips all but 'default' there."""
    if kernel != 'default' and device.type == 'cpu':
        pytest.skip('one CPU kernel')
    for name, value in MAX_PATHS[kernel].items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize('kernel', list(MAX_PATHS))
@pytest.mark.parametrize('flip', [False, True])
@pytest.mark.parametrize('width', [4, 40, 200])
def test_spmm_max_hub_rows(device, flip, width, kernel, monkeypatch):
    """Max aggregation and its gradient where one node has 3000 edges (over the CUDA
    kernels' long-row limit): as the destination (forward's long row) and as the source
    (the backward's), at widths that take one and several passes over the features,
    down each CUDA path (the hub row is cut into many runs merged by CAS)."""
    force_max_kernel(kernel, device, monkeypatch)
    ei = hub_graph(device=device)
    ei = ei.flip(0) if flip else ei
    n = 3000
    g = CooGraph.from_edge_index(ei, (n, n))
    x = torch.randn(n, width, device=device).relu().requires_grad_()
    poison_cuda_allocator()
    out = spmm(g, x, reduce='max')
    index = ei[1].view(-1, 1).expand(-1, width)
    ref = x.new_zeros(n, width).scatter_reduce(0, index, x[ei[0]], 'amax', include_self=False)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    grad = torch.randn_like(ref)
    got, = torch.autograd.grad(out, x, grad)
    want, = torch.autograd.grad(ref, x, grad)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)  # the hub's gradient sums 3000 terms


@pytest.mark.parametrize('kernel', list(MAX_PATHS))
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('width', [16, 64])
def test_spmm_max_rows_across_edge_chunks(device, dtype, width, kernel, monkeypatch):
    """Max aggregation over 40,000 edges into 300 destinations (~130 each). On the GPU
    the vectorised kernel cuts rows between its edge chunks and merges them by
    compare-and-swap: by default (64-edge runs) most rows, fewer with 256-edge runs, and
    with 'vec' (1,024-edge runs) every first and last run at width 16, only the cut rows
    at 64; 'generic' takes the row reductions. Values exact, ties (half the values ReLU zeros) through the gradient."""
    force_max_kernel(kernel, device, monkeypatch)
    gen = torch.Generator().manual_seed(3)
    ei = torch.stack([torch.randint(0, 500, (40000,), generator=gen),
                      torch.randint(0, 300, (40000,), generator=gen)]).to(device)
    g = CooGraph.from_edge_index(ei, (500, 300))
    x = torch.randn(500, width, generator=gen).relu().to(device=device, dtype=dtype).requires_grad_()
    poison_cuda_allocator()
    out = spmm(g, x, reduce='max')
    x64 = x.detach().double().requires_grad_()  # (the reference in float64: its gradient sums ~130 terms)
    index = ei[1].view(-1, 1).expand(-1, width)
    ref = x64.new_zeros(300, width).scatter_reduce(0, index, x64[ei[0]], 'amax', include_self=False)
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=0)
    grad = torch.randn_like(out)
    got, = torch.autograd.grad(out, x, grad)
    want, = torch.autograd.grad(ref, x64, grad.double())
    torch.testing.assert_close(got.double(), want, **TOL[dtype])


@pytest.mark.parametrize('kernel', list(MAX_PATHS))
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize('reduce', list(EXTREMES))
def test_spmm_max_propagates_nan_as_pyg(device, dtype, kernel, reduce, monkeypatch):
    """A NaN among a destination's edges makes its maximum (or minimum) NaN wherever it
    sits (first edge, last, a hub's middle), and its gradient NaN on every source of
    that destination: torch's scatter_reduce 'amax' / 'amin', which PyG's scatter is."""
    force_max_kernel(kernel, device, monkeypatch)
    gen = torch.Generator().manual_seed(5)
    ei = torch.stack([torch.randint(0, 60, (4000,), generator=gen),
                      torch.randint(0, 20, (4000,), generator=gen)])
    ei = ei[:, torch.argsort(ei[1], stable=True)]
    width = 8 if dtype == torch.float64 else 16
    x = torch.randn(60, width, generator=gen).to(dtype)
    x[ei[0, 0], 0] = float('nan')          # on destination 0's first edge
    x[7, 3] = float('nan')                 # wherever node 7 is a source
    last = ei[0, (ei[1] == 19).nonzero()[-1]]
    x[last, 5] = float('nan')              # on destination 19's last edge
    ei, x = ei.to(device), x.to(device).requires_grad_()
    g = CooGraph.from_edge_index(ei, (60, 20))
    out = spmm(g, x, reduce=reduce)
    x64 = x.detach().double().requires_grad_()  # (the reference in float64: gradients sum ~70 terms)
    index = ei[1].view(-1, 1).expand(-1, width)
    ref = x64.new_zeros(20, width).scatter_reduce(0, index, x64[ei[0]], EXTREMES[reduce], include_self=False)
    assert torch.equal(out.isnan(), ref.isnan()) and out.isnan().any()
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=0, equal_nan=True)
    grad = torch.randn_like(out)
    got, = torch.autograd.grad(out, x, grad)
    want, = torch.autograd.grad(ref, x64, grad.double())
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got.double(), want, equal_nan=True, **TOL[dtype])


def test_sddmm_add_is_gat_logits(device):
    ei = random_edges(device=device)
    g = CooGraph.from_edge_index(ei, (40, 30))
    a_dst, a_src = torch.randn(30, 4, device=device), torch.randn(40, 4, device=device)
    out = sddmm(g, a_dst, a_src, op='add')
    torch.testing.assert_close(out, g.sort_edges(a_dst[ei[1].long()] + a_src[ei[0].long()]))


@pytest.mark.parametrize('heads', [None, 3, 8])
def test_edge_softmax_matches_pyg(device, heads):
    ei = random_edges(device=device)
    g = CooGraph.from_edge_index(ei, (40, 30))
    logits = (10 * torch.randn(ei.size(1), *((heads,) if heads else ()), device=device,
                               dtype=torch.float64)).requires_grad_()
    poison_cuda_allocator()
    out = edge_softmax(g, g.sort_edges(logits))
    ref = g.sort_edges(pyg_softmax(logits, ei[1].long(), num_nodes=30))
    torch.testing.assert_close(out, ref, **TOL[torch.float64])
    grad = torch.randn_like(ref)
    torch.testing.assert_close(torch.autograd.grad(out, logits, grad)[0], torch.autograd.grad(ref, logits, grad)[0],
                               **TOL[torch.float64])


def test_empty_graph_and_isolated_nodes(device):
    g = CooGraph.from_edge_index(torch.empty(2, 0, dtype=torch.long, device=device), (5, 7))
    x = torch.randn(5, 16, device=device, requires_grad=True)
    out = spmm(g, x)
    assert out.shape == (7, 16) and bool((out == 0).all())
    out.sum().backward()
    assert bool((x.grad == 0).all())
    assert sddmm(g, torch.randn(7, 4, device=device), torch.randn(5, 4, device=device)).shape == (0,)
    assert edge_softmax(g, torch.empty(0, device=device)).shape == (0,)
    assert spmm(g, x, reduce='mean').abs().sum() == 0


def test_graph_sorting_transpose_and_int32(device):
    ei = random_edges(device=device)
    g = CooGraph.from_edge_index(ei, (40, 30))
    assert g.src.dtype == torch.int32 and g.ptr.dtype == torch.int64
    assert bool((g.dst[1:] >= g.dst[:-1]).all()) and torch.equal(g.ptr[-1].cpu(), torch.tensor(ei.size(1)))
    assert torch.equal(ei[:, g.perm].cpu(), torch.stack([g.src, g.dst]).long().cpu())
    rev, order = g.transpose()
    assert (rev.num_src, rev.num_dst) == (30, 40) and bool((rev.dst[1:] >= rev.dst[:-1]).all())
    assert torch.equal(rev.src.cpu(), g.dst[order].cpu()) and torch.equal(rev.dst.cpu(), g.src[order].cpu())
    already = CooGraph.from_edge_index(torch.stack([g.src, g.dst]).long(), (40, 30))
    assert already.perm is None


@pytest.mark.parametrize('order', ['sorted', 'unsorted', 'empty'])
@pytest.mark.parametrize('num_nodes', [0, 7, 30])
def test_with_self_loops_is_the_sorted_graph_of_the_edges_and_loops(device, order, num_nodes):
    """Merging one loop per node below num_nodes into a graph gives what sorting the edge
    list with the loops appended gives: ptr, src, dst and each edge's input id (stable:
    a loop after its node's edges); then SpMM and the transpose agree too."""
    ei = random_edges(device=device)
    if order == 'sorted':
        ei = ei[:, torch.argsort(ei[1].cpu(), stable=True).to(device)]
    elif order == 'empty':
        ei = ei[:, :0]
    graph = CooGraph.from_edge_index(ei, (40, 30))
    assert (graph.perm is None) == (order != 'unsorted')
    looped = graph.with_self_loops(num_nodes)
    loops = torch.arange(num_nodes, device=device)
    ref = CooGraph.from_edge_index(torch.cat([ei, torch.stack([loops, loops])], 1), (40, 30))
    for name in ('ptr', 'src', 'dst'):
        got, want = getattr(looped, name), getattr(ref, name)
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want.cpu()), name
    want_perm = ref.perm if ref.perm is not None else torch.arange(ref.num_edges, device=device)
    assert torch.equal(looped.perm.cpu(), want_perm.cpu())
    x = torch.randn(40, 8, device=device)
    torch.testing.assert_close(spmm(looped, x), spmm(ref, x))
    rev, ref_rev = looped.transpose()[0], ref.transpose()[0]
    assert torch.equal(rev.ptr.cpu(), ref_rev.ptr.cpu()) and torch.equal(rev.src.cpu(), ref_rev.src.cpu())
    with pytest.raises(ValueError, match='num_nodes'):
        graph.with_self_loops(31)  # (more than the 30 destinations)


@pytest.mark.parametrize('cut', ['whole', 'mid-destination', 'none', 'all'])
def test_edge_prefix_is_the_graph_of_the_first_edges(device, cut):
    """A prefix of a destination-sorted graph (what trim_to_layer keeps) equals the graph
    built from those edges: ptr, edges, degrees, 1/deg weights, transpose, SpMM and its
    gradient."""
    ei = random_edges(device=device)
    ei = ei[:, torch.argsort(ei[1].cpu(), stable=True).to(device)]  # sorted: perm is None
    full = CooGraph.from_edge_index(ei, (40, 30))
    full.mean_weight(torch.float32)
    dst = ei[1].cpu()
    e = {'whole': int((dst < 12).sum()), 'mid-destination': int((dst < 12).sum()) + 1, 'none': 0,
         'all': ei.size(1)}[cut]
    num_dst = int(dst[:e].max()) + 1 if e else 0
    if cut == 'whole':
        num_dst = 14  # destinations 12 and 13 keep no edges
    part = full.edge_prefix(e, 40, num_dst, whole_destinations=cut != 'mid-destination')
    ref = CooGraph.from_edge_index(ei[:, :e], (40, num_dst))
    for name in ('ptr', 'src', 'dst'):
        assert torch.equal(getattr(part, name).cpu(), getattr(ref, name).cpu()), name
    assert part.perm is None and torch.equal(part.in_degree().cpu(), ref.in_degree().cpu())
    torch.testing.assert_close(part.mean_weight(torch.float32), ref.mean_weight(torch.float32))
    rev, order = part.transpose()
    ref_rev, ref_order = ref.transpose()
    assert torch.equal(rev.ptr.cpu(), ref_rev.ptr.cpu()) and torch.equal(order.cpu(), ref_order.cpu())
    x = torch.randn(40, 8, device=device)
    outs, grads = [], []
    for graph in (part, ref):
        leaf = x.clone().requires_grad_()
        out = spmm(graph, leaf, reduce='mean')
        out.backward(torch.arange(out.numel(), device=device, dtype=out.dtype).view_as(out))
        outs.append(out.detach())
        grads.append(leaf.grad)
    torch.testing.assert_close(outs[0], outs[1])
    torch.testing.assert_close(grads[0], grads[1])
    with pytest.raises(ValueError, match='not a prefix'):
        full.edge_prefix(ei.size(1) + 1, 40, 30)


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('reduce', ['sum', 'mean'])
def test_spmm_adjoint_is_the_gradient_of_spmm(device, dtype, reduce):
    from pyg_accel.ops.sparse import spmm_adjoint
    g = CooGraph.from_edge_index(random_edges(device=device), (40, 30))
    x = torch.randn(40, 8, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn(30, 8, device=device, dtype=dtype)
    want, = torch.autograd.grad(spmm(g, x, reduce=reduce), x, grad)
    torch.testing.assert_close(spmm_adjoint(g, grad, reduce), want, **TOL[dtype])
    with pytest.raises(ValueError, match='reduce'):
        spmm_adjoint(g, grad, 'max')
    with pytest.raises(ValueError, match='30 destinations'):
        spmm_adjoint(g, grad[:20], reduce)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('index_dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('layout', [(1, 64), (1, 6), (3, 8), (1, 1)], ids=['64', '6', '3x8', '1'])
@pytest.mark.parametrize('weighted', [False, True])
def test_spmm_transposed_sums_into_the_sources(device, dtype, index_dtype, layout, weighted):
    """spmm_transposed(ptr, dst, src, w, x, num_src)[s] = sum over s's edges of w * x[dst],
    on the sorted edges and on the same edges in any order (a hub source too); sources
    without edges (and the rows past the largest id) are exactly 0 on a poisoned
    allocator."""
    from pyg_accel.ops._library import ops
    H, C = layout
    ei = torch.cat([random_edges(device=device), torch.tensor([[2] * 200, [7] * 200], device=device)], 1)
    g = CooGraph.from_edge_index(ei.to(index_dtype), (45, 30))
    x = torch.randn(30, H, C, device=device).to(dtype)
    w = torch.rand(g.num_edges, H, device=device).to(dtype) if weighted else None
    ref = torch.zeros(45, H, C, dtype=torch.float64, device=device).index_add_(
        0, g.src.long(), x.double()[g.dst.long()] * (1 if w is None else w.double().unsqueeze(-1)))
    tol = dict(atol=1e-4, rtol=1e-4) if dtype in (torch.float32, torch.float64) else TOL[dtype]
    shuffle = torch.randperm(g.num_edges, device=device)
    for dst, src, weight in ((g.dst, g.src, w), (g.dst[shuffle], g.src[shuffle], None if w is None else w[shuffle])):
        poison_cuda_allocator()
        out = ops().spmm_transposed(g.ptr, dst, src, weight, x, 45)
        assert out.shape == (45, H, C) and out.dtype == dtype
        torch.testing.assert_close(out.double(), ref, **tol)
        assert torch.equal(out[40:], torch.zeros_like(out[40:]))  # no edges: exactly 0
    if device.type == 'cpu':  # deterministic: the same bits on every call
        again = ops().spmm_transposed(g.ptr, g.dst, g.src, w, x, 45)
        assert torch.equal(again, ops().spmm_transposed(g.ptr, g.dst, g.src, w, x, 45))


@pytest.mark.parametrize('adjoint', ['scatter', 'transpose'])
@pytest.mark.parametrize('heads', [None, 3])
@pytest.mark.parametrize('reduce', ['sum', 'mean'])
def test_spmm_gradient_by_either_adjoint(device, adjoint, heads, reduce, monkeypatch):
    """x's gradient of spmm is the reference's whether the transposed SpMM runs by atomics
    over the graph's edges or over the built transpose (edge weights' gradient too)."""
    monkeypatch.setenv('PYG_ACCEL_SPMM_ADJOINT', adjoint)
    ei = random_edges(device=device)
    g = CooGraph.from_edge_index(ei, (40, 30))
    H = heads or 1
    x = torch.randn(40, H, 8, device=device, dtype=torch.float64, requires_grad=True)
    w = torch.rand(ei.size(1), H, device=device, dtype=torch.float64, requires_grad=True)
    xin, win = (x, w) if heads else (x[:, 0], w[:, 0])
    out = spmm(g, xin, g.sort_edges(win), reduce=reduce)
    ref = ref_spmm(ei, x, w, reduce, 30)
    ref = ref if heads else ref[:, 0]
    grad = torch.randn_like(ref)
    for got, want in zip(torch.autograd.grad(out, [x, w], grad), torch.autograd.grad(ref, [x, w], grad)):
        torch.testing.assert_close(got, want, **TOL[torch.float64])
    assert (g._transpose is None) == (adjoint == 'scatter')  # the atomic path builds no transpose
    x = torch.randn(40, H, 8, device=device, dtype=torch.float64, requires_grad=True)  # no destinations at all
    empty = CooGraph.from_edge_index(torch.empty(2, 0, dtype=torch.long, device=device), (40, 0))
    out = spmm(empty, x if heads else x[:, 0], reduce=reduce)
    assert out.shape[0] == 0
    got, = torch.autograd.grad(out, x, torch.zeros_like(out))
    assert torch.equal(got, torch.zeros_like(x))


def test_spmm_adjoint_choice(device, monkeypatch):
    """By default a graph without a built transpose (a sampled batch's) takes the
    transposed SpMM over its own edges up to SCATTER_ADJOINT_MAX edge-features on a GPU
    (SCATTER_ADJOINT_MAX_CPU on the CPU), and the transpose once it exists (a full
    graph's, after its first backward) or the graph is larger. On the CPU both paths
    give the same bits."""
    from pyg_accel.ops import sparse
    limit = 'SCATTER_ADJOINT_MAX' if device.type == 'cuda' else 'SCATTER_ADJOINT_MAX_CPU'
    g = CooGraph.from_edge_index(random_edges(device=device), (40, 30))
    x = torch.randn(30, 2, 8, device=device)
    assert sparse._scatters(g, x)
    no_dst = CooGraph.from_edge_index(torch.empty(2, 0, dtype=torch.long, device=device), (40, 0))
    assert sparse._scatters(no_dst, torch.empty(0, 2, 8, device=device))
    monkeypatch.setattr(sparse, limit, g.num_edges * 16 - 1)
    assert not sparse._scatters(g, x)
    monkeypatch.setattr(sparse, limit, g.num_edges * 16)
    assert sparse._scatters(g, x)
    scattered = sparse._spmm_transposed(g, None, x)
    g.transpose()
    assert not sparse._scatters(g, x)
    transposed = sparse._spmm_transposed(g, None, x)
    if device.type == 'cpu':
        assert torch.equal(scattered, transposed)
    else:
        torch.testing.assert_close(scattered, transposed)
    monkeypatch.setenv('PYG_ACCEL_SPMM_ADJOINT', 'scatter')
    assert sparse._scatters(g, x)
    monkeypatch.setenv('PYG_ACCEL_SPMM_ADJOINT', 'sideways')
    with pytest.raises(ValueError, match='PYG_ACCEL_SPMM_ADJOINT'):
        sparse._scatters(g, x)


@pytest.mark.parametrize('index_dtype', [torch.int64, torch.int32])
def test_csr_ptr_and_mean_edge_weight(device, index_dtype):
    """csr_ptr(key, n)[r] = how many sorted keys are below r (isolated rows at both ends,
    a hub row, no keys at all); mean_edge_weight = 1 / max(1, in-degree of dst), per
    floating dtype, as the reference computes it."""
    from pyg_accel.ops._library import ops
    for key, n in ((torch.tensor([2, 2, 2, 5, 5, 7] + [9] * 300), 12), (torch.tensor([], dtype=torch.long), 4),
                   (torch.randint(0, 1000, (5000,)).sort().values, 1003), (torch.tensor([0, 0]), 1)):
        key = key.to(device=device, dtype=index_dtype)
        want = torch.searchsorted(key.long(), torch.arange(n + 1, device=device))
        poison_cuda_allocator()
        ptr = ops().csr_ptr(key, n)
        assert ptr.dtype == torch.int64 and torch.equal(ptr, want)
        degree = (ptr[1:] - ptr[:-1]).clamp(min=1)
        for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            w = ops().mean_edge_weight(ptr, key, dtype)
            assert w.dtype == dtype and w.shape == key.shape
            torch.testing.assert_close(w, degree[key.long()].to(torch.float64).reciprocal().to(dtype), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match='int32 or int64'):
        ops().csr_ptr(torch.zeros(3, device=device), 4)
    with pytest.raises(RuntimeError, match='floating'):
        long = dict(dtype=torch.long, device=device)
        ops().mean_edge_weight(torch.zeros(3, **long), torch.zeros(2, **long), torch.int64)


@pytest.mark.parametrize('op', ['spmm', 'spmm-flat', 'spmm-mean', 'spmm-mean-weighted', 'spmm-max', 'spmm-min',
                                'sddmm', 'sddmm-flat', 'edge_softmax'])
def test_second_derivatives(device, op):
    """Gradients taken with create_graph=True (a differentiable backward path) equal the
    plain backward's and differentiate again (gradient penalties, Hessian-vector
    products): torch.autograd.gradgradcheck in float64 of each op as a function of all
    its differentiable inputs, over a graph with duplicate edges, self-loops and isolated
    nodes."""
    ei = random_edges(20, 15, 50, device=device)
    g = CooGraph.from_edge_index(ei, (20, 15))
    gen = torch.Generator().manual_seed(0)

    def leaf(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device).requires_grad_()
    x, a, w = leaf(20, 2, 3), leaf(15, 2, 3), leaf(g.num_edges, 2)
    fn, inputs = {'spmm': (lambda x, w: spmm(g, x, w), (x, w)),
                  'spmm-flat': (lambda x, w: spmm(g, x, w), (leaf(20, 4), leaf(g.num_edges))),
                  'spmm-mean': (lambda x: spmm(g, x, reduce='mean'), (x,)),
                  'spmm-mean-weighted': (lambda x, w: spmm(g, x, w, reduce='mean'), (x, w)),
                  'spmm-max': (lambda x: spmm(g, x, reduce='max'), (x,)),
                  'spmm-min': (lambda x: spmm(g, x, reduce='min'), (x,)),
                  'sddmm': (lambda a, x: sddmm(g, a, x), (a, x)),
                  'sddmm-flat': (lambda a, x: sddmm(g, a, x), (leaf(15, 4), leaf(20, 4))),
                  'edge_softmax': (lambda w: edge_softmax(g, w), (w,))}[op]
    out = fn(*inputs)
    v = torch.randn(out.shape, generator=gen, dtype=out.dtype).to(device)
    plain = torch.autograd.grad(out, inputs, v, retain_graph=True)
    tracked = torch.autograd.grad(out, inputs, v, create_graph=True)  # (the differentiable backward path)
    for a, b in zip(tracked, plain):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradgradcheck(fn, inputs)


def test_bad_input_is_a_clear_error():
    ei = random_edges()
    g = CooGraph.from_edge_index(ei, (40, 30))
    with pytest.raises(IndexError, match='outside'):
        CooGraph.from_edge_index(ei, (40, 20))
    with pytest.raises(TypeError, match='int32 or int64'):
        CooGraph.from_edge_index(ei.float())
    with pytest.raises(ValueError, match=r'\[2, E\]'):
        CooGraph.from_edge_index(ei[0])
    with pytest.raises(ValueError, match='source nodes'):
        spmm(g, torch.randn(39, 4))
    with pytest.raises(ValueError, match=r'\[E\] or \[E, H\]'):
        spmm(g, torch.randn(40, 4), torch.rand(7))
    with pytest.raises(TypeError, match='floating'):
        spmm(g, torch.ones(40, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="'sum', 'mean', 'max' or 'min'"):
        spmm(g, torch.randn(40, 4), reduce='amin')
    with pytest.raises(ValueError, match='no edge weights'):
        spmm(g, torch.randn(40, 4), torch.rand(g.num_edges), reduce='max')
    with pytest.raises(ValueError, match="reduce='min' takes no edge weights"):
        spmm(g, torch.randn(40, 4), torch.rand(g.num_edges), reduce='min')
    with pytest.raises(ValueError, match='rows'):
        sddmm(g, torch.randn(40, 4), torch.randn(40, 4))
    with pytest.raises(TypeError, match='CooGraph'):
        spmm(ei, torch.randn(40, 4))


def test_torch_compile_matches_eager():
    ei = random_edges()
    g = CooGraph.from_edge_index(ei, (40, 30))
    x, w = torch.randn(40, 2, 8), torch.rand(ei.size(1), 2)

    def layer(x, w):
        att = edge_softmax(g, w)
        return spmm(g, x, att)

    torch.testing.assert_close(torch.compile(layer)(x, w), layer(x, w))


def test_opcheck(device):
    """Schemas, fake kernels and dispatch of the raw ops (autograd lives in Python)."""
    from pyg_accel.ops._library import ops
    g = CooGraph.from_edge_index(random_edges(device=device), (40, 30))
    x, w = torch.randn(40, 2, 8, device=device), torch.rand(g.num_edges, 2, device=device)
    a = torch.randn(30, 2, 8, device=device)
    logits = torch.randn(g.num_edges, 2, device=device)
    for reduce in ('sum', 'mean'):
        torch.library.opcheck(ops().spmm.default, (g.ptr, g.dst, g.src, w, x, reduce))
        torch.library.opcheck(ops().spmm.default, (g.ptr, g.dst, g.src, None, x, reduce))
    torch.library.opcheck(ops().spmm.default, (g.ptr, g.dst, g.src, None, x))  # (reduce defaults to 'sum')
    torch.library.opcheck(ops().spmm_add_.default, (torch.randn(30, 2, 8, device=device), g.ptr, g.dst, g.src, w, x))
    torch.library.opcheck(ops().sddmm.default, (g.ptr, g.dst, g.src, a, x))
    torch.library.opcheck(ops().spmm_transposed.default, (g.ptr, g.dst, g.src, w, a, 40))
    torch.library.opcheck(ops().csr_ptr.default, (g.dst, 30))
    torch.library.opcheck(ops().mean_edge_weight.default, (g.ptr, g.dst, torch.float32))
    with pytest.raises(RuntimeError, match='one row per destination'):
        ops().spmm_transposed(g.ptr, g.dst, g.src, w, x, 40)
    with pytest.raises(RuntimeError, match='num_src must be non-negative'):
        ops().spmm_transposed(g.ptr, g.dst, g.src, w, a, -1)
    torch.library.opcheck(ops().edge_softmax.default, (g.ptr, logits))
    torch.library.opcheck(ops().edge_softmax_backward.default, (g.ptr, logits.softmax(-1), logits))
    for reduce in ('max', 'min'):
        out, ties = ops().spmm(g.ptr, g.dst, g.src, None, x, reduce)
        assert ties.shape == out.shape and ties.dtype == torch.int32
        torch.library.opcheck(ops().spmm.default, (g.ptr, g.dst, g.src, None, x, reduce))
        torch.library.opcheck(ops().spmm_extremum_backward.default,
                              (g.ptr, g.dst, g.src, x, out, ties, torch.randn_like(out)))
    with pytest.raises(RuntimeError, match="reduce must be 'sum', 'mean', 'max' or 'min', got 'prod'"):
        ops().spmm(g.ptr, g.dst, g.src, None, x, 'prod')
    with pytest.raises(RuntimeError, match="reduce='max' takes no edge weights"):
        ops().spmm(g.ptr, g.dst, g.src, w, x, 'max')


def test_take_rows_handles_tables_without_rows(device):
    from pyg_accel.ops.sparse import take_rows
    empty = torch.empty(0, 8, device=device)
    assert take_rows(empty, torch.empty(0, dtype=torch.long, device=device)).shape == (0, 8)
    table = torch.randn(5, 8, device=device)
    index = torch.tensor([4, 0, 4], device=device)
    assert torch.equal(take_rows(table, index), table[index])


def test_coo_graph_from_parts_is_checked(device):
    """A CooGraph built from its parts is checked before any kernel reads it (a bad one
    used to segfault spmm); one built by from_edge_index, or from good parts, works."""
    ei = random_edges(device=device)
    good = CooGraph.from_edge_index(ei, (40, 30))
    x = torch.randn(40, 8, device=device)
    again = CooGraph(good.ptr, good.src, good.dst, good.perm, 40, 30)
    torch.testing.assert_close(spmm(again, x), spmm(good, x))
    bad_src = good.src.clone()
    bad_src[0] = 10 ** 6
    bad_ptr = good.ptr.clone()
    bad_ptr[3] = 10 ** 9
    cases = [((bad_ptr, good.src, good.dst, good.perm, 40, 30), ValueError, 'ptr must start at 0'),
             ((good.ptr, bad_src, good.dst, good.perm, 40, 30), IndexError, 'src holds ids'),
             ((good.ptr, good.src, good.dst.flip(0), good.perm, 40, 30), ValueError, 'destinations ptr gives'),
             ((good.ptr[:-1], good.src, good.dst, good.perm, 40, 30), TypeError, r'ptr must be int64'),
             ((good.ptr, good.src.float(), good.dst, good.perm, 40, 30), TypeError, 'src must be'),
             ((good.ptr, good.src, good.dst, good.perm, 20, 30), IndexError, 'src holds ids'),
             ((good.ptr, good.src, good.dst, good.perm, -1, 30), ValueError, 'num_src')]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            CooGraph(*args)


def test_bad_arguments_of_sddmm_and_edge_softmax_are_named():
    g = CooGraph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 3]]), (5, 5))
    for a, b in ((torch.randn(2, 4), torch.randn(5, 4)), (torch.randn(5, 4), torch.randn(2, 4))):
        with pytest.raises(ValueError, match='sddmm: a needs 5 rows'):
            sddmm(g, a, b, op='add')
    with pytest.raises(TypeError, match='expected tensors with the graph, got list'):
        edge_softmax(g, [1.0, 2.0, 3.0])
