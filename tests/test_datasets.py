"""Synthetic graphs, the embedded default and OGB-format loading (offline)."""
import importlib.util

import pytest
import torch
import torch.nn.functional as F

from pyg_accel.datasets import (PRESETS, SyntheticSpec, load_dataset, load_default, load_hetero_dataset,
                                load_ogb_hetero_node_dataset, load_ogb_node_dataset, save_ogb_hetero_node_dataset,
                                save_ogb_node_dataset, synthetic_dataset, synthetic_graph, synthetic_mag,
                                synthetic_stores, synthetic_topology, SyntheticTopology)
from pyg_accel.datasets.hetero import MAG_EDGES, MAG_NUM_NODES

from conftest import requires_cuda


def degrees(data):
    return torch.bincount(data.edge_index[1], minlength=data.num_nodes)


def test_synthetic_is_reproducible_and_seeded():
    a, b = synthetic_dataset('tiny', seed=3), synthetic_dataset('tiny', seed=3)
    assert torch.equal(a.data.edge_index, b.data.edge_index) and torch.equal(a.data.x, b.data.x)
    c = synthetic_dataset('tiny', seed=4)
    assert not torch.equal(a.data.y, c.data.y)


def test_synthetic_structure():
    d = synthetic_dataset('small')
    spec = PRESETS['small']
    data = d.data
    assert data.num_nodes == spec.num_nodes and data.x.shape == (spec.num_nodes, spec.num_features)
    assert abs(data.num_edges - spec.num_edges) <= spec.num_edges * 0.01
    row, col = data.edge_index
    assert not bool((row == col).any())  # no self-loops
    keys = col * data.num_nodes + row
    assert bool((keys[1:] > keys[:-1]).all())  # coalesced: sorted, no duplicates
    assert torch.equal((row * data.num_nodes + col).sort().values, keys)  # undirected
    deg = degrees(data).float()
    assert deg.max() > 20 * deg.mean()  # heavy tail
    homophily = (data.y[row] == data.y[col]).float().mean()
    assert 0.5 < homophily < 0.95
    assert int(data.y.min()) >= 0 and int(data.y.max()) < d.num_classes
    ids = torch.cat(list(d.split.values()))
    assert ids.unique().numel() == ids.numel()  # disjoint splits
    assert d.split['train'].numel() == round(spec.split[0] * spec.num_nodes)


def test_synthetic_scale_and_errors():
    d = synthetic_dataset('arxiv', scale=0.01)
    assert d.data.num_nodes == int(169_343 * 0.01) and d.name == 'synthetic-arxiv@0.01'
    with pytest.raises(KeyError, match='unknown synthetic preset'):
        synthetic_dataset('huge')
    with pytest.raises(ValueError, match='invalid spec'):
        synthetic_graph(SyntheticSpec(1, 10, 4, 2))
    for bad in (0, -1, float('nan')):
        with pytest.raises(ValueError, match='scale must be a number > 0'):
            synthetic_dataset('arxiv', scale=bad)


# The edge counts of OGB's graphs as PyG users train on them: ogbn-products' 61,859,140
# undirected edges come back twice (OGB adds the inverse edges on load), ogbn-arxiv and
# ogbn-papers100M are made undirected (T.ToUndirected) by their users.
PYG_EDGE_COUNTS = {'arxiv': (169_343, 2_315_598), 'products': (2_449_029, 2 * 61_859_140),
                   'papers100M': (111_059_956, 2 * 1_615_685_872)}


@pytest.mark.parametrize('preset', sorted(PYG_EDGE_COUNTS))
def test_presets_have_the_edge_counts_pyg_trains_on(preset):
    num_nodes, num_edges = PYG_EDGE_COUNTS[preset]
    assert (PRESETS[preset].num_nodes, PRESETS[preset].num_edges) == (num_nodes, num_edges)


def test_products_preset_has_products_mean_degree():
    d = synthetic_dataset('products', scale=0.01)  # 24,490 nodes
    assert abs(d.data.num_edges - int(123_718_280 * 0.01)) <= 0.001 * 123_718_280 * 0.01
    assert d.data.num_edges / d.data.num_nodes == pytest.approx(50.5, rel=0.01)


def _fit(model_kind, d, epochs=60):
    from torch_geometric.nn import SAGEConv
    torch.manual_seed(0)
    x, y, ei, train = d.data.x, d.data.y, d.data.edge_index, d.split['train']
    if model_kind == 'gnn':
        convs = torch.nn.ModuleList([SAGEConv(x.shape[1], 32), SAGEConv(32, d.num_classes)])
        forward = lambda: convs[1](F.relu(convs[0](x, ei)), ei)  # noqa: E731
        params = convs.parameters()
    else:
        mlp = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 32), torch.nn.ReLU(), torch.nn.Linear(32, d.num_classes))
        forward = lambda: mlp(x)  # noqa: E731
        params = mlp.parameters()
    opt = torch.optim.Adam(params, lr=0.01)
    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(forward()[train], y[train]).backward()
        opt.step()
    with torch.no_grad():
        test = d.split['test']
        return float((forward()[test].argmax(-1) == y[test]).float().mean())


def test_gnn_learns_synthetic_task_better_than_mlp():
    d = synthetic_graph(SyntheticSpec(3000, 40_000, 32, 5), seed=1)
    gnn, mlp = _fit('gnn', d), _fit('mlp', d)
    assert gnn > mlp + 0.1 and gnn > 0.6


def test_embedded_default():
    d = load_default()
    assert d.data.num_nodes == 10_000 and d.num_features == 32 and d.num_classes == 8
    row, col = d.data.edge_index
    assert torch.equal((row * 10_000 + col).sort().values, (col * 10_000 + row).sort().values)
    assert sum(v.numel() for v in d.split.values()) == 10_000
    assert load_dataset('default').data.num_edges == d.data.num_edges


def test_load_dataset_names():
    assert load_dataset('synthetic-tiny').data.num_nodes == 1000
    with pytest.raises(ValueError, match='unknown dataset'):
        load_dataset('cora')



def test_load_dataset_device_auto():
    """'auto' picks the GPU exactly when one is visible."""
    expected = 'cuda' if torch.cuda.is_available() else 'cpu'
    assert load_dataset('synthetic-tiny', device='auto').data.x.device.type == expected
    assert load_dataset('default', device='auto').data.x.device.type == expected
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda"):
        load_dataset('default', device='gpu')


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the error on a machine without a GPU')
def test_load_dataset_refuses_a_gpu_that_is_not_there():
    """Asking for a GPU on a machine without one gets the clear error from_data gives,
    naming the argument, before any generator runs (PyTorch's own message blames
    missing CUDA libraries)."""
    for load in (lambda: load_dataset('default', device='cuda'),
                 lambda: load_dataset('synthetic-tiny', device='cuda:0'),
                 lambda: load_hetero_dataset('synthetic-mag', device='cuda'),
                 lambda: synthetic_topology('tiny', device='cuda')):
        with pytest.raises(RuntimeError, match=r"needs a CUDA GPU and none is visible; use device='cpu'"):
            load()


def test_large_synthetic_graph_on_the_cpu_says_it_is_slow(monkeypatch):
    import pyg_accel.datasets.synthetic as synthetic
    monkeypatch.setattr(synthetic, 'SLOW_ON_CPU_EDGES', 5_000)
    with pytest.warns(UserWarning, match='on the CPU takes minutes'):
        synthetic_dataset('tiny', device='cpu')

# OGB format ##################################################################

# (a marker, not a module-level importorskip: that would skip every test in this file)
needs_ogb = pytest.mark.skipif(importlib.util.find_spec('ogb') is None, reason="the 'ogb' extra is not installed")


@needs_ogb
@pytest.mark.parametrize('name', ['ogbn-arxiv', 'ogbn-products', 'ogbn-papers100M'])
def test_ogb_round_trip(tmp_path, name):
    d = synthetic_dataset('tiny', seed=2)
    data = d.data
    if name == 'ogbn-products':  # OGB stores one direction and adds the inverse on load
        row, col = data.edge_index
        data = data.clone()
        data.edge_index = data.edge_index[:, row < col]
    if name == 'ogbn-papers100M':  # mostly unlabelled
        data = data.clone()
        data.y = data.y.clone()
        data.y[::3] = -1
    d = type(d)(d.name, data, d.split, d.num_classes)
    save_ogb_node_dataset(d, name, tmp_path)
    loaded = load_ogb_node_dataset(name, tmp_path)
    expected = data.edge_index
    if name == 'ogbn-products':  # OGB interleaves each edge with its inverse
        expected = torch.stack([expected, expected.flip(0)], dim=2).reshape(2, -1)
    assert torch.equal(loaded.data.edge_index, expected)
    assert torch.allclose(loaded.data.x, data.x, atol=1e-6)
    assert torch.equal(loaded.data.y, data.y)
    for key in ('train', 'valid', 'test'):
        assert torch.equal(loaded.split[key], d.split[key])
    assert (tmp_path / name.replace('-', '_') / 'processed').is_dir()
    again = load_ogb_node_dataset(name, tmp_path)  # from the processed cache
    assert torch.equal(again.data.edge_index, loaded.data.edge_index) and torch.equal(again.data.y, loaded.data.y)
    assert load_dataset(name, root=tmp_path).num_classes == again.num_classes


def _write_csv(path, array):
    import pandas as pd
    pd.DataFrame(array).to_csv(path, header=False, index=False, compression='gzip')


@needs_ogb
def test_ogb_processed_cache_follows_every_file_it_was_built_from(tmp_path):
    """Edited split or feature files, and a raw file put back with an older time (as
    unzipping an archive does), are read again; an unreadable cache is rebuilt."""
    import os
    d = synthetic_dataset('tiny', seed=2)
    folder = save_ogb_node_dataset(d, 'ogbn-arxiv', tmp_path)
    load_ogb_node_dataset('ogbn-arxiv', tmp_path)
    train = folder / 'split' / 'time' / 'train.csv.gz'
    _write_csv(train, d.split['train'][:5].numpy().reshape(-1, 1))
    assert torch.equal(load_ogb_node_dataset('ogbn-arxiv', tmp_path).split['train'], d.split['train'][:5])
    feat = folder / 'raw' / 'node-feat.csv.gz'
    _write_csv(feat, (d.data.x * 2).numpy())
    assert torch.allclose(load_ogb_node_dataset('ogbn-arxiv', tmp_path).data.x, d.data.x * 2, atol=1e-5)
    _write_csv(feat, d.data.x.numpy())
    old = os.stat(feat).st_mtime - 3600
    os.utime(feat, (old, old))  # older than the cache, other contents than it holds
    assert torch.allclose(load_ogb_node_dataset('ogbn-arxiv', tmp_path).data.x, d.data.x, atol=1e-5)
    cached = folder / 'processed' / 'pyg_accel_processed.pt'
    cached.write_bytes(cached.read_bytes()[:100])  # cut short
    with pytest.warns(UserWarning, match='rebuilding'):
        again = load_ogb_node_dataset('ogbn-arxiv', tmp_path)
    assert torch.allclose(again.data.x, d.data.x, atol=1e-5)


@needs_ogb
def test_ogb_files_are_cross_checked_and_named_in_errors(tmp_path):
    d = synthetic_dataset('tiny', seed=2)
    raw = save_ogb_node_dataset(d, 'ogbn-arxiv', tmp_path) / 'raw'
    split = raw.parent / 'split' / 'time'
    load = lambda: load_ogb_node_dataset('ogbn-arxiv', tmp_path, cache=False)  # noqa: E731
    _write_csv(raw / 'num-edge-list.csv.gz', [[d.data.edge_index.size(1) - 10]])
    with pytest.raises(ValueError, match='declares .* edges, the edge file holds'):
        load()
    _write_csv(raw / 'num-edge-list.csv.gz', [[d.data.edge_index.size(1)]])
    _write_csv(split / 'valid.csv.gz', d.split['valid'].double().numpy().reshape(-1, 1) + 0.5)
    with pytest.raises(ValueError, match='valid.csv.gz: node ids must be whole numbers'):
        load()
    _write_csv(split / 'valid.csv.gz', d.split['valid'].numpy().reshape(-1, 1))
    _write_csv(raw / 'node-label.csv.gz', torch.stack([d.data.y, d.data.y], 1).numpy())
    with pytest.raises(ValueError, match=r'node-label.csv.gz: expected one label per node'):
        load()
    (raw / 'node-label.csv.gz').write_bytes(b'not gzip at all')
    with pytest.raises(ValueError, match='node-label.csv.gz'):
        load()


@needs_ogb
def test_ogb_missing_files_message(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'never downloads.*products.zip.*--root'):
        load_ogb_node_dataset('ogbn-products', tmp_path)
    with pytest.raises(ValueError, match='unknown OGB node dataset'):
        load_ogb_node_dataset('ogbn-nothing', tmp_path)


@needs_ogb
def test_ogb_hetero_round_trip(tmp_path):
    """A heterogeneous dataset written in OGB's raw format (a folder per relation and per
    node type) reads back equal, from the CSVs and then from the processed cache."""
    d = synthetic_mag(scale=0.002, seed=1)
    save_ogb_hetero_node_dataset(d, 'ogbn-mag', tmp_path)
    for loaded in (load_ogb_hetero_node_dataset('ogbn-mag', tmp_path), load_hetero_dataset('ogbn-mag', tmp_path)):
        assert loaded.target == 'paper' and loaded.num_classes == 349  # (OGB's meta for ogbn-mag)
        assert sorted(loaded.data.edge_types) == sorted(d.data.edge_types)
        for t in d.data.node_types:
            assert loaded.data[t].num_nodes == d.data[t].num_nodes
            assert ('x' in loaded.data[t]) == (t == 'paper')
        for et in d.data.edge_types:
            assert torch.equal(loaded.data[et].edge_index, d.data[et].edge_index), et
        assert torch.allclose(loaded.data['paper'].x, d.data['paper'].x, atol=1e-6)
        assert torch.equal(loaded.data['paper'].y, d.data['paper'].y)
        for key in ('train', 'valid', 'test'):
            assert torch.equal(loaded.split[key], d.split[key])
    assert (tmp_path / 'ogbn_mag' / 'processed').is_dir()


@needs_ogb
def test_ogb_hetero_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'never downloads.*mag.zip.*--root'):
        load_ogb_hetero_node_dataset('ogbn-mag', tmp_path)
    with pytest.raises(ValueError, match='load_ogb_hetero_node_dataset'):
        load_ogb_node_dataset('ogbn-mag', tmp_path)
    with pytest.raises(ValueError, match='homogeneous'):
        load_ogb_hetero_node_dataset('ogbn-arxiv', tmp_path)


def test_synthetic_mag_schema_sizes_and_seed():
    d = synthetic_mag(scale=0.005, seed=4)
    data = d.data
    assert sorted(data.edge_types) == sorted(MAG_EDGES) and sorted(data.node_types) == sorted(MAG_NUM_NODES)
    for t, n in MAG_NUM_NODES.items():
        assert data[t].num_nodes == max(int(n * 0.005), 10)
    for (src, rel, dst), count in MAG_EDGES.items():
        ei = data[src, rel, dst].edge_index
        assert ei.dtype == torch.long and 0.3 * count * 0.005 < ei.shape[1] <= count * 0.005  # (duplicates dropped)
        assert int(ei[0].max()) < data[src].num_nodes and int(ei[1].max()) < data[dst].num_nodes
        key = ei[0] * data[dst].num_nodes + ei[1]
        assert bool((key[1:] > key[:-1]).all())  # sorted, no duplicates
    assert not bool((data['paper', 'cites', 'paper'].edge_index.diff(dim=0) == 0).any())  # no self-citations
    x, y = data['paper'].x, data['paper'].y
    assert x.shape == (data['paper'].num_nodes, 128) and int(y.min()) >= 0 and int(y.max()) < d.num_classes
    ids = torch.cat([d.split[k] for k in ('train', 'valid', 'test')])
    assert ids.unique().numel() == ids.numel() <= data['paper'].num_nodes  # disjoint
    assert 0.8 < d.split['train'].numel() / data['paper'].num_nodes < 0.9
    again = synthetic_mag(scale=0.005, seed=4)
    assert torch.equal(again.data['author', 'writes', 'paper'].edge_index, data['author', 'writes', 'paper'].edge_index)
    assert torch.equal(again.data['paper'].x, x)
    other = synthetic_mag(scale=0.005, seed=5)
    assert not torch.equal(other.data['paper'].y, y)
    with pytest.raises(ValueError, match='scale'):
        synthetic_mag(scale=0)
    with pytest.raises(ValueError, match='synthetic-mag'):
        load_hetero_dataset('mag')
    with pytest.raises(ValueError, match='load_hetero_dataset'):
        load_dataset('synthetic-mag')


def test_synthetic_mag_authors_tell_a_papers_class():
    """The schema carries the task: a paper's class agrees with its authors' other papers'
    classes far more often than chance, while its own features alone say little."""
    d = synthetic_mag(scale=0.01, seed=0)
    y = d.data['paper'].y
    author, paper = d.data['author', 'writes', 'paper'].edge_index
    # for each writes edge, another paper of the same author (the next edge of that author)
    order = torch.argsort(author, stable=True)
    a, p = author[order], paper[order]
    same_author = a[1:] == a[:-1]
    agree = (y[p[1:]] == y[p[:-1]])[same_author].float().mean()
    assert agree > 0.2 > 5 / d.num_classes  # (0.33 here; chance is 1 / 32)


def _check_csc(topo):
    colptr, row, n = topo.colptr, topo.row, topo.num_nodes
    assert colptr.dtype == row.dtype == torch.long
    assert int(colptr[0]) == 0 and int(colptr[-1]) == row.numel()
    assert bool((colptr[1:] >= colptr[:-1]).all())
    assert int(row.min()) >= 0 and int(row.max()) < n
    col = torch.repeat_interleave(torch.arange(n), colptr.diff())
    assert not bool((row == col).any())  # no self-loops
    key = col * n + row
    assert bool((key[1:] > key[:-1]).all())  # rows sorted within columns, no duplicates
    return col


def test_synthetic_topology_structure():
    spec = PRESETS['small']
    topo = synthetic_topology('small', seed=1)
    assert topo.num_nodes == spec.num_nodes and topo.name == 'synthetic-small-topology'
    col = _check_csc(topo)
    assert abs(topo.num_edges - spec.num_edges) <= 0.03 * spec.num_edges  # (self-loops, duplicates dropped)
    in_deg = torch.bincount(col, minlength=topo.num_nodes).float()
    out_deg = torch.bincount(topo.row, minlength=topo.num_nodes).float()
    assert in_deg.max() > 20 * in_deg.mean() and out_deg.max() > 20 * out_deg.mean()  # heavy tails both ways
    assert topo.train.numel() == round(spec.split[0] * spec.num_nodes)
    assert bool((topo.train[1:] > topo.train[:-1]).all()) and int(topo.train.max()) < topo.num_nodes
    assert 'synthetic-small-topology' in repr(topo)


def test_synthetic_topology_chunks_seed_and_errors():
    a, b = synthetic_topology('small', seed=2), synthetic_topology('small', seed=2)
    assert torch.equal(a.row, b.row) and torch.equal(a.colptr, b.colptr) and torch.equal(a.train, b.train)
    assert not torch.equal(synthetic_topology('small', seed=3).colptr, a.colptr)
    chunked = synthetic_topology('small', scale=0.5, chunk_edges=10_000, progress=True)  # ~20 chunks
    assert chunked.name == 'synthetic-small@0.5-topology'
    _check_csc(chunked)
    assert abs(chunked.num_edges - PRESETS['small'].num_edges / 2) <= 0.03 * PRESETS['small'].num_edges / 2
    tiny = synthetic_topology('tiny', scale=1e-6)  # 2 nodes: only self-loops possible, so no edges
    assert tiny.num_nodes == 2 and tiny.num_edges == 0
    with pytest.raises(KeyError, match='unknown synthetic preset'):
        synthetic_topology('huge')
    with pytest.raises(ValueError, match='scale must be a number > 0'):
        synthetic_topology('small', scale=0)
    with pytest.raises(ValueError, match='chunk_edges must be a positive int'):
        synthetic_topology('small', chunk_edges=0)


def test_synthetic_stores_holds_a_learnable_task():
    from pyg_accel.loader import NeighborLoader
    spec = PRESETS['small']
    d = synthetic_stores('small', seed=1)
    assert d.num_nodes == spec.num_nodes and d.num_features == spec.num_features and d.name == 'synthetic-small-stored'
    assert abs(d.num_edges - spec.num_edges) <= 0.06 * spec.num_edges
    row, colptr, _ = d.graph_store.csc()
    col = _check_csc(SyntheticTopology('t', colptr, row, d.split['train']))
    y = d.feature_store.get_tensor(group_name=None, attr_name='y', index=None)
    x = d.feature_store.get_tensor(group_name=None, attr_name='x', index=None)
    assert x.shape == (spec.num_nodes, spec.num_features) and x.dtype == torch.float32
    assert 0.5 < float((y[row] == y[col]).float().mean()) < 0.95  # homophilous, as synthetic_graph
    in_deg = torch.bincount(col, minlength=d.num_nodes).float()
    assert in_deg.max() > 20 * in_deg.mean()
    ids = torch.cat(list(d.split.values()))
    assert ids.unique().numel() == ids.numel() and d.split['train'].numel() == round(spec.split[0] * spec.num_nodes)
    again = synthetic_stores('small', seed=1)
    assert torch.equal(again.graph_store.csc()[0], row)
    assert torch.equal(again.feature_store.get_tensor(group_name=None, attr_name='x', index=None), x)
    batch = next(iter(NeighborLoader((d.feature_store, d.graph_store), [5, 5], input_nodes=d.split['train'],
                                     batch_size=64)))
    assert batch.x.shape[1] == spec.num_features and batch.y.numel() == batch.num_nodes
    assert 'synthetic-small-stored' in repr(d)
    with pytest.raises(KeyError, match='unknown synthetic preset'):
        synthetic_stores('huge')


@requires_cuda
def test_synthetic_stores_writes_features_into_pinned_memory():
    d = synthetic_stores('small', scale=0.5, device='cuda', feature_location='pinned', graph_location='cuda')
    x = d.feature_store.get_tensor(group_name=None, attr_name='x', index=None)
    assert x.is_pinned() and not x.is_cuda and d.graph_store.csc()[0].is_cuda
    cpu = synthetic_stores('small', scale=0.5, device='cuda')  # same generator, stores on the CPU
    assert torch.equal(cpu.feature_store.get_tensor(group_name=None, attr_name='x', index=None), x)
