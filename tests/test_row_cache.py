"""FeatureStore.cache_rows: a GPU cache of hot rows in front of pinned features."""
import pytest
import torch
from torch_geometric.data import Data, TensorAttr

from pyg_accel.data import FeatureStore, from_data, rows_by_degree

from conftest import HAS_CUDA

# The cache's home: pinned host features read by the GPU; on a CPU-only machine the same
# logic runs with the cache in host memory.
LOCATION = 'pinned' if HAS_CUDA else 'cpu'


def store(n=1000, f=12):
    x = torch.randn(n, f)
    fs = FeatureStore(LOCATION)
    fs[None, 'x', None] = x
    fs[None, 'y', None] = torch.arange(n)
    return fs, x


def test_cached_reads_equal_uncached_and_count_hits():
    fs, x = store()
    hot = torch.arange(0, 1000, 4)  # every fourth row cached
    cache = fs.cache_rows('x', rows=hot)
    assert cache.num_cached == 250 and fs.row_cache('x') is cache
    index = torch.randint(0, 1000, (5000,))
    out = fs.get_tensor(None, 'x', index)
    assert torch.equal(out.cpu(), x[index])
    assert cache.hit_rate() == pytest.approx(float((index % 4 == 0).float().mean()))
    x_out, y_out = fs.multi_get_tensor([TensorAttr(None, 'x', index), TensorAttr(None, 'y', index)])
    assert torch.equal(x_out.cpu(), x[index]) and torch.equal(y_out.cpu(), index)
    cache.reset_stats()
    fs.get_tensor(None, 'x', hot[:10])
    assert cache.hit_rate() == 1.0


def test_row_updates_reach_the_cache_and_new_tensors_drop_it():
    fs, x = store()
    fs.cache_rows('x', rows=torch.tensor([5, 6, 7]))
    fs.put_tensor(torch.full((2, 12), 9.0), group_name=None, attr_name='x', index=torch.tensor([6, 100]))
    got = fs.get_tensor(None, 'x', torch.tensor([5, 6, 100])).cpu()
    assert torch.equal(got[0], x[5]) and bool((got[1:] == 9).all())
    fs[None, 'x', None] = torch.zeros(1000, 12)
    assert fs.row_cache('x') is None and bool((fs.get_tensor(None, 'x', torch.tensor([5])) == 0).all())


def test_cache_sizing_and_bad_input():
    fs, _ = store()
    assert fs.cache_rows('x', rows=torch.arange(1000), num_rows=10).num_cached == 10
    with pytest.raises(ValueError, match='rows to cache'):
        fs.cache_rows('x')
    with pytest.raises(IndexError, match='rows must lie'):
        fs.cache_rows('x', rows=torch.tensor([1000]))
    with pytest.raises(ValueError, match='distinct'):
        fs.cache_rows('x', rows=torch.tensor([1, 1]))
    with pytest.raises(KeyError):
        fs.cache_rows('nope', rows=torch.tensor([1]))
    if HAS_CUDA:
        assert fs.cache_rows('x', rows=torch.arange(1000), memory_fraction=0.001).num_cached > 0
    else:
        with pytest.raises(ValueError, match='memory_fraction'):
            fs.cache_rows('x', rows=torch.arange(1000), memory_fraction=0.5)


def test_rows_by_degree_ranks_hubs_first():
    src = torch.cat([torch.zeros(50, dtype=torch.long), torch.arange(100)])  # node 0: 51 out-edges
    dst = torch.cat([torch.arange(50), torch.arange(100).flip(0)])
    _, gs = from_data(Data(edge_index=torch.stack([src, dst]), num_nodes=100), 'cpu')
    ranked = rows_by_degree(gs)
    assert ranked[0] == 0 and ranked.numel() == 100 and rows_by_degree(gs, num_rows=5).numel() == 5


def test_rows_by_access_counts_every_read():
    from pyg_accel.data import rows_by_access
    ids = [torch.tensor([3, 1, 3]), torch.tensor([1, 3, 7]), torch.tensor([], dtype=torch.long)]
    ranked = rows_by_access(iter(ids), 10)
    assert ranked.tolist()[:3] == [3, 1, 7] and sorted(ranked.tolist()) == list(range(10))
    assert ranked.tolist()[3:] == [0, 2, 4, 5, 6, 8, 9]  # never read: by id
    assert rows_by_access(ids, 10, num_rows=2).tolist() == [3, 1]
    with pytest.raises(IndexError, match='lie in'):
        rows_by_access([torch.tensor([10])], 10)
    with pytest.raises(ValueError, match='no node ids'):
        rows_by_access([], 10)


@pytest.mark.parametrize('per_worker', [False, True])
def test_presampled_access_ranks_what_the_loader_reads(per_worker):
    """Pre-sampling through a loader's sampler (no features read) ranks the nodes its
    batches read: a cache of the top rows serves more reads than a random one."""
    from pyg_accel.data import presample_node_ids, rows_by_access
    from pyg_accel.datasets import load_dataset
    from pyg_accel.loader import NeighborLoader
    data = load_dataset('default').data
    fs, gs = from_data(data, LOCATION)
    loader = NeighborLoader((fs, gs), [5, 5], input_nodes=torch.arange(2000), batch_size=128, shuffle=True,
                            filter_per_worker=per_worker)
    ids = list(presample_node_ids(loader, num_batches=6, generator=torch.Generator().manual_seed(0)))
    assert len(ids) == 6 and all(int(t.max()) < data.num_nodes for t in ids)
    ranked = rows_by_access(ids, data.num_nodes)
    top = set(ranked[:1000].tolist())
    batch = next(iter(loader))
    hot = sum(n in top for n in batch.n_id.tolist()) / batch.n_id.numel()
    assert hot > 2 * 1000 / data.num_nodes  # far above a random 10% of the rows


def test_presampling_heterogeneous_batches_needs_and_uses_a_node_type():
    from conftest import paper_author_graph
    from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

    from pyg_accel.data import presample_node_ids, rows_by_access
    from pyg_accel.sampler import NeighborSampler
    data = paper_author_graph(80, 40, 300)
    data['paper', 'written_by', 'author'].edge_index = data['author', 'writes', 'paper'].edge_index.flip(0)
    fs, gs = from_data(data, 'cpu')
    loader = PyGNeighborLoader((fs, gs), [3, 2], neighbor_sampler=NeighborSampler((fs, gs), [3, 2]),
                               input_nodes=('paper', torch.arange(80)), batch_size=16)
    authors = list(presample_node_ids(loader, num_batches=3, node_type='author'))
    assert len(authors) == 3 and all(int(t.max()) < 40 for t in authors)
    assert rows_by_access(authors, 40).numel() == 40
    with pytest.raises(ValueError, match='node_type'):
        next(presample_node_ids(loader, num_batches=1))
