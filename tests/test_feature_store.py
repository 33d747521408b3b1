"""pyg_accel.data.FeatureStore: PyG's FeatureStore contract on every storage tier."""
import numpy as np
import pytest
import torch

import pyg_accel.data.tiers as tiers_module
from pyg_accel.data import FeatureStore

from conftest import HAS_CUDA, locations, requires_cuda


@pytest.fixture(params=locations())
def store(request):
    return FeatureStore(request.param)


def filled(store, n=100):
    x, y = torch.randn(n, 16), torch.randint(0, 5, (n,))
    store[None, 'x', None] = x
    store.put_tensor(y, group_name=None, attr_name='y', index=None)
    return x, y


def test_roundtrip_and_location(store):
    x, y = filled(store)
    got = store.get_tensor(None, 'x', None)
    assert torch.equal(got.cpu(), x)
    if store.location.kind == 'pinned':
        assert got.is_pinned() and not got.is_cuda
    assert got.device.type == store.location.storage_device.type
    assert store.get_tensor_size(None, 'x') == (100, 16)
    assert store.get_tensor_size(group_name=None, attr_name='x', index=torch.arange(7)) == (7, 16)


@pytest.mark.parametrize('index_dtype', [torch.int32, torch.int64])
def test_get_with_tensor_index(store, index_dtype):
    x, _ = filled(store)
    for idx_device in ['cpu'] + (['cuda'] if HAS_CUDA else []):
        index = torch.randint(0, 100, (40,), dtype=index_dtype, device=idx_device)
        out = store.get_tensor(None, 'x', index)
        assert out.device.type == store.device.type
        assert torch.equal(out.cpu(), x[index.long().cpu()])


def test_get_with_other_index_kinds(store):
    x, _ = filled(store)
    assert torch.equal(store[None, 'x', 3:9].cpu(), x[3:9])
    assert torch.equal(store.get_tensor(None, 'x', 5).cpu(), x[5:6])
    mask = torch.rand(100) < 0.3
    assert torch.equal(store.get_tensor(None, 'x', mask).cpu(), x[mask])
    # (A numpy index cannot pass PyG's own TensorAttr.is_fully_specified(), so none here.)


def test_multi_get_shares_one_gather(store, monkeypatch):
    x, y = filled(store)
    calls = []
    real = tiers_module.multi_gather
    monkeypatch.setattr(tiers_module, 'multi_gather', lambda tables, index, **kw: calls.append(len(tables)) or
                        real(tables, index, **kw))
    index = torch.randint(0, 100, (64,))
    attrs = store.get_all_tensor_attrs()
    for attr in attrs:
        attr.index = index
    outs = store.multi_get_tensor(attrs)
    assert calls == [2]
    by_name = {a.attr_name: o for a, o in zip(attrs, outs)}
    assert torch.equal(by_name['x'].cpu(), x[index]) and torch.equal(by_name['y'].cpu(), y[index])


def test_all_tensor_attrs_are_fresh(store):
    filled(store)
    attrs = store.get_all_tensor_attrs()
    assert {(a.group_name, a.attr_name) for a in attrs} == {(None, 'x'), (None, 'y')}
    assert all(not a.is_set('index') for a in attrs)
    attrs[0].index = torch.arange(3)
    assert all(not a.is_set('index') for a in store.get_all_tensor_attrs())


def test_heterogeneous_groups(store):
    paper, author = torch.randn(30, 4), torch.randn(10, 2)
    store['paper', 'x', None] = paper
    store['author', 'x', None] = author
    store[('paper', 'cites', 'paper'), 'weight', None] = torch.rand(50)
    index = torch.tensor([9, 0, 3])
    assert torch.equal(store['author', 'x', index].cpu(), author[index])
    assert torch.equal(store['paper'].x[index].cpu(), paper[index])
    assert len(store.get_all_tensor_attrs()) == 3


def test_partial_put_updates_rows(store):
    x, _ = filled(store)
    new = torch.randn(3, 16)
    store.put_tensor(new, group_name=None, attr_name='x', index=torch.tensor([1, 5, 7]))
    expected = x.clone()
    expected[[1, 5, 7]] = new
    assert torch.equal(store.get_tensor(None, 'x', None).cpu(), expected)


def test_update_tensor_rows_or_whole(store):
    """PyG's default update_tensor removes then re-puts: with an index that would drop
    the tensor. Ours writes the rows in place, or replaces the whole tensor."""
    x, _ = filled(store)
    new = torch.randn(2, 16)
    assert store.update_tensor(new, group_name=None, attr_name='x', index=torch.tensor([0, 9]))
    expected = x.clone()
    expected[[0, 9]] = new
    assert torch.equal(store.get_tensor(None, 'x', None).cpu(), expected)
    whole = torch.randn(4, 16)
    assert store.update_tensor(whole, group_name=None, attr_name='x')
    assert torch.equal(store.get_tensor(None, 'x', None).cpu(), whole)
    with pytest.raises(ValueError, match='expected shape'):
        store.update_tensor(torch.randn(3, 16), group_name=None, attr_name='x', index=torch.tensor([0]))


def test_remove(store):
    filled(store)
    assert store.remove_tensor(None, 'x', None)
    assert not store.remove_tensor(None, 'x', None)
    with pytest.raises(KeyError, match="'x'"):
        store.get_tensor(None, 'x', None)
    with pytest.raises(ValueError, match='whole tensors'):
        store.remove_tensor(None, 'y', torch.arange(2))


def test_bad_puts_leave_store_unchanged(store):
    x, _ = filled(store)
    before = store.get_tensor(None, 'x', None).cpu().clone()
    with pytest.raises(TypeError, match='dtype mismatch'):
        store.put_tensor(torch.randn(2, 16).double(), group_name=None, attr_name='x', index=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='expected shape'):
        store.put_tensor(torch.randn(2, 15), group_name=None, attr_name='x', index=torch.tensor([0, 1]))
    with pytest.raises(IndexError, match='out of range'):
        store.put_tensor(torch.randn(2, 16), group_name=None, attr_name='x', index=torch.tensor([0, 100]))
    with pytest.raises(ValueError, match='0-d'):
        store.put_tensor(torch.tensor(1.0), group_name=None, attr_name='s', index=None)
    with pytest.raises(TypeError, match='torch.Tensor or numpy'):
        store.put_tensor([1, 2], group_name=None, attr_name='l', index=None)
    assert torch.equal(store.get_tensor(None, 'x', None).cpu(), before)
    assert {a.attr_name for a in store.get_all_tensor_attrs()} == {'x', 'y'}


def test_bad_gets(store):
    filled(store)
    with pytest.raises(KeyError, match="stored: None/'x'"):
        store.get_tensor(None, 'nope', torch.arange(2))
    with pytest.raises(IndexError, match='out of range'):
        store.get_tensor(None, 'x', torch.tensor([100]))
    with pytest.raises(TypeError, match='int64 or int32'):
        store.get_tensor(None, 'x', torch.tensor([1.0]))
    with pytest.raises(IndexError, match='mask'):
        store.get_tensor(None, 'x', torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match='not fully specified'):
        store.get_tensor(attr_name='x')


def test_numpy_put():
    store = FeatureStore('cpu')
    store[None, 'x', None] = np.arange(12, dtype=np.float32).reshape(6, 2)
    assert torch.equal(store[None, 'x', torch.tensor([5])], torch.tensor([[10.0, 11.0]]))


def test_location_errors():
    with pytest.raises(ValueError, match='unknown location'):
        FeatureStore('disk')
    if not HAS_CUDA:
        for loc in ('cuda', 'pinned'):
            with pytest.raises(RuntimeError, match='needs a CUDA GPU'):
                FeatureStore(loc)
    assert FeatureStore('auto').location.kind == ('cuda' if HAS_CUDA else 'cpu')
    # 'auto' with a device: where the device is (a CPU store on a GPU machine too)
    assert FeatureStore('auto', device='cpu').location.kind == 'cpu'
    assert FeatureStore('auto', device=torch.device('cpu')).location.kind == 'cpu'
    if HAS_CUDA:
        assert FeatureStore('auto', device=0).location.device == torch.device('cuda', 0)
    else:
        with pytest.raises(RuntimeError, match='needs a CUDA GPU'):
            FeatureStore('auto', device='cuda')
    with pytest.raises(ValueError, match="device must be 'cpu' or a CUDA device, got 'meta'"):
        FeatureStore('auto', device='meta')
    for kind in locations():  # an empty tensor in each tier, to be filled in place
        loc = FeatureStore(kind).location
        block = loc.empty((5, 3), torch.float16)
        assert block.shape == (5, 3) and block.dtype == torch.float16
        assert block.device.type == loc.storage_device.type and block.is_pinned() == (loc.kind == 'pinned')


@requires_cuda
def test_pinned_tier_gathers_on_gpu_from_host_memory():
    store = FeatureStore('pinned')
    x = torch.randn(1000, 100)
    store[None, 'x', None] = x
    held = store.get_tensor(None, 'x', None)
    assert held.is_pinned() and held.device.type == 'cpu'
    index = torch.randint(0, 1000, (500,), device='cuda')
    out = store[None, 'x', index]
    assert out.is_cuda and torch.equal(out.cpu(), x[index.cpu()])
    on_gpu = torch.randn(300, 7, device='cuda')[:, 1:5]  # a GPU tensor goes into pinned memory in one copy
    store[None, 'z', None] = on_gpu
    held = store.get_tensor(None, 'z', None)
    assert held.is_pinned() and held.device.type == 'cpu' and torch.equal(held, on_gpu.cpu())


def test_pyg_reference_store_semantics(store):
    """As PyG's reference FeatureStore (its test_feature_store.py): a new attribute may be
    put by rows; an update replaces what the store holds and leaves the caller's tensor
    alone; an int index is one row, in get_tensor_size as in get_tensor."""
    from torch_geometric.data import TensorAttr
    tensor = torch.tensor([[0, 0, 0], [1, 1, 1], [2, 2, 2]])
    assert store.put_tensor(tensor, TensorAttr('A', 'feat', index=torch.tensor([0, 1, 2])))
    assert torch.equal(store.get_tensor('A', 'feat', index=None).cpu(), tensor)
    assert torch.equal(store.get_tensor('A', 'feat', index=torch.tensor([0, 2])).cpu(), tensor[[0, 2]])
    x = torch.randn(10, 4)
    kept = x.clone()
    store.put_tensor(x, group_name='B', attr_name='x', index=None)
    store.update_tensor(torch.zeros(2, 4), group_name='B', attr_name='x', index=torch.tensor([1, 3]))
    assert torch.equal(x, kept)  # the caller's tensor is unchanged
    want = kept.clone()
    want[[1, 3]] = 0
    assert torch.equal(store.get_tensor('B', 'x', index=None).cpu(), want)
    assert tuple(store.get_tensor('B', 'x', index=3).shape) == (1, 4)
    assert tuple(store.get_tensor_size('B', 'x', index=3)) == (1, 4)


@pytest.mark.parametrize('location', locations())
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_16_bit_storage(location, dtype):
    """float_dtype: floating tensors stored (and read) in 16 bits, half the bytes; labels
    and masks as put; row updates converted; a batch from the loader carries them."""
    from pyg_accel.data import from_data
    from pyg_accel.loader import NeighborLoader
    from conftest import community_data
    store = FeatureStore(location, float_dtype=dtype)
    x, y = filled(store)
    store[None, 'mask', None] = torch.arange(100) % 2 == 0
    got = store.get_tensor(None, 'x', index=torch.tensor([3, 1, 4]))
    assert got.dtype == dtype and torch.equal(got.cpu(), x[[3, 1, 4]].to(dtype))
    assert store.get_tensor(None, 'y', None).dtype == torch.int64
    assert store.get_tensor(None, 'mask', None).dtype == torch.bool
    assert store.get_tensor(None, 'x', None).nbytes == x.nbytes // 2
    store.put_tensor(torch.ones(2, 16), group_name=None, attr_name='x', index=torch.tensor([0, 5]))  # fp32 rows
    assert torch.equal(store.get_tensor(None, 'x', index=torch.tensor([5])).cpu(), torch.ones(1, 16, dtype=dtype))
    fs, gs = from_data(community_data(), location, float_dtype=dtype)
    batch = next(iter(NeighborLoader((fs, gs), [3, 2], input_nodes=torch.arange(20), batch_size=20)))
    assert batch.x.dtype == dtype and batch.y.dtype == torch.int64


def test_16_bit_features_train_under_autocast():
    """bf16 features with fp32 parameters: the model runs under autocast (here through
    TrainStep(amp_dtype=...)) and learns."""
    import pyg_accel.nn.models as accel_models
    from pyg_accel.data import from_data
    from pyg_accel.loader import NeighborLoader
    from pyg_accel.training import TrainStep
    from conftest import community_data
    fs, gs = from_data(community_data(), 'cpu', float_dtype=torch.bfloat16)
    loader = NeighborLoader((fs, gs), [5, 5], input_nodes=torch.arange(600), batch_size=64, shuffle=True)
    torch.manual_seed(0)
    model = accel_models.GraphSAGE(16, 32, 2, 4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    step = TrainStep(model, opt, amp_dtype=torch.bfloat16)
    losses = [torch.stack([step(batch) for batch in loader]).mean() for _ in range(4)]
    assert losses[-1] < 0.7 * losses[0]
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_bad_float_dtype_is_a_clear_error():
    with pytest.raises(TypeError, match='float_dtype'):
        FeatureStore('cpu', float_dtype=torch.int32)
