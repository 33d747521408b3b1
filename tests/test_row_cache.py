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
