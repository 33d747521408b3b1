"""pyg_accel.ops.neighbor_sample: structure, statistics, reproducibility, errors."""
import math

import pytest
import torch

from pyg_accel.data import GraphStore
from pyg_accel.ops import columns_sorted_by_time, hetero_neighbor_sample, neighbor_sample, sort_columns_by_time

from conftest import poison_cuda_allocator, requires_cuda

FANOUTS = [[3], [2, 2], [-1, 2], [4, 0, 3], []]


def random_graph(num_nodes=60, num_edges=400, seed=0, device='cpu', hubs=0):
    """CSC of a random multigraph with self-loops, duplicate edges and isolated nodes;
    ``hubs`` > 0: half of the edges lead to nodes ``0 .. hubs - 1``."""
    g = torch.Generator().manual_seed(seed)
    row = torch.randint(0, num_nodes, (num_edges,), generator=g)
    col = torch.randint(0, num_nodes - 5, (num_edges,), generator=g)  # the last 5 have no in-edges
    if hubs:
        col[::2] = torch.randint(0, hubs, (col[::2].numel(),), generator=g)
    row[:10], col[:10] = col[:10], col[:10]  # self-loops
    row, col = torch.cat([row, row[:20]]), torch.cat([col, col[:20]])  # duplicates
    store = GraphStore('cpu')
    store.put_edge_index((row, col), edge_type=None, layout='coo', size=(num_nodes, num_nodes))
    r, colptr, _ = store.csc()
    return colptr.to(device), r.to(device)


def check_structure(out, colptr, row, seed, fanouts, replace, disjoint):
    node, r, c, e = out.node.cpu(), out.row.cpu(), out.col.cpu(), out.edge.cpu()
    colptr, row = colptr.cpu(), row.cpu()
    deg = colptr[1:] - colptr[:-1]
    cum_nodes = [0] + torch.tensor(out.num_sampled_nodes).cumsum(0).tolist()
    cum_edges = [0] + torch.tensor(out.num_sampled_edges).cumsum(0).tolist()
    assert len(out.num_sampled_nodes) == len(fanouts) + 1 and len(out.num_sampled_edges) == len(fanouts)
    assert cum_nodes[-1] == node.numel() and cum_edges[-1] == r.numel() == c.numel() == e.numel()
    assert bool((c[1:] >= c[:-1]).all())  # edges grouped by the node they were sampled for, in node order
    if disjoint:
        assert torch.equal(node[:seed.numel()], seed.cpu()) and torch.equal(out.batch[:seed.numel()].cpu(),
                                                                            torch.arange(seed.numel()))
        pairs = out.batch.cpu() * colptr.numel() + node
        assert pairs.unique().numel() == node.numel()  # no node twice in one tree
        assert torch.equal(out.batch.cpu()[r], out.batch.cpu()[c])  # edges stay inside their tree
    else:
        assert out.batch is None
        assert torch.equal(node[:out.num_sampled_nodes[0]], seed.cpu())  # the seeds as given, repeats included
        later = node[seed.numel():]
        assert later.unique().numel() == later.numel() and not bool(torch.isin(later, seed.cpu()).any())
    # every sampled edge exists: its CSC position holds (node[row] -> node[col])
    col_of_edge = torch.repeat_interleave(torch.arange(deg.numel()), deg)
    assert torch.equal(node[r], row[e]) and torch.equal(node[c], col_of_edge[e])
    for hop, fanout in enumerate(fanouts):
        lo, hi = cum_edges[hop], cum_edges[hop + 1]
        dst, src = c[lo:hi], r[lo:hi]
        # edges of hop h leave the nodes discovered at hop h (seeds for h = 0) ...
        assert bool(((dst >= cum_nodes[hop]) & (dst < cum_nodes[hop + 1])).all())
        assert bool((src < cum_nodes[hop + 2]).all())  # ... and reach nodes known by hop h + 1
        frontier = torch.arange(cum_nodes[hop], cum_nodes[hop + 1])
        got = torch.bincount(dst - cum_nodes[hop], minlength=frontier.numel())
        d = deg[node[frontier]]
        want = d if fanout < 0 else (torch.where(d > 0, fanout, 0) if replace else d.clamp(max=fanout))
        assert torch.equal(got, want)
        if not replace:  # distinct edges per node
            keys = dst * (row.numel() + 1) + e[lo:hi]
            assert keys.unique().numel() == keys.numel()
    new_by_hop = [set(node[cum_nodes[h + 1]:cum_nodes[h + 2]].tolist()) for h in range(len(fanouts))]
    for h, new in enumerate(new_by_hop):  # hop order: a hop's new nodes first appear in that hop's edges
        first_hop_sources = set(node[r[cum_edges[h]:cum_edges[h + 1]]].tolist())
        assert new <= first_hop_sources


@pytest.mark.parametrize('fanouts', FANOUTS)
@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('disjoint', [False, True])
@pytest.mark.parametrize('index_dtype', [torch.int64, torch.int32])
def test_structure(sample_device, fanouts, replace, disjoint, index_dtype):
    colptr, row = random_graph(device=sample_device)
    seed = torch.tensor([3, 7, 0, 59, 12, 55], device=sample_device)  # 55 and 59: no in-edges
    out = neighbor_sample(colptr.to(index_dtype), row.to(index_dtype), seed.to(index_dtype), fanouts, replace,
                          disjoint, random_seed=5)
    check_structure(out, colptr, row, seed, fanouts, replace, disjoint)


@pytest.mark.parametrize('disjoint', [False, True])
def test_repeated_seeds_are_listed_as_given(sample_device, disjoint):
    """As PyG: a loader's batch_size is len(seeds) and training reads out[:batch_size],
    so every seed keeps its place, repeats included, and each copy draws neighbours."""
    colptr, row = random_graph(device=sample_device)
    seed = torch.tensor([3, 3, 5, 3, 7], device=sample_device)
    for fanouts in ([2], [3, 2], [-1]):
        out = neighbor_sample(colptr, row, seed, fanouts, disjoint=disjoint, random_seed=1)
        assert out.node[:5].tolist() == [3, 3, 5, 3, 7] and out.num_sampled_nodes[0] == 5
        check_structure(out, colptr, row, seed, fanouts, False, disjoint)
        if not disjoint and fanouts == [-1]:  # a hop reaching a repeated seed links to its first copy
            reaches_3 = out.row[out.node[out.row] == 3]
            assert bool((reaches_3 == 0).all())
    # A hub repeated: its copies draw 3x its edges, more than the graph has (the CUDA
    # sampler's hop-0 buffers were capped at the graph's edges and overflowed)
    hub_colptr = torch.tensor([0, 40, 40, 40, 40], device=sample_device)
    hub_row = torch.arange(40, device=sample_device) % 4
    out = neighbor_sample(hub_colptr, hub_row, torch.tensor([0, 0, 1, 0], device=sample_device), [-1, 2],
                          disjoint=disjoint, random_seed=2)
    assert out.num_sampled_edges[0] == 120 and out.node[:4].tolist() == [0, 0, 1, 0]
    check_structure(out, hub_colptr, hub_row, torch.tensor([0, 0, 1, 0]), [-1, 2], False, disjoint)


def test_reproducible_and_seeded(sample_device):
    colptr, row = random_graph(500, 5000, device=sample_device)
    seed = torch.arange(0, 400, 7, device=sample_device)
    a = neighbor_sample(colptr, row, seed, [5, 5], random_seed=11)
    b = neighbor_sample(colptr, row, seed, [5, 5], random_seed=11)
    c = neighbor_sample(colptr, row, seed, [5, 5], random_seed=12)
    assert torch.equal(a.node, b.node) and torch.equal(a.edge, b.edge)
    assert not torch.equal(a.edge, c.edge)
    torch.manual_seed(3)
    d = neighbor_sample(colptr, row, seed, [5, 5])
    torch.manual_seed(3)
    assert torch.equal(d.edge, neighbor_sample(colptr, row, seed, [5, 5]).edge)
    assert not torch.equal(d.edge, neighbor_sample(colptr, row, seed, [5, 5]).edge)  # the generator moved on


@pytest.mark.parametrize('random_seed', [7, None])
def test_opcheck(sample_device, random_seed):
    """Schema (random_seed optional: None draws from torch's generator), fake kernel and
    dispatch of the raw op."""
    from pyg_accel.ops._library import ops
    colptr, row = random_graph(50, 300, device=sample_device)
    seed = torch.tensor([0, 3, 7], device=sample_device)
    torch.library.opcheck(ops().neighbor_sample.default,
                          (colptr, row, seed, [2, 2], False, False, random_seed, [], [], None, 'uniform'),
                          test_utils=('test_schema', 'test_faketensor', 'test_autograd_registration'))


def test_raw_ops_check_their_inputs_in_one_place(sample_device):
    """The C++ front door (sampler_inputs.cpp), behind the Python checks: the CPU and CUDA
    ops refuse the same bad inputs with the same errors, homogeneous and heterogeneous
    alike for the rules they share."""
    from pyg_accel.ops._library import ops
    colptr, row = random_graph(50, 300, device=sample_device)
    seed = torch.tensor([0, 3, 7], device=sample_device)
    times = torch.arange(50, device=sample_device)
    seed_time = torch.full((3,), 100, device=sample_device)

    def homo(*, disjoint=True, weight=None, node_time=None, seed_time=seed_time, strategy='uniform', graph=None):
        c, r = graph or (colptr, row)
        return ops().neighbor_sample(c, r, seed, [2], False, disjoint, 1, [weight, None], [node_time], seed_time,
                                     strategy)

    def hetero(*, disjoint=True, weight=None, node_time=None, strategy='uniform'):
        return ops().hetero_neighbor_sample([50], [0], [0], [colptr], [row], [seed], [2], 1, False, disjoint, 1,
                                            [weight, None], [node_time], [seed_time], strategy)
    for run, name in ((homo, 'neighbor_sample'), (hetero, 'hetero_neighbor_sample')):
        with pytest.raises(RuntimeError, match=f"{name}: temporal_strategy must be 'uniform' or 'last'"):
            run(strategy='first')
        with pytest.raises(RuntimeError, match=f'{name}: temporal sampling needs disjoint=True'):
            run(node_time=times, disjoint=False)
        with pytest.raises(RuntimeError, match=f'{name}: weighted temporal sampling is not supported'):
            run(node_time=times, weight=torch.ones(row.numel(), device=sample_device))
    with pytest.raises(RuntimeError, match='neighbor_sample: temporal sampling needs one seed_time per seed'):
        homo(node_time=times, seed_time=seed_time[:2])
    with pytest.raises(RuntimeError, match='neighbor_sample: colptr must have num_nodes \\+ 1 entries'):
        homo(graph=(colptr[:0], row))
    with pytest.raises(RuntimeError, match='neighbor_sample: colptr, row and seed must be int64'):
        homo(graph=(colptr.int(), row))
    # the bias inputs come in lists of a fixed layout: two per edge type, one per node type
    with pytest.raises(RuntimeError, match=r'neighbor_sample: edge_bias must have 2 entries \(2 per type\) or none'):
        ops().neighbor_sample(colptr, row, seed, [2], False, True, 1, [None], [], None, 'uniform')
    with pytest.raises(RuntimeError, match=r'hetero_neighbor_sample: node_bias must have 1 entries'):
        ops().hetero_neighbor_sample([50], [0], [0], [colptr], [row], [seed], [2], 1, False, True, 1, [],
                                     [times, times], [seed_time], 'uniform')
    assert homo(node_time=times)[0].numel() >= 3  # (the good call)


def test_same_sample_with_any_thread_count():
    colptr, row = random_graph(2000, 40_000)
    seed = torch.arange(0, 1990, 3)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = neighbor_sample(colptr, row, seed, [10, 10], random_seed=9)
        torch.set_num_threads(max(2, threads))
        b = neighbor_sample(colptr, row, seed, [10, 10], random_seed=9)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(a.node, b.node) and torch.equal(a.edge, b.edge)


def chi_square_uniform(counts: torch.Tensor) -> float:
    expected = counts.sum() / counts.numel()
    return float(((counts - expected) ** 2 / expected).sum())


def chi_square_bound(dof: int) -> float:
    """Upper 0.1% point of chi-square (Wilson-Hilferty approximation)."""
    z = 3.09
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


@pytest.mark.parametrize('replace', [False, True])
def test_uniformity_chi_square(sample_device, replace):
    degree, fanout, trials = 20, 5, 4000
    colptr = torch.tensor([0, degree] + [degree] * degree, device=sample_device)  # node 0 <- nodes 1..20
    row = torch.arange(1, degree + 1, device=sample_device)
    out = neighbor_sample(colptr, row, torch.zeros(trials, dtype=torch.long, device=sample_device), [fanout],
                          replace=replace, disjoint=True, random_seed=2)
    counts = torch.bincount(out.edge.cpu(), minlength=degree).double()
    assert int(counts.sum()) == trials * fanout
    assert chi_square_uniform(counts) < chi_square_bound(degree - 1)
    # the same test rejects a biased sampler (first neighbours 20% more likely)
    biased = counts.clone()
    biased[:5] *= 1.2
    biased[5:] *= (counts.sum() - biased[:5].sum()) / counts[5:].sum()
    assert chi_square_uniform(biased) > chi_square_bound(degree - 1)


def test_inclusion_probability_is_fanout_over_degree():
    """Without replacement each neighbour is kept with probability fanout/degree, for all degrees."""
    degrees = torch.tensor([1, 3, 8, 50])
    colptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
    colptr = torch.cat([colptr, colptr[-1:].expand(int(degrees.sum()))])
    row = torch.arange(4, 4 + int(degrees.sum()))
    seeds = torch.arange(4).repeat(3000)
    out = neighbor_sample(colptr, row, seeds, [4], disjoint=True, random_seed=8)
    hits = torch.bincount(out.edge, minlength=int(degrees.sum())).double() / 3000
    starts = colptr[:4]
    for start, d in zip(starts.tolist(), degrees.tolist()):
        p = min(4, d) / d
        assert torch.allclose(hits[start:start + d], torch.full((d,), p, dtype=torch.double), atol=0.05)


def test_degenerate_inputs(sample_device):
    colptr, row = random_graph(device=sample_device)
    out = neighbor_sample(colptr, row, torch.empty(0, dtype=torch.long, device=sample_device), [3, 3])
    assert out.node.numel() == 0 and out.num_sampled_nodes == [0, 0, 0] and out.num_sampled_edges == [0, 0]
    no_edges = torch.zeros(11, dtype=torch.long, device=sample_device)
    out = neighbor_sample(no_edges, torch.empty(0, dtype=torch.long, device=sample_device),
                          torch.tensor([1, 2], device=sample_device), [5, 5])
    assert out.node.tolist() == [1, 2] and out.row.numel() == 0 and out.num_sampled_edges == [0, 0]


def test_bad_input(sample_device):
    colptr, row = random_graph(device=sample_device)
    with pytest.raises(IndexError, match='out of range'):
        neighbor_sample(colptr, row, torch.tensor([60], device=sample_device), [2])
    with pytest.raises(IndexError, match='out of range'):
        neighbor_sample(colptr, row, torch.tensor([-1], device=sample_device), [2])
    with pytest.raises(TypeError, match='seed must be'):
        neighbor_sample(colptr, row, torch.tensor([1.0], device=sample_device), [2])
    with pytest.raises(TypeError, match='list of ints'):
        neighbor_sample(colptr, row, torch.tensor([1], device=sample_device), 2)
    with pytest.raises(TypeError, match='list of ints'):
        neighbor_sample(colptr, row, torch.tensor([1], device=sample_device), [2.5])
    with pytest.raises(ValueError, match='-1'):
        neighbor_sample(colptr, row, torch.tensor([1], device=sample_device), [-2])
    with pytest.raises(TypeError, match='row must be'):
        neighbor_sample(colptr, row.float(), torch.tensor([1], device=sample_device), [2])


BAD_COLPTRS = {'huge': (3, 2 ** 40), 'decreasing': (3, 2), 'negative': (2, -1), 'past_the_end': (6, 19)}


@pytest.mark.parametrize('bad', list(BAD_COLPTRS))
def test_colptr_contents_are_checked_where_read(sample_device, bad):
    """A colptr that does not start at 0, decreases or ends past len(row) is an
    IndexError naming colptr, never an out-of-bounds read (it used to segfault), on
    every call: nothing about the graph's contents is remembered. The next good call
    samples as before."""
    colptr = torch.tensor([0, 3, 6, 9, 12, 15, 18], device=sample_device)
    row = torch.arange(18, device=sample_device) % 6
    good = neighbor_sample(colptr, row, torch.tensor([2, 5], device=sample_device), [2, 2], random_seed=0)
    at, value = BAD_COLPTRS[bad]
    broken = colptr.clone()
    broken[at] = value
    for seed in ([2, 5], [0, 1, 2, 3, 4, 5]):
        with pytest.raises(IndexError, match='colptr'):
            neighbor_sample(broken, row, torch.tensor(seed, device=sample_device), [2, 2], random_seed=0)
    again = neighbor_sample(colptr, row, torch.tensor([2, 5], device=sample_device), [2, 2], random_seed=0)
    assert torch.equal(good.edge, again.edge)
    with pytest.raises(IndexError, match='colptr'):
        hetero_neighbor_sample({('a', 'to', 'a'): broken}, {('a', 'to', 'a'): row},
                               {'a': torch.arange(6, device=sample_device)}, {('a', 'to', 'a'): [2]}, {'a': 6})


def test_a_graph_edited_through_numpy_is_sampled_as_it_is_now():
    """numpy writes do not bump a tensor's version counter: nothing derived from an
    int32 graph is kept on the CPU, and a row edited out of range is an IndexError."""
    colptr, row = random_graph()
    colptr32, row32 = colptr.int(), row.int()
    seed = torch.tensor([3, 7, 0])
    neighbor_sample(colptr32, row32, seed, [-1, -1], random_seed=0)
    row32.numpy()[:] = (row32.numpy() + 1) % 60
    got = neighbor_sample(colptr32, row32, seed, [-1, -1], random_seed=0)
    want = neighbor_sample(colptr, row32.long(), seed, [-1, -1], random_seed=0)
    assert torch.equal(got.node, want.node) and torch.equal(got.edge, want.edge)
    row32.numpy()[int(colptr[3])] = 10 ** 9
    with pytest.raises(IndexError, match='row'):
        neighbor_sample(colptr32, row32, seed, [-1, -1], random_seed=0)


# Against the per-hop PyTorch reference ############################################

from pyg_accel.sampler.reference import per_hop_neighbor_sample  # noqa: E402


@pytest.mark.parametrize('fanouts', [[-1], [-1, -1], [-1, 0, -1]])
def test_equals_reference_when_deterministic(sample_device, fanouts):
    colptr, row = random_graph(device=sample_device)
    seed = torch.tensor([3, 7, 0, 59, 12, 55], device=sample_device)
    ours = neighbor_sample(colptr, row, seed, fanouts, random_seed=0)
    ref = per_hop_neighbor_sample(colptr, row, seed, fanouts)
    for a, b in zip(ours[:4], ref[:4]):
        assert torch.equal(a.cpu(), b.cpu())
    assert ours.num_sampled_nodes == ref.num_sampled_nodes and ours.num_sampled_edges == ref.num_sampled_edges


@pytest.mark.parametrize('replace', [False, True])
def test_reference_passes_the_structural_checks(replace):
    colptr, row = random_graph()
    seed = torch.tensor([3, 7, 0, 59, 12, 55])
    out = per_hop_neighbor_sample(colptr, row, seed, [3, 2], replace, torch.Generator().manual_seed(0))
    check_structure(out, colptr, row, seed, [3, 2], replace, False)


def test_same_distribution_as_reference(sample_device):
    """Hop sizes of the fused op and the per-hop reference agree on average."""
    colptr, row = random_graph(2000, 30_000, device=sample_device)
    seed = torch.arange(0, 1990, 10, device=sample_device)
    g = torch.Generator(device=sample_device).manual_seed(0)
    ours = torch.tensor([neighbor_sample(colptr, row, seed, [5, 5], random_seed=s).num_sampled_nodes
                         for s in range(40)], dtype=torch.double)
    ref = torch.tensor([per_hop_neighbor_sample(colptr, row, seed, [5, 5], generator=g).num_sampled_nodes
                        for _ in range(40)], dtype=torch.double)
    assert torch.allclose(ours.mean(0), ref.mean(0), rtol=0.02)


# Weighted sampling ###########################################################

def star(weights, device):
    """Node 0 with in-neighbours 1..len(weights) carrying `weights`."""
    d = len(weights)
    colptr = torch.tensor([0, d] + [d] * d, device=device)
    return colptr, torch.arange(1, d + 1, device=device), torch.tensor(weights, dtype=torch.float, device=device)


@pytest.mark.parametrize('replace', [False, True])
def test_weighted_chi_square(sample_device, replace):
    weights = [1.0, 2.0, 3.0, 4.0, 0.0, 10.0]
    colptr, row, w = star(weights, sample_device)
    trials = 6000
    # fanout 1: P(pick j) = w_j / sum(w) with or without replacement
    out = neighbor_sample(colptr, row, torch.zeros(trials, dtype=torch.long, device=sample_device), [1],
                          replace=replace, disjoint=True, random_seed=4, edge_weight=w)
    counts = torch.bincount(out.edge.cpu(), minlength=len(weights)).double()
    assert counts[4] == 0  # zero weight: never drawn
    expected = torch.tensor(weights, dtype=torch.double) / sum(weights) * trials
    keep = expected > 0
    chi2 = float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    assert chi2 < chi_square_bound(int(keep.sum()) - 1)
    uniform = torch.full_like(expected, trials / len(weights))  # a weight-blind sampler fails it
    assert float(((uniform[keep] - expected[keep]) ** 2 / expected[keep]).sum()) > chi_square_bound(4)


def test_weighted_without_replacement_is_successive_sampling(sample_device):
    """fanout 2 of weights (1, 1, 2): P(pair) follows draw-one-renormalise-draw-again."""
    colptr, row, w = star([1.0, 1.0, 2.0], sample_device)
    trials = 6000
    out = neighbor_sample(colptr, row, torch.zeros(trials, dtype=torch.long, device=sample_device), [2],
                          disjoint=True, random_seed=6, edge_weight=w)
    pairs = out.edge.cpu().view(trials, 2).sort(dim=1).values
    p01 = 2 * (1 / 4) * (1 / 3)                  # {0, 1}
    p02 = (1 / 4) * (2 / 3) + (2 / 4) * (1 / 2)  # {0, 2}, the same for {1, 2}
    freq = [float(((pairs[:, 0] == a) & (pairs[:, 1] == b)).double().mean()) for a, b in ((0, 1), (0, 2), (1, 2))]
    assert abs(freq[0] - p01) < 0.02 and abs(freq[1] - p02) < 0.025 and abs(freq[2] - p02) < 0.025


_M64 = (1 << 64) - 1


def _mix64(x: int) -> int:  # csrc/sampling/sampling_rng.h, in Python integers
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _uniform_open(key: int, draw: int) -> float:
    r = _mix64(key ^ _mix64((draw + 0x632BE59BD9B4E019) & _M64))
    return ((r >> 11) + 1.0) / 9007199254740992.0


@pytest.mark.parametrize('fanout', [5, 40, 100])
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_weighted_draws_match_the_reference(sample_device, fanout, dtype):
    """Weighted draws without replacement, recomputed in Python from the shared RNG: the
    `fanout` largest Efraimidis-Spirakis keys log(u) / w of each node's positive edges,
    in decreasing order. Fanout 5: the CPU kernel's running top-k that passes over most
    positions without their log; 100: its full sort; 40: the CUDA kernel's serial draw
    (above 32) against nodes of 30-5,000 edges (drawn by a thread, a warp or a block).
    float32 weights are read as they are and widened exactly: the keys are float64's."""
    g = torch.Generator().manual_seed(12)
    degrees = [5000, 700, 64, 30, 0]
    colptr = torch.tensor([0] + degrees).cumsum(0)
    row = torch.randint(0, len(degrees), (int(colptr[-1]),), generator=g)
    w = (torch.rand(row.numel(), generator=g, dtype=torch.float64) * 5).to(dtype)
    w[torch.rand(row.numel(), generator=g) < 0.1] = 0
    seed = torch.arange(len(degrees))
    out = neighbor_sample(colptr.to(sample_device), row.to(sample_device), seed.to(sample_device), [fanout],
                          disjoint=True, random_seed=33, edge_weight=w.to(sample_device))
    hop = _mix64(33 ^ _mix64(1))  # hop_key(33, 0)
    for i, v in enumerate(seed.tolist()):
        node_key = _mix64(hop ^ _mix64(i))  # slot_key: frontier slot i
        start, end = int(colptr[v]), int(colptr[v + 1])
        keyed = [(math.log(_uniform_open(node_key, e - start)) / float(w[e]), e)
                 for e in range(start, end) if w[e] > 0]
        want = [e for _, e in sorted(keyed, key=lambda t: (-t[0], t[1]))[:fanout]]
        got = out.edge[out.col == i].tolist()
        assert got == want, f'node {v}'


@pytest.mark.parametrize('replace', [False, True])
def test_weights_of_every_float_dtype_give_the_same_sample(sample_device, replace):
    """float32 and float64 weights are read as given, float16 and bfloat16 widened to
    float64: weights of equal values give equal samples whatever their dtype, a
    non-contiguous tensor included."""
    colptr, row = random_graph(300, 20_000, device=sample_device, hubs=2)  # two of ~5,000 in-edges
    g = torch.Generator().manual_seed(4)
    w = torch.randint(0, 9, (row.numel(),), generator=g).double() / 8  # exact in every float dtype
    seed = torch.cat([torch.arange(2), torch.randint(2, 300, (78,), generator=g)]).to(sample_device)
    outs = []
    for weights in (w, w.float(), w.half(), w.bfloat16(), torch.stack([w.float(), w.float()], 1)[:, 0]):
        out = neighbor_sample(colptr, row, seed, [5, 40, -1], replace=replace, random_seed=8,
                              edge_weight=weights.to(sample_device))
        outs.append(out)
    for out in outs[1:]:
        for key in ('node', 'row', 'col', 'edge'):
            assert torch.equal(getattr(out, key), getattr(outs[0], key)), key
    assert outs[0].edge.numel() > 0 and bool((w.to(sample_device)[outs[0].edge] > 0).all())


@requires_cuda
def test_float32_weights_are_not_copied_on_the_gpu():
    """A float32 weight tensor is read in place by the CUDA sampler: sampling with it
    leaves no E-sized copy behind (a float64 copy would be 8 B per edge)."""
    colptr, row = random_graph(20_000, 2_000_000, device='cuda')
    w = torch.rand(row.numel(), device='cuda')
    seed = torch.arange(256, device='cuda')
    neighbor_sample(colptr, row, seed, [5, 5], random_seed=0)  # (the uniform plan's buffers)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for i in range(2):  # the plan is built, then replayed
        neighbor_sample(colptr, row, seed, [5, 5], random_seed=i, edge_weight=w)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - before < row.numel() * 2


def test_weighted_counts_and_errors(sample_device):
    colptr, row, w = star([0.0, 0.0, 1.0, 1.0], sample_device)
    out = neighbor_sample(colptr, row, torch.tensor([0], device=sample_device), [3], edge_weight=w, random_seed=0)
    assert sorted(out.edge.tolist()) == [2, 3] and out.num_sampled_edges == [2]  # capped at positive weights
    out = neighbor_sample(colptr, row, torch.tensor([0], device=sample_device), [3], replace=True, edge_weight=w)
    assert out.num_sampled_edges == [3] and set(out.edge.tolist()) <= {2, 3}
    with pytest.raises(TypeError, match='edge_weight must be a float tensor'):
        neighbor_sample(colptr, row, torch.tensor([0], device=sample_device), [1], edge_weight=w[:2])
    with pytest.raises(ValueError, match='non-negative'):
        neighbor_sample(colptr, row, torch.tensor([0], device=sample_device), [1], edge_weight=-w)


def test_checked_weights_are_checked_again_after_an_in_place_change():
    """The CPU path scans a weight tensor once and marks it; an in-place edit drops the mark."""
    colptr, row, w = star([0.0, 0.0, 1.0, 1.0], 'cpu')
    neighbor_sample(colptr, row, torch.tensor([0]), [1], edge_weight=w)
    w[0] = -1.0
    with pytest.raises(ValueError, match='non-negative'):
        neighbor_sample(colptr, row, torch.tensor([0]), [1], edge_weight=w)


# Temporal sampling ###########################################################

@pytest.mark.parametrize('mode', ['weighted', 'temporal-uniform', 'temporal-last'])
def test_edges_grouped_by_destination_in_every_mode(sample_device, mode):
    """``col`` never decreases (layers build their graph from it without sorting)."""
    colptr, row = random_graph(300, 4000, device=sample_device)
    g = torch.Generator().manual_seed(3)
    extra = dict(disjoint=mode.startswith('temporal'))
    if mode == 'weighted':
        extra['edge_weight'] = torch.rand(row.numel(), generator=g).to(sample_device)
    else:
        extra.update(node_time=torch.randint(0, 50, (300,), generator=g).to(sample_device),
                     seed_time=torch.randint(20, 50, (40,), generator=g).to(sample_device),
                     temporal_strategy=mode.split('-')[1])
    seed = torch.randint(0, 295, (40,), generator=g).to(sample_device)
    out = neighbor_sample(colptr, row, seed, [5, 3, -1], random_seed=1, **extra)
    assert out.col.numel() > 0 and bool((out.col[1:] >= out.col[:-1]).all())


def test_temporal_op_filters_and_strategies(sample_device):
    colptr = torch.tensor([0, 6] + [6] * 6, device=sample_device)  # node 0 <- 1..6
    row = torch.arange(1, 7, device=sample_device)
    node_time = torch.arange(7, device=sample_device)
    seeds = torch.tensor([0, 0], device=sample_device)
    out = neighbor_sample(colptr, row, seeds, [2], disjoint=True, node_time=node_time,
                          seed_time=torch.tensor([3, 6], device=sample_device), temporal_strategy='last')
    assert out.node.tolist() == [0, 0, 2, 3, 5, 6]
    out = neighbor_sample(colptr, row, seeds, [-1], disjoint=True, node_time=node_time,
                          seed_time=torch.tensor([2, 4], device=sample_device))
    assert sorted(out.node[2:].tolist()) == [1, 1, 2, 2, 3, 4]
    edge_time = torch.tensor([5, 1, 5, 1, 5, 1], device=sample_device)
    out = neighbor_sample(colptr, row, seeds[:1], [-1], disjoint=True, edge_time=edge_time,
                          seed_time=torch.tensor([2], device=sample_device))
    assert out.node.tolist() == [0, 2, 4, 6]
    counts = torch.zeros(6)
    for s in range(300):  # uniform among the eligible (times 1..4 of 6)
        out = neighbor_sample(colptr, row, seeds[:1], [1], disjoint=True, node_time=node_time,
                              seed_time=torch.tensor([4], device=sample_device), random_seed=s)
        counts[out.node[1].item() - 1] += 1
    assert counts[4:].sum() == 0 and bool((counts[:4] > 40).all())


def test_sort_columns_by_time():
    """Each column in ascending max(node time, edge time), ties in CSC order; perm maps
    the new positions to the old ones; the columns keep their edges."""
    colptr, row = random_graph(200, 3000, hubs=5)
    g = torch.Generator().manual_seed(4)
    node_time = torch.randint(0, 30, (200,), generator=g)
    edge_time = torch.randint(0, 30, (row.numel(),), generator=g)
    col = torch.repeat_interleave(torch.arange(200), colptr[1:] - colptr[:-1])
    for nt, et in [(node_time, None), (None, edge_time), (node_time, edge_time)]:
        new_row, new_et, perm = sort_columns_by_time(colptr, row, nt, et)
        assert torch.equal(new_row, row[perm]) and torch.equal(col[perm], col)  # edges stay in their column
        assert (new_et is None) == (et is None) and (et is None or torch.equal(new_et, et[perm]))
        assert torch.equal(perm.sort().values, torch.arange(row.numel()))
        key = torch.zeros_like(new_row) if nt is None else nt[new_row]
        key = key if et is None else torch.maximum(key, new_et)
        same_col = col[1:] == col[:-1]
        assert bool((key[1:][same_col] >= key[:-1][same_col]).all())
        ties = same_col & (key[1:] == key[:-1])
        assert bool((perm[1:][ties] > perm[:-1][ties]).all())  # stable
        assert columns_sorted_by_time(colptr, new_row, nt, new_et)
        assert not columns_sorted_by_time(colptr, row, nt, et)
    # times spread so wide that (column, time) overflows one int64 key: two stable sorts, same order
    wide = sort_columns_by_time(colptr, row, node_time * 2 ** 55 - 2 ** 60)
    assert all(torch.equal(a, b) for a, b in zip(wide[::2], sort_columns_by_time(colptr, row, node_time)[::2]))
    with pytest.raises(ValueError, match='node_time or edge_time'):
        sort_columns_by_time(colptr, row)
    assert not columns_sorted_by_time(colptr, row)  # no times: nothing to search
    with pytest.raises(IndexError, match='outside the 10 entries of node_time'):
        columns_sorted_by_time(colptr, row, node_time[:10])
    with pytest.raises(RuntimeError, match='one entry per edge'):
        columns_sorted_by_time(colptr, row, edge_time=edge_time[:-1])


def test_columns_sorted_by_time_against_brute_force():
    """Small random graphs with empty columns (leading, trailing, repeated starts), node
    times, edge times or both: the check equals a column-by-column test."""
    g = torch.Generator().manual_seed(0)
    for trial in range(300):
        n = int(torch.randint(1, 8, (1,), generator=g))
        colptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.randint(0, 4, (n,), generator=g).cumsum(0)])
        row = torch.randint(0, n, (int(colptr[-1]),), generator=g)
        nt = None if trial % 3 == 1 else torch.randint(0, 4, (n,), generator=g)
        et = None if trial % 3 == 0 else torch.randint(0, 4, (row.numel(),), generator=g)
        key = nt[row] if nt is not None else et
        key = torch.maximum(key, et) if nt is not None and et is not None else key
        want = all(bool((key[colptr[c]:colptr[c + 1]].diff() >= 0).all()) for c in range(n))
        assert columns_sorted_by_time(colptr, row, nt, et) == want, f'trial {trial}'


def with_unsorted_column(colptr, row, node_time):
    """The graph plus one node whose column holds two edges out of time order: no edge
    leads to the new node, so no sample reaches it, but the columns are no longer all
    in time order and the samplers scan them instead of searching."""
    late, early = int(torch.argmax(node_time)), int(torch.argmin(node_time))
    assert node_time[late] > node_time[early]
    return (torch.cat([colptr, colptr[-1:] + 2]), torch.cat([row, torch.tensor([late, early], device=row.device)]),
            torch.cat([node_time, node_time[:1]]))


@pytest.mark.parametrize('strategy', ['uniform', 'last'])
def test_temporal_search_equals_scan(sample_device, strategy):
    """Columns in time order are binary-searched (both kernels; the order is checked
    once per graph): the sample equals the scanned one, taken on the same graph with an
    unreachable unsorted column added. A graph in order but for one pair of edges (in
    the first column with edges, after empty ones, or in the last) must be scanned too,
    or the samples would differ."""
    colptr, row = random_graph(400, 8000, hubs=3)
    colptr, row = torch.cat([torch.zeros(3, dtype=torch.long), colptr]), row + 3  # nodes 0-2: no in-edges
    g = torch.Generator().manual_seed(8)
    node_time = torch.randint(0, 50, (403,), generator=g)
    row, _, _ = sort_columns_by_time(colptr, row, node_time)
    graphs = [row]
    for column in [3, 397]:  # the first and the last column with edges (398-402 have none)
        begin, end = int(colptr[column]), int(colptr[column + 1])
        bad = row.clone()
        late = begin + int(torch.argmax(node_time[row[begin:end]]))  # a latest edge to the front
        bad[begin], bad[late] = row[late], row[begin]
        assert node_time[bad[begin]] > node_time[bad[begin + 1]]
        graphs.append(bad)
    seed = torch.cat([torch.full((32,), 3), torch.full((32,), 397), torch.randint(0, 400, (64,), generator=g)])
    seed_time = torch.randint(10, 40, (128,), generator=g)
    on = lambda t: t.to(sample_device)  # noqa: E731
    for graph in graphs:
        scan_graph = with_unsorted_column(colptr, graph, node_time)
        assert columns_sorted_by_time(on(colptr), on(graph), on(node_time)) == (graph is row)
        assert not columns_sorted_by_time(*(on(t) for t in scan_graph))
        searched, scanned = (neighbor_sample(on(c), on(r), on(seed), [3, 2], disjoint=True, random_seed=2,
                                             node_time=on(t), seed_time=on(seed_time), temporal_strategy=strategy)
                             for c, r, t in [(colptr, graph, node_time), scan_graph])
        assert torch.equal(searched.node, scanned.node) and torch.equal(searched.edge, scanned.edge)
        assert searched.num_sampled_edges == scanned.num_sampled_edges


def test_time_order_is_checked_again_after_an_in_place_change(sample_device):
    """The order check is remembered by the tensors' identity and version: a graph sorted,
    sampled (searched), then edited in place out of order must be scanned, not searched
    with the stale answer, in both kernels (the CUDA plan and the CPU memo)."""
    colptr, row = random_graph(400, 8000, hubs=3)
    g = torch.Generator().manual_seed(9)
    node_time = torch.randint(0, 50, (400,), generator=g)
    row = sort_columns_by_time(colptr, row, node_time)[0]
    on = lambda t: t.to(sample_device)  # noqa: E731
    colptr_d, row_d, node_time_d = on(colptr), on(row).clone(), on(node_time)
    seed, seed_time = on(torch.zeros(64, dtype=torch.long)), on(torch.randint(10, 40, (64,), generator=g))
    kwargs = dict(disjoint=True, random_seed=4, node_time=node_time_d, seed_time=seed_time)
    neighbor_sample(colptr_d, row_d, seed, [3, 2], **kwargs)  # (remembered: sorted)
    begin, end = int(colptr[0]), int(colptr[1])
    late = begin + int(torch.argmax(node_time[row[begin:end]]))
    row_d[begin], row_d[late] = int(row[late]), int(row[begin])  # node 0's latest edge to its front
    assert not columns_sorted_by_time(colptr_d, row_d, node_time_d)
    got = neighbor_sample(colptr_d, row_d, seed, [3, 2], **kwargs)
    scan_colptr, scan_row, scan_time = with_unsorted_column(colptr_d, row_d, node_time_d)
    want = neighbor_sample(scan_colptr, scan_row, seed, [3, 2], **{**kwargs, 'node_time': scan_time})
    assert torch.equal(got.node, want.node) and torch.equal(got.edge, want.edge)


def test_temporal_rows_outside_node_time(sample_device):
    """A row whose node has no time is reported before any kernel reads its time, by both
    kernels and for heterogeneous graphs too (there, rows are otherwise checked while
    sampling)."""
    colptr, row = random_graph(device=sample_device)
    node_time = torch.zeros(60, dtype=torch.long, device=sample_device)
    seed, seed_time = torch.tensor([1, 2], device=sample_device), torch.zeros(2, dtype=torch.long, device=sample_device)
    bad = row.clone()
    bad[5] = 70
    with pytest.raises(IndexError, match='out'):  # (the CUDA plan checks the rows against colptr first)
        neighbor_sample(colptr, bad, seed, [2], disjoint=True, node_time=node_time, seed_time=seed_time)
    et = ('paper', 'cites', 'paper')
    with pytest.raises(IndexError, match='row holds node 70, outside the 60 entries of node_time'):
        hetero_neighbor_sample({et: colptr}, {et: bad}, {'paper': seed}, {et: [2]}, {'paper': 60}, disjoint=True,
                               node_time={'paper': node_time}, seed_time={'paper': seed_time})


def test_temporal_bad_input(sample_device):
    colptr, row = random_graph(device=sample_device)
    seeds = torch.tensor([1, 2], device=sample_device)
    node_time = torch.zeros(60, dtype=torch.long, device=sample_device)
    with pytest.raises(ValueError, match='disjoint=True'):
        neighbor_sample(colptr, row, seeds, [2], node_time=node_time)
    with pytest.raises(TypeError, match='integer tensor'):
        neighbor_sample(colptr, row, seeds, [2], disjoint=True, node_time=node_time.float())
    with pytest.raises(ValueError, match='needs seed_time'):
        neighbor_sample(colptr, row, seeds, [2], disjoint=True, edge_time=torch.zeros_like(row))
    with pytest.raises(ValueError, match='without node_time'):
        neighbor_sample(colptr, row, seeds, [2], seed_time=torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="'uniform' or 'last'"):
        neighbor_sample(colptr, row, seeds, [2], disjoint=True, node_time=node_time, temporal_strategy='first')


CPU_CUDA_MODES = ['uniform', 'weighted', 'temporal-uniform', 'temporal-last']
SORTED_TEMPORAL_MODES = ['temporal-uniform-sorted', 'temporal-last-sorted']  # columns in time order


@requires_cuda
@pytest.mark.parametrize('mode,disjoint', [(m, d) for m in CPU_CUDA_MODES + SORTED_TEMPORAL_MODES
                                           for d in (False, True)
                                           if d or not m.startswith('temporal')])  # temporal needs disjoint
@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('num_seeds,fanouts', [(500, [10, 5, -1]), (1500, [40, 3])])
@pytest.mark.parametrize('hubs', [0, 20, 2])
def test_cpu_and_cuda_give_the_same_sample(mode, disjoint, replace, num_seeds, fanouts, hubs):
    """Same RNG, same algorithm, first-seen relabelling: sample-for-sample equal. Four
    batches per setting: the first runs the kernels, the next ones replay the CUDA
    graph of the cached plan with new seeds and new random seeds. 500 seeds are numbered
    by the one-block first kernel, 1500 by the seed and numbering kernels; fanouts up to
    32 draw in lane groups (expanded by the same kernel when uniform), 40 and -1 a
    thread per node. With hubs (20 nodes of ~1,500 in-edges among ~20-edge ones, or 2
    of ~15,000, seeded in every batch) the weighted and temporal counts and draws of the
    hubs are made by whole warps (up to 32 draws; weighted with replacement and 40 draws
    without stay with one thread), weighted draws of the 15,000-edge ones by a whole
    block (slices merged).
    '-sorted': the graph's columns sorted by time (the later of node and edge time),
    where the CUDA sampler binary-searches each column and the CPU kernel scans it."""
    colptr, row = random_graph(3000, 60_000, hubs=hubs)
    g = torch.Generator().manual_seed(5)
    extra = {}
    if mode == 'weighted':
        w = torch.rand(row.numel(), generator=g)
        w[torch.rand(row.numel(), generator=g) < 0.2] = 0  # zero weights are never drawn
        extra['edge_weight'] = w
    elif mode.startswith('temporal'):
        extra = dict(node_time=torch.randint(0, 100, (3000,), generator=g),
                     edge_time=torch.randint(0, 100, (row.numel(),), generator=g),
                     temporal_strategy=mode.split('-')[1])
        if mode.endswith('-sorted'):
            row, extra['edge_time'], _ = sort_columns_by_time(colptr, row, extra['node_time'], extra['edge_time'])
    on_gpu = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in extra.items()}
    colptr_gpu, row_gpu = colptr.cuda(), row.cuda()
    for batch in range(4):
        seed = torch.randint(0, 2990, (num_seeds,), generator=g)
        seed[:hubs] = torch.arange(hubs)
        if mode.startswith('temporal'):
            extra['seed_time'] = torch.randint(20, 100, (num_seeds,), generator=g)
            on_gpu['seed_time'] = extra['seed_time'].cuda()
        poison_cuda_allocator()
        cpu = neighbor_sample(colptr, row, seed, fanouts, replace, disjoint, random_seed=21 + batch, **extra)
        gpu = neighbor_sample(colptr_gpu, row_gpu, seed.cuda(), fanouts, replace, disjoint,
                              random_seed=21 + batch, **on_gpu)
        for name, a, b in zip(['node', 'row', 'col', 'edge'], cpu[:4], gpu[:4]):
            assert torch.equal(a, b.cpu()), f'{name} differs in batch {batch}'
        if disjoint:
            assert torch.equal(cpu.batch, gpu.batch.cpu())
        assert cpu.num_sampled_nodes == gpu.num_sampled_nodes and cpu.num_sampled_edges == gpu.num_sampled_edges


@requires_cuda
def test_cuda_plans_without_graph_capture_or_spinning_agree(monkeypatch):
    colptr, row = random_graph(500, 5000, device='cuda')
    seed = torch.arange(0, 400, 7, device='cuda')
    replayed = [neighbor_sample(colptr, row, seed, [4, 4], random_seed=s) for s in range(3)]
    monkeypatch.setenv('PYG_ACCEL_SAMPLER_CUDA_GRAPHS', '0')
    colptr2, row2 = colptr.clone(), row.clone()  # a new plan, run eagerly
    for wait in ('block', 'sleep'):  # and waits for the counts asleep, both ways
        monkeypatch.setenv('PYG_ACCEL_SAMPLER_WAIT', wait)
        for s, want in enumerate(replayed):
            got = neighbor_sample(colptr2, row2, seed, [4, 4], random_seed=s)
            assert torch.equal(got.node, want.node) and torch.equal(got.row, want.row)
    monkeypatch.setenv('PYG_ACCEL_SAMPLER_WAIT', 'nap')
    with pytest.raises(RuntimeError, match='PYG_ACCEL_SAMPLER_WAIT must be spin, block or sleep'):
        neighbor_sample(colptr2, row2, seed, [4, 4])
    monkeypatch.setenv('PYG_ACCEL_SAMPLER_WAIT', 'sleep')  # the plan still works after the error
    got = neighbor_sample(colptr2, row2, seed, [4, 4], random_seed=0)
    assert torch.equal(got.node, replayed[0].node)


def test_clear_sampler_cache():
    """Both CUDA samplers' plans are dropped: the homogeneous and the heterogeneous one."""
    from pyg_accel.ops import clear_sampler_cache
    if torch.cuda.is_available():
        clear_sampler_cache()
        colptr, row = random_graph(device='cuda')
        neighbor_sample(colptr, row, torch.tensor([1, 2], device='cuda'), [2])
        colptrs, rows, num_nodes = random_hetero_graph()
        hetero_neighbor_sample({et: t.cuda() for et, t in colptrs.items()}, {et: t.cuda() for et, t in rows.items()},
                               {'paper': torch.tensor([1, 2], device='cuda')}, {et: [2] for et in colptrs}, num_nodes)
        assert clear_sampler_cache() == 2
    assert clear_sampler_cache() == 0


def test_last_sample_wait_is_part_of_the_call():
    """The wait the benchmark subtracts to get a call's host time lies inside the call;
    without a CUDA sample there is none."""
    import time
    from pyg_accel.ops import last_sample_wait_us
    colptr, row = random_graph()
    neighbor_sample(colptr, row, torch.tensor([1, 2]), [2])
    if not torch.cuda.is_available():
        assert last_sample_wait_us() == 0.0
        return
    colptr, row = colptr.cuda(), row.cuda()
    colptrs, rows, num_nodes = random_hetero_graph()
    colptrs, rows = ({et: t.cuda() for et, t in d.items()} for d in (colptrs, rows))
    samples = (lambda: neighbor_sample(colptr, row, torch.arange(0, 60, 3, device='cuda'), [5, 5]),
               lambda: hetero_neighbor_sample(colptrs, rows, {'paper': torch.arange(0, 60, 3, device='cuda')},
                                              {et: [5, 5] for et in colptrs}, num_nodes))
    for sample in samples:  # either sampler's
        for _ in range(3):  # (the plan's CUDA graph is captured on its second call)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            sample()
            wall_us = (time.perf_counter() - t0) * 1e6
            assert 0.0 < last_sample_wait_us() < wall_us


@requires_cuda
def test_cuda_plan_follows_in_place_graph_edits():
    """A plan is keyed by its tensors' versions: editing the graph in place is seen."""
    colptr, row = random_graph(200, 2000, device='cuda')
    seed = torch.arange(0, 150, 3, device='cuda')
    for _ in range(2):
        neighbor_sample(colptr, row, seed, [3], random_seed=1)
    row.zero_()  # every edge now comes from node 0
    out = neighbor_sample(colptr, row, seed, [3], random_seed=1)
    assert bool((out.node[out.row] == 0).all())


@requires_cuda
def test_cuda_degree_grown_behind_the_version_counter_is_an_error_not_an_overflow():
    """A plan's buffers for fanout -1 are sized by the largest degree it saw. colptr
    edited through .data (as through numpy or DLPack: no version bump) so that a node has
    more neighbours is refused, not written past the buffers; after clear_sampler_cache()
    the graph is sampled as it is now."""
    from pyg_accel.ops import clear_sampler_cache
    colptr = torch.tensor([0, 1, 2, 3, 4], device='cuda')
    row = torch.tensor([1, 2, 3, 0], device='cuda')
    seed = torch.tensor([3], device='cuda')
    for _ in range(2):  # eager, then captured
        assert neighbor_sample(colptr, row, seed, [-1]).num_sampled_edges == [1]
    colptr.data.copy_(torch.tensor([0, 0, 0, 0, 4]))  # node 3 now has every edge
    with pytest.raises(RuntimeError, match='node 3 has more neighbours.*clear_sampler_cache'):
        neighbor_sample(colptr, row, seed, [-1])
    clear_sampler_cache()
    out = neighbor_sample(colptr, row, seed, [-1])
    assert out.num_sampled_edges == [4] and sorted(out.node[out.row].tolist()) == [0, 1, 2, 3]


@requires_cuda
def test_hetero_cuda_degree_grown_behind_the_version_counter_is_an_error():
    from pyg_accel.ops import clear_sampler_cache
    et = ('a', 'to', 'a')
    colptr = torch.tensor([0, 1, 2, 3, 4], device='cuda')
    row = torch.tensor([1, 2, 3, 0], device='cuda')
    seeds = {'a': torch.tensor([3], device='cuda')}
    for _ in range(2):
        hetero_neighbor_sample({et: colptr}, {et: row}, seeds, {et: [-1]}, {'a': 4})
    colptr.data.copy_(torch.tensor([0, 0, 0, 0, 4]))
    with pytest.raises(RuntimeError, match='node 3 of edge type 0.*clear_sampler_cache'):
        hetero_neighbor_sample({et: colptr}, {et: row}, seeds, {et: [-1]}, {'a': 4})
    clear_sampler_cache()
    out = hetero_neighbor_sample({et: colptr}, {et: row}, seeds, {et: [-1]}, {'a': 4})
    assert out.row[et].numel() == 4


@requires_cuda
def test_cuda_bad_seed_after_a_good_batch_is_an_error_and_the_plan_recovers():
    colptr, row = random_graph(device='cuda')
    seed = torch.tensor([1, 2, 3], device='cuda')
    good = neighbor_sample(colptr, row, seed, [2, 2], random_seed=4)
    with pytest.raises(IndexError, match='seed 60 is out of range'):
        neighbor_sample(colptr, row, torch.tensor([1, 60, 3], device='cuda'), [2, 2], random_seed=4)
    again = neighbor_sample(colptr, row, seed, [2, 2], random_seed=4)
    assert torch.equal(good.node, again.node) and torch.equal(good.row, again.row)


# Heterogeneous op ############################################################



def test_hetero_op_structure_and_errors():
    colptr, row = random_graph(60, 400)  # paper <- paper
    a2p = torch.randint(0, 30, (300,))  # author -> paper edges, grouped by paper
    p_of = torch.randint(0, 60, (300,)).sort().values
    a2p_colptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(p_of, minlength=60).cumsum(0)])
    graphs = {('paper', 'cites', 'paper'): (colptr, row), ('author', 'writes', 'paper'): (a2p_colptr, a2p)}
    colptrs = {et: g[0] for et, g in graphs.items()}
    rows = {et: g[1] for et, g in graphs.items()}
    seed = torch.tensor([5, 9, 11])
    out = hetero_neighbor_sample(colptrs, rows, {'paper': seed}, {et: [2, 2] for et in graphs},
                                 {'paper': 60, 'author': 30}, random_seed=3)
    assert torch.equal(out.node['paper'][:3], seed) and out.num_sampled_nodes['author'][0] == 0
    for et, (cp, rw) in graphs.items():
        src, _, dst = et
        r, c, e = out.row[et], out.col[et], out.edge[et]
        col_of_edge = torch.repeat_interleave(torch.arange(cp.numel() - 1), cp[1:] - cp[:-1])
        assert torch.equal(out.node[src][r], rw[e]) and torch.equal(out.node[dst][c], col_of_edge[e])
        assert sum(out.num_sampled_edges[et]) == e.numel()
    with pytest.raises(ValueError, match='unknown node types'):
        hetero_neighbor_sample(colptrs, rows, {'venue': seed}, {et: [2] for et in graphs}, {'paper': 60, 'author': 30})
    with pytest.raises(ValueError, match='share edge types'):
        hetero_neighbor_sample(colptrs, rows, {'paper': seed}, {('paper', 'cites', 'paper'): [2]},
                               {'paper': 60, 'author': 30})
    with pytest.raises(RuntimeError, match='out of range'):
        hetero_neighbor_sample(colptrs, rows, {'paper': torch.tensor([60])}, {et: [2] for et in graphs},
                               {'paper': 60, 'author': 30})
    # weights and times: clear errors before the kernel
    cites, writes = ('paper', 'cites', 'paper'), ('author', 'writes', 'paper')
    args = (colptrs, rows, {'paper': seed}, {et: [2] for et in graphs}, {'paper': 60, 'author': 30})
    paper_time = {'paper': torch.arange(60)}
    n = rows[cites].numel()
    cases = [
        (dict(edge_weight={cites: torch.ones(n, dtype=torch.long)}), TypeError, 'must be a float tensor'),
        (dict(edge_weight={cites: torch.ones(3)}), TypeError, f'shape \\[{n}\\]'),
        (dict(edge_weight={cites: -torch.ones(n)}), ValueError, 'finite and non-negative'),
        (dict(edge_weight={('a', 'b', 'c'): torch.ones(n)}), ValueError, 'unknown types'),
        (dict(node_time={'paper': torch.rand(60)}, disjoint=True), TypeError, 'must be an integer tensor'),
        (dict(node_time=paper_time), ValueError, 'needs disjoint=True'),
        (dict(node_time=paper_time, edge_weight={cites: torch.ones(n)}, disjoint=True), ValueError,
         'weighted temporal'),
        (dict(seed_time={'paper': torch.zeros(3, dtype=torch.long)}), ValueError, 'without node_time'),
        (dict(edge_time={writes: torch.zeros(300, dtype=torch.long)}, disjoint=True), ValueError,
         'need seed_time'),
        (dict(node_time=paper_time, disjoint=True, temporal_strategy='first'), ValueError, 'temporal_strategy'),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            hetero_neighbor_sample(*args, **kwargs)
    # types without a weight are drawn uniformly; a zero-weight type draws nothing
    out = hetero_neighbor_sample(*args, edge_weight={writes: torch.zeros(300)}, random_seed=1)
    assert out.edge[writes].numel() == 0 and out.edge[cites].numel() > 0


@requires_cuda
def test_int32_graph_copies_are_reused_until_the_graph_changes():
    """On the GPU (no numpy writes), an int32 graph's int64 copy is kept by version."""
    from pyg_accel.ops.sampling import _graph_long
    colptr, row = random_graph(device='cuda')
    row32 = row.int()
    assert _graph_long(row32.cpu()) is not _graph_long(row32.cpu())  # (the CPU converts per call)
    first = _graph_long(row32)
    assert first.dtype == torch.int64 and _graph_long(row32) is first
    row32[0] = row32[1]  # an in-place edit makes a fresh copy
    second = _graph_long(row32)
    assert second is not first and torch.equal(second, row32.long())
    assert _graph_long(row) is row


def random_hetero_graph(seed=0, hubs=0, scale=1):
    """Three node types (one with no edges in or out: 'venue'), four edge types (one
    from a type to itself, two into 'paper'), with self-loops, duplicate edges and
    isolated nodes; CSC per edge type. ``hubs`` > 0: half of each edge type's edges lead
    to its first ``hubs`` destination nodes. ``scale``: times as many edges."""
    num_nodes = {'paper': 400, 'author': 250, 'venue': 7}
    specs = {('paper', 'cites', 'paper'): 3000, ('author', 'writes', 'paper'): 1500,
             ('paper', 'written_by', 'author'): 1500, ('author', 'knows', 'author'): 600}
    g = torch.Generator().manual_seed(seed)
    colptrs, rows = {}, {}
    for et, num_edges in specs.items():
        num_edges *= scale
        src, _, dst = et
        row = torch.randint(0, num_nodes[src], (num_edges,), generator=g)
        col = torch.randint(0, num_nodes[dst] - 10, (num_edges,), generator=g)  # the last 10 have no in-edges
        if hubs:
            col[::2] = torch.randint(0, hubs, (col[::2].numel(),), generator=g)
        row, col = torch.cat([row, row[:50]]), torch.cat([col, col[:50]])  # duplicates
        if src == dst:
            row[:20] = col[:20]  # self-loops
        order = torch.argsort(col * num_nodes[src] + row)
        rows[et] = row[order]
        colptrs[et] = torch.cat([torch.zeros(1, dtype=torch.long),
                                 torch.bincount(col, minlength=num_nodes[dst]).cumsum(0)])
    return colptrs, rows, num_nodes


HETERO_FANOUTS = {('paper', 'cites', 'paper'): [6, 3, -1], ('author', 'writes', 'paper'): [4, 0, 2],
                  ('paper', 'written_by', 'author'): [40, 2, 1], ('author', 'knows', 'author'): [-1, 3, 2]}


@requires_cuda
@pytest.mark.parametrize('mode,disjoint', [(m, d) for m in CPU_CUDA_MODES + SORTED_TEMPORAL_MODES
                                           for d in (False, True)
                                           if d or not m.startswith('temporal')])  # temporal needs disjoint
@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('index_dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('hubs', [0, 3])
def test_hetero_cpu_and_cuda_give_the_same_sample(mode, disjoint, replace, index_dtype, hubs):
    """The CUDA heterogeneous kernel draws with the CPU kernel's RNG and numbers nodes in
    its first-seen order per type: sample-for-sample equal, for seeds of two types
    (with repeats), fanouts 0, -1 and > 32, on a poisoned allocator (every output element
    must be written). With hubs (~250-750 in-edges) the weighted and temporal counts and
    draws of the hubs are made by whole warps. '-sorted': the timed edge types' columns
    sorted by time, which the CUDA kernel binary-searches (int32 inputs: converted per
    call, the order remembered by the caller's tensors)."""
    colptrs, rows, num_nodes = random_hetero_graph(hubs=hubs)
    g = torch.Generator().manual_seed(11)
    extra = {}
    if mode == 'weighted':  # weights on two edge types, one with zeros; the others uniform
        extra['edge_weight'] = {}
        for et in [('paper', 'cites', 'paper'), ('author', 'writes', 'paper')]:
            w = torch.rand(rows[et].numel(), generator=g, dtype=torch.float64)
            w[torch.rand(w.numel(), generator=g) < 0.2] = 0
            extra['edge_weight'][et] = w if et[1] == 'cites' else w.float()  # (each type read in its dtype)
    elif mode.startswith('temporal'):  # node times on papers, edge times on one edge type
        extra = dict(node_time={'paper': torch.randint(0, 100, (num_nodes['paper'],), generator=g)},
                     edge_time={('author', 'knows', 'author'):
                                torch.randint(0, 100, (rows[('author', 'knows', 'author')].numel(),), generator=g)},
                     temporal_strategy=mode.split('-')[1])
        if mode.endswith('-sorted'):
            for et in rows:
                node_time, edge_time = extra['node_time'].get(et[0]), extra['edge_time'].get(et)
                if node_time is not None or edge_time is not None:
                    rows[et], sorted_time, _ = sort_columns_by_time(colptrs[et], rows[et], node_time, edge_time)
                    if edge_time is not None:
                        extra['edge_time'][et] = sorted_time
    cuda = lambda value: ({k: v.cuda() for k, v in value.items()} if isinstance(value, dict)  # noqa: E731
                          else value)
    for batch in range(3):
        seeds = {'paper': torch.randint(0, 400, (60,), generator=g),
                 'author': torch.randint(0, 250, (25,), generator=g)}
        seeds['paper'][5] = seeds['paper'][0]  # a repeated seed
        if mode.startswith('temporal'):
            extra['seed_time'] = {t: torch.randint(20, 100, (s.numel(),), generator=g) for t, s in seeds.items()}
        args = [{et: t.to(index_dtype) for et, t in colptrs.items()}, {et: t.to(index_dtype) for et, t in rows.items()}]
        poison_cuda_allocator()
        cpu = hetero_neighbor_sample(*args, seeds, HETERO_FANOUTS, num_nodes, replace, disjoint,
                                     random_seed=5 + batch, **extra)
        gpu = hetero_neighbor_sample(*[cuda(a) for a in args], cuda(seeds), HETERO_FANOUTS, num_nodes, replace,
                                     disjoint, random_seed=5 + batch, **{k: cuda(v) for k, v in extra.items()})
        assert_same_hetero_sample(cpu, gpu, num_nodes, colptrs, disjoint, batch)


def assert_same_hetero_sample(cpu, gpu, num_nodes, colptrs, disjoint, batch=0):
    """The CPU and CUDA heterogeneous samples are equal, field by field, and not empty."""
    assert cpu.num_sampled_nodes == gpu.num_sampled_nodes and cpu.num_sampled_edges == gpu.num_sampled_edges
    for t in num_nodes:
        assert gpu.node[t].is_cuda and torch.equal(cpu.node[t], gpu.node[t].cpu()), f'node[{t}], batch {batch}'
        if disjoint:
            assert torch.equal(cpu.batch[t], gpu.batch[t].cpu()), f'batch[{t}]'
    for et in colptrs:
        for name in ('row', 'col', 'edge'):
            assert torch.equal(getattr(cpu, name)[et], getattr(gpu, name)[et].cpu()), f'{name}[{et}]'
    assert sum(sum(v) for v in gpu.num_sampled_edges.values()) > 0


@requires_cuda
def test_hetero_cuda_plan_follows_in_place_graph_edits():
    """The heterogeneous plan is keyed by its tensors' versions: after its graph replay
    is captured, editing an edge type's rows in place is seen by the next sample."""
    colptrs, rows, num_nodes = random_hetero_graph()
    colptrs = {et: t.cuda() for et, t in colptrs.items()}
    rows = {et: t.cuda() for et, t in rows.items()}
    seeds = {'paper': torch.arange(0, 300, 5, device='cuda')}
    fanouts = {et: [3, 2] for et in colptrs}
    for s in range(3):  # eager, then captured and replayed
        hetero_neighbor_sample(colptrs, rows, seeds, fanouts, num_nodes, random_seed=s)
    cites = ('paper', 'cites', 'paper')
    rows[cites].zero_()  # every 'cites' edge now comes from paper 0
    out = hetero_neighbor_sample(colptrs, rows, seeds, fanouts, num_nodes, random_seed=1)
    assert out.row[cites].numel() > 0 and bool((out.node['paper'][out.row[cites]] == 0).all())


@requires_cuda
def test_hetero_cuda_plan_does_not_keep_a_freed_graph():
    """A plan holds no tensor of the caller's graph: once the graph is freed, its plan
    goes at the next lookup and the graph's memory is released."""
    from pyg_accel.ops import clear_sampler_cache
    clear_sampler_cache()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    colptrs, rows, num_nodes = random_hetero_graph(scale=40)
    colptrs = {et: t.cuda() for et, t in colptrs.items()}
    rows = {et: t.cuda() for et, t in rows.items()}
    graph_bytes = sum(t.numel() * t.element_size() for d in (colptrs, rows) for t in d.values())
    fanouts = {et: [2] for et in colptrs}
    for s in range(2):
        out = hetero_neighbor_sample(colptrs, rows, {'paper': torch.arange(8, device='cuda')}, fanouts, num_nodes,
                                     random_seed=s)
    del colptrs, rows, out
    small, small_rows, small_nodes = random_hetero_graph()  # another graph's call drops the dead plan
    hetero_neighbor_sample({et: t.cuda() for et, t in small.items()}, {et: t.cuda() for et, t in small_rows.items()},
                           {'paper': torch.arange(8, device='cuda')}, {et: [2] for et in small}, small_nodes)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - before < graph_bytes / 4
    clear_sampler_cache()


@requires_cuda
@pytest.mark.parametrize('disjoint', [False, True])
def test_hetero_weighted_giants_are_drawn_as_on_the_cpu(disjoint):
    """Weighted nodes of more than 4,096 in-edges (two papers cited ~7,500 times each,
    seeded in every batch and reached again) are queued apart and drawn by whole CUDA
    blocks, before the other hubs, which warps take as they come free: the same sample
    as the CPU kernel, on a poisoned allocator."""
    colptrs, rows, num_nodes = random_hetero_graph(hubs=2, scale=10)
    cites, writes = ('paper', 'cites', 'paper'), ('author', 'writes', 'paper')
    assert int((colptrs[cites][1:] - colptrs[cites][:-1]).max()) > 4096
    g = torch.Generator().manual_seed(3)
    weights = {}
    for et in (cites, writes):
        w = torch.rand(rows[et].numel(), generator=g, dtype=torch.float64)
        w[torch.rand(w.numel(), generator=g) < 0.2] = 0
        weights[et] = w.float() if et == writes else w
    fanouts = {cites: [6, 3], writes: [4, 2], ('paper', 'written_by', 'author'): [5, 2],
               ('author', 'knows', 'author'): [3, 2]}
    cuda = lambda d: {k: v.cuda() for k, v in d.items()}  # noqa: E731
    for batch in range(3):
        seeds = {'paper': torch.cat([torch.arange(2), torch.randint(2, 400, (60,), generator=g)]),
                 'author': torch.randint(0, 250, (20,), generator=g)}
        poison_cuda_allocator()
        cpu = hetero_neighbor_sample(colptrs, rows, seeds, fanouts, num_nodes, disjoint=disjoint, random_seed=batch,
                                     edge_weight=weights)
        gpu = hetero_neighbor_sample(cuda(colptrs), cuda(rows), cuda(seeds), fanouts, num_nodes, disjoint=disjoint,
                                     random_seed=batch, edge_weight=cuda(weights))
        assert_same_hetero_sample(cpu, gpu, num_nodes, colptrs, disjoint, batch)


@requires_cuda
def test_hetero_cuda_degenerate_inputs_and_errors():
    colptrs, rows, num_nodes = random_hetero_graph()
    colptrs = {et: t.cuda() for et, t in colptrs.items()}
    rows = {et: t.cuda() for et, t in rows.items()}
    fanouts = {et: [2, 2] for et in colptrs}
    empty = hetero_neighbor_sample(colptrs, rows, {'paper': torch.empty(0, dtype=torch.long)}, fanouts, num_nodes)
    assert all(n.numel() == 0 for n in empty.node.values()) and all(e.numel() == 0 for e in empty.edge.values())
    assert empty.num_sampled_nodes['paper'] == [0, 0, 0]
    # no hops: the seeds only; isolated seeds (no in-edges): no edges
    seeds = {'paper': torch.tensor([399, 398, 399])}
    none = hetero_neighbor_sample(colptrs, rows, seeds, {et: [] for et in colptrs}, num_nodes)
    assert none.node['paper'].tolist() == [399, 398, 399]  # (the seeds as given, repeats included)
    assert none.num_sampled_edges[('paper', 'cites', 'paper')] == []
    isolated = hetero_neighbor_sample(colptrs, rows, seeds, fanouts, num_nodes)
    assert all(e.numel() == 0 for e in isolated.edge.values()) and isolated.node['paper'].tolist() == [399, 398, 399]
    # a seed of a type without edges is kept, and draws nothing
    venue = hetero_neighbor_sample(colptrs, rows, {'venue': torch.tensor([3])}, fanouts, num_nodes)
    assert venue.node['venue'].tolist() == [3] and venue.num_sampled_nodes['venue'] == [1, 0, 0]
    with pytest.raises(RuntimeError, match='seed 400 is out of range for node type'):
        hetero_neighbor_sample(colptrs, rows, {'paper': torch.tensor([1, 400])}, fanouts, num_nodes)
    with pytest.raises(RuntimeError, match='out of range'):
        hetero_neighbor_sample(colptrs, rows, {'paper': torch.tensor([-1])}, fanouts, num_nodes)
    bad_rows = dict(rows)
    bad_rows[('paper', 'cites', 'paper')] = rows[('paper', 'cites', 'paper')].clone().fill_(400)
    with pytest.raises(IndexError, match='holds a node out of range'):
        hetero_neighbor_sample(colptrs, bad_rows, {'paper': torch.tensor([1, 2])}, fanouts, num_nodes)
    mixed_colptrs, mixed_rows = dict(colptrs), dict(rows)
    for d in (mixed_colptrs, mixed_rows):  # one edge type in host memory
        d[('paper', 'cites', 'paper')] = d[('paper', 'cites', 'paper')].cpu()
    with pytest.raises(ValueError, match='one device'):
        hetero_neighbor_sample(mixed_colptrs, mixed_rows, {'paper': torch.tensor([1])}, fanouts, num_nodes)
    # the sampler still works after an error
    good = hetero_neighbor_sample(colptrs, rows, {'paper': torch.tensor([1, 2])}, fanouts, num_nodes, random_seed=1)
    assert good.node['paper'][:2].tolist() == [1, 2]


def _sync_count(fn, capfd) -> int:
    """How many host synchronisations `fn()` makes (PyTorch's sync debug mode; a sync in
    a C++ op is reported on stderr, one in Python as a warning)."""
    import warnings
    torch.cuda.synchronize()
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        torch.cuda.set_sync_debug_mode('warn')
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode('default')
    message = 'called a synchronizing CUDA operation'
    return capfd.readouterr().err.count(message) + sum(message in str(w.message) for w in caught)


@requires_cuda
def test_hetero_cuda_fanout_all_reads_the_max_degree_once_per_graph(capfd):
    """Fanout -1 bounds its draws by the edge type's largest in-degree. It is read from
    the device the first time a colptr is seen (a host sync) and remembered while that
    tensor is unmodified: an in-place edit that raises the largest degree must be seen,
    or the buffers would be too small."""
    colptrs, rows, num_nodes = random_hetero_graph()
    et = ('paper', 'cites', 'paper')
    colptrs = {k: v.cuda() for k, v in colptrs.items()}
    rows = {k: v.cuda() for k, v in rows.items()}
    seeds = {'paper': torch.arange(0, 60, device='cuda')}
    bounded = {k: [2, 2] for k in colptrs}
    every = {**bounded, et: [-1, 2]}

    def sample(fanouts):
        return hetero_neighbor_sample(colptrs, rows, seeds, fanouts, num_nodes, random_seed=3)

    plain = _sync_count(lambda: sample(bounded), capfd)
    assert plain >= 1  # (the one read of the counts: the count works)
    assert _sync_count(lambda: sample(every), capfd) == plain + 1  # first sight of this colptr
    assert _sync_count(lambda: sample(every), capfd) == plain  # remembered
    # every 'cites' edge now enters paper 0: its in-degree becomes the whole edge count
    num_edges = rows[et].numel()
    colptrs[et].copy_(torch.cat([torch.zeros(1, dtype=torch.long, device='cuda'),
                                 torch.full((num_nodes['paper'],), num_edges, device='cuda')]))
    gpu = sample(every)
    cpu = hetero_neighbor_sample({k: v.cpu() for k, v in colptrs.items()}, {k: v.cpu() for k, v in rows.items()},
                                 {'paper': seeds['paper'].cpu()}, every, num_nodes, random_seed=3)
    assert gpu.num_sampled_edges[et][0] == num_edges == cpu.num_sampled_edges[et][0]
    for k in colptrs:
        assert torch.equal(gpu.row[k].cpu(), cpu.row[k]) and torch.equal(gpu.col[k].cpu(), cpu.col[k])


@pytest.mark.parametrize('disjoint', [False, True])
def test_hetero_opcheck(sample_device, disjoint):
    """Schema, fake kernel (per-type outputs of dynamic sizes) and dispatch of the raw
    heterogeneous op."""
    from pyg_accel.ops._library import ops
    colptrs, rows, num_nodes = random_hetero_graph()
    edge_types = list(colptrs)
    types = list(num_nodes)
    seeds = [torch.tensor([1, 5, 9], device=sample_device), torch.tensor([2], device=sample_device),
             torch.empty(0, dtype=torch.long, device=sample_device)]
    args = ([num_nodes[t] for t in types], [types.index(et[0]) for et in edge_types],
            [types.index(et[-1]) for et in edge_types], [colptrs[et].to(sample_device) for et in edge_types],
            [rows[et].to(sample_device) for et in edge_types], seeds, [2, 2] * len(edge_types), 2, False, disjoint, 3,
            [], [], [], 'uniform')
    torch.library.opcheck(ops().hetero_neighbor_sample.default, args,
                          test_utils=('test_schema', 'test_faketensor', 'test_autograd_registration'))


def test_bad_arguments_are_named_before_any_allocation():
    """Each gets a TypeError / ValueError naming the argument, before anything is
    allocated or launched (a fanout of 2**62 with replacement asked std::vector for
    2**62 entries; a negative node count blamed a row)."""
    colptr = torch.tensor([0, 3, 6, 9, 12, 15, 18])
    row = torch.arange(18) % 6
    seed = torch.tensor([2])
    with pytest.raises(TypeError, match='num_neighbors must be a list of ints'):
        neighbor_sample(colptr, row, seed, None)
    with pytest.raises(TypeError, match='num_neighbors must be a list of ints'):
        neighbor_sample(colptr, row, seed, [None])
    with pytest.raises(ValueError, match='fanouts must be at most'):
        neighbor_sample(colptr, row, seed, [2 ** 62], replace=True)
    with pytest.raises(ValueError, match='would draw more than'):
        neighbor_sample(colptr, row, seed.repeat(100), [2 ** 31 - 1, 2 ** 31 - 1], replace=True)
    et = ('a', 'to', 'a')
    with pytest.raises(ValueError, match='num_nodes must map node types to ints >= 0'):
        hetero_neighbor_sample({et: colptr}, {et: row}, {'a': seed}, {et: [2]}, {'a': -6})
    with pytest.raises(TypeError, match='num_neighbors must be a list of ints'):
        hetero_neighbor_sample({et: colptr}, {et: row}, {'a': seed}, {et: [None]}, {'a': 6})


def test_a_time_sorted_graph_edited_through_numpy_never_leaks_later_nodes():
    """Whether a graph's columns are sorted by time is remembered per tensor; numpy writes
    change node times unseen. The CPU kernel then checks what its binary search drew and
    scans the column instead, so no tree reaches a node later than its seed."""
    colptr, row = random_graph(200, 3000, seed=4)
    node_time = torch.randint(0, 100, (200,))
    row, _, _ = sort_columns_by_time(colptr, row, node_time)
    seed = torch.arange(0, 150, 3)
    seed_time = torch.full((seed.numel(),), 50)
    neighbor_sample(colptr, row, seed, [-1, -1], disjoint=True, node_time=node_time, seed_time=seed_time)
    node_time.numpy()[:] = node_time.numpy()[::-1].copy()  # no longer sorted; the version counter did not move
    out = neighbor_sample(colptr, row, seed, [-1, -1], disjoint=True, node_time=node_time, seed_time=seed_time)
    later = out.node[seed.numel():]
    assert later.numel() > 0 and bool((node_time[later] <= 50).all())


def _stable_graph(num_nodes: int, num_edges: int, seed: int):
    """A CSC graph from Python's own generator (stable across torch versions), with hubs
    of a few hundred neighbours, so the large-fanout draws take their own paths."""
    import random
    r = random.Random(seed)
    dst = [int(r.random() * num_nodes) if i % 3 else int(r.random() * 4) for i in range(num_edges)]
    src = [int(r.random() * num_nodes) for _ in range(num_edges)]
    order = sorted(range(num_edges), key=lambda e: (dst[e], e))
    row = torch.tensor([src[e] for e in order])
    colptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    colptr[1:] = torch.bincount(torch.tensor(dst), minlength=num_nodes).cumsum(0)
    weight = torch.tensor([round(r.random(), 3) * (e % 5 != 0) for e in range(num_edges)], dtype=torch.float64)
    return colptr, row, weight, torch.tensor([int(r.random() * 50) for _ in range(num_nodes)])


def _digest(*tensors) -> int:
    import zlib
    crc = 0
    for t in tensors:
        if t is not None:
            crc = zlib.crc32(t.to(torch.int64).contiguous().numpy().tobytes(), crc)
    return crc


def test_cpu_samples_are_stable():
    """The CPU sampler's samples for fixed seeds are pinned: the CUDA samplers must give
    the same ones (tests that compare them need a GPU), so a CPU refactor that changed a
    sample would break that promise unseen on a CPU-only machine. Every draw path runs:
    Floyd with a list and with a set (fanout over 64), with replacement, weighted
    (top-k and inverse CDF past 32 draws, float32 and float64), temporal ('uniform' and
    'last', node and edge times), and a heterogeneous graph."""
    colptr, row, weight, node_time = _stable_graph(200, 6000, seed=0)
    seeds = torch.tensor([0, 1, 2, 3, 7, 7, 150, 199])
    seed_time = torch.tensor([10, 20, 30, 40, 25, 25, 49, 0])
    edge_time = node_time[row]
    settings = {
        'uniform': dict(num_neighbors=[5, 3]),
        'uniform-large': dict(num_neighbors=[70, 2]),
        'replace': dict(num_neighbors=[6, 40], replace=True),
        'all': dict(num_neighbors=[-1]),
        'weighted': dict(num_neighbors=[5, 70], edge_weight=weight.float()),
        'weighted-replace': dict(num_neighbors=[40, 3], replace=True, edge_weight=weight),
        'temporal': dict(num_neighbors=[5, 70], disjoint=True, node_time=node_time, seed_time=seed_time),
        'temporal-last': dict(num_neighbors=[5, 3], disjoint=True, edge_time=edge_time, seed_time=seed_time,
                              temporal_strategy='last'),
    }
    got = {}
    for name, kwargs in settings.items():
        out = neighbor_sample(colptr, row, seeds, random_seed=3, **kwargs)
        got[name] = _digest(out.node, out.row, out.col, out.edge, out.batch,
                            torch.tensor(out.num_sampled_nodes + out.num_sampled_edges))
    cites, writes = ('paper', 'cites', 'paper'), ('author', 'writes', 'paper')
    a_colptr, a_row, _, _ = _stable_graph(200, 3000, seed=1)
    out = hetero_neighbor_sample({cites: colptr, writes: a_colptr}, {cites: row, writes: a_row},
                                 {'paper': seeds}, {cites: [4, 70], writes: [3, 2]}, {'paper': 200, 'author': 200},
                                 random_seed=3, edge_weight={cites: weight})
    got['hetero'] = _digest(*[part[key] for part in (out.node, out.row, out.col, out.edge)
                              for key in sorted(part, key=str)])
    assert got == {'uniform': 196097484, 'uniform-large': 2256603187, 'replace': 3738970608, 'all': 3633229233,
                   'weighted': 2312685940, 'weighted-replace': 2369659527, 'temporal': 4269594004,
                   'temporal-last': 484382690, 'hetero': 698107805}
