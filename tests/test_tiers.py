"""Storage tiers (pyg_accel.data.tiers): one interface for a whole table in local memory,
a sharded table and a row cache in front of either; locations as two axes (memory and
distribution); and no code outside the tiers asking which kind a location or tier is."""
import re
from pathlib import Path

import pytest
import torch

import pyg_accel.data.tiers as tiers_module
from pyg_accel.data import FeatureStore, LocalTier, Location, RowCache, ShardedTier, resolve_location
from pyg_accel.data.shards import ShardedTensor
from pyg_accel.data.tiers import read_together

from conftest import HAS_CUDA


def test_locations_are_a_memory_and_a_distribution():
    cpu = resolve_location('cpu')
    assert (cpu.memory, cpu.sharded, cpu.kind, cpu.zero_copy) == ('cpu', False, 'cpu', False)
    sharded = resolve_location('sharded')
    assert sharded.sharded and sharded.kind == 'sharded'
    assert sharded.memory == ('cuda' if HAS_CUDA else 'cpu') and sharded.device.type == sharded.memory
    pinned = Location('pinned', torch.device('cuda'))  # (a description: nothing allocated)
    assert pinned.zero_copy and pinned.storage_device.type == 'cpu' and pinned.kind == 'pinned'
    with pytest.raises(ValueError, match='memory must be one of'):
        Location('sharded', torch.device('cpu'))
    with pytest.raises(ValueError, match='sharded blocks live in'):
        Location('pinned', torch.device('cuda'), sharded=True)
    with pytest.raises(ValueError, match='built collectively'):
        sharded.place(torch.ones(2))


def _tiers(table: torch.Tensor):
    """The same table in each tier this machine can make (a world of one for sharded)."""
    local = resolve_location('cpu').tier(table)
    sharded = ShardedTier(ShardedTensor.from_full(table, device='cpu'))
    cached = RowCache(resolve_location('cpu').tier(table.clone()), torch.tensor([7, 2, 9]), torch.device('cpu'))
    return {'local': local, 'sharded': sharded, 'cached': cached}


@pytest.mark.parametrize('kind', ['local', 'sharded', 'cached'])
def test_every_tier_answers_the_same_interface(kind):
    table = torch.randn(20, 3)
    tier = _tiers(table)[kind]
    assert tier.shape == (20, 3) and tier.dtype == torch.float32 and tier.element_size() == 4
    assert tier.nbytes == 20 * 3 * 4 and tier.device.type == 'cpu'
    assert torch.equal(torch.cat([t.cpu() for t in tier.tables()]), table)
    index = torch.tensor([9, 0, 19, 9, 2])
    assert torch.equal(tier.read(index), table[index])
    assert torch.equal(tier.read_slice(slice(3, 8)), table[3:8])
    assert torch.equal(tier.whole(), table)
    assert tier.read(torch.tensor([], dtype=torch.long)).shape == (0, 3)
    with pytest.raises(IndexError):
        tier.read(torch.tensor([20]))
    tier.write_rows(torch.tensor([2, 4]), torch.zeros(2, 3))
    expected = table.clone()
    expected[[2, 4]] = 0
    assert torch.equal(tier.read(torch.arange(20)), expected)  # (cached row 2 too)
    assert tier.uncached().read(torch.tensor([2])).abs().sum() == 0
    assert tier.shared == (kind == 'sharded')


def test_a_local_tier_keeps_the_callers_tensor_until_a_row_is_written():
    table = torch.randn(6, 2)
    tier = resolve_location('cpu').tier(table)
    assert tier.whole() is table and tier.borrowed
    tier.write_rows(torch.tensor([1]), torch.ones(1, 2))
    assert not torch.equal(table[1], torch.ones(2)) and torch.equal(tier.whole()[1], torch.ones(2))


def test_a_row_cache_counts_hits_and_refuses_a_shared_table():
    table = torch.arange(40.).view(20, 2)
    cache = RowCache(resolve_location('cpu').tier(table), torch.tensor([3, 5]), torch.device('cpu'))
    assert torch.equal(cache.read(torch.tensor([3, 4, 5, 3])), table[[3, 4, 5, 3]])
    assert cache.hit_rate() == 0.75 and cache.cache_nbytes == 2 * 2 * 4 + 20 * 4
    cache.reset_stats()
    assert cache.hit_rate() != cache.hit_rate()  # (nan: nothing read since)
    again = RowCache(cache, torch.tensor([1]), torch.device('cpu'))  # a cache of a cache fronts the table itself
    assert again.fallback is cache.fallback
    with pytest.raises(ValueError, match='written by other processes'):
        RowCache(_tiers(table)['sharded'], torch.tensor([1]), torch.device('cpu'))


def test_read_together_reads_the_local_tables_in_one_launch(monkeypatch):
    calls = []
    real = tiers_module.multi_gather
    monkeypatch.setattr(tiers_module, 'multi_gather', lambda tables, index, **kw: calls.append(len(tables)) or
                        real(tables, index, **kw))
    x, y = torch.randn(10, 4), torch.arange(10)
    tiers = [resolve_location('cpu').tier(x), _tiers(x)['sharded'], resolve_location('cpu').tier(y)]
    index = torch.tensor([1, 8, 8])
    got = read_together(tiers, index)
    assert calls == [2]
    assert torch.equal(got[0], x[index]) and torch.equal(got[1], x[index]) and torch.equal(got[2], y[index])


def test_a_feature_store_holds_one_tier_per_tensor():
    fs = FeatureStore('cpu')
    fs.put_tensor(torch.randn(8, 2), group_name=None, attr_name='x', index=None)
    assert isinstance(fs.tier('x'), LocalTier) and fs.row_cache('x') is None
    cache = fs.cache_rows('x', rows=torch.tensor([0]))
    assert fs.tier('x') is cache and fs.row_cache('x') is cache
    fs.put_tensor(torch.randn(8, 2), group_name=None, attr_name='x', index=None)  # a new tensor: no cache
    assert fs.row_cache('x') is None
    with pytest.raises(KeyError, match="no tensor for group None, attribute 'nope'"):
        fs.tier('nope')


def test_no_code_outside_the_tiers_asks_which_kind_a_location_or_table_is():
    """Storage decisions go through Location's axes and the Tier interface: nothing else
    in the package compares a location's kind or tests for a sharded table's type."""
    package = Path(__file__).resolve().parents[1] / 'pyg_accel'
    allowed = {package / 'data' / 'location.py', package / 'data' / 'tiers.py', package / 'data' / 'shards.py'}
    kind_test = re.compile(r"location\.kind\s*(==|!=|in\b|not in\b)|isinstance\([^)]*Sharded(Tensor|Tier)")
    offenders = [f'{path.relative_to(package)}:{number}: {line.strip()}'
                 for path in package.rglob('*.py') if path not in allowed
                 for number, line in enumerate(path.read_text().splitlines(), 1) if kind_test.search(line)]
    assert offenders == []


def test_slice_ids_are_the_slices_rows_without_every_row_id():
    from pyg_accel.data._rows import slice_ids
    for n in (0, 7, 50):
        for rows in (slice(2, 5), slice(-3, None), slice(10, 2), slice(None, None, 3), slice(None, 100), slice(3, -1, 2)):
            assert torch.equal(slice_ids(rows, n), torch.arange(n)[rows]), (n, rows)
    with pytest.raises(ValueError, match='step must be greater than zero'):
        slice_ids(slice(None, None, -1), 5)


def test_put_block_makes_a_sharded_table_from_this_process_block():
    """One process: its block is every row. The store reads it as put_tensor would have
    put it (float_dtype applied); a block of the wrong rows, or a store that is not
    sharded, is a clear error."""
    from pyg_accel.data import FeatureStore
    x = torch.randn(20, 3)
    fs = FeatureStore('sharded', float_dtype=torch.bfloat16)
    fs.put_block(x, 20, 'x')
    index = torch.tensor([0, 7, 19]).to(fs.location.device)
    assert torch.equal(fs.get_tensor(group_name=None, attr_name='x', index=index).cpu(), x.bfloat16()[index.cpu()])
    assert tuple(fs.get_tensor_size(group_name=None, attr_name='x')) == (20, 3)
    with pytest.raises(ValueError, match='put_block: process 0 of 1 must hold rows 0:21 of 21'):
        fs.put_block(x, 21, 'x')
    with pytest.raises(ValueError, match='put_block: a block of rows makes a sharded table'):
        FeatureStore('cpu').put_block(x, 20, 'x')
    with pytest.raises(TypeError, match='put_block'):
        fs.put_block([1, 2], 2, 'x')
