"""PyG's own loaders on our stores (PyG's CPU sampler needs pyg-lib or torch-sparse)."""
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

from pyg_accel.data import from_data

from conftest import HAS_CUDA, paper_author_graph, requires_stock_sampler

# PyG's CPU sampler reads host memory: our 'cpu' and 'pinned' tiers.
SAMPLER_LOCATIONS = ['cpu'] + (['pinned'] if HAS_CUDA else [])


def random_data(n=200, e=1500, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Data(x=torch.randn(n, 8, generator=g), y=torch.randint(0, 4, (n,), generator=g),
                edge_index=torch.randint(0, n, (2, e), generator=g), num_nodes=n)


def test_neighbor_loader_accepts_our_stores_and_reads_the_held_csc():
    data = random_data()
    fs, gs = from_data(data, 'cpu')
    loader = NeighborLoader((fs, gs), num_neighbors=[5, 5], input_nodes=torch.arange(50), batch_size=10)
    sampler = loader.node_sampler
    row, colptr, perm = gs.csc()
    assert sampler.num_nodes == 200
    assert sampler.colptr is colptr and sampler.row is row and sampler.perm is perm  # no copy of the graph


@requires_stock_sampler
@pytest.mark.parametrize('location', SAMPLER_LOCATIONS)
def test_neighbor_loader_end_to_end_matches_data_loader(location):
    data = random_data()
    fs, gs = from_data(data, location)
    kwargs = dict(num_neighbors=[-1, -1], batch_size=16, input_nodes=torch.arange(64))
    ours = NeighborLoader((fs, gs), **kwargs)
    ref = NeighborLoader(data, **kwargs)
    for batch, expected in zip(ours, ref):
        assert batch.batch_size == expected.batch_size
        assert batch.num_nodes == expected.num_nodes and batch.num_edges == expected.num_edges
        assert torch.equal(batch.n_id[:batch.batch_size], expected.n_id[:expected.batch_size])  # seeds first
        assert torch.equal(batch.n_id.sort().values, expected.n_id.sort().values)
        assert torch.equal(batch.x.cpu(), data.x[batch.n_id]) and torch.equal(batch.y.cpu(), data.y[batch.n_id])
        # Edge ids are the input's: the sampled edges are exactly those edges.
        assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])


@requires_stock_sampler
def test_heterogeneous_neighbor_loader_end_to_end():
    data = paper_author_graph(60, 30, 200)
    data['paper', 'written_by', 'author'].edge_index = data['author', 'writes', 'paper'].edge_index.flip(0)
    fs, gs = from_data(data, 'cpu')
    loader = NeighborLoader((fs, gs), num_neighbors=[-1, -1], batch_size=8, input_nodes=('paper', torch.arange(24)))
    seen = 0
    for batch in loader:
        assert batch['paper'].batch_size == 8
        assert torch.equal(batch['paper'].x, data['paper'].x[batch['paper'].n_id])
        assert torch.equal(batch['author'].x, data['author'].x[batch['author'].n_id])
        ei = batch['author', 'writes', 'paper'].edge_index
        src, dst = batch['author'].n_id[ei[0]], batch['paper'].n_id[ei[1]]
        full = data['author', 'writes', 'paper'].edge_index
        edges = set(zip(full[0].tolist(), full[1].tolist()))
        assert all((s, d) in edges for s, d in zip(src.tolist(), dst.tolist()))
        seen += 1
    assert seen == 3


def _with_edge_features(n=200, e=1500, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Data(x=torch.randn(n, 8, generator=g), edge_index=torch.randint(0, n, (2, e), generator=g),
                edge_attr=torch.randn(e, 4, generator=g), edge_weight=torch.rand(e, generator=g),
                y=torch.randint(0, 3, (n,), generator=g))


@pytest.mark.parametrize('location', ['cpu'] + (['cuda', 'pinned'] if HAS_CUDA else []))
@pytest.mark.parametrize('transform_sampler_output', [None, lambda out: out])
def test_our_loaders_attach_edge_features(location, transform_sampler_output):
    """PyG's remote-backend loader fetches node features only; ours also gives each
    batch the per-edge tensors our GraphStore holds, at the sampled edges, as PyG's
    loader over a Data does."""
    from pyg_accel.loader import LinkNeighborLoader as OurLinkLoader
    from pyg_accel.loader import NeighborLoader as OurLoader
    data = _with_edge_features()
    fs, gs = from_data(data, location)
    loaders = [OurLoader((fs, gs), [5, 5], input_nodes=torch.arange(50), batch_size=25,
                         transform_sampler_output=transform_sampler_output),
               OurLinkLoader((fs, gs), [5, 5], edge_label_index=(None, data.edge_index[:, :40]), batch_size=20,
                             transform_sampler_output=transform_sampler_output)]
    for loader in loaders:
        for batch in loader:
            e_id = batch.e_id.cpu()
            assert batch.edge_attr.device == batch.edge_index.device
            assert torch.equal(batch.edge_attr.cpu(), data.edge_attr[e_id])
            assert torch.equal(batch.edge_weight.cpu(), data.edge_weight[e_id])


def test_our_loaders_attach_edge_features_per_edge_type():
    from torch_geometric.data import HeteroData

    from pyg_accel.loader import NeighborLoader as OurLoader
    g = torch.Generator().manual_seed(0)
    data = HeteroData()
    data['a'].x, data['b'].x = torch.randn(60, 4, generator=g), torch.randn(40, 4, generator=g)
    data['a', 'to', 'b'].edge_index = torch.stack([torch.randint(0, 60, (300,), generator=g),
                                                   torch.randint(0, 40, (300,), generator=g)])
    data['a', 'to', 'b'].edge_attr = torch.randn(300, 3, generator=g)
    data['b', 'rev', 'a'].edge_index = data['a', 'to', 'b'].edge_index.flip(0)
    fs, gs = from_data(data, 'cpu')
    batch = next(iter(OurLoader((fs, gs), [4, 4], input_nodes=('a', torch.arange(20)), batch_size=20)))
    store = batch['a', 'to', 'b']
    assert torch.equal(store.edge_attr, data['a', 'to', 'b'].edge_attr[store.e_id])
    assert 'edge_attr' not in batch['b', 'rev', 'a']  # that type has none


def test_our_loader_takes_every_node_when_input_nodes_is_none():
    """Over a Data, PyG's NeighborLoader seeds every node when input_nodes=None; over a
    remote backend it asserts. Ours seeds every node over our stores too."""
    from pyg_accel.loader import NeighborLoader as OurLoader
    data = _with_edge_features(n=100)
    loader = OurLoader(from_data(data, 'cpu'), [3], batch_size=32)
    assert len(loader) == 4 and torch.equal(torch.cat([b.input_id for b in loader]), torch.arange(100))
    hetero = paper_author_graph(20, 10, 50)
    with pytest.raises(ValueError, match="input_nodes=\\('node_type'"):
        OurLoader(from_data(hetero, 'cpu'), [3], batch_size=8)


def test_no_input_nodes_is_no_batches():
    """As stock PyG: len(loader) == 0 and iteration yields nothing (one empty batch's
    mean loss would be NaN); with shuffle=True both refuse (torch's RandomSampler)."""
    from pyg_accel.loader import NeighborLoader as OurLoader
    data = _with_edge_features(n=100)
    empty = torch.empty(0, dtype=torch.long)
    for loader in (OurLoader(from_data(data, 'cpu'), [3], input_nodes=empty, batch_size=32),
                   NeighborLoader(data, [3], input_nodes=empty, batch_size=32)):
        assert len(loader) == 0 and list(loader) == []
    for cls, source in ((OurLoader, from_data(data, 'cpu')), (NeighborLoader, data)):
        with pytest.raises(ValueError, match='num_samples'):
            cls(source, [3], input_nodes=empty, batch_size=32, shuffle=True)


def test_our_loaders_take_the_data_spellings_of_seeds_over_our_stores():
    """PyG's remote-backend path asserts on ``input_nodes=(None, ids)`` and on a bare or
    missing ``edge_label_index``; over our homogeneous stores ours takes them as it does
    for a Data."""
    from pyg_accel.loader import LinkNeighborLoader as OurLinkLoader
    from pyg_accel.loader import NeighborLoader as OurLoader
    data = random_data(n=100, e=400)
    stores = from_data(data, 'cpu')
    seeds = torch.arange(10, 30)
    batch = next(iter(OurLoader(stores, [3], input_nodes=(None, seeds), batch_size=20)))
    assert torch.equal(batch.n_id[:20], seeds)
    edges = data.edge_index[:, 50:90]
    for spelling in (edges, (None, edges)):
        batch = next(iter(OurLinkLoader(stores, [3], edge_label_index=spelling, batch_size=40)))
        assert torch.equal(batch.n_id[batch.edge_label_index], edges)
    loader = OurLinkLoader(stores, [3], batch_size=100)  # every edge, in input order
    assert len(loader) == 4
    for batch in loader:
        assert torch.equal(batch.n_id[batch.edge_label_index], data.edge_index[:, batch.input_id])
    with pytest.raises(ValueError, match='edge_label_index must be'):
        OurLinkLoader(stores, [3], edge_label_index=[1, 2, 3], batch_size=4)
    hetero = from_data(paper_author_graph(20, 10, 50), 'cpu')
    for spelling in (None, torch.zeros(2, 3, dtype=torch.long)):  # a heterogeneous graph needs the edge type
        with pytest.raises(ValueError, match='edge_label_index must be'):
            OurLinkLoader(hetero, [3], edge_label_index=spelling, batch_size=4)


def test_directed_false_is_an_induced_subgraph_as_in_pyg():
    from pyg_accel.loader import NeighborLoader as OurLoader
    from pyg_accel.ops.sparse import is_trusted_dst_sorted
    from pyg_accel.sampler import NeighborSampler
    data = random_data(n=100, e=600)
    stores = from_data(data, 'cpu')
    with pytest.warns(UserWarning, match="'directed' argument"):
        loader = OurLoader(stores, [2, 2], input_nodes=torch.arange(8), batch_size=8, directed=False)
    assert loader.node_sampler.subgraph_type.value == 'induced'
    batch = next(iter(loader))
    inside = torch.isin(data.edge_index, batch.n_id).all(0)
    assert torch.equal(batch.e_id.sort().values, inside.nonzero().view(-1))
    dst = batch.edge_index[1]
    assert is_trusted_dst_sorted(batch.edge_index) and bool((dst[1:] >= dst[:-1]).all())
    with pytest.raises(ValueError, match="'forward' or 'backward'"):
        NeighborSampler(stores, [2], sample_direction='sideways')
    with pytest.raises(NotImplementedError, match="'backward' does not take time_attr"):  # (as stock PyG)
        NeighborSampler(stores, [2], sample_direction='backward', time_attr='time')
    from torch_geometric.testing import MyGraphStore
    foreign = MyGraphStore()
    foreign.put_edge_index(data.edge_index, edge_type=None, layout='coo', size=(data.num_nodes,) * 2)
    with pytest.raises(NotImplementedError, match='weight'):  # (as stock PyG over a foreign GraphStore)
        NeighborSampler((stores[0], foreign), [2], weight_attr='w')
    with pytest.raises(TypeError):
        NeighborSampler(stores, [2], fanout=3)  # a misspelt argument is not swallowed


def test_graphs_without_edges_are_sampled_as_pyg_does():
    """PyG's test_homo_/test_hetero_link_neighbor_loader_no_edges with our sampler: a
    Data with only num_nodes, a HeteroData with no edge type."""
    from torch_geometric.data import HeteroData
    from torch_geometric.loader import LinkNeighborLoader
    from pyg_accel.sampler import NeighborSampler
    data = Data(num_nodes=100)
    loader = LinkNeighborLoader(data, num_neighbors=[], batch_size=20, edge_label_index=torch.arange(100).view(2, -1),
                                neighbor_sampler=NeighborSampler(data, []))
    batches = list(loader)
    assert len(batches) == 3
    for batch in batches[:2]:
        assert isinstance(batch, Data) and batch.input_id.numel() == 20 and batch.edge_label_index.size(1) == 20
        assert batch.num_nodes == batch.edge_label_index.unique().numel()
    hetero = HeteroData()
    hetero['paper'].num_nodes = 100
    loader = LinkNeighborLoader(hetero, num_neighbors=[], edge_label_index=(('paper', 'paper'),
                                                                            torch.arange(100).view(2, -1)),
                                batch_size=20, neighbor_sampler=NeighborSampler(hetero, []))
    for batch in list(loader)[:2]:
        assert isinstance(batch, HeteroData) and batch['paper', 'paper'].input_id.numel() == 20
        assert batch['paper'].num_nodes == batch['paper', 'paper'].edge_label_index.unique().numel()
