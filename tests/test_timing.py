"""pyg_accel.loader.StageTimer: per-stage epoch time without a sync per batch."""
import time

import pytest
import torch
from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

from pyg_accel.data import from_data
from pyg_accel.datasets import load_dataset
from pyg_accel.loader import NeighborLoader, StageTimer

from conftest import assert_freed_without_gc, locations


@pytest.fixture(scope='module')
def data():
    return load_dataset('default').data


@pytest.mark.parametrize('location', locations())
@pytest.mark.parametrize('pipeline', [False, True])
def test_instrumented_loader_times_sampling_and_gathering(data, location, pipeline):
    fs, gs = from_data(data, location)
    loader = NeighborLoader((fs, gs), [5, 5], input_nodes=torch.arange(512), batch_size=128, pipeline=pipeline)
    timer = StageTimer(fs.device)
    assert timer.instrument(loader) is loader
    batches = 0
    for batch in loader:
        with timer.stage('compute'):
            (batch.x * 2).sum()
        batches += 1
    assert batches == 4
    stages = timer.summary()
    assert set(stages) == {'sampling', 'gathering', 'compute'} and all(v > 0 for v in stages.values())
    assert timer.summary() == {}  # reset
    ids = [b.n_id.tolist() for b in loader]  # instrumenting changes no batch
    plain = NeighborLoader((fs, gs), [5, 5], input_nodes=torch.arange(512), batch_size=128, pipeline=pipeline)
    assert len(ids) == 4 and all(len(i) > 128 for i in ids) and len([b for b in plain]) == 4


def test_host_stages_count_wall_time():
    timer = StageTimer('cpu')
    with timer.stage('compute'):
        time.sleep(0.02)
    with timer.stage('compute'):
        time.sleep(0.01)
    assert 0.03 <= timer.summary()['compute'] < 0.5


def test_stock_pyg_loader_can_be_instrumented_and_others_cannot(data):
    timer = StageTimer()
    fs, gs = from_data(data, 'cpu')
    from pyg_accel.sampler import NeighborSampler
    loader = PyGNeighborLoader((fs, gs), [3], input_nodes=torch.arange(64), batch_size=32,
                               neighbor_sampler=NeighborSampler((fs, gs), [3]))
    timer.instrument(loader)
    assert len(list(loader)) == 2 and set(timer.summary()) == {'sampling', 'gathering'}
    with pytest.raises(TypeError, match='filter_fn'):
        timer.instrument(torch.utils.data.DataLoader(range(4)))
    with pytest.raises(ValueError, match='DataLoader worker processes'):  # (their stages run elsewhere)
        timer.instrument(PyGNeighborLoader((fs, gs), [3], input_nodes=torch.arange(64), batch_size=32,
                                           neighbor_sampler=NeighborSampler((fs, gs), [3]), num_workers=1))


def test_an_instrumented_loader_is_freed_at_once(data):
    """The timed wrappers reach the loader through a weak reference: dropping an
    instrumented loader of ours frees it (and its stores) without a garbage collection."""
    fs, gs = from_data(data, 'cpu')
    loader = StageTimer().instrument(NeighborLoader((fs, gs), [3], input_nodes=torch.arange(64), batch_size=32))
    assert len(list(loader)) == 2
    objects = [loader, fs, gs]
    del loader, fs, gs
    assert_freed_without_gc(objects)
