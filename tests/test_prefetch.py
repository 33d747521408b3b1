"""Pipelined loading (pyg_accel.loader.prefetch): same batches as plain iteration, data
intact while the consumer's stream is busy, clean fallback without a GPU."""
import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data, HeteroData

import pyg_accel.nn.models as accel_models
from pyg_accel.data import from_data
from pyg_accel.loader import NeighborLoader, PrefetchLoader, prefetch_batches
from pyg_accel.loader.prefetch import _record_stream

from conftest import HAS_CUDA, community_data, locations, requires_cuda


def batches(loader, seed=0):
    torch.manual_seed(seed)
    return [(b.n_id.cpu(), b.edge_index.cpu(), b.x.cpu(), b.batch_size) for b in loader]


@pytest.mark.parametrize('location', locations())
def test_pipelined_loader_yields_the_plain_batches(location):
    data = community_data()
    fs, gs = from_data(data, location)
    kwargs = dict(num_neighbors=[5, 3], input_nodes=torch.arange(200), batch_size=32, shuffle=True)
    plain = batches(NeighborLoader((fs, gs), pipeline=False, **kwargs))
    piped = batches(NeighborLoader((fs, gs), pipeline=True, **kwargs))
    wrapped = batches(PrefetchLoader(NeighborLoader((fs, gs), pipeline=False, **kwargs)))
    assert len(plain) == len(piped) == len(wrapped) == 7
    for a, b, c in zip(plain, piped, wrapped):
        for x, y, z in zip(a, b, c):
            assert torch.equal(torch.as_tensor(x), torch.as_tensor(y)) and torch.equal(torch.as_tensor(x),
                                                                                       torch.as_tensor(z))


@requires_cuda
def test_batches_stay_intact_while_the_consumer_stream_is_busy():
    """Each batch's features equal the store's rows although the consumer keeps its
    stream busy and frees every batch (allocator reuse across the two streams)."""
    data = community_data(n=5000, e=60000)
    fs, gs = from_data(data, 'cuda')
    x_ref = data.x.cuda()
    loader = NeighborLoader((fs, gs), num_neighbors=[10, 10], input_nodes=torch.arange(5000), batch_size=256,
                            shuffle=True, pipeline=True)
    busy = torch.randn(2048, 2048, device='cuda')
    checks = []
    for batch in loader:
        for _ in range(4):  # long-running work queued ahead of the check on the consumer's stream
            busy = (busy @ busy).tanh_()
        checks.append(torch.equal(batch.x, x_ref[batch.n_id]) and bool((batch.edge_index < batch.num_nodes).all()))
        del batch
    assert len(checks) == 20 and all(checks)


def test_our_loaders_mark_their_edge_indices_trusted():
    from pyg_accel.ops.sparse import is_trusted_dst_sorted, is_trusted_edge_index
    fs, gs = from_data(community_data(), 'cpu')
    for batch in NeighborLoader((fs, gs), [3, 3], input_nodes=torch.arange(20), batch_size=10):
        assert is_trusted_edge_index(batch.edge_index, (batch.num_nodes, batch.num_nodes))
        assert int(batch.edge_index.max()) < batch.num_nodes
        assert is_trusted_dst_sorted(batch.edge_index)
        dst = batch.edge_index[1]
        assert bool((dst[1:] >= dst[:-1]).all())
    bidirectional = NeighborLoader((fs, gs), [3, 3], input_nodes=torch.arange(20), batch_size=10,
                                   subgraph_type='bidirectional')
    assert not is_trusted_dst_sorted(next(iter(bidirectional)).edge_index)
    transformed = NeighborLoader((fs, gs), [3, 3], input_nodes=torch.arange(20), batch_size=10,
                                 transform=lambda b: b)  # a transform may rewrite edge_index: no marks
    assert not is_trusted_edge_index(next(iter(transformed)).edge_index, (10**6, 10**6))


def test_record_stream_marks_every_cuda_tensor_once(monkeypatch):
    """Every CUDA tensor reachable through Data / HeteroData stores, lists, tuples and dicts
    is marked on the consumer's stream once; CPU tensors and other values are left alone.
    (On any machine: tensors made by ``cuda()`` stand in for CUDA tensors, and the marks
    are recorded instead of made.)"""
    on_gpu, marked, kept = set(), [], []
    monkeypatch.setattr(torch.Tensor, 'is_cuda', property(lambda t: id(t) in on_gpu))
    monkeypatch.setattr(torch.Tensor, 'record_stream', lambda t, stream: marked.append((id(t), stream)))

    def cuda(*shape):
        t = torch.ones(*shape)
        on_gpu.add(id(t))
        kept.append(t)  # (alive to the end: ids stay unique)
        return t
    hetero = HeteroData()
    hetero['a'].x, hetero['a'].n_id, hetero['a'].num_sampled_nodes = cuda(3, 2), torch.arange(3), [1, 2]
    hetero['a', 'to', 'a'].edge_index = cuda(2, 4)
    hetero['a', 'to', 'a'].num_sampled_edges = [4]
    data = Data(x=cuda(2, 2), y=torch.zeros(2), batch_size=2)
    nested = (hetero, [cuda(1), 5, 'text', None, (cuda(1),)], {'k': cuda(1), 'd': {'deep': cuda(1)}}, data)
    stream = object()
    assert _record_stream(nested, stream) is nested
    assert sorted(i for i, _ in marked) == sorted(id(t) for t in kept)
    assert all(s is stream for _, s in marked)
    marked.clear()
    assert _record_stream(kept[0], stream) is kept[0] and marked == [(id(kept[0]), stream)]


def test_prefetch_falls_back_to_plain_iteration():
    items = [torch.ones(1), torch.zeros(1)]
    assert [int(t) for t in prefetch_batches(items, 'cpu')] == [1, 0]
    loader = PrefetchLoader(items, enabled=False)
    assert len(loader) == 2 and list(loader) == items
    fs, gs = from_data(community_data(), 'cpu')
    ours = NeighborLoader((fs, gs), [3], input_nodes=torch.arange(10), batch_size=5)
    assert ours.pipeline and not ours._on_gpu  # CPU batches: nothing to overlap, plain iteration


@pytest.mark.parametrize('pipeline', [False, True])
def test_training_through_the_pipelined_loader_learns(pipeline):
    device = torch.device('cuda' if HAS_CUDA else 'cpu')
    data = community_data()
    fs, gs = from_data(data, device.type)
    torch.manual_seed(0)
    loader = NeighborLoader((fs, gs), [5, 5], input_nodes=torch.arange(600), batch_size=64, shuffle=True,
                            pipeline=pipeline)
    model = accel_models.GraphSAGE(16, 32, 2, 4).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(5):
        total = torch.zeros((), device=device)  # no host sync per batch
        for batch in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(batch.x, batch.edge_index)[:batch.batch_size], batch.y[:batch.batch_size])
            loss.backward()
            opt.step()
            total += loss.detach()
        losses.append(float(total) / len(loader))
    assert losses[-1] < 0.6 * losses[0]


@pytest.mark.parametrize('name', ['GraphSAGE', 'GCN', 'GAT'])
def test_trimmed_models_match_pyg_and_keep_the_mark(name):
    """model(..., num_sampled_nodes_per_hop=..., num_sampled_edges_per_hop=...) on a
    loader's batch: the seed outputs and gradients of PyG's untrimmed model on the same
    weights, and every trimmed layer's edge_index still marked in range. (PyG's own
    trimmed GCN normalises by the trimmed degrees and gives other seed outputs; ours
    keeps the batch's degrees.)"""
    import torch_geometric.nn.models as pyg_models
    from pyg_accel.nn.conv._graph import memoized_graph
    from pyg_accel.ops.sparse import is_trusted_dst_sorted, is_trusted_edge_index
    fs, gs = from_data(community_data(), 'cpu')
    batch = next(iter(NeighborLoader((fs, gs), [4, 3, 2], input_nodes=torch.arange(40), batch_size=40)))
    torch.manual_seed(0)
    ref = getattr(pyg_models, name)(16, 8, 3, 4).eval()
    ours = getattr(accel_models, name)(16, 8, 3, 4).eval()
    ours.load_state_dict(ref.state_dict())
    seen, derived = [], []

    def look(mod, args):
        size = (args[0].size(0), args[0].size(0))
        seen.append(is_trusted_edge_index(args[1], size) and is_trusted_dst_sorted(args[1]))
        derived.append(memoized_graph(args[1], size) is not None)  # a trimmed layer's graph, from the last one's

    for conv in ours.convs:
        conv.register_forward_pre_hook(look)
    trim = dict(num_sampled_nodes_per_hop=batch.num_sampled_nodes, num_sampled_edges_per_hop=batch.num_sampled_edges)
    out = ours(batch.x, batch.edge_index, **trim)[:40]
    expected = ref(batch.x, batch.edge_index)[:40]
    assert seen == [True, True, True]
    if name == 'GraphSAGE':  # (GCN and GAT build graphs with self-loops added)
        assert derived == [False, True, True]
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    out.square().sum().backward()
    expected.square().sum().backward()
    for (key, p), q in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=key)
    pyg_trimmed = ref(batch.x, batch.edge_index, **trim)[:40]
    if name == 'GCN':
        assert not torch.allclose(pyg_trimmed, expected, atol=1e-3)  # (the case above is one that tells)
    else:
        torch.testing.assert_close(out, pyg_trimmed, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('name', ['GraphSAGE', 'GCN', 'GAT'])
def test_evaluation_under_inference_mode(name):
    """Batches made under torch.inference_mode() are inference tensors, which have no
    version counter: nothing is marked or memoised on them, and the models give the
    same outputs as under no_grad."""
    from pyg_accel.ops.sparse import is_trusted_edge_index
    device = torch.device('cuda' if HAS_CUDA else 'cpu')
    fs, gs = from_data(community_data(), device.type)
    torch.manual_seed(0)
    model = getattr(accel_models, name)(16, 8, 2, 4).to(device).eval()
    loader = NeighborLoader((fs, gs), [4, 3], input_nodes=torch.arange(100), batch_size=50)
    torch.manual_seed(1)
    with torch.no_grad():
        expected = [model(b.x, b.edge_index)[:b.batch_size] for b in loader]
    torch.manual_seed(1)
    with torch.inference_mode():
        batches = list(loader)
        got = [model(b.x, b.edge_index)[:b.batch_size] for b in batches]
    assert not is_trusted_edge_index(batches[0].edge_index, (10**6, 10**6))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize('shuffle,drop_last', [(True, False), (False, True), (True, True)])
def test_tensor_index_batches_equal_the_dataloader_path(shuffle, drop_last):
    """Our loaders draw each batch's seed positions as one tensor (no per-item
    DataLoader machinery): the same batches, from the same random numbers."""
    fs, gs = from_data(community_data(), 'cpu')
    runs = []
    for fast in (True, False):
        loader = NeighborLoader((fs, gs), [3, 2], input_nodes=torch.arange(5, 95), batch_size=16, shuffle=shuffle,
                                drop_last=drop_last)
        loader.fast_index = fast
        torch.manual_seed(7)
        runs.append([(b.input_id.tolist(), b.n_id.tolist()) for b in loader])
        runs[-1].append(torch.rand(1).item())  # the global generator ends in the same state
    assert runs[0] == runs[1]
    assert len(runs[0]) - 1 == (90 // 16 if drop_last else -(-90 // 16))
    generator = torch.Generator().manual_seed(3)  # a user's generator, both paths
    a = NeighborLoader((fs, gs), [3], input_nodes=torch.arange(40), batch_size=8, shuffle=True, generator=generator)
    first = [b.input_id.tolist() for b in a]
    generator.manual_seed(3)
    a.fast_index = False
    assert [b.input_id.tolist() for b in a] == first


@requires_cuda
@pytest.mark.parametrize('kind', ['node', 'hetero', 'link'])
def test_gpu_batches_carry_their_seed_ids_on_the_gpu(kind):
    """PyG keeps sampler inputs on the CPU; a GPU sampler moves each batch's input_id (and
    seed times / labels) to the GPU without waiting, so moving the batch in a training
    step (``batch.to('cuda')``) copies nothing and waits for nothing (a blocking copy
    would wait for every kernel queued before it); the ids are the CPU index's."""
    from conftest import paper_author_graph

    from pyg_accel.loader import LinkNeighborLoader
    data = community_data()
    if kind == 'hetero':
        loader = NeighborLoader(paper_author_graph(60, 30, 300).to('cuda'), [3, 2],
                                input_nodes=('paper', torch.arange(5, 55)), batch_size=16, shuffle=True)
    elif kind == 'node':
        loader = NeighborLoader(from_data(data, 'cuda'), [3, 2], input_nodes=torch.arange(5, 95), batch_size=16,
                                shuffle=True)
    else:
        loader = LinkNeighborLoader(from_data(data, 'cuda'), [3], edge_label_index=data.edge_index[:, :40],
                                    batch_size=16, shuffle=True)
    torch.manual_seed(7)
    batches = list(loader)
    seeds = [b['paper'] if kind == 'hetero' else b for b in batches]
    assert all(s.input_id.is_cuda for s in seeds)
    assert sorted(torch.cat([s.input_id for s in seeds]).tolist()) == list(range(50 if kind == 'hetero' else
                                                                                 90 if kind == 'node' else 40))
    if kind == 'node':
        assert all(torch.equal(s.n_id[:s.batch_size].cpu(), s.input_id.cpu() + 5) for s in seeds)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('error')
    try:
        [b.to('cuda') for b in batches]
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_index_batches_defers_to_the_dataloader_when_it_must():
    from torch.utils.data import SubsetRandomSampler

    from pyg_accel.loader.index_batches import index_batches
    fs, gs = from_data(community_data(), 'cpu')
    custom = NeighborLoader((fs, gs), [3], input_nodes=torch.arange(40), batch_size=8,
                            sampler=SubsetRandomSampler(range(40)))
    assert index_batches(custom) is None and len([b for b in custom]) == 5
    with_replacement = NeighborLoader((fs, gs), [3], input_nodes=torch.arange(40), batch_size=8,
                                      sampler=torch.utils.data.RandomSampler(range(40), replacement=True))
    assert index_batches(with_replacement) is None
    plain = NeighborLoader((fs, gs), [3], input_nodes=torch.arange(40), batch_size=8)
    assert [t.tolist() for t in index_batches(plain)][-1] == list(range(32, 40))


def test_side_stream_priority_from_the_environment(monkeypatch):
    from pyg_accel.loader.prefetch import _side_priority
    assert _side_priority() == -1  # high by default
    monkeypatch.setenv('PYG_ACCEL_PREFETCH_PRIORITY', '0')
    assert _side_priority() == 0
    monkeypatch.setenv('PYG_ACCEL_PREFETCH_PRIORITY', 'low')
    with pytest.raises(ValueError, match="PYG_ACCEL_PREFETCH_PRIORITY must be '0' .* got 'low'"):
        _side_priority()
