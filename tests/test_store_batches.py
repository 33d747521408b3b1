"""Batches made over our stores, or over a Data / HeteroData, without PyG's per-batch layers
(pyg_accel.loader.store_batches) equal the batches PyG's layers make, key by key (store by store
for heterogeneous graphs), and loaders that need those layers keep them."""
import pytest
import torch
from torch_geometric.data import Data, HeteroData

from pyg_accel.data import from_data
from pyg_accel.loader import NeighborLoader, store_batches
from pyg_accel.loader.store_batches import StoreBatches

from conftest import community_data, locations, paper_author_graph


def _graph(edge_features: bool, times: bool) -> Data:
    data = community_data()
    g = torch.Generator().manual_seed(1)
    if edge_features:
        data.edge_attr = torch.randn(data.num_edges, 3, generator=g)
    if times:
        data.time = torch.randint(0, 100, (data.num_nodes,), generator=g)
    return data


def placements():
    """(location, source) pairs: our stores in every tier, or the ``Data`` / ``HeteroData``
    itself on each device (``source='graph'``)."""
    return [(loc, 'stores') for loc in locations()] + [(loc, 'graph') for loc in locations() if loc != 'pinned']


def _source(data, location: str, source: str):
    """What the loader reads: our stores of ``data`` at ``location``, or ``data`` on its device."""
    return from_data(data, location) if source == 'stores' else data.to('cpu' if location == 'cpu' else 'cuda')


def _edge_keys(graph, edge_type=None) -> list:
    """The per-edge tensors the loader slices: our graph store's, or the graph's edge attributes."""
    if isinstance(graph, tuple):
        return graph[1].edge_feature_names(edge_type)
    store = graph[edge_type] if edge_type is not None else graph
    return [k for k in store.keys() if k != 'edge_index' and store.is_edge_attr(k)]


def _epoch(stores, direct: bool, monkeypatch, loader_cls=NeighborLoader, **kwargs) -> list:
    with monkeypatch.context() as patch:
        if not direct:
            patch.setattr(StoreBatches, 'applies', staticmethod(lambda loader: False))
        loader = loader_cls(stores, **kwargs)
        assert StoreBatches.applies(loader) == direct
        torch.manual_seed(3)
        return list(loader)


def _parallel_edges_in_one_order(batch: Data, edge_keys) -> dict:
    """The batch's tensors with its parallel edges (one source, one destination: a
    multigraph's) in one order, by edge id: which copy the CUDA sampler writes first is
    left open, and runs differ in it (the edges' endpoints, and every other tensor, do
    not)."""
    values = dict(batch._store._mapping)
    if 'e_id' in values:
        e_id, edge_index = values['e_id'], values['edge_index']
        key = (edge_index[0] * batch.num_nodes + edge_index[1]) * (int(e_id.max()) + 1 if e_id.numel() else 1) + e_id
        order = torch.argsort(key)
        for name in ('e_id', *edge_keys):
            values[name] = values[name][order]
    return values


def _assert_same_batch(got: Data, want: Data, edge_keys, graph: Data, merged_parallel_edges: bool) -> None:
    """``merged_parallel_edges``: PyG's bidirectional output keeps one of a pair's
    parallel edges, and on a GPU which one is up to its coalesce (``reduce='any'``) in
    either path: each ``e_id`` (and its edge features) is then checked to be one of the
    graph's edges between the batch edge's endpoints, in either direction."""
    assert type(got) is type(want)
    assert list(got._store._mapping) == list(want._store._mapping)  # same keys, in the same order
    assert torch.equal(got.edge_index.cpu(), want.edge_index.cpu())
    got_values = _parallel_edges_in_one_order(got, edge_keys)
    want_values = _parallel_edges_in_one_order(want, edge_keys)
    if merged_parallel_edges:
        for batch in (got, want):
            ends = batch.n_id[batch.edge_index].cpu()
            stored = graph.edge_index[:, batch.e_id.cpu()]
            assert bool(((stored == ends).all(0) | (stored == ends.flip(0)).all(0)).all())
            for name in edge_keys:
                assert torch.equal(batch[name].cpu(), graph[name][batch.e_id.cpu()])
        edge_keys = ('e_id', *edge_keys)
    for key in want.keys():
        if key in edge_keys and merged_parallel_edges:
            continue
        a, b = got_values[key], want_values[key]
        assert type(a) is type(b), key
        if isinstance(b, torch.Tensor):
            assert a.dtype == b.dtype and a.device == b.device and torch.equal(a.cpu(), b.cpu()), key
        else:
            assert a == b, key
    orig = want._store.__dict__.get('_orig_edge_index')
    assert (orig is None) == (got._store.__dict__.get('_orig_edge_index') is None)
    if orig is not None:
        assert torch.equal(got._store.__dict__['_orig_edge_index'].cpu(), orig.cpu())


CASES = {
    'plain': dict(),
    'disjoint': dict(disjoint=True),
    'edge features': dict(edge_features=True),
    'temporal seeds': dict(times=True, time_attr='time', input_time=True),
    'mask of seeds': dict(mask=True),
    'induced': dict(subgraph_type='induced'),
    'bidirectional': dict(subgraph_type='bidirectional'),
}


@pytest.mark.parametrize('location,source', placements())
@pytest.mark.parametrize('case', list(CASES))
def test_direct_batches_are_pyg_layers_batches(location, source, case, monkeypatch):
    options = dict(CASES[case])
    data = _graph(options.pop('edge_features', False), options.pop('times', False))
    seeds = torch.arange(5, 205)
    if options.pop('mask', False):  # a boolean mask: PyG keeps input ids beside the seeds
        mask = torch.zeros(data.num_nodes, dtype=torch.bool)
        mask[seeds] = True
        seeds = mask
    if options.pop('input_time', False):
        options['input_time'] = torch.full((200,), 60)
    stores = _source(data, location, source)
    kwargs = dict(num_neighbors=[4, 3], input_nodes=seeds, batch_size=32, shuffle=True, **options)
    direct, layered = _epoch(stores, True, monkeypatch, **kwargs), _epoch(stores, False, monkeypatch, **kwargs)
    assert len(direct) == len(layered) == 7
    for got, want in zip(direct, layered):
        _assert_same_batch(got, want, _edge_keys(stores), data,
                           merged_parallel_edges=case == 'bidirectional' and location != 'cpu')


def _hetero_graph(edge_features: bool, times: bool) -> HeteroData:
    """Papers and authors, both directions of ``writes``, and papers citing papers."""
    g = torch.Generator().manual_seed(2)
    data = paper_author_graph(120, 60, 600)
    data['paper', 'written_by', 'author'].edge_index = data['author', 'writes', 'paper'].edge_index.flip(0)
    data['paper', 'cites', 'paper'].edge_index = torch.randint(0, 120, (2, 400), generator=g)
    if edge_features:
        data['author', 'writes', 'paper'].edge_attr = torch.randn(600, 3, generator=g)
    if times:
        data['paper'].time = torch.randint(0, 100, (120,), generator=g)
        data['author'].time = torch.randint(0, 100, (60,), generator=g)
    return data


def _assert_same_hetero_batch(got: HeteroData, want: HeteroData, graph) -> None:
    """Same class, node and edge types in the same order, each store the same keys in the
    same order and equal values (parallel edges as in :func:`_assert_same_batch`)."""
    assert type(got) is type(want)
    assert got.node_types == want.node_types and got.edge_types == want.edge_types
    for key in want.node_types + want.edge_types:
        a, b = got[key], want[key]
        assert list(a._mapping) == list(b._mapping), key
        values_a, values_b = dict(a._mapping), dict(b._mapping)
        if 'e_id' in values_b:
            fake_a, fake_b = Data(**values_a), Data(**values_b)  # (one store as a Data: same ordering rule)
            fake_a.num_nodes = fake_b.num_nodes = int(max(got.num_nodes, 1))
            edge_keys = [k for k in _edge_keys(graph, key) if k in values_b]
            values_a = _parallel_edges_in_one_order(fake_a, edge_keys)
            values_b = _parallel_edges_in_one_order(fake_b, edge_keys)
        for name, value in values_b.items():
            other = values_a[name]
            assert type(other) is type(value), (key, name)
            if isinstance(value, torch.Tensor):
                assert other.dtype == value.dtype and other.device == value.device, (key, name)
                assert torch.equal(other.cpu(), value.cpu()), (key, name)
            else:
                assert other == value, (key, name)
        orig = b.__dict__.get('_orig_edge_index')
        assert (orig is None) == (a.__dict__.get('_orig_edge_index') is None)


HETERO_CASES = {name: options for name, options in CASES.items() if name != 'mask of seeds'}


@pytest.mark.parametrize('location,source', placements())
@pytest.mark.parametrize('case', list(HETERO_CASES))
def test_direct_heterogeneous_batches_are_pyg_layers_batches(location, source, case, monkeypatch):
    options = dict(HETERO_CASES[case])
    data = _hetero_graph(options.pop('edge_features', False), options.pop('times', False))
    if options.pop('input_time', False):
        options['input_time'] = torch.full((100,), 60)
    stores = _source(data, location, source)
    kwargs = dict(num_neighbors=[4, 3], input_nodes=('paper', torch.arange(10, 110)), batch_size=16, shuffle=True,
                  **options)
    direct, layered = _epoch(stores, True, monkeypatch, **kwargs), _epoch(stores, False, monkeypatch, **kwargs)
    assert len(direct) == len(layered) == 7
    for got, want in zip(direct, layered):
        _assert_same_hetero_batch(got, want, stores)


LINK_CASES = {
    'no negatives': dict(),
    'binary negatives': dict(neg_sampling='binary'),
    'triplet negatives': dict(neg_sampling='triplet'),
    'disjoint, binary': dict(disjoint=True, neg_sampling='binary'),
    'edge features': dict(edge_features=True, neg_sampling='binary'),
    'temporal': dict(times=True, time_attr='time', label_time=True),
}


@pytest.mark.parametrize('location,source', placements())
@pytest.mark.parametrize('case', list(LINK_CASES))
def test_direct_link_batches_are_pyg_layers_batches(location, source, case, monkeypatch):
    from pyg_accel.loader import LinkNeighborLoader
    options = dict(LINK_CASES[case])
    data = _graph(options.pop('edge_features', False), options.pop('times', False))
    labels = data.edge_index[:, :100]
    if options.pop('label_time', False):
        options['edge_label_time'] = torch.full((100,), 60)
    stores = _source(data, location, source)
    kwargs = dict(num_neighbors=[4, 3], edge_label_index=labels, batch_size=16, shuffle=True,
                  loader_cls=LinkNeighborLoader, **options)
    direct, layered = _epoch(stores, True, monkeypatch, **kwargs), _epoch(stores, False, monkeypatch, **kwargs)
    assert len(direct) == len(layered) == 7
    for got, want in zip(direct, layered):
        _assert_same_batch(got, want, _edge_keys(stores), data, merged_parallel_edges=False)


@pytest.mark.parametrize('location,source', placements())
@pytest.mark.parametrize('negatives', [None, 'binary', 'triplet'])
def test_direct_heterogeneous_link_batches_are_pyg_layers_batches(location, source, negatives, monkeypatch):
    from pyg_accel.loader import LinkNeighborLoader
    data = _hetero_graph(edge_features=True, times=False)
    edge_type = ('author', 'writes', 'paper')
    stores = _source(data, location, source)
    kwargs = dict(num_neighbors=[4, 3], edge_label_index=(edge_type, data[edge_type].edge_index[:, :100]),
                  batch_size=16, shuffle=True, neg_sampling=negatives, loader_cls=LinkNeighborLoader)
    direct, layered = _epoch(stores, True, monkeypatch, **kwargs), _epoch(stores, False, monkeypatch, **kwargs)
    assert len(direct) == len(layered) == 7
    for got, want in zip(direct, layered):
        _assert_same_hetero_batch(got, want, stores)


def test_loaders_that_need_pyg_layers_keep_them():
    """A hook PyG's layers run or a subclass overriding a step: made by PyG's layers, as
    before. (Over our stores, a Data or a HeteroData alike.)"""
    data = community_data()
    stores = from_data(data, 'cpu')
    kwargs = dict(num_neighbors=[3], input_nodes=torch.arange(40), batch_size=8)
    assert StoreBatches.applies(NeighborLoader(stores, **kwargs))
    assert StoreBatches.applies(NeighborLoader(data, **kwargs))
    assert not StoreBatches.applies(NeighborLoader(stores, transform=lambda b: b, **kwargs))
    assert not StoreBatches.applies(NeighborLoader(stores, transform_sampler_output=lambda o: o, **kwargs))
    assert not StoreBatches.applies(NeighborLoader(data, transform=lambda b: b, **kwargs))

    class Filtered(NeighborLoader):
        def filter_fn(self, out):
            batch = super().filter_fn(out)
            batch.marked = True
            return batch
    loader = Filtered(stores, **kwargs)
    assert not StoreBatches.applies(loader) and all(b.marked for b in loader)
    hooked = NeighborLoader(stores, **kwargs)
    plain_filter = hooked.filter_fn
    hooked.filter_fn = lambda out: Data(marked=True, **plain_filter(out).to_dict())  # a hook on the loader itself
    assert not StoreBatches.applies(hooked) and all(b.marked for b in hooked)
    hetero = paper_author_graph(60, 30, 200)
    assert StoreBatches.applies(NeighborLoader(hetero, [3], input_nodes=('paper', torch.arange(20)), batch_size=8))


class _Graph(Data):
    """A Data subclass with its own increments and a graph-level attribute: PyG's filter
    keeps both, so the direct path must too."""

    def __inc__(self, key, value, *args, **kwargs):
        return 0 if key == 'marks' else super().__inc__(key, value, *args, **kwargs)


def test_direct_batches_of_a_data_keep_its_class_and_attributes(monkeypatch):
    data = community_data()
    graph = _Graph(**data.to_dict())
    graph.marks = torch.arange(data.num_edges)  # (an edge-level tensor by its size)
    graph.title = 'communities'  # (neither node- nor edge-level: carried along)
    kwargs = dict(num_neighbors=[3, 2], input_nodes=torch.arange(40), batch_size=8, shuffle=True)
    direct, layered = _epoch(graph, True, monkeypatch, **kwargs), _epoch(graph, False, monkeypatch, **kwargs)
    assert len(direct) == len(layered) == 5
    for got, want in zip(direct, layered):
        assert type(got) is _Graph and got.title == 'communities'
        _assert_same_batch(got, want, ['marks'], graph, merged_parallel_edges=False)


def test_a_stage_timer_times_the_direct_path():
    from pyg_accel.loader import StageTimer
    timer = StageTimer('cpu')
    loader = timer.instrument(NeighborLoader(from_data(community_data(), 'cpu'), [3], input_nodes=torch.arange(40),
                                             batch_size=8))
    assert StoreBatches.applies(loader)
    assert len(list(loader)) == 5
    stages = timer.summary()
    assert set(stages) == {'sampling', 'gathering'} and all(s > 0 for s in stages.values())


def test_a_direct_epoch_reads_the_seeds_as_iteration_begins(monkeypatch):
    """The seeds move to the graph's device once per epoch, when iteration begins: a
    change to the loader's seeds between epochs reaches the next epoch."""
    stores = from_data(community_data(), 'cpu')
    loader = NeighborLoader(stores, [2], input_nodes=torch.arange(10, 26), batch_size=8)
    assert [b.n_id[:b.batch_size].tolist() for b in loader] == [list(range(10, 18)), list(range(18, 26))]
    loader.input_data.node.add_(100)
    assert [b.n_id[:b.batch_size].tolist() for b in loader] == [list(range(110, 118)), list(range(118, 126))]
    calls = []
    monkeypatch.setattr(store_batches.StoreBatches, '__call__', lambda self, index: calls.append(index) or Data())
    list(loader)
    assert len(calls) == 2  # (the direct path made them)
