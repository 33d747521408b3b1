"""Property-based tests (hypothesis) of the public ops and the sampler: random graphs
with the degenerate cases drawn on purpose (no nodes, no edges, isolated nodes, hubs,
duplicate edges, self-loops, repeated seeds), against plain-PyTorch references, and
corrupted inputs that must raise a Python error, never crash.

The example count is bounded for CI (profile 'ci', the default: 25 examples per test);
HYPOTHESIS_PROFILE=thorough runs 500.
"""
import os

import pytest
import torch

hypothesis = pytest.importorskip('hypothesis')
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pyg_accel.ops import CooGraph, edge_softmax, gather, hetero_neighbor_sample, neighbor_sample, sddmm, spmm  # noqa: E402,E501
from pyg_accel.sampler.reference import per_hop_neighbor_sample  # noqa: E402

from conftest import DEVICES  # noqa: E402

settings.register_profile('ci', max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile('thorough', max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'ci'))

INDEX_DTYPES = st.sampled_from([torch.int32, torch.int64])


@st.composite
def graphs(draw, max_nodes=30, max_edges=120, square=True):
    """``(edge_index [2, E] int64, num_src, num_dst)``: any sizes from empty up, edges
    concentrated on a few nodes at times (hubs), duplicates and self-loops allowed."""
    num_src = draw(st.integers(0, max_nodes))
    num_dst = num_src if square else draw(st.integers(0, max_nodes))
    num_edges = draw(st.integers(0, max_edges)) if num_src and num_dst else 0
    seed = draw(st.integers(0, 2 ** 31 - 1))
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, max(num_src, 1), (num_edges,), generator=g)
    dst = torch.randint(0, max(num_dst, 1), (num_edges,), generator=g)
    if num_edges and draw(st.booleans()):  # a hub: half the edges into one node
        dst[::2] = int(dst[0])
    return torch.stack([src, dst]), num_src, num_dst


def csc_of(edge_index, num_nodes):
    """``(colptr [N + 1], row [E])`` of a square graph (destination-sorted, stable)."""
    order = torch.sort(edge_index[1], stable=True).indices
    colptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    colptr[1:] = torch.bincount(edge_index[1], minlength=num_nodes).cumsum(0)
    return colptr, edge_index[0][order]


# Sparse ops against scatter references ###########################################

@pytest.mark.parametrize('device', DEVICES)
@given(graph=graphs(square=False), width=st.integers(1, 9), reduce=st.sampled_from(['sum', 'mean', 'max']),
       dtype=st.sampled_from([torch.float32, torch.float64]), index_dtype=INDEX_DTYPES)
def test_spmm_equals_scatter(device, graph, width, reduce, dtype, index_dtype):
    edge_index, num_src, num_dst = graph
    x = torch.randn(num_src, width, dtype=dtype)
    g = CooGraph.from_edge_index(edge_index.to(device, index_dtype), (num_src, num_dst))
    out = spmm(g, x.to(device), reduce=reduce)
    index = edge_index[1].view(-1, 1).expand(-1, width)
    ref = x.new_zeros(num_dst, width).scatter_reduce(0, index, x[edge_index[0]], {'sum': 'sum', 'mean': 'mean',
                                                                                  'max': 'amax'}[reduce],
                                                     include_self=False)
    assert out.shape == (num_dst, width)
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('device', DEVICES)
@given(graph=graphs(square=False), heads=st.integers(1, 3), channels=st.integers(1, 8))
def test_sddmm_and_edge_softmax_equal_their_references(device, graph, heads, channels):
    from torch_geometric.utils import softmax
    edge_index, num_src, num_dst = graph
    a, b = torch.randn(num_dst, heads, channels), torch.randn(num_src, heads, channels)
    g = CooGraph.from_edge_index(edge_index.to(device), (num_src, num_dst))
    dot = sddmm(g, a.to(device), b.to(device))
    ref = g.sort_edges((a[edge_index[1]] * b[edge_index[0]]).sum(-1).to(device))
    torch.testing.assert_close(dot, ref, atol=1e-5, rtol=1e-4)
    logits = torch.randn(edge_index.size(1), heads)
    sorted_logits = g.sort_edges(logits.to(device))
    got = edge_softmax(g, sorted_logits)
    want = g.sort_edges(softmax(logits, edge_index[1], num_nodes=num_dst).to(device))
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('device', DEVICES)
@given(rows=st.integers(0, 40), width=st.integers(1, 12), picks=st.lists(st.integers(-50, 90), max_size=60),
       index_dtype=INDEX_DTYPES)
def test_gather_equals_index_select_or_names_the_bad_row(device, rows, width, picks, index_dtype):
    table = torch.randn(rows, width, device=device)
    index = torch.tensor(picks, dtype=index_dtype, device=device)
    if all(0 <= p < rows for p in picks):
        torch.testing.assert_close(gather(table, index), table.index_select(0, index.long()), rtol=0, atol=0)
    else:
        with pytest.raises(IndexError):
            gather(table, index)


@given(graph=graphs(square=False), corrupt=st.sampled_from(['ptr_end', 'ptr_order', 'src', 'dst', 'perm']),
       at=st.integers(0, 1000))
def test_coo_graph_parts_that_are_wrong_are_refused(graph, corrupt, at):
    edge_index, num_src, num_dst = graph
    good = CooGraph.from_edge_index(edge_index, (num_src, num_dst))
    ptr, src, dst = good.ptr.clone(), good.src.clone(), good.dst.clone()
    perm = torch.arange(src.numel()) if good.perm is None else good.perm.clone()
    CooGraph(ptr, src, dst, perm, num_src, num_dst)  # the parts as built: accepted
    if corrupt.startswith('ptr'):
        if corrupt == 'ptr_end':
            ptr[-1] += 1
        elif num_dst >= 2 and int(ptr[1]) > 0:
            ptr[1] = int(ptr[-1]) + 1  # decreasing after it
        else:
            ptr[0] = -1
    elif src.numel() == 0:
        return
    elif corrupt == 'src':
        src[at % src.numel()] = num_src
    elif corrupt == 'dst':
        dst[at % dst.numel()] = (int(dst[at % dst.numel()]) + 1) % max(num_dst + 1, 2)
    else:
        perm[at % perm.numel()] = src.numel()
    with pytest.raises((TypeError, ValueError, IndexError)):
        CooGraph(ptr, src, dst, perm, num_src, num_dst)


# The sampler ##################################################################

@st.composite
def sample_calls(draw):
    edge_index, n, _ = draw(graphs(max_nodes=25, max_edges=100))
    hops = draw(st.integers(0, 3))
    fanouts = draw(st.lists(st.sampled_from([-1, 0, 1, 2, 3, 7]), min_size=hops, max_size=hops))
    seeds = draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=12)) if n else []
    return edge_index, n, fanouts, seeds, draw(st.booleans()), draw(st.booleans())


def check_sample(out, colptr, row, seeds, fanouts, replace, disjoint):
    """The sample's invariants: seeds first as given, nodes unique (per tree), every
    edge exists and leaves a node of its hop, per-node draw counts, hop bookkeeping."""
    node, r, c, e = out.node.cpu(), out.row.cpu(), out.col.cpu(), out.edge.cpu()
    S = len(seeds)
    assert node[:S].tolist() == seeds and out.num_sampled_nodes[0] == S
    assert sum(out.num_sampled_nodes) == node.numel() and sum(out.num_sampled_edges) == e.numel() == r.numel()
    later = node[S:]
    if disjoint:
        tree = out.batch.cpu()
        keys = tree * (colptr.numel() + 1) + node
        assert keys.unique().numel() == keys.numel()
        assert torch.equal(tree[r], tree[c])
    else:
        assert later.unique().numel() == later.numel() and not bool(torch.isin(later, torch.tensor(seeds)).any())
    deg = colptr[1:] - colptr[:-1]
    owner = torch.repeat_interleave(torch.arange(deg.numel()), deg)
    assert torch.equal(node[r], row[e]) and torch.equal(node[c], owner[e])
    bounds = [0] + torch.tensor(out.num_sampled_nodes).cumsum(0).tolist()
    edge_bounds = [0] + torch.tensor(out.num_sampled_edges, dtype=torch.long).cumsum(0).tolist()
    for hop, fanout in enumerate(fanouts):
        lo, hi = edge_bounds[hop], edge_bounds[hop + 1]
        frontier = torch.arange(bounds[hop], bounds[hop + 1])
        got = torch.bincount(c[lo:hi] - bounds[hop], minlength=frontier.numel()) if hi > lo else \
            torch.zeros(frontier.numel(), dtype=torch.long)
        d = deg[node[frontier]]
        want = d if fanout < 0 else (torch.where(d > 0, fanout, 0) if replace else d.clamp(max=fanout))
        assert torch.equal(got, want)


@pytest.mark.parametrize('device', DEVICES)
@given(call=sample_calls(), index_dtype=INDEX_DTYPES, random_seed=st.integers(0, 2 ** 40))
def test_sampler_invariants_and_device_agreement(device, call, index_dtype, random_seed):
    edge_index, n, fanouts, seeds, replace, disjoint = call
    if n == 0:
        return
    colptr, row = csc_of(edge_index, n)
    seed = torch.tensor(seeds, dtype=torch.long)
    args = (colptr.to(device, index_dtype), row.to(device, index_dtype), seed.to(device, index_dtype), fanouts)
    out = neighbor_sample(*args, replace, disjoint, random_seed=random_seed)
    check_sample(out, colptr, row, seeds, fanouts, replace, disjoint)
    if device != 'cpu':  # the same sample for the same random_seed on the CPU
        cpu = neighbor_sample(colptr, row, seed, fanouts, replace, disjoint, random_seed=random_seed)
        for a, b in zip(out[:4], cpu[:4]):
            assert torch.equal(a.cpu(), b)
    if all(f == -1 for f in fanouts) and not disjoint:  # deterministic: the per-hop reference
        ref = per_hop_neighbor_sample(colptr, row, seed, fanouts)
        assert torch.equal(out.node.cpu(), ref.node) and torch.equal(out.edge.cpu(), ref.edge)


@pytest.mark.parametrize('device', DEVICES)
@given(call=sample_calls(), where=st.integers(0, 10 ** 6),
       value=st.sampled_from([-1, -(2 ** 40), 2 ** 40, 10 ** 6]), part=st.sampled_from(['colptr', 'row']))
def test_a_corrupted_graph_is_an_error_never_a_crash(device, call, where, value, part):
    """Any one entry of colptr or row set out of range: the call raises (IndexError /
    ValueError) or, when no draw reads that entry, samples; it never reads outside."""
    edge_index, n, fanouts, seeds, replace, disjoint = call
    if n == 0:
        return
    colptr, row = csc_of(edge_index, n)
    target = colptr if part == 'colptr' else row
    if target.numel() == 0:
        return
    target[where % target.numel()] = value
    seed = torch.tensor(seeds, dtype=torch.long).to(device)
    try:
        out = neighbor_sample(colptr.to(device), row.to(device), seed, fanouts, replace, disjoint, random_seed=1)
    except (IndexError, ValueError):
        return
    assert out.node.numel() >= len(seeds)


@given(call=sample_calls(), disjoint=st.booleans())
def test_a_homogeneous_graph_samples_alike_through_the_heterogeneous_op(call, disjoint):
    """The heterogeneous op over one node type and one edge type draws its own
    stream, but the structure is the homogeneous op's: seeds first, per-node counts."""
    edge_index, n, fanouts, seeds, replace, _ = call
    if n == 0:
        return
    colptr, row = csc_of(edge_index, n)
    et = ('v', 'to', 'v')
    out = hetero_neighbor_sample({et: colptr}, {et: row}, {'v': torch.tensor(seeds, dtype=torch.long)},
                                 {et: fanouts}, {'v': n}, replace, disjoint, random_seed=3)
    assert out.node['v'][:len(seeds)].tolist() == seeds
    if fanouts:
        first = out.col[et][:out.num_sampled_edges[et][0]]
        got = torch.bincount(first, minlength=len(seeds))[:len(seeds)] if first.numel() else \
            torch.zeros(len(seeds), dtype=torch.long)
        d = (colptr[1:] - colptr[:-1])[torch.tensor(seeds, dtype=torch.long)]
        f = fanouts[0]
        want = d if f < 0 else (torch.where(d > 0, f, 0) if replace else d.clamp(max=f))
        assert torch.equal(got, want)


@pytest.mark.parametrize('device', DEVICES)
@given(call=sample_calls(), mode=st.sampled_from(['weighted', 'temporal', 'temporal-last']),
       random_seed=st.integers(0, 2 ** 40), data=st.data())
def test_weighted_and_temporal_samples_keep_their_rules(device, call, mode, random_seed, data):
    """Weighted: a zero-weight edge is never drawn. Temporal: every node a tree reaches
    past its seed is not later than the seed's time. Both: the same sample on the GPU as
    on the CPU for the same random_seed."""
    edge_index, n, fanouts, seeds, replace, _ = call
    if n == 0:
        return
    colptr, row = csc_of(edge_index, n)
    g = torch.Generator().manual_seed(random_seed % 2 ** 31)
    seed = torch.tensor(seeds, dtype=torch.long)
    kwargs, disjoint = {}, False
    if mode == 'weighted':
        weight = torch.rand(row.numel(), generator=g, dtype=torch.float64)
        weight[torch.rand(row.numel(), generator=g) < 0.3] = 0
        kwargs['edge_weight'] = weight
        disjoint = data.draw(st.booleans())
    else:
        node_time = torch.randint(0, 10, (n,), generator=g)
        kwargs.update(node_time=node_time, seed_time=torch.randint(0, 10, (len(seeds),), generator=g),
                      temporal_strategy='last' if mode == 'temporal-last' else 'uniform')
        disjoint = True
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    out = neighbor_sample(colptr.to(device), row.to(device), seed.to(device), fanouts, replace, disjoint,
                          random_seed=random_seed, **{k: move(v) for k, v in kwargs.items()})
    edge = out.edge.cpu()
    if mode == 'weighted':
        assert bool((kwargs['edge_weight'][edge] > 0).all())
    else:
        tree, node = out.batch.cpu(), out.node.cpu()
        later = torch.arange(node.numel()) >= len(seeds)
        assert bool((kwargs['node_time'][node[later]] <= kwargs['seed_time'][tree[later]]).all())
    if device != 'cpu':
        cpu = neighbor_sample(colptr, row, seed, fanouts, replace, disjoint, random_seed=random_seed, **kwargs)
        assert torch.equal(out.node.cpu(), cpu.node) and torch.equal(edge, cpu.edge)
