"""Sampling ops started in the background (pyg_accel.ops._background): results in the
order started, errors raised where the result is read, a wait for every op started, and
the same samples as the ops run in the caller's thread."""
import threading

import pytest
import torch
from torch_geometric.data import HeteroData

from pyg_accel.loader import NeighborLoader
from pyg_accel.ops._background import Pending, start, wait_for_background_ops
from pyg_accel.ops._library import ops
from pyg_accel.ops.sampling import neighbor_sample, start_hetero_neighbor_sample, start_neighbor_sample

from conftest import requires_cuda


def random_graph(num_nodes: int, num_edges: int, seed: int = 0):
    """A random CSC graph: ``(colptr, row)``."""
    generator = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=generator).sort().values
    row = torch.randint(0, num_nodes, (num_edges,), generator=generator)
    colptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    colptr[1:] = torch.bincount(dst, minlength=num_nodes).cumsum(0)
    return colptr, row


def test_background_calls_run_on_another_thread_in_order():
    calls, caller = [], threading.get_ident()

    def op(k):
        calls.append((k, threading.get_ident()))
        return k * 10
    pending = [start(op, (k,), lambda raw: raw + 1, background=True) for k in range(20)]
    assert [p.result() for p in pending] == [k * 10 + 1 for k in range(20)]
    assert [k for k, _ in calls] == list(range(20))
    assert all(thread != caller for _, thread in calls)
    here = start(op, (7,), lambda raw: raw, background=False)  # (in the caller's thread, at once)
    assert calls[-1] == (7, caller) and here.result() == 70
    assert Pending.done(5).then(lambda v: v * 2).then(str).result() == '10'


def test_an_op_error_is_raised_where_its_result_is_read():
    def op():
        raise IndexError('seed 99 is out of range')
    pending = start(op, (), lambda raw: raw, background=True)
    after = start(lambda: 'next', (), lambda raw: raw, background=True)  # (the worker goes on)
    with pytest.raises(IndexError, match='seed 99'):
        pending.result()
    assert after.result() == 'next'


def test_wait_for_background_ops_waits_for_every_op_started():
    release, done = threading.Event(), []

    def slow(k):
        release.wait(timeout=30)
        done.append(k)
    for k in range(3):
        start(slow, (k,), lambda raw: raw, background=True)
    waiter = threading.Thread(target=wait_for_background_ops)
    waiter.start()
    waiter.join(timeout=0.2)
    assert waiter.is_alive() and done == []  # (still waiting for the blocked ops)
    release.set()
    waiter.join(timeout=30)
    assert not waiter.is_alive() and done == [0, 1, 2]


def test_the_drawn_random_seed_is_the_one_the_op_draws():
    """An op started in the background is given the seed the op would draw from torch's
    default generator, drawn in the caller's order: the same samples either way."""
    colptr, row = random_graph(300, 3000)
    seed = torch.arange(0, 300, 7)
    torch.manual_seed(3)
    drawn_by_op = [neighbor_sample(colptr, row, seed, [5, 5]) for _ in range(2)]
    after_op = torch.rand(())
    torch.manual_seed(3)
    drawn_here = [neighbor_sample(colptr, row, seed, [5, 5], random_seed=int(ops().draw_random_seed()))
                  for _ in range(2)]
    assert torch.equal(torch.rand(()), after_op)  # (one draw from the generator each)
    for a, b in zip(drawn_by_op, drawn_here):
        assert torch.equal(a.node, b.node) and torch.equal(a.row, b.row) and torch.equal(a.edge, b.edge)
    assert not torch.equal(drawn_by_op[0].node, drawn_by_op[1].node)


@requires_cuda
def test_background_samples_equal_the_foreground_ones():
    colptr, row = (t.cuda() for t in random_graph(500, 8000))
    seed = torch.arange(0, 500, 3, device='cuda')
    torch.manual_seed(1)
    here = [start_neighbor_sample(colptr, row, seed, [10, 5]).result() for _ in range(3)]
    torch.manual_seed(1)
    started = [start_neighbor_sample(colptr, row, seed, [10, 5], background=True) for _ in range(3)]
    for a, b in zip(here, (p.result() for p in started)):
        assert torch.equal(a.node, b.node) and torch.equal(a.row, b.row) and torch.equal(a.col, b.col)
        assert a.num_sampled_nodes == b.num_sampled_nodes and a.num_sampled_edges == b.num_sampled_edges
    types = {('a', 'to', 'b'): random_graph(500, 8000, 1), ('b', 'to', 'a'): random_graph(500, 6000, 2)}
    colptrs = {et: c.cuda() for et, (c, _) in types.items()}
    rows = {et: r.cuda() for et, (_, r) in types.items()}
    fanouts = {et: [6, 4] for et in types}
    sizes = {'a': 500, 'b': 500}
    torch.manual_seed(2)
    here = [start_hetero_neighbor_sample(colptrs, rows, {'a': seed}, fanouts, sizes).result() for _ in range(3)]
    torch.manual_seed(2)
    started = [start_hetero_neighbor_sample(colptrs, rows, {'a': seed}, fanouts, sizes, background=True)
               for _ in range(3)]
    for a, b in zip(here, (p.result() for p in started)):
        assert all(torch.equal(a.node[t], b.node[t]) for t in sizes)
        assert all(torch.equal(a.row[et], b.row[et]) and torch.equal(a.col[et], b.col[et]) for et in types)


@requires_cuda
def test_pipelined_heterogeneous_batches_equal_the_plain_ones():
    """A pipelined loader samples each batch in the background before building the one
    before it: the same batches as plain iteration."""
    data = HeteroData()
    data['a'].x, data['b'].x = torch.randn(500, 8), torch.randn(400, 4)
    for (src, dst), (n_src, n_dst, e) in {('a', 'b'): (500, 400, 6000), ('b', 'a'): (400, 500, 5000)}.items():
        data[src, 'to', dst].edge_index = torch.stack([torch.randint(0, n_src, (e,)), torch.randint(0, n_dst, (e,))])
    data = data.to('cuda')
    kwargs = dict(num_neighbors=[5, 3], input_nodes=('a', torch.arange(300)), batch_size=32, shuffle=True)

    def batches(pipeline):
        torch.manual_seed(0)
        return [{(store._key, key): value.cpu() for store in b.stores for key, value in store.items()
                 if torch.is_tensor(value)}
                for b in NeighborLoader(data, pipeline=pipeline, **kwargs)]
    plain, piped = batches(False), batches(True)
    assert len(plain) == len(piped) == 10
    for a, b in zip(plain, piped):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
