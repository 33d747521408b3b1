"""Trimming (PyG's ``trim_to_layer``): pyg_accel's models trim by themselves on its
loaders' batches and give the untrimmed model's seed outputs and gradients, GCN included
(normalised by the batch's degrees, not the trimmed graph's)."""
import pytest
import torch
import torch_geometric.nn.models as pyg_models

from torch_geometric.utils import add_self_loops

import pyg_accel.nn.models as accel_models
from pyg_accel.data import from_data
from pyg_accel.loader import NeighborLoader
from pyg_accel.ops.hops import record_hops, sampled_hops

from conftest import DEVICES, community_data

MODELS = ['GraphSAGE', 'GCN', 'GAT', 'GIN']


def first_batch(device, fanout=(4, 3, 2), data=None, batch_size=40):
    fs, gs = from_data(data if data is not None else community_data(), device)
    loader = NeighborLoader((fs, gs), list(fanout), input_nodes=torch.arange(100), batch_size=batch_size,
                            shuffle=True)
    torch.manual_seed(0)
    return next(iter(loader))


def model_pair(name, device, num_layers=3, **kwargs):
    """Our model trimming by itself, and the same weights untrimmed."""
    torch.manual_seed(0)
    trimmed = getattr(accel_models, name)(16, 8, num_layers, 4, **kwargs).to(device).eval()
    full = getattr(accel_models, name)(16, 8, num_layers, 4, auto_trim=False, **kwargs).to(device).eval()
    full.load_state_dict(trimmed.state_dict())
    return trimmed, full


def assert_same_step(trimmed, full, batch, **inputs):
    """Seed outputs of the trimmed model (which returns only those) equal the untrimmed
    model's, and so do the parameter and input gradients of a loss on them."""
    x1 = batch.x.clone().requires_grad_()
    x2 = batch.x.clone().requires_grad_()
    out = trimmed(x1, batch.edge_index, **inputs)
    expected = full(x2, batch.edge_index, **inputs)
    assert out.shape == (batch.batch_size, expected.size(1)) and expected.size(0) == batch.num_nodes
    expected = expected[:batch.batch_size]
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)
    out.square().sum().backward()
    expected.square().sum().backward()
    for (key, p), q in zip(trimmed.named_parameters(), full.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=2e-5, rtol=1e-4, msg=key)
    torch.testing.assert_close(x1.grad, x2.grad, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('name', MODELS)
def test_models_trim_loader_batches_by_themselves(device, name):
    batch = first_batch(device)
    assert sampled_hops(batch.edge_index, batch.num_nodes) == (batch.num_sampled_nodes, batch.num_sampled_edges)
    assert_same_step(*model_pair(name, device), batch)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('case', ['weighted', 'improved', 'self-loops', 'no-self-loops', 'no-normalize'])
def test_trimmed_gcn_keeps_the_batch_degrees(device, case):
    """GCN's normalisation of a trimmed layer uses the untrimmed batch's degrees: edge
    weights (trimmed beside the edges), improved, graphs with self-loops of their own."""
    data = community_data()
    if case == 'self-loops':
        data.edge_index = add_self_loops(data.edge_index, num_nodes=data.num_nodes)[0]
    options = {'improved': {'improved': True}, 'no-self-loops': {'add_self_loops': False},
               'no-normalize': {'normalize': False}}.get(case, {})
    batch = first_batch(device, data=data)
    trimmed, full = model_pair('GCN', device, **options)
    inputs = {}
    if case in ('weighted', 'improved'):
        inputs['edge_weight'] = torch.rand(batch.edge_index.size(1), device=device) + 0.1
    assert_same_step(trimmed, full, batch, **inputs)
    # PyG's way of asking (the counts passed): our GCN gives the untrimmed seed outputs there too
    explicit = trimmed(batch.x, batch.edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                       num_sampled_edges_per_hop=batch.num_sampled_edges, **inputs)
    assert explicit.size(0) == batch.num_sampled_nodes[0] + batch.num_sampled_nodes[1]  # PyG's trimmed shape
    torch.testing.assert_close(explicit[:batch.batch_size], full(batch.x, batch.edge_index, **inputs)[:batch.batch_size],
                               atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize('num_layers', [3, 2])
@pytest.mark.parametrize('name', MODELS)
def test_each_layer_computes_only_what_the_next_reads(name, num_layers):
    """Layer i of L reads the nodes of hops 0..L-i and computes the nodes of hops
    0..L-i-1 only (DGL's blocks; PyG's trim_to_layer computes one hop more), so the last
    layer computes the seeds alone; fewer layers than hops read fewer hops too."""
    batch = first_batch('cpu', fanout=(4, 3, 2))
    nodes = batch.num_sampled_nodes
    model, _ = model_pair(name, 'cpu', num_layers=num_layers)
    seen = []
    hooks = [conv.register_forward_hook(lambda m, args, out: seen.append((args[0][0].size(0), out.size(0))))
             for conv in model.convs]
    model(batch.x, batch.edge_index)
    for hook in hooks:
        hook.remove()
    assert seen == [(sum(nodes[:num_layers - i + 1]), sum(nodes[:num_layers - i])) for i in range(num_layers)]


@pytest.mark.parametrize('weighted', [False, True])
def test_gcn_computes_the_first_rows_of_a_pair(weighted):
    """GCNConv((x, x[:n]), edge_index): the first n rows of GCNConv(x, edge_index) (edges
    all ending below n; the others are a clear error naming the rows)."""
    from pyg_accel.nn import GCNConv
    g = torch.Generator().manual_seed(0)
    x = torch.randn(30, 6, generator=g)
    edge_index = torch.stack([torch.randint(0, 30, (80,), generator=g), torch.randint(0, 12, (80,), generator=g)])
    weight = torch.rand(80, generator=g) + 0.1 if weighted else None
    conv = GCNConv(6, 5)
    expected = conv(x, edge_index, weight)[:12]
    torch.testing.assert_close(conv((x, x[:12]), edge_index, weight), expected)
    with pytest.raises(IndexError, match=r'\[0, 10\)'):
        conv((x, x[:10]), edge_index, weight)


@pytest.mark.parametrize('name', MODELS)
def test_fewer_layers_than_hops_trim_too(name):
    batch = first_batch('cpu', fanout=(4, 3, 2))
    assert_same_step(*model_pair(name, 'cpu', num_layers=2), batch)


@pytest.mark.parametrize('case', ['auto_trim=False', 'more layers than hops', 'batch norm', 'jumping knowledge',
                                  'edge_index changed', 'inference_mode'])
def test_untrimmed_where_trimming_could_change_the_seeds(case):
    """Where trimming is not known to keep the seed outputs, the model runs untrimmed and
    returns every row, as PyG's does."""
    batch = first_batch('cpu', fanout=(4, 3))
    kwargs = {'auto_trim=False': {'auto_trim': False}, 'batch norm': {'norm': 'batch_norm'},
              'jumping knowledge': {'jk': 'cat'}}.get(case, {})
    torch.manual_seed(0)
    model = accel_models.GraphSAGE(16, 8, 3 if case == 'more layers than hops' else 2, 4, **kwargs).eval()
    edge_index = batch.edge_index
    if case == 'edge_index changed':
        edge_index[0, 0] = edge_index[0, 1]  # an in-place change: the recorded counts no longer vouch for it
    if case == 'inference_mode':
        with torch.inference_mode():
            batch = first_batch('cpu', fanout=(4, 3))
            assert model(batch.x, batch.edge_index).size(0) == batch.num_nodes
        return
    assert model(batch.x, edge_index).size(0) == batch.num_nodes


def test_pyg_models_take_our_batches_untrimmed():
    """PyG's own models ignore the recorded counts: every row, the seeds equal ours."""
    batch = first_batch('cpu')
    torch.manual_seed(0)
    ref = pyg_models.GraphSAGE(16, 8, 3, 4).eval()
    ours = accel_models.GraphSAGE(16, 8, 3, 4).eval()
    ours.load_state_dict(ref.state_dict())
    expected = ref(batch.x, batch.edge_index)
    assert expected.size(0) == batch.num_nodes
    torch.testing.assert_close(ours(batch.x, batch.edge_index), expected[:batch.batch_size], atol=2e-5, rtol=1e-4)


def test_training_step_trims_with_dropout():
    """Training mode with dropout: trimmed steps still learn (dropout masks differ from an
    untrimmed run's, as they do between any two runs)."""
    fs, gs = from_data(community_data(), 'cpu')
    loader = NeighborLoader((fs, gs), [5, 5], input_nodes=torch.arange(600), batch_size=64, shuffle=True)
    torch.manual_seed(0)
    model = accel_models.GraphSAGE(16, 32, 2, 4, dropout=0.2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(4):
        total = 0.0
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)
            assert out.size(0) == batch.batch_size
            loss = torch.nn.functional.cross_entropy(out, batch.y[:batch.batch_size])
            loss.backward()
            opt.step()
            total += float(loss.detach())
        losses.append(total / len(loader))
    assert losses[-1] < 0.6 * losses[0]


def test_hop_counts_that_do_not_add_up_are_not_recorded():
    edge_index = torch.tensor([[1, 2, 3], [0, 0, 1]])
    assert not record_hops(edge_index, 4, [1, 2], [2])  # 3 edges
    assert not record_hops(edge_index, 4, [1, 2, 2], [2, 1])  # 5 nodes
    assert not record_hops(edge_index, 4, [1, 3], [3, 0])  # one count too many
    assert record_hops(edge_index, 4, [1, 2, 1], [2, 1])
    assert sampled_hops(edge_index, 4) == ([1, 2, 1], [2, 1]) and sampled_hops(edge_index, 5) is None


def test_link_loader_batches_trim():
    """LinkNeighborLoader's seeds (the label edges' nodes) come first: out[edge_label_index]
    reads the trimmed output as it reads the untrimmed one."""
    from pyg_accel.loader import LinkNeighborLoader
    data = community_data()
    fs, gs = from_data(data, 'cpu')
    loader = LinkNeighborLoader((fs, gs), [4, 3], edge_label_index=data.edge_index[:, :50], batch_size=25)
    batch = next(iter(loader))
    trimmed, full = model_pair('GraphSAGE', 'cpu', num_layers=2)
    out, expected = trimmed(batch.x, batch.edge_index), full(batch.x, batch.edge_index)
    assert out.size(0) < expected.size(0)
    torch.testing.assert_close(out[batch.edge_label_index], expected[batch.edge_label_index], atol=2e-5, rtol=1e-4)


