"""Started samples (start_neighbor_sample, start_hetero_neighbor_sample, the *_start ops):
the samples the plain ops give, random keys drawn in the order started, a GPU start
that enqueues without waiting, samples of one plan finished in any order, errors raised
where the result is read, and loaders that start each batch's sample ahead."""
import warnings

import pytest
import torch
from torch_geometric.data import HeteroData

from pyg_accel.data import from_data
from pyg_accel.loader import NeighborLoader
from pyg_accel.loader.store_batches import StoreBatches
from pyg_accel.ops import Pending
from pyg_accel.ops._library import ops
from pyg_accel.ops.sampling import (hetero_neighbor_sample, neighbor_sample, start_hetero_neighbor_sample,
                                    start_neighbor_sample)

from conftest import community_data, cuda_sampling_built, requires_cuda

requires_cuda_sampling = pytest.mark.skipif(not cuda_sampling_built(), reason='needs the CUDA sampler')


def random_graph(num_nodes: int, num_edges: int, seed: int = 0, device='cpu'):
    """A random CSC graph: ``(colptr, row)``."""
    generator = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=generator).sort().values
    row = torch.randint(0, num_nodes, (num_edges,), generator=generator)
    colptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    colptr[1:] = torch.bincount(dst, minlength=num_nodes).cumsum(0)
    return colptr.to(device), row.to(device)


def hetero_inputs(device):
    types = {('a', 'to', 'b'): random_graph(500, 8000, 1, device), ('b', 'to', 'a'): random_graph(500, 6000, 2, device)}
    colptrs = {et: c for et, (c, _) in types.items()}
    rows = {et: r for et, (_, r) in types.items()}
    return colptrs, rows, {et: [6, 4] for et in types}, {'a': 500, 'b': 500}


def same_sample(a, b) -> bool:
    return (torch.equal(a.node, b.node) and torch.equal(a.row, b.row) and torch.equal(a.col, b.col)
            and torch.equal(a.edge, b.edge) and a.num_sampled_nodes == b.num_sampled_nodes
            and a.num_sampled_edges == b.num_sampled_edges)


def same_hetero_sample(a, b) -> bool:
    return (a.node.keys() == b.node.keys() and all(torch.equal(a.node[t], b.node[t]) for t in a.node)
            and all(torch.equal(a.row[et], b.row[et]) and torch.equal(a.col[et], b.col[et])
                    and torch.equal(a.edge[et], b.edge[et]) for et in a.row)
            and a.num_sampled_nodes == b.num_sampled_nodes and a.num_sampled_edges == b.num_sampled_edges)


def test_pending_is_read_once():
    pending = Pending.done(5).then(lambda v: v * 2).then(str)
    assert pending.result() == '10'
    with pytest.raises(RuntimeError, match='read once'):
        pending.result()
    first = Pending.done(1)
    first.then(lambda v: v)
    with pytest.raises(RuntimeError, match='read once'):  # (then() consumes it)
        first.result()


def test_the_start_op_finishes_once():
    colptr, row = random_graph(50, 300)
    started = ops().neighbor_sample_start(colptr, row, torch.arange(5), [3, 2], False, False, 7, [], [])
    plain = ops().neighbor_sample(colptr, row, torch.arange(5), [3, 2], False, False, 7, [], [])
    assert all(torch.equal(a, b) for a, b in zip(started.finish(), plain))
    with pytest.raises(RuntimeError, match='already finished'):
        started.finish()


def test_started_samples_are_the_plain_ones(sample_device):
    """Random keys are drawn from torch's default generator in the order the samples are
    started: starting several before reading any gives the plain op's samples."""
    colptr, row = random_graph(300, 3000, device=sample_device)
    seed = torch.arange(0, 300, 7, device=sample_device)
    torch.manual_seed(3)
    plain = [neighbor_sample(colptr, row, seed, [5, 5]) for _ in range(3)]
    torch.manual_seed(3)
    started = [start_neighbor_sample(colptr, row, seed, [5, 5]) for _ in range(3)]
    assert all(same_sample(a, b.result()) for a, b in zip(plain, started))
    assert not torch.equal(plain[0].node, plain[1].node)
    colptrs, rows, fanouts, sizes = hetero_inputs(sample_device)
    torch.manual_seed(2)
    plain = [hetero_neighbor_sample(colptrs, rows, {'a': seed}, fanouts, sizes) for _ in range(3)]
    torch.manual_seed(2)
    started = [start_hetero_neighbor_sample(colptrs, rows, {'a': seed}, fanouts, sizes) for _ in range(3)]
    assert all(same_hetero_sample(a, b.result()) for a, b in zip(plain, started))


@requires_cuda_sampling
@pytest.mark.parametrize('order', ['in order', 'reversed'])
def test_samples_of_one_plan_finish_in_any_order(order):
    """A plan's samples share one buffer of counts: a start reads the previous unfinished
    sample's counts first, so each sample's outputs are its own, whichever finishes first,
    also when the samples were started on different streams."""
    colptr, row = random_graph(2000, 40000, device='cuda')
    seed = torch.randint(0, 2000, (256,), device='cuda')
    plain = [neighbor_sample(colptr, row, seed, [10, 5], random_seed=k) for k in range(4)]
    side = torch.cuda.Stream()
    started = []
    for k in range(4):
        with torch.cuda.stream(side if k % 2 else torch.cuda.current_stream()):
            started.append(start_neighbor_sample(colptr, row, seed, [10, 5], random_seed=k))
    finished = [(k, started[k].result()) for k in (range(4) if order == 'in order' else reversed(range(4)))]
    assert all(same_sample(plain[k], out) for k, out in finished)
    colptrs, rows, fanouts, sizes = hetero_inputs('cuda')
    plain = [hetero_neighbor_sample(colptrs, rows, {'a': seed % 500}, fanouts, sizes, random_seed=k) for k in range(3)]
    started = [start_hetero_neighbor_sample(colptrs, rows, {'a': seed % 500}, fanouts, sizes, random_seed=k)
               for k in range(3)]
    assert all(same_hetero_sample(plain[k], started[k].result()) for k in reversed(range(3)))


@requires_cuda_sampling
def test_a_gpu_start_does_not_wait_for_the_sample():
    """Starting enqueues the sample without a host synchronisation; reading it waits (what
    PyTorch's sync debug mode reports)."""
    colptr, row = random_graph(2000, 40000, device='cuda')
    seed = torch.randint(0, 2000, (256,), device='cuda')
    colptrs, rows, fanouts, sizes = hetero_inputs('cuda')
    starts = [lambda: start_neighbor_sample(colptr, row, seed, [10, 5]),
              lambda: start_hetero_neighbor_sample(colptrs, rows, {'a': seed % 500}, fanouts, sizes)]
    for start in starts:
        for _ in range(3):  # (the plan is made and its CUDA graph captured: syncs, once)
            start().result()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode('warn')
        try:
            with warnings.catch_warnings(record=True) as at_start:
                warnings.simplefilter('always')
                pending = start()
            with warnings.catch_warnings(record=True) as at_result:
                warnings.simplefilter('always')
                pending.result()
        finally:
            torch.cuda.set_sync_debug_mode('default')
        assert not [w for w in at_start if 'synchroniz' in str(w.message)]
        assert [w for w in at_result if 'synchroniz' in str(w.message)]


@requires_cuda_sampling
def test_a_bad_seed_is_raised_where_the_result_is_read():
    colptr, row = random_graph(100, 1000, device='cuda')
    good = torch.arange(10, device='cuda')
    start_neighbor_sample(colptr, row, good, [3]).result()
    pending = start_neighbor_sample(colptr, row, torch.tensor([3, 100, 5] + [0] * 7, device='cuda'), [3])
    after = start_neighbor_sample(colptr, row, good, [3], random_seed=1)  # (reads the bad sample's counts first)
    with pytest.raises(IndexError, match='100'):
        pending.result()
    assert same_sample(after.result(), neighbor_sample(colptr, row, good, [3], random_seed=1))


def store_batches(ahead: bool, location: str):
    fs, gs = from_data(community_data(), location)
    loader = NeighborLoader((fs, gs), num_neighbors=[5, 3], input_nodes=torch.arange(200), batch_size=32,
                            shuffle=True, pipeline=False)
    torch.manual_seed(0)
    indices = [torch.randperm(200)[k:k + 32].to(loader.node_sampler.device) for k in range(0, 200, 32)]
    return [(b.n_id.cpu(), b.edge_index.cpu(), b.x.cpu(), b.batch_size)
            for b in StoreBatches.for_loader(loader).batches(indices, ahead=ahead)]


@pytest.mark.parametrize('location', ['cpu'] + (['cuda'] if cuda_sampling_built() else []))
def test_batches_started_ahead_are_the_plain_ones(location):
    torch.manual_seed(5)
    plain = store_batches(False, location)
    torch.manual_seed(5)
    ahead = store_batches(True, location)
    assert len(plain) == len(ahead) == 7
    for a, b in zip(plain, ahead):
        assert all(torch.equal(torch.as_tensor(x), torch.as_tensor(y)) for x, y in zip(a, b))


@requires_cuda
def test_pipelined_heterogeneous_batches_equal_the_plain_ones():
    data = HeteroData()
    data['a'].x, data['b'].x = torch.randn(500, 8), torch.randn(400, 4)
    for (src, dst), (n_src, n_dst, e) in {('a', 'b'): (500, 400, 6000), ('b', 'a'): (400, 500, 5000)}.items():
        data[src, 'to', dst].edge_index = torch.stack([torch.randint(0, n_src, (e,)), torch.randint(0, n_dst, (e,))])
    data = data.to('cuda')
    kwargs = dict(num_neighbors=[5, 3], input_nodes=('a', torch.arange(300)), batch_size=32, shuffle=True)

    def batches(pipeline: bool, ahead: bool = True):
        torch.manual_seed(0)
        loader = NeighborLoader(data, pipeline=pipeline, **kwargs)
        loader.sample_ahead = ahead
        return [{(store._key, key): value.cpu() for store in b.stores for key, value in store.items()
                 if torch.is_tensor(value)} for b in loader]
    plain, piped, inline = batches(False), batches(True), batches(True, ahead=False)
    assert len(plain) == len(piped) == len(inline) == 10
    for a, b, c in zip(plain, piped, inline):
        assert a.keys() == b.keys() == c.keys() and all(torch.equal(a[k], b[k]) and torch.equal(a[k], c[k]) for k in a)
