"""Node reordering for locality: reverse Cuthill-McKee (C++), degree order, block-wise
reordering, and renumbering a Data."""
from collections import deque

import pytest
import torch
from torch_geometric.data import Data

from pyg_accel.data import mean_edge_span, node_order, reorder_data
from pyg_accel.data.reorder import inverse_order, label_propagation, symmetric_csr
from pyg_accel.ops import rcm_order

from conftest import DEVICES


def reference_rcm(edge_index: torch.Tensor, num_nodes: int, lo: int, hi: int) -> list:
    """Reverse Cuthill-McKee in plain Python, as the kernel defines it: components from
    their lowest-degree unnumbered node (ties by id), moved to a pseudo-peripheral node
    (up to 4 George-Liu steps), breadth-first with neighbours by increasing degree."""
    adj = {v: [] for v in range(lo, hi)}
    for s, d in edge_index.t().tolist():
        for a, b in ((s, d), (d, s)):
            if lo <= a < hi and lo <= b < hi and a != b:
                adj[a].append(b)
    degree = {v: len(adj[v]) for v in adj}
    key = lambda v: (degree[v], v)  # noqa: E731
    numbered, order = set(), []

    def last_level(s):
        seen, frontier, depth = {s}, [s], 0
        while True:
            nxt = []
            for v in frontier:
                for u in adj[v]:
                    if u not in numbered and u not in seen:
                        seen.add(u)
                        nxt.append(u)
            if not nxt:
                return frontier, depth
            frontier, depth = nxt, depth + 1

    for s in sorted(adj, key=key):
        if s in numbered:
            continue
        last, depth = last_level(s)
        for _ in range(4):
            c = min(last, key=key)
            c_last, c_depth = last_level(c)
            if c_depth <= depth:
                break
            s, last, depth = c, c_last, c_depth
        queue = deque([s])
        numbered.add(s)
        while queue:
            v = queue.popleft()
            order.append(v)
            fresh = []
            for u in adj[v]:
                if u not in numbered:
                    numbered.add(u)
                    fresh.append(u)
            queue.extend(sorted(fresh, key=key))
    return order[::-1]


def messy_graph(num_nodes=60, num_edges=90, seed=0):
    """Random edges plus self-loops and duplicates; several components and isolated nodes."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, num_nodes - 10, (2, num_edges), generator=g)  # the last 10 nodes are isolated
    loops = torch.tensor([[3, 7], [3, 7]])
    return torch.cat([ei, loops, ei[:, :5]], dim=1)


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_rcm_matches_reference(dtype, seed):
    n = 60
    ei = messy_graph(n, seed=seed)
    rowptr, col = symmetric_csr(ei, n)
    got = rcm_order(rowptr.to(dtype), col.to(dtype))
    assert got.dtype == torch.int64 and got.tolist() == reference_rcm(ei, n, 0, n)
    assert sorted(got.tolist()) == list(range(n))
    # a node range: only edges inside it count
    assert rcm_order(rowptr, col, 10, 35).tolist() == reference_rcm(ei, n, 10, 35)


def test_rcm_recovers_band_structure():
    """A 30 x 30 grid under a random numbering: RCM brings its bandwidth back to about the
    grid's width (the shuffled numbering spreads neighbours over the whole range)."""
    side = 30
    ids = torch.arange(side * side).view(side, side)
    ei = torch.cat([torch.stack([ids[:, :-1].reshape(-1), ids[:, 1:].reshape(-1)]),
                    torch.stack([ids[:-1].reshape(-1), ids[1:].reshape(-1)])], dim=1)
    shuffle = torch.randperm(side * side, generator=torch.Generator().manual_seed(0))
    shuffled = shuffle[ei]
    order = node_order(shuffled, side * side, 'rcm')
    reordered = inverse_order(order)[shuffled]
    bandwidth = int((reordered[0] - reordered[1]).abs().max())
    assert bandwidth <= 2 * side, bandwidth
    assert int((shuffled[0] - shuffled[1]).abs().max()) > 10 * side
    assert mean_edge_span(reordered) < mean_edge_span(shuffled) / 5


def test_empty_graph_and_ranges():
    rowptr, col = symmetric_csr(torch.empty(2, 0, dtype=torch.long), 5)
    assert rcm_order(rowptr, col).tolist() == [4, 3, 2, 1, 0]  # isolated nodes: reversed id order
    assert rcm_order(rowptr, col, 2, 2).numel() == 0
    assert rcm_order(*symmetric_csr(torch.empty(2, 0, dtype=torch.long), 0)).numel() == 0


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('method', ['rcm', 'degree', 'cluster'])
def test_block_wise_order_keeps_blocks(device, method):
    n = 60
    ei = messy_graph(n).to(device)
    bounds = [0, 25, 25, 60]
    order = node_order(ei, n, method, bounds=bounds)
    assert order.device.type == device and sorted(order.tolist()) == list(range(n))
    for lo, hi in zip(bounds, bounds[1:]):
        assert sorted(order[lo:hi].tolist()) == list(range(lo, hi))
    if method == 'rcm':
        rowptr, col = symmetric_csr(ei.cpu(), n)
        assert order[25:].tolist() == rcm_order(rowptr, col, 25, 60).tolist()


def reference_label_propagation(edge_index, n, iterations=8):
    """Synchronous label propagation in plain Python (neighbours and the node itself vote;
    ties go to the smallest label)."""
    adj = [[v] for v in range(n)]
    for s, d in edge_index.t().tolist():
        adj[d].append(s)
        adj[s].append(d)
    labels = list(range(n))
    for _ in range(iterations):
        new = []
        for v in range(n):
            votes = {}
            for u in adj[v]:
                votes[labels[u]] = votes.get(labels[u], 0) + 1
            top = max(votes.values())
            new.append(min(label for label, c in votes.items() if c == top))
        if new == labels:
            break
        labels = new
    return labels


@pytest.mark.parametrize('device', DEVICES)
def test_label_propagation_matches_reference_and_finds_clusters(device):
    ei = messy_graph(40, 60, seed=5)
    assert label_propagation(ei.to(device), 40).tolist() == reference_label_propagation(ei, 40)
    # two 12-node cliques joined by one edge, ids shuffled: each clique becomes one contiguous cluster
    clique = torch.combinations(torch.arange(12)).t()
    ei = torch.cat([clique, clique + 12, torch.tensor([[0], [12]])], dim=1)
    shuffle = torch.randperm(24, generator=torch.Generator().manual_seed(0))
    order = node_order(shuffle[ei].to(device), 24, 'cluster')
    original = inverse_order(shuffle)[order.cpu()]  # the clique-numbered id of each new position
    assert sorted((original[:12] // 12).tolist()) in ([0] * 12, [1] * 12)
    assert set((original[12:] // 12).tolist()) == {1 - int(original[0] // 12)}


def test_degree_order():
    ei = torch.tensor([[0, 1, 2, 2, 3], [2, 2, 3, 0, 2]])
    degree = torch.bincount(ei.reshape(-1), minlength=5)  # [2, 1, 5, 2, 0]
    order = node_order(ei, 5, 'degree')
    assert order.tolist() == [2, 0, 3, 1, 4]
    assert (degree[order][:-1] >= degree[order][1:]).all()


@pytest.mark.parametrize('device', DEVICES)
def test_reorder_data_relabels_consistently(device):
    n = 40
    g = torch.Generator().manual_seed(3)
    data = Data(x=torch.randn(n, 3, generator=g), y=torch.arange(n), edge_index=messy_graph(n, 70, 3)[:, :70],
                edge_attr=torch.randn(70, 2, generator=g), train_mask=torch.arange(n) % 3 == 0).to(device)
    order = node_order(data.edge_index, n, 'rcm')
    out = reorder_data(data, order)
    new_id = inverse_order(order)
    assert torch.equal(out.x[new_id], data.x) and torch.equal(out.y[new_id], data.y)
    assert torch.equal(out.train_mask[new_id], data.train_mask)
    assert torch.equal(out.edge_index, new_id[data.edge_index]) and torch.equal(out.edge_attr, data.edge_attr)
    assert out.num_nodes == n and data.x is not out.x  # the input is left alone


def test_bad_input():
    ei = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match='method'):
        node_order(ei, 3, 'metis')
    with pytest.raises(ValueError, match='bounds'):
        node_order(ei, 3, bounds=[0, 2])
    with pytest.raises(ValueError, match='outside'):
        node_order(ei, 2)
    with pytest.raises(TypeError, match='int32 or int64'):
        node_order(ei.float(), 3)
    with pytest.raises(ValueError, match=r'\[2, E\]'):
        node_order(ei[0], 3)
    rowptr, col = symmetric_csr(ei, 3)
    with pytest.raises(ValueError, match='range'):
        rcm_order(rowptr, col, 2, 5)
    with pytest.raises(TypeError, match='int32/int64'):
        rcm_order(rowptr.float(), col)
    with pytest.raises(RuntimeError, match='rowptr must start at 0'):
        rcm_order(rowptr + 1, col)
    data = Data(x=torch.randn(3, 2), edge_index=ei)
    with pytest.raises(ValueError, match='not a permutation'):
        reorder_data(data, torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError, match='permutation of the 3 nodes'):
        reorder_data(data, torch.tensor([0, 1]))


def test_rcm_opcheck():
    from pyg_accel.ops._library import ops
    rowptr, col = symmetric_csr(messy_graph(), 60)
    torch.library.opcheck(ops().rcm_order.default, (rowptr, col, 5, 50),
                          test_utils=('test_schema', 'test_faketensor'))
