"""pyg_accel.nn layers and models against PyG's: outputs, gradients, state_dict,
options, input formats, torch.compile."""
import copy

import pytest
import torch
import torch_geometric.nn as pyg_nn
from torch_geometric import EdgeIndex

import pyg_accel.nn as acc_nn

TOL = dict(atol=2e-5, rtol=2e-4)


def graph(num_nodes=50, num_edges=400, seed=0, device='cpu', num_dst=None):
    """Random edges with duplicates and self-loops; the last 5 nodes are isolated."""
    g = torch.Generator().manual_seed(seed)
    num_dst = num_dst or num_nodes
    src = torch.randint(0, num_nodes - 5, (num_edges,), generator=g)
    dst = torch.randint(0, num_dst - 5, (num_edges,), generator=g)
    src[:10] = dst[:10] = torch.arange(10)
    ei = torch.stack([torch.cat([src, src[:20]]), torch.cat([dst, dst[:20]])])
    return ei.to(device)


def same_layers(ours_cls, pyg_cls, *args, device='cpu', **kwargs):
    torch.manual_seed(0)
    ref = pyg_cls(*args, **kwargs).to(device)
    ours = ours_cls(*args, **kwargs).to(device)
    ours.load_state_dict(ref.state_dict())
    return ours, ref


def check_forward_backward(ours, ref, inputs_ours, inputs_ref, leaves):
    out, want = ours(*inputs_ours), ref(*inputs_ref)
    torch.testing.assert_close(out, want, **TOL)
    grad = torch.randn_like(want)
    got = torch.autograd.grad(out, list(ours.parameters()) + leaves, grad, allow_unused=True)
    exp = torch.autograd.grad(want, list(ref.parameters()) + leaves, grad, allow_unused=True)
    for a, b in zip(got, exp):
        if b is None:
            assert a is None or bool((a == 0).all())
        else:
            torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize('options', [{}, {'improved': True}, {'add_self_loops': False}, {'normalize': False},
                                     {'bias': False}, {'cached': True}])
@pytest.mark.parametrize('weighted', [False, True])
def test_gcn_conv_matches_pyg(device, options, weighted):
    ei = graph(device=device)
    ours, ref = same_layers(acc_nn.GCNConv, pyg_nn.GCNConv, 16, 8, device=device, **options)
    x = torch.randn(50, 16, device=device, requires_grad=True)
    w = torch.rand(ei.size(1), device=device, requires_grad=True) if weighted else None
    check_forward_backward(ours, ref, (x, ei, w), (x, ei, w), [x] + ([w] if weighted else []))
    if options.get('cached'):  # the cached graph is reused, as PyG's is
        other = graph(seed=1, device=device)
        torch.testing.assert_close(ours(x, other, w), ref(x, other, w), **TOL)


def test_gcn_conv_input_formats_and_empty_graph(device):
    ei = graph(device=device)
    ours, ref = same_layers(acc_nn.GCNConv, pyg_nn.GCNConv, 16, 8, device=device)
    x = torch.randn(50, 16, device=device)
    want = ref(x, ei)
    torch.testing.assert_close(ours(x, EdgeIndex(ei, sparse_size=(50, 50))), want, **TOL)
    torch.testing.assert_close(ours(x, ei.int()), want, **TOL)
    adj_t = torch.sparse_coo_tensor(ei.flip(0), torch.ones(ei.size(1), device=device), (50, 50))
    torch.testing.assert_close(ours(x, adj_t), ref(x, adj_t), **TOL)  # PyG's own path
    empty = torch.empty(2, 0, dtype=torch.long, device=device)
    torch.testing.assert_close(ours(x, empty), ref(x, empty), **TOL)


@pytest.mark.parametrize('aggr', ['mean', 'sum', 'max', 'min'])
@pytest.mark.parametrize('options', [{}, {'normalize': True}, {'root_weight': False}, {'project': True},
                                     {'bias': False}])
@pytest.mark.parametrize('widths', [(16, 8), (8, 16)])
def test_sage_conv_matches_pyg(device, aggr, options, widths):
    ei = graph(device=device)
    ours, ref = same_layers(acc_nn.SAGEConv, pyg_nn.SAGEConv, *widths, aggr=aggr, device=device, **options)
    x = torch.randn(50, widths[0], device=device, requires_grad=True)
    check_forward_backward(ours, ref, (x, ei), (x, ei), [x])


@pytest.mark.parametrize('aggr', ['max', 'min'])
def test_sage_conv_max_propagates_nan_as_pyg(device, aggr):
    ours, ref = same_layers(acc_nn.SAGEConv, pyg_nn.SAGEConv, 8, 16, aggr=aggr, device=device)
    ei = graph(device=device)
    x = torch.randn(50, 8, device=device)
    x[ei[0, 0], 2] = float('nan')
    x[ei[0, -1], 5] = float('nan')
    out, want = ours(x, ei), ref(x, ei)
    assert torch.equal(out.isnan(), want.isnan()) and out.isnan().any()
    torch.testing.assert_close(out, want, equal_nan=True, **TOL)


@pytest.mark.parametrize('widths', [(16, 8), (8, 16)])
def test_sage_conv_backward_twice_through_a_retained_graph(device, widths):
    """The fused aggregation + root backward frees its intermediate after the first
    backward; a second one (retain_graph=True) recomputes it and gives the same gradients."""
    ei = graph(device=device)
    ours, ref = same_layers(acc_nn.SAGEConv, pyg_nn.SAGEConv, *widths, device=device)
    x = torch.randn(50, widths[0], device=device, requires_grad=True)
    out, want = ours(x, ei), ref(x, ei)
    grad = torch.randn_like(want)
    leaves = [x] + list(ours.parameters())
    first = torch.autograd.grad(out, leaves, grad, retain_graph=True)
    second = torch.autograd.grad(out, leaves, grad)
    expected = torch.autograd.grad(want, [x] + list(ref.parameters()), grad)
    for a, b, c in zip(first, second, expected):
        torch.testing.assert_close(a, c, **TOL)
        torch.testing.assert_close(b, c, **TOL)


@pytest.mark.parametrize('name', ['SAGEConv', 'GCNConv', 'GATConv'])
def test_lazy_layers_size_their_weights_on_the_first_call(device, name):
    """in_channels=-1: the first call sizes the weights (PyG's path), the next ones run
    ours, with PyG's results."""
    ei = graph(device=device)
    x = torch.randn(50, 16, device=device)
    torch.manual_seed(0)
    ours = getattr(acc_nn, name)(-1, 8).to(device)
    first = ours(x, ei)
    ref = getattr(pyg_nn, name)(16, 8).to(device)
    ref.load_state_dict(ours.state_dict())
    torch.testing.assert_close(first, ref(x, ei), **TOL)
    torch.testing.assert_close(ours(x, ei), ref(x, ei), **TOL)


@pytest.mark.parametrize('name,kwargs', [('SAGEConv', {}), ('GCNConv', {}), ('GATConv', {'heads': 2})])
@pytest.mark.parametrize('widths', [(16, 8), (16, 32)])
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_layers_under_autocast_match_pyg(device, name, kwargs, widths, dtype):
    """Mixed precision (torch.autocast, bf16 and fp16): the same output dtype and values
    as PyG's layer, and the same gradients of the input and of every (fp32) parameter
    (SAGE runs its fused root term in the 16-bit dtype there; mixing dtypes in place would
    fail)."""
    ei = graph(device=device)
    ours, ref = same_layers(getattr(acc_nn, name), getattr(pyg_nn, name), *widths, device=device, **kwargs)
    x = torch.randn(50, widths[0], device=device, requires_grad=True)
    with torch.autocast(device.type, dtype=dtype):
        out, want = ours(x, ei), ref(x, ei)
    assert out.dtype == want.dtype
    torch.testing.assert_close(out.float(), want.float(), atol=5e-2, rtol=5e-2)
    grad = torch.randn(want.shape, device=device)
    got = torch.autograd.grad(out.float(), [x] + list(ours.parameters()), grad)
    expected = torch.autograd.grad(want.float(), [x] + list(ref.parameters()), grad)
    for a, b in zip(got, expected):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, atol=1e-1, rtol=5e-2)


def gradient_penalty_grads(layer, x: torch.Tensor, *args) -> list:
    """The gradients, with respect to ``x`` and the layer's parameters, of a gradient
    penalty ``|d sum(layer(x)^2) / dx|^2`` (a second backward through the layer)."""
    x = x.detach().requires_grad_()
    grad, = torch.autograd.grad(layer(x, *args).pow(2).sum(), x, create_graph=True)
    return torch.autograd.grad(grad.pow(2).sum(), [x, *layer.parameters()], allow_unused=True)


@pytest.mark.parametrize('name,kwargs,widths', [
    ('SAGEConv', {}, (16, 8)), ('SAGEConv', {}, (8, 16)), ('SAGEConv', {'aggr': 'sum', 'root_weight': False}, (8, 16)),
    ('SAGEConv', {'project': True, 'normalize': True}, (16, 8)), ('SAGEConv', {'aggr': 'max'}, (16, 8)),
    ('GCNConv', {}, (16, 8)),
    ('GCNConv', {'normalize': False}, (8, 16)), ('GATConv', {'heads': 2}, (16, 8)),
    ('GATConv', {'heads': 2, 'concat': False, 'edge_dim': 3}, (8, 16))])
def test_second_derivatives_through_layers_match_pyg(device, name, kwargs, widths):
    """A gradient penalty through our layers (create_graph=True, then a backward through
    the gradient) gives PyG's gradients for the input and every parameter, in float64,
    both when the layer aggregates before its linear map and after."""
    ei = graph(device=device)
    torch.manual_seed(0)
    ours = getattr(acc_nn, name)(*widths, **kwargs).to(device).double()
    ref = getattr(pyg_nn, name)(*widths, **kwargs).to(device).double()
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(50, widths[0], device=device, dtype=torch.float64)
    args = (ei, torch.randn(ei.size(1), 3, device=device, dtype=torch.float64)) if 'edge_dim' in kwargs else (ei,)
    got, want = gradient_penalty_grads(ours, x, *args), gradient_penalty_grads(ref, x, *args)
    for a, b in zip(got, want):
        if b is None:
            assert a is None or not a.any()
        else:
            torch.testing.assert_close(a, b)


def test_second_derivatives_through_sage_under_autocast(device):
    """The same under bf16 autocast (SAGE's fused function casts inside itself): close to
    the float32 penalty's gradients."""
    ei = graph(device=device)
    torch.manual_seed(0)
    layer = acc_nn.SAGEConv(16, 32).to(device)
    x = torch.randn(50, 16, device=device)
    want = gradient_penalty_grads(layer, x, ei)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        got = gradient_penalty_grads(layer, x, ei)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, atol=0.1 * b.abs().max().item(), rtol=0.1)


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
@pytest.mark.parametrize('rows', [0, 5, 8, 9, 16, 29])
def test_row_gemms_match_one_gemm(device, monkeypatch, dtype, rows):
    """The 16-bit GEMMs over a batch's rows (a head of whole chunks and a fixed-shape tail
    sharing rows with it; a chunk of 8 rows here, on the CPU too): the product of one GEMM,
    with bias, and accumulated in place, for row counts below, at and past the chunk."""
    from pyg_accel.nn.conv import _row_gemm
    monkeypatch.setattr(_row_gemm, 'ROW_CHUNK', 8)
    monkeypatch.setattr(_row_gemm, '_SPLIT_DEVICES', ('cpu', 'cuda'))
    a = torch.randn(rows, 12, device=device).to(dtype)
    w = torch.randn(6, 12, device=device).to(dtype)  # used transposed, as the layers do
    bias = torch.randn(6, device=device).to(dtype)
    want = a.double() @ w.double().t()
    tol = dict(atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(_row_gemm.row_mm(a, w.t()).double(), want, **tol)
    torch.testing.assert_close(_row_gemm.row_mm(a, w.t(), bias).double(), want + bias.double(), **tol)
    out = torch.randn(rows, 6, device=device).to(dtype)
    expected = out.double() + want
    assert _row_gemm.row_addmm_(out, a, w.t()) is out
    torch.testing.assert_close(out.double(), expected, **tol)


@pytest.mark.parametrize('name,kwargs', [('GraphSAGE', {}), ('GAT', {'add_self_loops': False})])
def test_models_through_to_hetero_match_pyg(device, name, kwargs):
    """torch_geometric.nn.to_hetero on our models (bipartite calls per edge type, the
    trimming module given (x_src, x_dst) pairs): PyG's outputs and gradients."""
    from torch_geometric.data import HeteroData
    from torch_geometric.nn import to_hetero
    torch.manual_seed(0)
    data = HeteroData()
    data['a'].x, data['b'].x = torch.randn(30, 8), torch.randn(20, 8)
    data['a', 'to', 'b'].edge_index = torch.stack([torch.randint(0, 30, (100,)), torch.randint(0, 20, (100,))])
    data['b', 'rev', 'a'].edge_index = data['a', 'to', 'b'].edge_index.flip(0)
    data = data.to(device)
    ref = to_hetero(getattr(pyg_nn.models, name)(-1, 16, 2, 4, **kwargs), data.metadata()).to(device)
    ours = to_hetero(getattr(acc_nn.models, name)(-1, 16, 2, 4, **kwargs), data.metadata()).to(device)
    ref(data.x_dict, data.edge_index_dict), ours(data.x_dict, data.edge_index_dict)  # size the lazy weights
    ours.load_state_dict(ref.state_dict())
    want, got = ref(data.x_dict, data.edge_index_dict), ours(data.x_dict, data.edge_index_dict)
    for key in want:
        torch.testing.assert_close(got[key], want[key], **TOL)
    sum(v.square().sum() for v in want.values()).backward()
    sum(v.square().sum() for v in got.values()).backward()
    for (key, p), q in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **TOL, msg=key)


def test_sage_conv_bipartite(device):
    ei = graph(num_nodes=50, num_dst=30, device=device)
    ours, ref = same_layers(acc_nn.SAGEConv, pyg_nn.SAGEConv, (16, 12), 8, device=device)
    x_src = torch.randn(50, 16, device=device, requires_grad=True)
    x_dst = torch.randn(30, 12, device=device, requires_grad=True)
    check_forward_backward(ours, ref, ((x_src, x_dst), ei), ((x_src, x_dst), ei), [x_src, x_dst])
    out = ours((x_src, None), ei, size=(50, 30))
    assert out.shape == (30, 8)


def test_state_dict_round_trip_both_ways():
    for ours_cls, pyg_cls in ((acc_nn.GCNConv, pyg_nn.GCNConv), (acc_nn.SAGEConv, pyg_nn.SAGEConv),
                              (acc_nn.GATConv, pyg_nn.GATConv)):
        ours, ref = ours_cls(16, 8), pyg_cls(16, 8)
        assert list(ours.state_dict()) == list(ref.state_dict())
        ours.load_state_dict(ref.state_dict())
        ref2 = pyg_cls(16, 8)
        ref2.load_state_dict(ours.state_dict())
        x, ei = torch.randn(50, 16), graph()
        torch.testing.assert_close(ref2(x, ei), ours(x, ei), **TOL)


@pytest.mark.parametrize('name', [pytest.param('GCN', marks=pytest.mark.slow), 'GraphSAGE',
                                  pytest.param('GraphSAGE-max', marks=pytest.mark.slow)])
def test_models_match_pyg_and_compile(device, name):
    torch.manual_seed(0)
    name, _, aggr = name.partition('-')
    kwargs = {'aggr': aggr} if aggr else {}
    ref = getattr(pyg_nn.models, name)(16, 32, 2, 4, **kwargs).to(device)
    ours = getattr(acc_nn.models, name)(16, 32, 2, 4, **kwargs).to(device)
    ours.load_state_dict(ref.state_dict())
    ref.eval(), ours.eval()
    x, ei = torch.randn(50, 16, device=device), graph(device=device)
    torch.testing.assert_close(ours(x, ei), ref(x, ei), **TOL)
    assert all(type(c).__module__.startswith('pyg_accel') for c in ours.convs)
    compiled = torch.compile(copy.deepcopy(ours))
    torch.testing.assert_close(compiled(x, ei), ref(x, ei), **TOL)


@pytest.mark.parametrize('name', ['GraphSAGE', 'GCN', 'GAT', 'GCN-loops', 'GAT-loops'])
def test_models_compile_without_graph_breaks(name):
    """As PyG's models (its test_compile_graph_breaks, without self-loops): no graph
    break, so torch.compile(model, fullgraph=True) works. With self-loops PyG's own
    self-loop utilities break the graph (for PyG's models too); nothing else does."""
    name, _, loops = name.partition('-')
    kwargs = {} if name == 'GraphSAGE' else {'add_self_loops': bool(loops)}
    model = getattr(acc_nn.models, name)(16, 32, 2, 4, **kwargs)
    x, ei = torch.randn(50, 16), graph()
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x, ei)
    if loops:
        where = {frame.filename for b in explained.break_reasons for frame in b.user_stack[-1:]}
        assert where and all(f.endswith('torch_geometric/utils/loop.py') for f in where), where
        return
    assert explained.graph_break_count == 0, [str(b.reason)[:200] for b in explained.break_reasons]
    torch._dynamo.reset()  # (dynamo's 'eager' backend: the whole graph traced, no inductor compile to wait for)
    torch.testing.assert_close(torch.compile(model, fullgraph=True, backend='eager')(x, ei), model(x, ei), **TOL)


def test_compile_before_any_eager_call_in_a_fresh_process():
    """torch.compile traces a model's first call; the ops are loaded with the layers, so
    a fresh process may compile before running anything eagerly."""
    import subprocess
    import sys
    code = (
        'import torch, pyg_accel.nn as A, torch_geometric.nn as P\n'
        'torch.manual_seed(0)\n'
        'ref = P.models.GraphSAGE(16, 32, 2, 4); ours = A.models.GraphSAGE(16, 32, 2, 4)\n'
        'ours.load_state_dict(ref.state_dict())\n'
        'x, ei = torch.randn(50, 16), torch.randint(0, 50, (2, 300))\n'
        'out = torch.compile(ours, fullgraph=True, backend="eager")(x, ei)\n'
        'torch.testing.assert_close(out, ref(x, ei), atol=2e-5, rtol=2e-4)\n'
        'print("ok")\n')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith('ok'), done.stderr[-3000:]


@pytest.mark.filterwarnings('ignore::FutureWarning')  # (torch.jit.script is deprecated in newer torch)
@pytest.mark.parametrize('name', ['GCNConv', 'SAGEConv', 'GraphSAGE', 'GCN'])
def test_torchscript_scripts_pyg_layers_over_our_parameters(name):
    """torch.jit.script(ours) scripts PyG's layer over the same parameters (the fast path
    is not TorchScript): what PyG's scripted layer or model computes. (PyG's own GATConv
    does not script in this PyG version; ours scripts no further.)"""
    ours = getattr(acc_nn, name)(8, 16) if name.endswith('Conv') else getattr(acc_nn.models, name)(8, 16, 2, 4)
    x, ei = torch.randn(50, 8), graph()
    scripted = torch.jit.script(ours)
    torch.testing.assert_close(scripted(x, ei), ours(x, ei), **TOL)
    assert isinstance(ours, acc_nn.SAGEConv if name == 'SAGEConv' else torch.nn.Module)  # (ours is left as is)
    for param in ours.parameters():  # shared, not copied: training the original shows in the scripted one
        param.data.add_(0.5)
    torch.testing.assert_close(scripted(x, ei), ours(x, ei), **TOL)


def test_bad_input_is_a_clear_error():
    conv = acc_nn.SAGEConv(16, 8)
    with pytest.raises(IndexError, match='outside'):
        conv(torch.randn(10, 16), graph())
    with pytest.raises(ValueError, match='tuple'):
        acc_nn.GCNConv(16, 8)((torch.randn(50, 16), torch.randn(50, 16)), graph())
    ei = graph()
    for layer in (acc_nn.GCNConv(16, 8), acc_nn.GATConv(16, 8)):  # before PyG's self-loop code indexes with them
        with pytest.raises(IndexError, match='outside'):
            layer(torch.randn(10, 16), ei)
    with pytest.raises(ValueError, match='edge_weight must have one entry per edge'):
        acc_nn.GCNConv(16, 8)(torch.randn(50, 16), ei, torch.rand(5))
    with pytest.raises(ValueError, match='edge_attr must have one row per edge'):
        acc_nn.GATConv(16, 8, edge_dim=2)(torch.randn(50, 16), ei, torch.rand(5, 2))


@pytest.mark.parametrize('options', [{}, {'heads': 4}, {'heads': 4, 'concat': False}, {'negative_slope': 0.5},
                                     {'add_self_loops': False}, {'bias': False}, {'residual': True, 'heads': 2},
                                     {'edge_dim': 3, 'heads': 2}, {'edge_dim': 3, 'fill_value': 0.5}])
def test_gat_conv_matches_pyg(device, options):
    ei = graph(device=device)
    ours, ref = same_layers(acc_nn.GATConv, pyg_nn.GATConv, 16, 8, device=device, **options)
    x = torch.randn(50, 16, device=device, requires_grad=True)
    leaves = [x]
    args = (x, ei)
    if 'edge_dim' in options:
        attr = torch.randn(ei.size(1), 3, device=device, requires_grad=True)
        args, leaves = (x, ei, attr), [x, attr]
    check_forward_backward(ours, ref, args, args, leaves)


def test_gat_conv_attention_weights_bipartite_and_dropout(device):
    ei = graph(num_nodes=50, num_dst=30, device=device)
    ours, ref = same_layers(acc_nn.GATConv, pyg_nn.GATConv, (16, 12), 8, heads=3, device=device)
    x_src = torch.randn(50, 16, device=device, requires_grad=True)
    x_dst = torch.randn(30, 12, device=device, requires_grad=True)
    check_forward_backward(ours, ref, ((x_src, x_dst), ei), ((x_src, x_dst), ei), [x_src, x_dst])
    out, (ei_out, alpha) = ours((x_src, x_dst), ei, return_attention_weights=True)
    want, (ei_ref, alpha_ref) = ref((x_src, x_dst), ei, return_attention_weights=True)
    assert torch.equal(ei_out, ei_ref)
    torch.testing.assert_close(alpha, alpha_ref, **TOL)
    drop, _ = same_layers(acc_nn.GATConv, pyg_nn.GATConv, 16, 8, heads=2, dropout=0.5, device=device)
    drop.train()
    x = torch.randn(50, 16, device=device)
    _, (_, att) = drop(x, graph(device=device), return_attention_weights=True)
    assert bool((att == 0).any()) and drop(x, graph(device=device)).shape == (50, 16)


def test_gat_model_matches_pyg(device):
    torch.manual_seed(0)
    ref = pyg_nn.models.GAT(16, 32, 2, 4, heads=4).to(device).eval()
    ours = acc_nn.models.GAT(16, 32, 2, 4, heads=4).to(device).eval()
    ours.load_state_dict(ref.state_dict())
    assert all(type(c) is acc_nn.GATConv for c in ours.convs)
    x, ei = torch.randn(50, 16, device=device), graph(device=device)
    torch.testing.assert_close(ours(x, ei), ref(x, ei), **TOL)


def test_layers_share_one_graph_per_edge_index(device):
    """The sorted graph (and GCN's normalisation) is built once per edge_index object and
    reused by every layer that sees it, until the tensor is modified in place."""
    from pyg_accel.nn.conv._graph import coo_graph
    ei = graph(50, 300, device=device)
    first = coo_graph(ei, (50, 50))
    assert coo_graph(ei, (50, 50)) is first and coo_graph(ei, (60, 60)) is not first
    ei[0, 0] = 1  # in place: a new version, a new graph
    assert coo_graph(ei, (50, 50)) is not first
    model = acc_nn.models.GCN(8, 16, 3, 4).to(device)
    x = torch.randn(50, 8, device=device)
    model(x, ei)
    shared, _ = facts_of(ei)['_pyg_accel_gcn'][1]
    model(x, ei)
    assert facts_of(ei)['_pyg_accel_gcn'][1][0] is shared


def test_trusted_edge_index_skips_validation_but_not_results(device):
    from pyg_accel.nn.conv._graph import coo_graph
    from pyg_accel.ops.sparse import is_trusted_edge_index, trust_edge_index
    ei = graph(50, 300, device=device)
    trusted = trust_edge_index(ei.clone(), 50, 50)
    assert is_trusted_edge_index(trusted, (50, 50)) and not is_trusted_edge_index(trusted, (40, 50))
    a, b = coo_graph(ei, (50, 50)), coo_graph(trusted, (50, 50))
    assert torch.equal(a.ptr, b.ptr) and torch.equal(a.src, b.src) and torch.equal(a.perm, b.perm)
    bad = graph(50, 300, device=device)
    bad[0, 3] = 99
    with pytest.raises(IndexError, match='outside'):
        coo_graph(bad, (50, 50))  # not trusted: checked
    trusted[0, 0] = 0  # modified after the mark: checked again
    assert not is_trusted_edge_index(trusted, (50, 50))


@pytest.mark.parametrize('batch', [2, 8])  # fewer and more graphs than nodes
@pytest.mark.parametrize('name', ['GCNConv', 'SAGEConv'])
def test_static_graph_batches_match_pyg(device, name, batch):
    """x of shape [B, N, F] with one edge_index (PyG's static graphs, node_dim=-2; its
    test_static_gcn_conv / test_static_graph): PyG's own path, same numbers (SAGEConv
    used to give wrong ones when B > N, GCNConv to raise)."""
    ours, ref = same_layers(getattr(acc_nn, name), getattr(pyg_nn, name), 8, 16, device=device)
    ei = torch.randint(0, 4, (2, 12), generator=torch.Generator().manual_seed(0)).to(device)
    x = torch.randn(batch, 4, 8, device=device)
    out = ours(x, ei)
    assert out.shape == (batch, 4, 16)
    torch.testing.assert_close(out, ref(x, ei), **TOL)


def test_gcn_cache_is_cleared_the_pyg_way(device):
    """`conv._cached_edge_index = None` (PyG's cache attribute, cleared by hand in PyG's
    own code and users') drops our cached graph too."""
    ours, ref = same_layers(acc_nn.GCNConv, pyg_nn.GCNConv, 8, 16, cached=True, device=device)
    x = torch.randn(50, 8, device=device)
    a, b = graph(seed=0, device=device), graph(seed=1, device=device)
    torch.testing.assert_close(ours(x, a), ref(x, a), **TOL)
    torch.testing.assert_close(ours(x, b), ref(x, b), **TOL)  # cached: both still give a's output
    ours._cached_edge_index = ref._cached_edge_index = None
    torch.testing.assert_close(ours(x, b), ref(x, b), **TOL)
    ours.reset_parameters()  # (PyG's clears the cache too)
    ref.reset_parameters()
    ours.load_state_dict(ref.state_dict())
    torch.testing.assert_close(ours(x, a), ref(x, a), **TOL)


def test_facts_about_a_cpu_edge_index_do_not_survive_numpy_writes():
    """numpy writes bypass the version counter: a trusted mark or a memoised graph on a
    CPU edge_index is checked against its contents, so an edited batch is an IndexError
    (it used to segfault) and a memoised normalisation is rebuilt (it used to be reused,
    off by up to 1.39 from PyG's)."""
    from pyg_accel.ops.sparse import trust_edge_index
    ours, ref = same_layers(acc_nn.GCNConv, pyg_nn.GCNConv, 8, 16)
    x, ei = torch.randn(50, 8), graph(50, 300)
    torch.testing.assert_close(ours(x, ei), ref(x, ei), **TOL)
    ei.numpy()[1, :40] = 7
    torch.testing.assert_close(ours(x, ei), ref(x, ei), **TOL)
    sage = acc_nn.SAGEConv(8, 4)
    batch_ei = trust_edge_index(graph(50, 300), 50, 50)
    sage(x, batch_ei)
    facts = facts_of(batch_ei)
    assert facts['_pyg_accel_trusted'][2] is facts['_pyg_accel_coo'][2]  # one copy of the contents per tensor
    batch_ei.numpy()[0, 0] = 10 ** 9
    with pytest.raises(IndexError, match='outside'):
        sage(x, batch_ei)


def test_edge_index_marked_sorted_builds_its_graph_without_sorting(device):
    from pyg_accel.nn.conv._graph import coo_graph
    from pyg_accel.ops.sparse import is_trusted_dst_sorted, trust_edge_index
    ei = graph(50, 300, device=device)
    ei = ei[:, torch.argsort(ei[1], stable=True)]
    marked = trust_edge_index(ei.clone(), 50, 50, dst_sorted=True)
    assert is_trusted_dst_sorted(marked) and not is_trusted_dst_sorted(trust_edge_index(ei.clone(), 50, 50))
    g = coo_graph(marked, (50, 50))
    assert g.perm is None  # taken as it is
    ref = coo_graph(ei, (50, 50))
    assert torch.equal(g.ptr, ref.ptr) and torch.equal(g.src, ref.src)
    x = torch.randn(50, 8, device=device)
    conv = acc_nn.SAGEConv(8, 4).to(device)
    torch.testing.assert_close(conv(x, marked), conv(x, ei))


def test_graph_memo_can_be_switched_off(monkeypatch):
    from pyg_accel.nn.conv._graph import coo_graph
    ei = graph(50, 300)
    monkeypatch.setenv('PYG_ACCEL_GRAPH_MEMO', '0')
    assert coo_graph(ei, (50, 50)) is not coo_graph(ei, (50, 50))
    assert '_pyg_accel_coo' not in facts_of(ei)


def facts_of(t: torch.Tensor) -> dict:
    """What the package has recorded about ``t`` (its side table's entry)."""
    from pyg_accel.ops._marks import _FACTS
    return _FACTS.get(t) or {}


def test_no_code_sets_attributes_on_tensors_or_keys_caches_by_id():
    """Facts about tensors go through pyg_accel/ops/_marks.py's side table: no setattr,
    no ``._pyg_accel_*`` attribute, and no other module-level table keyed by ``id()``."""
    import re
    from pathlib import Path
    package = Path(__file__).resolve().parents[1] / 'pyg_accel'
    pattern = re.compile(r"setattr\(|\._pyg_accel_\w+\s*=|getattr\([^)]*'_pyg_accel|^_\w+\s*:\s*Dict\[int")
    offenders = [f'{path.relative_to(package)}:{number}: {line.strip()}'
                 for path in package.rglob('*.py') if path.name != '_marks.py'
                 for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def test_facts_stay_off_the_tensor_and_do_not_travel_with_it(device):
    """Facts live in a side table, not on the tensor: nothing in its __dict__, nothing
    carried through torch.save / pickle / deepcopy (a loaded tensor restarts its version
    counter, so a carried fact could pass for current after the tensor changed), and the
    entry goes with the tensor."""
    import gc
    import io
    import pickle
    from pyg_accel.ops._marks import _FACTS
    from pyg_accel.ops.sparse import is_trusted_edge_index, trust_edge_index
    before = len(_FACTS)
    ei = trust_edge_index(graph(50, 300, device=device), 50, 50)
    acc_nn.SAGEConv(8, 4).to(device)(torch.randn(50, 8, device=device), ei)
    assert is_trusted_edge_index(ei, (50, 50)) and '_pyg_accel_coo' in facts_of(ei)
    assert not [k for k in vars(ei) if k.startswith('_pyg_accel')]
    buffer = io.BytesIO()
    torch.save(ei, buffer)
    buffer.seek(0)
    for copy_of in (torch.load(buffer), pickle.loads(pickle.dumps(ei)), copy.deepcopy(ei)):
        assert not is_trusted_edge_index(copy_of, (50, 50)) and facts_of(copy_of) == {}
    del ei, copy_of
    gc.collect()
    assert len(_FACTS) == before
    # an int32 edge_index (no cast copies it) with its graph memoised on it: the graph holds rows of
    # a detached view, so the tensor, its facts and its graph still go together
    for layer in (acc_nn.SAGEConv, acc_nn.GCNConv):
        for trusted in (True, False):
            ei = graph(50, 300, device=device).int()
            ei = ei[:, torch.argsort(ei[1], stable=True)].contiguous()
            if trusted:
                ei = trust_edge_index(ei, 50, 50, dst_sorted=True)
            layer(8, 4).to(device)(torch.randn(50, 8, device=device), ei)
            assert facts_of(ei)
            del ei
            gc.collect()
            assert len(_FACTS) == before, (layer.__name__, trusted)


EXPLAIN_SCRIPT = '''
import torch, torch_geometric.nn.models as pyg_models
import pyg_accel.nn.models as acc_models
from torch_geometric.explain import Explainer, GNNExplainer
torch.manual_seed(0)
x, edge_index = torch.randn(60, 8), torch.randint(0, 60, (2, 300))
for name in ('GAT', 'GCN', 'GraphSAGE'):
    ref = getattr(pyg_models, name)(8, 16, 2, 3)  # PyG's layers built first, as in a user's script
    ours = getattr(acc_models, name)(8, 16, 2, 3)
    ours.load_state_dict(ref.state_dict())
    masks = []
    for model in (ref, ours):
        explainer = Explainer(model=model, algorithm=GNNExplainer(epochs=5), explanation_type='model',
                              node_mask_type='attributes', edge_mask_type='object',
                              model_config=dict(mode='multiclass_classification', task_level='node',
                                                return_type='log_probs'))
        torch.manual_seed(1)
        masks.append(explainer(x, edge_index, index=3).edge_mask)
    torch.testing.assert_close(masks[1], masks[0]), name
print('ok')
'''


def test_gnn_explainer_edge_masks_match_pyg_after_pyg_layers_were_built():
    """PyG generates a `propagate` per class and keeps the class's previous one for
    explain mode; our subclasses built after PyG's own layers kept PyG's generated one,
    which ignores edge masks, so GNNExplainer failed ("Could not compute gradients for
    edges"). A fresh interpreter, so that PyG's layers really are built first."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get('PYTHONPATH', '')]))
    done = subprocess.run([sys.executable, '-W', 'ignore', '-c', EXPLAIN_SCRIPT], env=env, cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith('ok'), done.stderr[-2000:]


@pytest.mark.parametrize('options', [{}, {'eps': 0.3}, {'train_eps': True}, {'eps': -0.5, 'train_eps': True}])
def test_gin_conv_matches_pyg(device, options):
    """GINConv: nn((1 + eps) x + sum of the in-neighbours' x), values and gradients
    (eps's too when trained), int32 and int64 ids, bipartite inputs, an edgeless graph."""
    def mlp():
        return torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.ReLU(), torch.nn.Linear(24, 8))
    torch.manual_seed(0)
    ref = pyg_nn.GINConv(mlp(), **options).to(device)
    ours = acc_nn.GINConv(mlp(), **options).to(device)
    assert list(ours.state_dict()) == list(ref.state_dict())
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(50, 16, device=device, requires_grad=True)
    for ei in (graph(device=device), graph(device=device).int()):
        check_forward_backward(ours, ref, (x, ei), (x, ei.long()), [x])
    bipartite = graph(num_nodes=50, num_dst=30, device=device)
    x_dst = torch.randn(30, 16, device=device, requires_grad=True)
    check_forward_backward(ours, ref, ((x, x_dst), bipartite), ((x, x_dst), bipartite), [x, x_dst])
    assert ours((x, None), bipartite, size=(50, 30)).shape == (30, 8)
    empty = torch.empty(2, 0, dtype=torch.long, device=device)
    check_forward_backward(ours, ref, (x, empty), (x, empty), [x])


def test_gin_model_matches_pyg(device):
    torch.manual_seed(0)
    ref = pyg_nn.models.GIN(16, 32, 2, 4, train_eps=True).to(device).eval()
    ours = acc_nn.models.GIN(16, 32, 2, 4, train_eps=True).to(device).eval()
    assert list(ours.state_dict()) == list(ref.state_dict())
    ours.load_state_dict(ref.state_dict())
    assert all(type(c) is acc_nn.GINConv for c in ours.convs)
    x, ei = torch.randn(50, 16, device=device), graph(device=device)
    torch.testing.assert_close(ours(x, ei), ref(x, ei), **TOL)
