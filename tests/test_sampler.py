"""pyg_accel.sampler.NeighborSampler through PyG's loaders and pyg_accel.loader."""
import gc

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader, NodeLoader

import pyg_accel.loader
from pyg_accel.data import from_data
from pyg_accel.datasets import load_dataset
from pyg_accel.sampler import NeighborSampler

from conftest import HAS_CUDA, assert_freed_without_gc, paper_author_graph, requires_cuda, requires_stock_sampler

LOCATIONS = ['cpu'] + (['cuda'] if HAS_CUDA else [])


@pytest.fixture(scope='module')
def dataset():
    return load_dataset('default')


@pytest.fixture(scope='module', params=['cpu'] + (['cuda'] if HAS_CUDA else []))
def stores(dataset, request):
    """Stores on the CPU (CPU sampler) and, on a GPU machine, on the GPU (CUDA sampler)."""
    return from_data(dataset.data, request.param)


@pytest.fixture(scope='module')
def cpu_stores(dataset):
    return from_data(dataset.data, 'cpu')


def check_batch(batch, data, seeds):
    """Seeds first, features of the right nodes, edges that exist, hop counts consistent;
    the batch stays on the stores' device."""
    device = batch.edge_index.device
    assert batch.n_id.device == batch.x.device == device
    n_id, e_id, edge_index = batch.n_id.cpu(), batch.e_id.cpu(), batch.edge_index.cpu()
    assert torch.equal(n_id[:batch.batch_size], seeds)
    assert torch.equal(batch.x.cpu(), data.x[n_id]) and torch.equal(batch.y.cpu(), data.y[n_id])
    assert torch.equal(n_id[edge_index], data.edge_index[:, e_id])
    assert sum(batch.num_sampled_nodes) == batch.num_nodes and sum(batch.num_sampled_edges) == batch.num_edges


def test_neighbor_loader_with_our_sampler(dataset, stores):
    sampler = NeighborSampler(stores, [5, 3])
    seeds = dataset.split['train'][:300]
    loader = NeighborLoader(stores, [5, 3], neighbor_sampler=sampler, input_nodes=seeds, batch_size=100)
    batches = list(loader)
    assert len(batches) == 3
    for i, batch in enumerate(batches):
        check_batch(batch, dataset.data, seeds[100 * i:100 * (i + 1)])
        assert len(batch.num_sampled_nodes) == 3


def test_node_loader_with_our_sampler(dataset, stores):
    sampler = NeighborSampler(stores, [4, 4], disjoint=True)
    seeds = dataset.split['valid'][:64]
    batch = next(iter(NodeLoader(stores, node_sampler=sampler, input_nodes=seeds, batch_size=64)))
    check_batch(batch, dataset.data, seeds)
    assert torch.equal(batch.batch[:64].cpu(), torch.arange(64))


@pytest.mark.parametrize('neg_sampling', ['binary', 'triplet'])
def test_link_neighbor_loader_with_negatives(dataset, stores, neg_sampling):
    disjoint = neg_sampling == 'triplet'
    sampler = NeighborSampler(stores, [5, 5], disjoint=disjoint)
    edges = dataset.data.edge_index[:, :256]
    loader = LinkNeighborLoader(stores, [5, 5], neighbor_sampler=sampler, edge_label_index=(None, edges),
                                batch_size=64, neg_sampling=neg_sampling, shuffle=False)
    batch = next(iter(loader))
    for key, value in batch.items():  # one device for the whole batch, seed-edge labels included
        assert not isinstance(value, torch.Tensor) or value.device.type == sampler.device.type, key
    batch = batch.cpu()
    assert torch.equal(batch.n_id[batch.edge_index], dataset.data.edge_index[:, batch.e_id])
    if neg_sampling == 'binary':
        assert batch.edge_label.sum() == 64 and batch.edge_label_index.shape == (2, 128)
        pos = batch.n_id[batch.edge_label_index[:, :64]]
        assert torch.equal(pos, edges[:, :64])
    else:
        assert torch.equal(batch.n_id[batch.src_index], edges[0, :64])
        assert torch.equal(batch.n_id[batch.dst_pos_index], edges[1, :64])
        assert batch.dst_neg_index.shape == (64,)


def test_plain_data_and_our_loader(dataset):
    seeds = dataset.split['train'][:50]
    loader = pyg_accel.loader.NeighborLoader(dataset.data, [3, 3], input_nodes=seeds, batch_size=50)
    assert isinstance(loader.node_sampler, NeighborSampler)
    check_batch(next(iter(loader)), dataset.data, seeds)
    link = pyg_accel.loader.LinkNeighborLoader(dataset.data, [3], edge_label_index=dataset.data.edge_index[:, :40],
                                               batch_size=20, neg_sampling='binary')
    assert isinstance(link.link_sampler, NeighborSampler) and next(iter(link)).edge_label.numel() == 40
    from pyg_accel.ops.sparse import is_trusted_dst_sorted
    for batch in link:  # marked sorted by destination, and so it is
        dst = batch.edge_index[1]
        assert is_trusted_dst_sorted(batch.edge_index) and bool((dst[1:] >= dst[:-1]).all())


def test_bidirectional(stores):
    sampler = NeighborSampler(stores, [3, 3], subgraph_type='bidirectional')
    out = sampler._sample(torch.arange(20))
    pairs = set(zip(out.row.tolist(), out.col.tolist()))
    assert len(pairs) > 0
    assert all((c, r) in pairs for r, c in pairs)


def directed_graph(num_nodes=400, num_edges=3000, seed=0) -> Data:
    """A random directed graph whose out- and in-neighbourhoods differ (each edge points
    1-40 ids ahead), with out-degrees from 0 to ~30."""
    g = torch.Generator().manual_seed(seed)
    src = (torch.rand(num_edges, generator=g) ** 2 * num_nodes).long()  # skewed out-degrees
    dst = (src + 1 + torch.randint(0, 40, (num_edges,), generator=g)) % num_nodes
    return Data(x=torch.randn(num_nodes, 8), y=torch.zeros(num_nodes, dtype=torch.long),
                edge_index=torch.stack([src, dst]), num_nodes=num_nodes)


@pytest.mark.parametrize('location', LOCATIONS)
def test_backward_sampling_follows_out_edges(location):
    """sample_direction='backward': each node draws min(fanout, out-degree) distinct
    out-edges; the batch's edges are the graph's (source = the node sampled from, grouped
    by it), and our layers on it match PyG's (the batch is not marked dst-sorted)."""
    data = directed_graph()
    data.edge_attr = torch.randn(data.num_edges, 3)
    stores = from_data(data, location)
    seeds = torch.arange(0, 400, 9)
    sampler = NeighborSampler(stores, [4, 3], sample_direction='backward')
    batch = next(iter(pyg_accel.loader.NeighborLoader(stores, [4, 3], neighbor_sampler=sampler, input_nodes=seeds,
                                                      batch_size=seeds.numel())))
    check_batch(batch, data, seeds)
    # the store's per-edge tensors at the sampled edges (the sampler's positions index the reversed graph)
    assert torch.equal(batch.edge_attr.cpu(), data.edge_attr[batch.e_id.cpu()])
    src, dst = batch.edge_index.cpu()
    assert bool((src[1:] >= src[:-1]).all())  # grouped by the node sampled from, in node order
    out_degree = torch.bincount(data.edge_index[0], minlength=400)
    first_hop = batch.num_sampled_edges[0]
    drawn = torch.bincount(src[:first_hop], minlength=seeds.numel())
    assert torch.equal(drawn, out_degree[seeds].clamp(max=4))
    assert batch.e_id.unique().numel() == batch.e_id.numel()  # without replacement
    from pyg_accel.nn import SAGEConv as OurSAGE
    from torch_geometric.nn import SAGEConv as PyGSAGE
    torch.manual_seed(0)
    ours, ref = OurSAGE(8, 4).to(batch.x.device), PyGSAGE(8, 4).to(batch.x.device)
    ref.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(batch.x, batch.edge_index), ref(batch.x, batch.edge_index))


@pytest.mark.parametrize('location', LOCATIONS)
def test_backward_sampling_with_weights_and_induced_edges(location):
    """Backward sampling over a weighted graph never draws a zero-weight out-edge, and its
    induced subgraph is every edge among the sampled nodes, in the graph's direction."""
    data = directed_graph()
    data.w = (torch.arange(data.num_edges) % 3 != 0).float()  # a third of the edges weigh 0
    stores = from_data(data, location)
    sampler = NeighborSampler(stores, [5, 5], sample_direction='backward', weight_attr='w')
    batch = next(iter(pyg_accel.loader.NeighborLoader(stores, [5, 5], neighbor_sampler=sampler,
                                                      input_nodes=torch.arange(0, 400, 5), batch_size=80)))
    check_batch(batch, data, torch.arange(0, 400, 5))
    assert bool((data.w[batch.e_id.cpu()] > 0).all())
    induced = NeighborSampler(stores, [5, 5], sample_direction='backward', subgraph_type='induced')
    batch = next(iter(NeighborLoader(stores, [5, 5], neighbor_sampler=induced, input_nodes=torch.arange(0, 400, 5),
                                     batch_size=80)))
    n_id, e_id = batch.n_id.cpu(), batch.e_id.cpu()
    assert torch.equal(n_id[batch.edge_index.cpu()], data.edge_index[:, e_id])
    inside = torch.isin(data.edge_index, n_id).all(0)
    assert torch.equal(e_id.sort().values, inside.nonzero().view(-1))


@requires_stock_sampler
def test_backward_sampling_matches_stock_pyg(dataset):
    """All out-neighbours ([-1, -1]) reach stock PyG's backward node and edge sets."""
    from torch_geometric.sampler import NeighborSampler as PyGSampler
    data = directed_graph()
    seeds = torch.arange(0, 400, 13)
    ours = next(iter(NeighborLoader(data, [-1, -1], input_nodes=seeds, batch_size=seeds.numel(),
                                    neighbor_sampler=NeighborSampler(data, [-1, -1], sample_direction='backward'))))
    ref = next(iter(NeighborLoader(data, [-1, -1], input_nodes=seeds, batch_size=seeds.numel(),
                                   neighbor_sampler=PyGSampler(data, [-1, -1], sample_direction='backward'))))
    assert torch.equal(ours.n_id.sort().values, ref.n_id.sort().values)
    assert torch.equal(ours.e_id.sort().values, ref.e_id.sort().values)
    assert torch.equal(ours.n_id[ours.edge_index], data.edge_index[:, ours.e_id])


def check_induced(node, row, col, edge, edge_index, perm=None):
    """Exactly the input edges between the sampled nodes, ordered by destination (in node
    order) then by CSC position; ``edge`` maps through ``perm`` to input edge ids."""
    node, row, col, edge = node.cpu(), row.cpu(), col.cpu(), edge.cpu()
    edge_id = edge if perm is None else perm.cpu()[edge]
    assert torch.equal(torch.stack([node[row], node[col]]), edge_index[:, edge_id])
    inside = torch.isin(edge_index, node).all(0)
    assert torch.equal(edge_id.sort().values, inside.nonzero().view(-1))
    key = col * (edge.max().item() + 1 if edge.numel() else 1) + edge
    assert bool((key[1:] > key[:-1]).all())


def test_induced_subgraph(dataset, stores):
    sampler = NeighborSampler(stores, [4, 3], subgraph_type='induced')
    out = sampler._sample(dataset.split['train'][:64])
    assert out.num_sampled_edges is None and sum(out.num_sampled_nodes) == out.node.numel()
    assert out.row.device == out.node.device
    check_induced(out.node, out.row, out.col, out.edge, dataset.data.edge_index, sampler.edge_permutation)
    # through PyG's loader: the edges of the batch are the input edges among its nodes
    loader = NeighborLoader(stores, [4, 3], neighbor_sampler=sampler, input_nodes=dataset.split['train'][:64],
                            batch_size=32)
    for batch in loader:
        n_id, e_id = batch.n_id.cpu(), batch.e_id.cpu()
        assert torch.equal(n_id[batch.edge_index.cpu()], dataset.data.edge_index[:, e_id])
        assert e_id.numel() == int(torch.isin(dataset.data.edge_index, n_id).all(0).sum())


def test_induced_subgraph_with_repeated_seeds(dataset, stores):
    """Each copy of a repeated seed gets its in-edges (its output aggregates them, as its
    first copy's does); an edge from a repeated node comes from its first copy."""
    seeds = dataset.split['train'][:20]
    seeds = torch.cat([seeds, seeds[:5]])
    out = NeighborSampler(stores, [4, 3], subgraph_type='induced')._sample(seeds)
    node, row, col = out.node.cpu(), out.row.cpu(), out.col.cpu()
    assert torch.equal(node[:25], seeds)
    data = dataset.data
    perm = NeighborSampler(stores, [4, 3], subgraph_type='induced').edge_permutation
    edge_id = out.edge.cpu() if perm is None else perm.cpu()[out.edge.cpu()]
    assert torch.equal(torch.stack([node[row], node[col]]), data.edge_index[:, edge_id])
    first = {}
    for i, v in enumerate(node.tolist()):
        first.setdefault(v, i)
    assert all(first[v] == r for v, r in zip(node[row].tolist(), row.tolist()))
    for copy in range(20, 25):  # the repeated copies get their first copies' in-edges
        assert torch.equal(edge_id[col == copy], edge_id[col == copy - 20])


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
def test_induced_edges_on_degenerate_graphs(dtype):
    from pyg_accel.sampler.induced import induced_edges
    # self-loops, duplicate edges, an isolated node (5), unsorted node ids
    edge_index = torch.tensor([[0, 0, 1, 1, 2, 3, 3, 4], [1, 1, 1, 2, 0, 3, 4, 0]])
    order = torch.argsort(edge_index[1], stable=True)
    row = edge_index[0, order].to(dtype)
    colptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(edge_index[1], minlength=6).cumsum(0)])
    node = torch.tensor([3, 0, 1, 5])
    r, c, e = induced_edges(colptr.to(dtype), row, node, node)
    check_induced(node, r, c, e, edge_index, order)
    assert e.numel() == 4  # 3->3, 0->1 twice, 1->1
    for empty in (torch.empty(0, dtype=torch.long), torch.tensor([5])):
        r, c, e = induced_edges(colptr, row, empty, empty)
        assert r.numel() == c.numel() == e.numel() == 0


@requires_stock_sampler
def test_induced_matches_stock_pyg_at_full_fanout(dataset, stores):
    seeds = dataset.split['train'][:128]
    induced = NeighborSampler(stores, [-1], subgraph_type='induced')
    ours = next(iter(NeighborLoader(stores, [-1], neighbor_sampler=induced,
                                    input_nodes=seeds, batch_size=128)))
    ref = next(iter(NeighborLoader(dataset.data, [-1], input_nodes=seeds, batch_size=128,
                                   subgraph_type='induced')))
    assert torch.equal(ours.n_id.sort().values.cpu(), ref.n_id.sort().values)
    assert torch.equal(ours.e_id.sort().values.cpu(), ref.e_id.sort().values)


def test_seeded_sampler_is_reproducible(stores):
    a = NeighborSampler(stores, [5, 5], seed=4)._sample(torch.arange(30))
    b = NeighborSampler(stores, [5, 5], seed=4)._sample(torch.arange(30))
    assert torch.equal(a.node, b.node) and torch.equal(a.edge, b.edge)


def test_unsupported_options_are_clear_errors(stores):
    with pytest.raises(ValueError, match="induced' needs disjoint=False"):
        NeighborSampler(stores, [2], subgraph_type='induced', disjoint=True)
    with pytest.raises(KeyError, match='no edge feature'):
        NeighborSampler(stores, [2], weight_attr='edge_weight')
    with pytest.raises(KeyError, match="no edge feature 'time'"):
        NeighborSampler(stores, [2], time_attr='time')
    with pytest.raises(ValueError, match='weighted temporal'):
        NeighborSampler(stores, [2], time_attr='time', weight_attr='w')
    with pytest.raises(ValueError, match='temporal_strategy'):
        NeighborSampler(stores, [2], temporal_strategy='first')
    with pytest.raises(KeyError, match="no edge type has an edge feature 'w'"):
        NeighborSampler(from_data(paper_author_graph(10, 5, 20), 'cpu'), [2], weight_attr='w')
    with pytest.raises(ValueError, match="neither 'edge_index' nor 'num_nodes'"):
        NeighborSampler(Data(), [2])
    with pytest.raises(TypeError, match='Data object or a'):
        NeighborSampler(torch.zeros(3), [2])
    with pytest.raises(ValueError, match='no time_attr'):
        NeighborSampler(stores, [2])._sample(torch.arange(3), seed_time=torch.zeros(3))


@requires_stock_sampler
def test_matches_stock_pyg_sampler(dataset, stores):
    seeds = dataset.split['train'][:256]
    # -1 everywhere is deterministic: the same node and edge sets as PyG's sampler
    ours = next(iter(NeighborLoader(stores, [-1, -1], neighbor_sampler=NeighborSampler(stores, [-1, -1]),
                                    input_nodes=seeds, batch_size=256)))
    ref = next(iter(NeighborLoader(dataset.data, [-1, -1], input_nodes=seeds, batch_size=256)))
    assert torch.equal(ours.n_id.sort().values.cpu(), ref.n_id.sort().values)
    assert torch.equal(ours.e_id.sort().values.cpu(), ref.e_id.sort().values)
    # random fanouts: the same node and edge counts on average (torch-sparse's sampler
    # reports no per-hop counts, so compare totals)
    torch.manual_seed(0)
    counts = {'ours': [], 'pyg': []}
    for name, loader in (('ours', NeighborLoader(stores, [5, 5], neighbor_sampler=NeighborSampler(stores, [5, 5]),
                                                 input_nodes=dataset.split['train'], batch_size=128)),
                         ('pyg', NeighborLoader(dataset.data, [5, 5], input_nodes=dataset.split['train'],
                                                batch_size=128))):
        for batch in loader:
            counts[name].append([batch.num_nodes, batch.num_edges])
    ours_mean = torch.tensor(counts['ours'], dtype=torch.double).mean(0)
    pyg_mean = torch.tensor(counts['pyg'], dtype=torch.double).mean(0)
    assert torch.allclose(ours_mean, pyg_mean, rtol=0.03)


def test_training_with_our_sampler_lowers_the_loss(dataset, stores):
    device = stores[0].location.device
    from torch_geometric.nn.models import GraphSAGE
    torch.manual_seed(0)
    model = GraphSAGE(dataset.num_features, 32, 2, dataset.num_classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = pyg_accel.loader.NeighborLoader(stores, [10, 5], input_nodes=dataset.split['train'], batch_size=256,
                                             shuffle=True)
    losses = []
    for _ in range(3):
        total = 0.0
        for batch in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(batch.x, batch.edge_index)[:batch.batch_size], batch.y[:batch.batch_size])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * batch.batch_size
        losses.append(total / dataset.split['train'].numel())
    assert losses[2] < losses[0] * 0.8


@pytest.mark.parametrize('location', LOCATIONS)
def test_weighted_sampling_through_the_loader(dataset, location):
    data = dataset.data.clone()
    data.edge_weight = (data.edge_index[0] % 2 == 0).float()  # only even neighbours can be drawn
    fs, gs = from_data(data, location)
    sampler = NeighborSampler((fs, gs), [5, 5], weight_attr='edge_weight')
    batch = next(iter(NeighborLoader((fs, gs), [5, 5], neighbor_sampler=sampler, input_nodes=dataset.split['train'],
                                     batch_size=128)))
    assert batch.edge_index.device.type == location
    assert batch.num_edges > 0 and bool((batch.n_id[batch.edge_index[0]] % 2 == 0).all())
    sampler = NeighborSampler(data, [5], weight_attr='edge_weight')  # from a Data object
    out = sampler._sample(torch.arange(50))
    assert bool((out.node[out.row] % 2 == 0).all())
    with pytest.raises(ValueError, match="no edge attribute 'w'"):
        NeighborSampler(data, [5], weight_attr='w')


@pytest.mark.parametrize('location', LOCATIONS)
@pytest.mark.parametrize('strategy', ['uniform', 'last'])
def test_temporal_node_time_through_the_loader(dataset, strategy, location):
    data = dataset.data.clone()
    data.time = torch.randint(0, 100, (data.num_nodes,))
    seeds = dataset.split['train'][:128]
    seed_time = torch.full((128,), 50)
    loader = pyg_accel.loader.NeighborLoader(data, [5, 5], input_nodes=seeds, input_time=seed_time, batch_size=64,
                                             time_attr='time', temporal_strategy=strategy)
    assert loader.node_sampler.disjoint  # temporal implies disjoint, as in PyG
    for batch in loader:
        sampled = batch.n_id[batch.batch_size:]
        assert bool((data.time[sampled] <= 50).all()) and batch.num_edges > 0
        assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])
    fs, gs = from_data(data, location)  # node time read from the FeatureStore
    sampler = NeighborSampler((fs, gs), [5], time_attr='time', temporal_strategy=strategy)
    out = sampler._sample(seeds[:10], seed_time=torch.full((10,), 30))
    assert out.node.device.type == location and out.node.numel() > 10
    assert bool((data.time[out.node[10:].cpu()] <= 30).all())


def test_temporal_last_takes_the_most_recent(dataset):
    data = dataset.data.clone()
    data.time = torch.randperm(data.num_nodes)
    sampler = NeighborSampler(data, [3], time_attr='time', temporal_strategy='last')
    seeds = torch.arange(20)
    limit = data.num_nodes // 2
    out = sampler._sample(seeds, seed_time=torch.full((20,), limit))
    row, col = data.edge_index
    for i in range(20):
        times = data.time[row[col == i]]
        eligible = times[times <= limit].sort(descending=True).values[:3]
        got = data.time[out.node[out.row[out.col == i]]].sort(descending=True).values
        assert torch.equal(got, eligible)


def test_temporal_edge_time(dataset):
    data = dataset.data.clone()
    data.edge_time = torch.randint(0, 10, (data.num_edges,))
    sampler = NeighborSampler(data, [-1], time_attr='edge_time')
    out = sampler._sample(torch.arange(30), seed_time=torch.full((30,), 4))
    edge_ids = sampler.edge_permutation[out.edge]
    assert out.edge.numel() > 0 and bool((data.edge_time[edge_ids] <= 4).all())
    expected = int(sum(((data.edge_index[1] == i) & (data.edge_time <= 4)).sum() for i in range(30)))
    assert out.edge.numel() == expected


def test_temporal_sampling_over_stores_laid_out_the_pyg_way(dataset):
    """PyG's remote backends keep times in the FeatureStore under any group ('default'
    for a homogeneous graph), edge times in the order the edges were put; ours finds
    them there as PyG's sampler does, with the samples of the same graph as a Data."""
    from torch_geometric.testing import MyFeatureStore
    from pyg_accel.data import GraphStore
    data = dataset.data.clone()
    data.time = torch.randint(0, 100, (data.num_nodes,))
    data.edge_time = torch.randint(0, 10, (data.num_edges,))
    gs = GraphStore('cpu')
    gs.put_edge_index(data.edge_index, edge_type=None, layout='coo', size=(data.num_nodes,) * 2)
    seeds = torch.arange(30)
    for name, limit in (('time', 50), ('edge_time', 4)):
        fs = MyFeatureStore()
        fs.put_tensor(data[name], group_name='default', attr_name=name, index=None)
        remote = NeighborSampler((fs, gs), [-1, -1], time_attr=name)
        local = NeighborSampler(data, [-1, -1], time_attr=name)
        a = remote._sample(seeds, seed_time=torch.full((30,), limit))
        b = local._sample(seeds, seed_time=torch.full((30,), limit))
        assert a.edge.numel() > 0 and torch.equal(a.node, b.node)
        assert torch.equal(remote.edge_permutation[a.edge], local.edge_permutation[b.edge])


def test_heterogeneous_edge_times_from_the_feature_store():
    """Edge times under edge-type groups of a FeatureStore (PyG's remote layout), in the
    order the edges were put: the same samples as the HeteroData's edge attribute."""
    from torch_geometric.testing import MyFeatureStore
    data = hetero_graph()
    for et in data.edge_types:
        data[et].edge_time = torch.randint(0, 10, (data[et].num_edges,))
    from pyg_accel.data import GraphStore
    gs = GraphStore('cpu')  # the edges only: no edge features in our store
    for et in data.edge_types:
        gs.put_edge_index(data[et].edge_index, edge_type=et, layout='coo',
                          size=(data[et[0]].num_nodes, data[et[-1]].num_nodes))
    fs = MyFeatureStore()
    for et in data.edge_types:
        fs.put_tensor(data[et].edge_time, group_name=et, attr_name='edge_time', index=None)
    seeds = {'paper': torch.arange(20)}
    times = {'paper': torch.full((20,), 4)}
    remote = NeighborSampler((fs, gs), [-1, -1], time_attr='edge_time')
    local = NeighborSampler(data, [-1, -1], time_attr='edge_time')
    a, b = remote._sample(seeds, seed_time=times), local._sample(seeds, seed_time=times)
    for t in a.node:
        assert torch.equal(a.node[t], b.node[t])
    assert sum(e.numel() for e in a.edge.values()) > 0


def test_workers_are_refused_with_gpu_stores(dataset):
    from pyg_accel.data import Location
    fs, gs = from_data(dataset.data, 'cpu')
    pyg_accel.loader.NeighborLoader((fs, gs), [2], input_nodes=torch.arange(8), batch_size=4, num_workers=1)
    fs.location = Location('pinned', torch.device('cuda'))  # as a GPU machine's store would be
    with pytest.raises(ValueError, match='num_workers=0'):
        pyg_accel.loader.NeighborLoader((fs, gs), [2], input_nodes=torch.arange(8), batch_size=4, num_workers=1)


@pytest.mark.parametrize('location', LOCATIONS)
@pytest.mark.parametrize('kind', ['node', 'link'])
def test_a_dropped_loader_is_freed_at_once(dataset, location, kind):
    """Our loaders hold no reference cycle (PyG's keep a bound collate_fn), so dropping
    one frees its sampler and stores, and their GPU memory, without waiting for the
    garbage collector; the loader still iterates, in this process and in workers."""
    import pickle
    fs, gs = from_data(dataset.data, location)
    if kind == 'node':
        loader = pyg_accel.loader.NeighborLoader((fs, gs), [3, 2], input_nodes=torch.arange(64), batch_size=16)
    else:
        loader = pyg_accel.loader.LinkNeighborLoader((fs, gs), [3, 2], edge_label_index=dataset.data.edge_index[:, :64],
                                                     batch_size=16, neg_sampling='binary')
    assert sum(1 for _ in loader) == 4
    assert callable(loader.collate_fn) and loader.collate_fn.__self__ is loader
    assert pickle.loads(pickle.dumps(loader.node_sampler if kind == 'node' else loader.link_sampler)) is not None
    objects = [loader, fs, gs]
    del loader, fs, gs
    assert_freed_without_gc(objects)


def test_our_cpu_loader_runs_in_worker_processes(cpu_stores):
    fs, gs = cpu_stores
    loader = pyg_accel.loader.NeighborLoader((fs, gs), [3, 2], input_nodes=torch.arange(64), batch_size=16,
                                             num_workers=2)
    batches = list(loader)
    assert len(batches) == 4 and all(batch.batch_size == 16 and batch.edge_index.numel() > 0 for batch in batches)
    assert torch.equal(torch.cat([batch.n_id[:16] for batch in batches]).sort().values, torch.arange(64))


def test_seeded_sampler_draws_a_stream_per_worker(cpu_stores):
    """With seed= and DataLoader workers, each worker draws its own stream (copies of one
    generator drew the same one: worker 0's and worker 1's first batches, of the same
    seeds, were the same sample), reproducibly."""
    def run():
        loader = pyg_accel.loader.NeighborLoader(cpu_stores, [5, 5], input_nodes=torch.arange(16).repeat(4),
                                                 batch_size=16, num_workers=2,
                                                 neighbor_sampler=NeighborSampler(cpu_stores, [5, 5], seed=3))
        return [batch.e_id for batch in loader]
    first = run()
    assert not torch.equal(first[0], first[1])  # batches 0 and 1: the two workers' first draws
    assert all(torch.equal(a, b) for a, b in zip(first, run()))


# Heterogeneous graphs ##########################################################

def hetero_graph():
    data = paper_author_graph(80, 40, 300)
    data['paper', 'written_by', 'author'].edge_index = data['author', 'writes', 'paper'].edge_index.flip(0)
    data['paper', 'cites', 'paper'].edge_index = torch.randint(0, 80, (2, 250))
    return data


def check_hetero_batch(batch, data, seeds, fanouts=None):
    assert torch.equal(batch['paper'].n_id[:batch['paper'].batch_size], seeds)
    for node_type in ('paper', 'author'):
        assert torch.equal(batch[node_type].x, data[node_type].x[batch[node_type].n_id])
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        ei = batch[edge_type].edge_index
        glob = torch.stack([batch[src].n_id[ei[0]], batch[dst].n_id[ei[1]]])
        assert torch.equal(glob, data[edge_type].edge_index[:, batch[edge_type].e_id])  # edges exist, ids right
        if fanouts is not None and ei.numel():  # per-node count: min(fanout, degree) at the first hop
            deg = torch.bincount(data[edge_type].edge_index[1], minlength=data[dst].num_nodes)
            hop0 = ei[:, :batch[edge_type].num_sampled_edges[0]]
            if dst == 'paper':
                got = torch.bincount(hop0[1], minlength=batch['paper'].batch_size)[:batch['paper'].batch_size]
                assert torch.equal(got, deg[seeds].clamp(max=fanouts[0]))


def test_repeated_input_nodes_keep_their_places(dataset, stores):
    """The oversampling idiom (input nodes repeated, shuffled) and PyG's ImbalancedSampler
    repeat seeds; the first batch_size nodes are the seeds as drawn, as with stock PyG,
    so out[:batch_size] and y[:batch_size] line up."""
    from torch_geometric.loader import ImbalancedSampler
    data = dataset.data
    seeds = dataset.split['train'][:40].repeat(3)[torch.randperm(120, generator=torch.Generator().manual_seed(0))]
    loader = NeighborLoader(stores, [3, 2], neighbor_sampler=NeighborSampler(stores, [3, 2]), input_nodes=seeds,
                            batch_size=50)
    for i, batch in enumerate(loader):
        check_batch(batch, data, seeds[50 * i:50 * (i + 1)])
        assert batch.num_sampled_nodes[0] == batch.batch_size
    torch.manual_seed(12345)
    loader = NeighborLoader(stores, [-1], neighbor_sampler=NeighborSampler(stores, [-1]), batch_size=10,
                            sampler=ImbalancedSampler(data.y, input_nodes=torch.arange(100)),
                            input_nodes=torch.arange(100))
    y = torch.cat([batch.y[:batch.batch_size].cpu() for batch in loader])
    assert y.numel() == 100
    for batch in loader:
        assert torch.equal(batch.y[:batch.batch_size].cpu(), data.y[batch.input_id.cpu()])


@pytest.mark.parametrize('remote', [True, False])
@pytest.mark.parametrize('disjoint', [False, True])
def test_heterogeneous_sampling_through_the_loader(remote, disjoint):
    data = hetero_graph()
    source = from_data(data, 'cpu') if remote else data
    sampler = NeighborSampler(source, [3, 2], disjoint=disjoint)
    seeds = torch.arange(24)
    loader = NeighborLoader(source, [3, 2], neighbor_sampler=sampler, input_nodes=('paper', seeds), batch_size=8)
    for i, batch in enumerate(loader):
        check_hetero_batch(batch, data, seeds[8 * i:8 * (i + 1)], fanouts=[3, 2])
        assert len(batch['paper'].num_sampled_nodes) == 3
        if disjoint:
            assert torch.equal(batch['paper'].batch[:8], torch.arange(8))


@pytest.mark.parametrize('location', LOCATIONS)
def test_heterogeneous_repeated_seeds_keep_their_places(location):
    data = hetero_graph()
    source = from_data(data, location)
    seeds = torch.tensor([3, 3, 5, 3, 7, 1, 1, 2])
    loader = NeighborLoader(source, [3, 2], neighbor_sampler=NeighborSampler(source, [3, 2]),
                            input_nodes=('paper', seeds), batch_size=8)
    batch = next(iter(loader)).to('cpu')
    check_hetero_batch(batch, data, seeds, fanouts=[3, 2])
    assert batch['paper'].n_id[:8].tolist() == seeds.tolist() and batch['paper'].num_sampled_nodes[0] == 8


@requires_cuda
@pytest.mark.parametrize('disjoint', [False, True])
def test_heterogeneous_graph_on_the_gpu_samples_as_on_the_cpu(disjoint):
    """A GPU-held heterogeneous graph is sampled on the GPU by the CUDA kernel, with the
    same sample as a CPU store for the same seed, and the batches stay on the GPU."""
    from pyg_accel.loader import NeighborLoader as OurLoader
    data = hetero_graph()
    seeds = torch.arange(24)
    runs = []
    for location in ('cpu', 'cuda'):
        torch.manual_seed(0)
        loader = OurLoader(from_data(data, location), [3, 2], input_nodes=('paper', seeds), batch_size=8,
                           disjoint=disjoint)
        runs.append(list(loader))
    for i, (cpu_batch, gpu_batch) in enumerate(zip(*runs)):
        assert gpu_batch['paper'].x.is_cuda and gpu_batch['author', 'writes', 'paper'].edge_index.is_cuda
        check_hetero_batch(gpu_batch.to('cpu'), data, seeds[8 * i:8 * (i + 1)], fanouts=[3, 2])
        for node_type in ('paper', 'author'):
            assert torch.equal(gpu_batch[node_type].n_id.cpu(), cpu_batch[node_type].n_id)
        for edge_type in data.edge_types:
            assert torch.equal(gpu_batch[edge_type].edge_index.cpu(), cpu_batch[edge_type].edge_index)


@requires_cuda
@pytest.mark.parametrize('mode', ['uniform', 'weighted', 'edge_time', 'node_time_last'])
def test_pinned_graph_is_sampled_on_the_gpu_in_place(dataset, mode):
    """A GraphStore('pinned') is sampled by the CUDA kernels reading the host graph over
    the bus: the same sample as the graph held on the GPU (same kernels, same seed),
    batches on the GPU, edge ids mapped back through the permutation, and no copy of
    the graph in GPU memory but its column pointers."""
    data = dataset.data.clone()
    kwargs, seed_time = {}, None
    if mode == 'weighted':
        data.edge_weight = torch.rand(data.num_edges)
        kwargs = dict(weight_attr='edge_weight')
    elif mode == 'edge_time':
        data.edge_time = torch.randint(0, 10, (data.num_edges,))
        kwargs, seed_time = dict(time_attr='edge_time'), torch.full((64,), 5)
    elif mode == 'node_time_last':
        data.time = torch.randint(0, 10, (data.num_nodes,))
        kwargs, seed_time = dict(time_attr='time', temporal_strategy='last'), torch.full((64,), 5)
    seeds = dataset.split['train'][:64]
    outs = []
    for graph_location in ('cuda', 'pinned'):
        fs, gs = from_data(data, 'cuda', graph_location=graph_location)
        gc.collect()  # (the previous iteration's stores, freed now rather than while measuring)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        sampler = NeighborSampler((fs, gs), [5, 3], seed=0, **kwargs)
        grew = torch.cuda.memory_allocated() - before
        assert sampler.device.type == 'cuda'
        outs.append(sampler._sample(seeds, seed_time=seed_time))
        loader = NeighborLoader((fs, gs), [5, 3], neighbor_sampler=sampler, input_nodes=seeds, batch_size=32,
                                input_time=seed_time, time_attr=kwargs.get('time_attr'))
        batch = next(iter(loader))
        assert batch.edge_index.is_cuda and batch.num_edges > 0
        assert torch.equal(batch.n_id[batch.edge_index].cpu(), data.edge_index[:, batch.e_id.cpu()])
    assert (data.num_nodes + 1) * 8 <= grew < data.num_edges * 8  # colptr copied; row (num_edges * 8 B) is not
    for key in ('node', 'row', 'col', 'edge', 'batch', 'num_sampled_nodes', 'num_sampled_edges'):
        a, b = getattr(outs[0], key), getattr(outs[1], key)
        assert (a is None and b is None) or (torch.equal(a, b) if torch.is_tensor(a) else a == b), key


@requires_cuda
def test_pinned_heterogeneous_graph_is_sampled_on_the_gpu():
    """The same for a heterogeneous graph in a pinned GraphStore."""
    from pyg_accel.loader import NeighborLoader as OurLoader
    data = hetero_graph()
    seeds = torch.arange(24)
    runs = []
    for graph_location in ('cuda', 'pinned'):
        torch.manual_seed(0)
        loader = OurLoader(from_data(data, 'cuda', graph_location=graph_location), [3, 2],
                           input_nodes=('paper', seeds), batch_size=8)
        assert loader.node_sampler.device.type == 'cuda'
        runs.append(list(loader))
    for i, (gpu_batch, pinned_batch) in enumerate(zip(*runs)):
        assert pinned_batch['author', 'writes', 'paper'].edge_index.is_cuda
        check_hetero_batch(pinned_batch.to('cpu'), data, seeds[8 * i:8 * (i + 1)], fanouts=[3, 2])
        for edge_type in data.edge_types:  # (to('cpu') moved the pinned batch in place)
            assert torch.equal(pinned_batch[edge_type].edge_index, gpu_batch[edge_type].edge_index.cpu())


@requires_cuda
def test_a_heterodata_on_the_gpu_is_sampled_there():
    """A HeteroData held on a GPU is sampled by the CUDA kernel (as a Data is), with
    the CPU kernel's sample for the same seed, and its features are not copied into a
    store of the sampler's own; batches stay on the GPU."""
    from pyg_accel.loader import NeighborLoader as OurLoader
    data = hetero_graph()
    data['paper'].x = torch.randn(80, 50_000)  # 16 MB: a copy would show
    seeds = torch.arange(24)
    gpu_data = data.clone().to('cuda')  # HeteroData.to moves in place
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    gpu_sampler = NeighborSampler(gpu_data, [3, 2], seed=0)
    grew = torch.cuda.memory_allocated() - before
    assert gpu_sampler.device.type == 'cuda'
    assert grew < 1 << 20  # the graph's CSC only (~850 edges), no copy of the features
    cpu_sampler = NeighborSampler(data, [3, 2], seed=0)
    gpu, cpu = gpu_sampler._sample({'paper': seeds.cuda()}), cpu_sampler._sample({'paper': seeds})
    for edge_type in data.edge_types:
        assert torch.equal(gpu.row[edge_type].cpu(), cpu.row[edge_type]), edge_type
    for node_type in data.node_types:
        assert torch.equal(gpu.node[node_type].cpu(), cpu.node[node_type]), node_type
    batch = next(iter(OurLoader(gpu_data, [3, 2], input_nodes=('paper', seeds.cuda()), batch_size=8)))
    assert batch['paper'].x.is_cuda and batch['author', 'writes', 'paper'].edge_index.is_cuda
    check_hetero_batch(batch.to('cpu'), data, seeds[:8], fanouts=[3, 2])


@pytest.mark.parametrize('mode', ['weighted', 'node_time', 'edge_time'])
def test_a_heterodata_samples_as_its_stores_do(mode):
    """A HeteroData passed as it is (a GraphStore of its edges and the named per-edge
    tensors, nothing else copied) gives the sample of the same data in our stores."""
    data = hetero_graph()
    writes = ('author', 'writes', 'paper')
    kwargs, seed_time = {}, None
    if mode == 'weighted':
        data[writes].w = torch.rand(data[writes].num_edges)
        kwargs = dict(weight_attr='w')
    elif mode == 'node_time':
        data['paper'].time, data['author'].time = torch.randint(0, 10, (80,)), torch.randint(0, 10, (40,))
        kwargs, seed_time = dict(time_attr='time'), {'paper': torch.full((20,), 5)}
    else:
        data[writes].t = torch.randint(0, 10, (data[writes].num_edges,))
        kwargs, seed_time = dict(time_attr='t'), {'paper': torch.full((20,), 5)}
    seeds = {'paper': torch.arange(20)}
    direct = NeighborSampler(data, [3, 2], seed=1, **kwargs)._sample(seeds, seed_time=seed_time)
    stored = NeighborSampler(from_data(data, 'cpu'), [3, 2], seed=1, **kwargs)._sample(seeds, seed_time=seed_time)
    for node_type in data.node_types:
        assert torch.equal(direct.node[node_type], stored.node[node_type]), node_type
    for edge_type in data.edge_types:
        for name in ('row', 'col', 'edge'):
            assert torch.equal(getattr(direct, name)[edge_type], getattr(stored, name)[edge_type]), (name, edge_type)


@pytest.mark.parametrize('location', LOCATIONS)
@pytest.mark.parametrize('neg_sampling', ['binary', 'triplet'])
def test_heterogeneous_link_loader_with_negatives(location, neg_sampling):
    """Link prediction on one edge type of a heterogeneous graph: our LinkNeighborLoader
    over a HeteroData (where its edges are) or our stores, with PyG's negatives. The
    positive pairs map back to the input edges, negatives are of the right node types,
    and every sampled edge exists."""
    data = hetero_graph()
    writes = ('author', 'writes', 'paper')
    edges = data[writes].edge_index[:, :64]
    source = data.clone().to('cuda') if location == 'cuda' else data  # .to moves in place
    loader = pyg_accel.loader.LinkNeighborLoader(source, [3, 2], edge_label_index=(writes, edges.to(location)),
                                                 batch_size=32, neg_sampling=neg_sampling, shuffle=False)
    batches = [b.to('cpu') for b in loader]
    assert len(batches) == 2
    for i, batch in enumerate(batches):
        want = edges[:, 32 * i:32 * (i + 1)]
        authors, papers = batch['author'].n_id, batch['paper'].n_id
        if neg_sampling == 'binary':
            label_index, label = batch[writes].edge_label_index, batch[writes].edge_label
            assert label_index.shape == (2, 64) and label.tolist() == [1.0] * 32 + [0.0] * 32
            assert torch.equal(authors[label_index[0, :32]], want[0]) and torch.equal(papers[label_index[1, :32]],
                                                                                      want[1])
            assert int(label_index[0].max()) < authors.numel() and int(label_index[1].max()) < papers.numel()
        else:
            assert torch.equal(authors[batch['author'].src_index], want[0])
            assert torch.equal(papers[batch['paper'].dst_pos_index], want[1])
            assert batch['paper'].dst_neg_index.shape == (32,)
            assert int(batch['paper'].dst_neg_index.max()) < papers.numel()
        for edge_type in data.edge_types:  # every sampled edge is an edge of the graph
            src, _, dst = edge_type
            local = batch[edge_type].edge_index
            got = torch.stack([batch[src].n_id[local[0]], batch[dst].n_id[local[1]]])
            assert torch.equal(got, data[edge_type].edge_index[:, batch[edge_type].e_id]), edge_type


def test_heterogeneous_per_edge_type_fanouts():
    data = hetero_graph()
    fs, gs = from_data(data, 'cpu')
    fanouts = {('author', 'writes', 'paper'): [2, 0], ('paper', 'written_by', 'author'): [1, 1],
               ('paper', 'cites', 'paper'): [0, 0]}
    out = NeighborSampler((fs, gs), fanouts)._sample({'paper': torch.arange(10)})
    assert out.num_sampled_edges[('paper', 'cites', 'paper')] == [0, 0]
    assert out.num_sampled_edges[('author', 'writes', 'paper')][1] == 0
    with pytest.raises(ValueError, match='same across all edge types|needs 2 fanouts'):
        NeighborSampler((fs, gs), {**fanouts, ('paper', 'cites', 'paper'): [1]})._sample({'paper': torch.arange(3)})
    with pytest.raises(ValueError, match='keyed by node type'):
        NeighborSampler((fs, gs), [1])._sample(torch.arange(3))


@pytest.mark.parametrize('location', LOCATIONS)
def test_heterogeneous_induced_subgraph(location):
    data = hetero_graph()
    seeds = torch.arange(12)
    sampler = NeighborSampler(from_data(data, location), [3, 2], subgraph_type='induced')
    out = sampler._sample({'paper': seeds})
    assert out.num_sampled_edges is None
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        perm = sampler.edge_permutation[edge_type] if sampler.edge_permutation else None
        ei = data[edge_type].edge_index
        r, c, e = out.row[edge_type], out.col[edge_type], out.edge[edge_type]
        node_src, node_dst = out.node[src].cpu(), out.node[dst].cpu()
        edge_id = e.cpu() if perm is None else perm.cpu()[e.cpu()]
        assert torch.equal(torch.stack([node_src[r.cpu()], node_dst[c.cpu()]]), ei[:, edge_id])
        inside = torch.isin(ei[0], node_src) & torch.isin(ei[1], node_dst)
        assert torch.equal(edge_id.sort().values, inside.nonzero().view(-1))


def sampled_global_edges(batch, edge_type):
    """``[2, k]`` global (src, dst) ids and the input edge ids of a batch's edge type."""
    src, _, dst = edge_type
    ei = batch[edge_type].edge_index
    return torch.stack([batch[src].n_id[ei[0]], batch[dst].n_id[ei[1]]]), batch[edge_type].e_id


@pytest.mark.parametrize('location', LOCATIONS)
def test_heterogeneous_weighted_sampling(location):
    """Edge types with a weight draw by weight (zero-weight edges never); the others
    uniformly. At fanout -1 a weighted type takes exactly its positive-weight edges."""
    data = hetero_graph()
    writes = ('author', 'writes', 'paper')
    weight = torch.rand(data[writes].num_edges)
    weight[::2] = 0
    data[writes].w = weight
    seeds = torch.arange(20)
    for fanout in (2, -1):
        loader = NeighborLoader(data, [fanout], neighbor_sampler=NeighborSampler(from_data(data, location), [fanout],
                                                                                 weight_attr='w'),
                                input_nodes=('paper', seeds), batch_size=20)
        batch = next(iter(loader)).to('cpu')
        check_hetero_batch(batch, data, seeds, fanouts=None)
        _, e_id = sampled_global_edges(batch, writes)
        assert bool((weight[e_id] > 0).all())
        dst = data[writes].edge_index[1]
        positive = torch.bincount(dst[weight > 0], minlength=80)[seeds]
        got = torch.bincount(dst[e_id], minlength=80)[seeds]
        assert torch.equal(got, positive if fanout < 0 else positive.clamp(max=fanout))
        cites = batch['paper', 'cites', 'paper'].e_id  # no weight: uniform, min(fanout, degree)
        deg = torch.bincount(data['paper', 'cites', 'paper'].edge_index[1], minlength=80)[seeds]
        got = torch.bincount(data['paper', 'cites', 'paper'].edge_index[1, cites], minlength=80)[seeds]
        assert torch.equal(got, deg if fanout < 0 else deg.clamp(max=fanout))
    with pytest.raises(KeyError, match="no edge type has an edge feature 'nope'"):
        NeighborSampler(from_data(data, location), [2], weight_attr='nope')


HETERO_MODES = {'uniform': {}, 'disjoint': dict(disjoint=True), 'replace': dict(replace=True),
                'weighted': dict(weight_attr='w'), 'temporal': dict(time_attr='time'),
                'temporal-last-disjoint': dict(time_attr='time', temporal_strategy='last', disjoint=True),
                'induced': dict(subgraph_type='induced')}


@pytest.mark.parametrize('location', LOCATIONS)
@pytest.mark.parametrize('mode', list(HETERO_MODES))
def test_heterogeneous_batches_are_sorted_by_destination(location, mode):
    """Every edge type of a heterogeneous batch lists its edges by destination, and the
    loader marks it so (pyg_accel's layers then build its graph without a sort); a
    bidirectional batch is not marked."""
    from pyg_accel.ops.sparse import is_trusted_dst_sorted, is_trusted_edge_index
    data = hetero_graph()
    g = torch.Generator().manual_seed(2)
    data['author', 'writes', 'paper'].w = torch.rand(data['author', 'writes', 'paper'].num_edges, generator=g)
    data['paper'].time = torch.randint(0, 10, (80,), generator=g)
    data['author'].time = torch.randint(0, 10, (40,), generator=g)
    source = data.clone().to(location)
    kwargs = HETERO_MODES[mode]
    time = dict(input_time=torch.full((80,), 7, device=location)) if 'time_attr' in kwargs else {}
    seeds = ('paper', torch.arange(80, device=location))
    loader = pyg_accel.loader.NeighborLoader(source, [4, 3, 2], input_nodes=seeds, batch_size=20, shuffle=True,
                                             **kwargs, **time)
    for batch in loader:
        for edge_type in batch.edge_types:
            edge_index = batch[edge_type].edge_index
            dst = edge_index[1]
            assert bool((dst[1:] >= dst[:-1]).all()), edge_type
            assert is_trusted_dst_sorted(edge_index), edge_type
    bidirectional = pyg_accel.loader.NeighborLoader(source, [4, 3], input_nodes=('paper', torch.arange(20)),
                                                    batch_size=20, subgraph_type='bidirectional')
    batch = next(iter(bidirectional))
    edge_index = batch['paper', 'cites', 'paper'].edge_index
    assert is_trusted_edge_index(edge_index, (batch['paper'].num_nodes,) * 2) and not is_trusted_dst_sorted(edge_index)


def out_neighbourhood(data, seeds: torch.Tensor, hops: int):
    """Reference for backward sampling at fanout -1 from paper ``seeds``: per node type
    the nodes reached along out-edges within ``hops`` hops, and per edge type the
    out-edges of the nodes expanded (those new at each hop before the last)."""
    reached = {t: torch.zeros(data[t].num_nodes, dtype=torch.bool) for t in data.node_types}
    reached['paper'][seeds] = True
    frontier = {t: r.clone() for t, r in reached.items()}
    drawn = {et: torch.zeros(data[et].num_edges, dtype=torch.bool) for et in data.edge_types}
    for _ in range(hops):
        new = {t: torch.zeros_like(r) for t, r in reached.items()}
        for et in data.edge_types:
            src, dst = data[et].edge_index
            take = frontier[et[0]][src]
            drawn[et] |= take
            new[et[-1]][dst[take]] = True
        frontier = {t: new[t] & ~reached[t] for t in reached}
        reached = {t: reached[t] | new[t] for t in reached}
    return reached, drawn


def backward_loader(graph, fanouts, seeds: torch.Tensor, **kwargs):
    """Our loader over ``graph`` with a backward sampler, one batch of paper ``seeds``."""
    sampler = NeighborSampler(graph, fanouts, sample_direction='backward', **kwargs)
    return pyg_accel.loader.NeighborLoader(graph, fanouts, neighbor_sampler=sampler, input_nodes=('paper', seeds),
                                           batch_size=seeds.numel())


def with_edge_attrs(data):
    for et in data.edge_types:
        data[et].edge_attr = torch.randn(data[et].num_edges, 2)
    return data


BACKWARD_SOURCES = ['cpu', 'heterodata-cpu'] + (['cuda', 'pinned', 'heterodata-cuda'] if HAS_CUDA else [])


@pytest.mark.parametrize('source', BACKWARD_SOURCES)
def test_heterogeneous_backward_sampling_at_full_fanout(source):
    """sample_direction='backward' on a heterogeneous graph, every out-neighbour: exactly
    the nodes reached along out-edges and the out-edges of the nodes expanded, under the
    graph's own edge types, each edge in the graph's direction with its input id and
    edge features."""
    data = with_edge_attrs(hetero_graph())
    seeds = torch.arange(0, 80, 7)
    kind, _, location = source.rpartition('-')
    graph = data.clone().to(location) if kind == 'heterodata' else from_data(data, location)
    batch = next(iter(backward_loader(graph, [-1, -1], seeds))).to('cpu')
    check_hetero_batch(batch, data, seeds)
    reached, drawn = out_neighbourhood(data, seeds, 2)
    for node_type in data.node_types:
        assert torch.equal(batch[node_type].n_id.sort().values, reached[node_type].nonzero().view(-1))
    for edge_type in data.edge_types:
        e_id = batch[edge_type].e_id
        assert torch.equal(e_id.sort().values, drawn[edge_type].nonzero().view(-1)), edge_type
        assert torch.equal(batch[edge_type].edge_attr, data[edge_type].edge_attr[e_id]), edge_type


@pytest.mark.parametrize('location', LOCATIONS)
def test_heterogeneous_backward_sampling_draws_out_edges(location):
    """Each paper seed draws min(fanout, out-degree) distinct out-edges of each edge type
    leaving papers, with per-edge-type fanouts keyed by the graph's own edge types; the
    edges of a type are grouped by source and the batch is not marked dst-sorted."""
    from pyg_accel.ops.sparse import is_trusted_dst_sorted
    data = hetero_graph()
    seeds = torch.arange(0, 80, 3)
    fanouts = {('paper', 'cites', 'paper'): [2, 1], ('paper', 'written_by', 'author'): [3, 0],
               ('author', 'writes', 'paper'): [1, 1]}
    batch = next(iter(backward_loader(from_data(data, location), fanouts, seeds)))
    for edge_type in batch.edge_types:
        assert not is_trusted_dst_sorted(batch[edge_type].edge_index)
    batch = batch.to('cpu')
    check_hetero_batch(batch, data, seeds)
    assert batch['author', 'writes', 'paper'].num_sampled_edges[0] == 0  # no author seeds
    assert batch['paper', 'written_by', 'author'].num_sampled_edges[1] == 0  # fanout 0 at hop 2
    for edge_type in (('paper', 'cites', 'paper'), ('paper', 'written_by', 'author')):
        src = batch[edge_type].edge_index[0]
        first_hop = src[:batch[edge_type].num_sampled_edges[0]]
        assert bool((first_hop[1:] >= first_hop[:-1]).all())
        out_degree = torch.bincount(data[edge_type].edge_index[0], minlength=80)[seeds]
        drawn = torch.bincount(first_hop, minlength=seeds.numel())
        assert torch.equal(drawn, out_degree.clamp(max=fanouts[edge_type][0]))
        assert batch[edge_type].e_id.unique().numel() == batch[edge_type].e_id.numel()  # without replacement


@pytest.mark.parametrize('location', LOCATIONS)
def test_heterogeneous_backward_sampling_weighted_and_induced(location):
    """Backward over a weighted edge type never draws a zero-weight out-edge; the induced
    backward subgraph is every edge among the sampled nodes, under the graph's types."""
    data = hetero_graph()
    written_by = ('paper', 'written_by', 'author')
    weight = (torch.arange(data[written_by].num_edges) % 3 != 0).float()
    data[written_by].w = weight
    seeds = torch.arange(0, 80, 4)
    stores = from_data(data, location)
    batch = next(iter(backward_loader(stores, [3, 2], seeds, weight_attr='w'))).to('cpu')
    check_hetero_batch(batch, data, seeds)
    assert batch[written_by].e_id.numel() and bool((weight[batch[written_by].e_id] > 0).all())
    sampler = NeighborSampler(stores, [3, 2], sample_direction='backward', subgraph_type='induced')
    out = sampler._sample({'paper': seeds})
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        ei = data[edge_type].edge_index
        node_src, node_dst = out.node[src].cpu(), out.node[dst].cpu()
        edge_id = sampler.edge_permutation[edge_type].cpu()[out.edge[edge_type].cpu()]
        got = torch.stack([node_src[out.row[edge_type].cpu()], node_dst[out.col[edge_type].cpu()]])
        assert torch.equal(got, ei[:, edge_id])
        inside = torch.isin(ei[0], node_src) & torch.isin(ei[1], node_dst)
        assert torch.equal(edge_id.sort().values, inside.nonzero().view(-1))


@pytest.mark.parametrize('location', LOCATIONS)
def test_heterogeneous_backward_sampling_disjoint_trees(location):
    """Disjoint backward sampling: one tree per seed, and every sampled edge (in the
    graph's direction) joins two nodes of the same tree."""
    data = hetero_graph()
    sampler = NeighborSampler(from_data(data, location), [3, 2], sample_direction='backward', disjoint=True)
    out = sampler._sample({'paper': torch.arange(6)})
    assert torch.equal(out.batch['paper'][:6].cpu(), torch.arange(6))
    for (src, rel, dst), row in out.row.items():
        col = out.col[src, rel, dst]
        assert torch.equal(out.batch[src][row], out.batch[dst][col]), (src, rel, dst)
    assert sum(len(row) for row in out.row.values()) > 0


@pytest.mark.parametrize('location', LOCATIONS)
@pytest.mark.parametrize('hetero', [False, True])
def test_link_loader_with_backward_sampling(location, hetero):
    """LinkNeighborLoader over a backward sampler, with negatives: every sampled edge is
    the graph's, in its direction, with its input id and the store's edge features."""
    from torch_geometric.sampler import NegativeSampling
    data = hetero_graph() if hetero else directed_graph()
    for store in data.edge_stores:
        store.edge_attr = torch.randn(store.num_edges, 2)
    stores = from_data(data, location)
    label_type = ('author', 'writes', 'paper') if hetero else None
    labels = (data[label_type] if hetero else data).edge_index[:, :20]
    loader = pyg_accel.loader.LinkNeighborLoader(
        stores, [3, 2], neighbor_sampler=NeighborSampler(stores, [3, 2], sample_direction='backward'),
        edge_label_index=(label_type, labels) if hetero else labels, batch_size=10,
        neg_sampling=NegativeSampling('binary' if hetero else 'triplet'))
    batch = next(iter(loader)).to('cpu')
    for edge_type in (batch.edge_types if hetero else [None]):
        store, graph = (batch[edge_type], data[edge_type]) if hetero else (batch, data)
        src_ids = batch[edge_type[0]].n_id if hetero else batch.n_id
        dst_ids = batch[edge_type[-1]].n_id if hetero else batch.n_id
        ei = store.edge_index
        assert torch.equal(torch.stack([src_ids[ei[0]], dst_ids[ei[1]]]), graph.edge_index[:, store.e_id])
        assert torch.equal(store.edge_attr, graph.edge_attr[store.e_id])


@requires_stock_sampler
def test_heterogeneous_backward_sampling_matches_stock_pyg_nodes():
    """All out-neighbours ([-1, -1]): the same node sets as stock PyG's backward sampler."""
    from torch_geometric.sampler import NeighborSampler as PyGSampler
    data = hetero_graph()
    seeds = ('paper', torch.arange(0, 80, 9))
    ours = next(iter(NeighborLoader(data, [-1, -1], input_nodes=seeds, batch_size=9, neighbor_sampler=NeighborSampler(
        data, [-1, -1], sample_direction='backward'))))
    ref = next(iter(NeighborLoader(data, [-1, -1], input_nodes=seeds, batch_size=9,
                                   neighbor_sampler=PyGSampler(data, [-1, -1], sample_direction='backward'))))
    for node_type in data.node_types:
        assert torch.equal(ours[node_type].n_id.sort().values, ref[node_type].n_id.sort().values)


def time_graph(node_level: bool):
    data = hetero_graph()
    g = torch.Generator().manual_seed(5)
    if node_level:
        data['paper'].time = torch.randint(0, 100, (80,), generator=g)
        data['author'].time = torch.randint(0, 100, (40,), generator=g)
    else:
        for edge_type in data.edge_types:
            data[edge_type].time = torch.randint(0, 100, (data[edge_type].num_edges,), generator=g)
    return data


@pytest.mark.parametrize('location', LOCATIONS)
@pytest.mark.parametrize('node_level', [True, False])
@pytest.mark.parametrize('strategy', ['uniform', 'last'])
def test_heterogeneous_temporal_sampling(location, node_level, strategy):
    """Each seed's tree only holds neighbours (node times) or edges (edge times) not later
    than the seed's time; 'last' takes the most recent eligible ones."""
    data = time_graph(node_level)
    seeds, seed_time = torch.arange(16), torch.randint(20, 100, (16,), generator=torch.Generator().manual_seed(1))
    fanouts = [2, 2]
    sampler = NeighborSampler(from_data(data, location), fanouts, time_attr='time', temporal_strategy=strategy)
    assert sampler.disjoint and sampler.is_temporal
    loader = NeighborLoader(data, fanouts, neighbor_sampler=sampler, input_nodes=('paper', seeds),
                            input_time=seed_time, batch_size=16, time_attr='time')
    batch = next(iter(loader)).to('cpu')
    assert torch.equal(batch['paper'].n_id[:16], seeds)
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        glob, e_id = sampled_global_edges(batch, edge_type)
        limit = seed_time[batch[dst].batch[batch[edge_type].edge_index[1]]]
        when = data[src].time[glob[0]] if node_level else data[edge_type].time[e_id]
        assert e_id.numel() > 0 and bool((when <= limit).all()), edge_type
        if strategy == 'last':  # first hop from the seeds: the latest eligible neighbours
            hop0 = batch[edge_type].num_sampled_edges[0]
            for k in range(hop0):
                v, tree = int(glob[1, k]), int(batch[dst].batch[batch[edge_type].edge_index[1, k]])
                mine = data[edge_type].edge_index[1] == v
                times = (data[src].time[data[edge_type].edge_index[0]] if node_level else data[edge_type].time)[mine]
                eligible = times[times <= seed_time[tree]].sort(descending=True).values
                assert int(when[k]) >= int(eligible[min(fanouts[0], eligible.numel()) - 1])
    with pytest.raises(ValueError, match='seed times were given'):
        NeighborSampler(from_data(data, location), fanouts)._sample({'paper': seeds}, {'paper': seed_time})


@requires_cuda
def test_heterogeneous_temporal_graph_on_the_gpu_samples_as_on_the_cpu():
    data = time_graph(node_level=True)
    seeds = {'paper': torch.arange(16)}
    outs = [NeighborSampler(from_data(data, location), [2, 2], time_attr='time', seed=3)._sample(seeds)
            for location in ('cpu', 'cuda')]
    assert outs[1].node['paper'].is_cuda
    for edge_type in data.edge_types:
        assert torch.equal(outs[1].edge[edge_type].cpu(), outs[0].edge[edge_type])


@requires_stock_sampler
def test_heterogeneous_matches_stock_pyg_at_full_fanout():
    data = hetero_graph()
    seeds = ('paper', torch.arange(16))
    ours = next(iter(NeighborLoader(data, [-1, -1], neighbor_sampler=NeighborSampler(data, [-1, -1]),
                                    input_nodes=seeds, batch_size=16)))
    ref = next(iter(NeighborLoader(data, [-1, -1], input_nodes=seeds, batch_size=16)))
    for node_type in ('paper', 'author'):
        assert torch.equal(ours[node_type].n_id.sort().values, ref[node_type].n_id.sort().values)
    for edge_type in data.edge_types:
        assert torch.equal(ours[edge_type].e_id.sort().values, ref[edge_type].e_id.sort().values)
