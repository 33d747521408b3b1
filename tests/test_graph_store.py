"""pyg_accel.data.GraphStore: COO / CSR / CSC in, CSC held, PyG's GraphStore contract."""
import pytest
import torch

from pyg_accel.data import GraphStore

from conftest import locations


@pytest.fixture(params=locations())
def store(request):
    return GraphStore(request.param)


def random_coo(num_src=30, num_dst=20, num_edges=200, seed=0):
    g = torch.Generator().manual_seed(seed)
    row = torch.randint(0, num_src, (num_edges,), generator=g)
    col = torch.randint(0, num_dst, (num_edges,), generator=g)
    return row, col  # contains duplicates; isolated nodes likely


def check_csc(store, row, col, size, edge_type=None):
    """The held CSC is the input graph: same (row, col) multiset, perm maps back."""
    csc = store.graph(edge_type)
    assert csc.size == size
    r, cp = csc.row.cpu(), csc.colptr.cpu()
    assert cp.numel() == size[1] + 1 and int(cp[-1]) == row.numel()
    c = torch.repeat_interleave(torch.arange(size[1]), cp[1:] - cp[:-1])
    perm = torch.arange(row.numel()) if csc.perm is None else csc.perm.cpu()
    assert torch.equal(r, row[perm]) and torch.equal(c, col[perm])
    assert bool((c[1:] >= c[:-1]).all())


def test_coo_in_csc_held(store):
    row, col = random_coo()
    store.put_edge_index((row, col), edge_type=None, layout='coo', size=(30, 20))
    check_csc(store, row, col, (30, 20))
    r, cp, perm = store.csc()
    ref_perm = torch.sort(col, stable=True).indices  # ties keep input order: deterministic
    assert torch.equal(perm.cpu(), ref_perm) and torch.equal(r.cpu(), row[ref_perm])


def test_layouts_agree(store):
    row, col = random_coo()
    store.put_edge_index((row, col), edge_type=None, layout='coo', size=(30, 20))
    r1, cp1, _ = store.csc()
    r1, cp1 = r1.clone(), cp1.clone()
    rowptr, col_csr = store.get_edge_index(edge_type=None, layout='csr')
    other = GraphStore(store.location)
    other.put_edge_index((rowptr, col_csr), edge_type=None, layout='csr', size=(30, 20))
    r2, cp2, _ = other.csc()
    assert torch.equal(cp1, cp2)
    for j in range(20):  # same neighbour multiset per destination
        a, b = r1[cp1[j]:cp1[j + 1]].sort().values, r2[cp2[j]:cp2[j + 1]].sort().values
        assert torch.equal(a, b)
    third = GraphStore(store.location)
    third.put_edge_index((r1, cp1), edge_type=None, layout='csc', size=(30, 20))
    r3, cp3, perm3 = third.csc()
    assert perm3 is None and torch.equal(r3, r1) and torch.equal(cp3, cp1)


def test_get_coo_in_input_order_or_sorted(store):
    row, col = random_coo()
    store.put_edge_index((row, col), edge_type=None, layout='coo', size=(30, 20))
    r, c = store.get_edge_index(edge_type=None, layout='coo')
    assert torch.equal(r.cpu(), row) and torch.equal(c.cpu(), col)
    r, c = store.get_edge_index(edge_type=None, layout='coo', is_sorted=True)
    assert bool((c[1:] >= c[:-1]).all())


def test_size_always_set(store):
    row, col = random_coo()
    store.put_edge_index(torch.stack([row, col]), edge_type=None, layout='coo')
    (attr,) = store.get_all_edge_attrs()
    assert attr.size == (int(row.max()) + 1, int(col.max()) + 1)
    assert attr.layout.value == 'csc' and attr.is_sorted


def test_degenerate_graphs(store):
    store.put_edge_index((torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)),
                         edge_type=None, layout='coo', size=(5, 5))
    r, cp, _ = store.csc()
    assert r.numel() == 0 and torch.equal(cp.cpu(), torch.zeros(6, dtype=torch.long))
    row = torch.tensor([0, 1, 1, 1, 4])
    col = torch.tensor([0, 1, 1, 3, 3])  # self-loops, a duplicate edge, isolated node 2
    store.put_edge_index((row, col), edge_type=None, layout='coo', size=(5, 5))
    check_csc(store, row, col, (5, 5))
    assert torch.equal(store.csc()[1].cpu(), torch.tensor([0, 1, 3, 3, 5, 5]))


def test_int32_input(store):
    row, col = random_coo()
    store.put_edge_index((row.int(), col.int()), edge_type=None, layout='coo', size=(30, 20))
    check_csc(store, row, col, (30, 20))


def test_heterogeneous(store):
    a = random_coo(30, 20, 100, 1)
    b = random_coo(20, 30, 50, 2)
    store.put_edge_index(a, edge_type=('paper', 'cites', 'author'), layout='coo', size=(30, 20))
    store.put_edge_index(b, edge_type=('author', 'writes', 'paper'), layout='coo', size=(20, 30))
    rows, colptrs, perms = store.csc()
    assert set(rows) == {('paper', 'cites', 'author'), ('author', 'writes', 'paper')}
    check_csc(store, *a, (30, 20), ('paper', 'cites', 'author'))
    check_csc(store, *b, (20, 30), ('author', 'writes', 'paper'))
    rows, _, _ = store.csc(edge_types=[('author', 'writes', 'paper')])
    assert list(rows) == [('author', 'writes', 'paper')]
    assert all(attr.size is not None for attr in store.get_all_edge_attrs())


def test_pyg_base_conversions_work_on_our_store(store):
    row, col = random_coo()
    store.put_edge_index((row, col), edge_type=None, layout='coo', size=(30, 20))
    r, c, _ = store.coo()
    assert sorted(zip(r.tolist(), c.tolist())) == sorted(zip(row.tolist(), col.tolist()))
    rowptr, c2, _ = store.csr()
    assert rowptr.numel() == 31 and int(rowptr[-1]) == 200


def test_edge_features_follow_csc_order(store):
    row, col = random_coo()
    store.put_edge_index((row, col), edge_type=None, layout='coo', size=(30, 20))
    weight = torch.rand(200)
    store.put_edge_feature(weight, 'edge_weight')
    perm = store.csc()[2].cpu()
    assert torch.equal(store.get_edge_feature('edge_weight').cpu(), weight[perm])
    assert store.edge_feature_names() == ['edge_weight']
    with pytest.raises(ValueError, match='200 rows'):
        store.put_edge_feature(torch.rand(10), 'bad')
    with pytest.raises(KeyError, match='no edge feature'):
        store.get_edge_feature('nope')


def test_remove(store):
    store.put_edge_index(random_coo(), edge_type=None, layout='coo', size=(30, 20))
    assert store.remove_edge_index(edge_type=None, layout='coo')
    assert store.get_all_edge_attrs() == []
    with pytest.raises(KeyError):
        store.get_edge_index(edge_type=None, layout='coo')


@pytest.mark.parametrize('edge_index, layout, size, error, match', [
    ((torch.tensor([0.0]), torch.tensor([0.0])), 'coo', None, TypeError, 'int64 or int32'),
    ((torch.tensor([0, 1]), torch.tensor([0])), 'coo', None, ValueError, 'differ in length'),
    ((torch.tensor([0, 5]), torch.tensor([0, 1])), 'coo', (5, 5), IndexError, 'out of range'),
    ((torch.tensor([-1]), torch.tensor([0])), 'coo', None, IndexError, 'negative'),
    ((torch.tensor([0, 2, 1, 3]), torch.tensor([0, 1, 2])), 'csr', None, ValueError, 'non-decreasing|end'),
    ((torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2])), 'csr', None, ValueError, 'end at the number'),
    ((torch.tensor([0, 1]), torch.tensor([0, 1, 2])), 'csc', (3, 5), ValueError, 'columns but size'),
    ((torch.tensor([0, 1]), torch.tensor([1, 0])), 'coo', None, ValueError, 'not sorted'),
    (torch.zeros(3, 4, dtype=torch.long), 'coo', None, ValueError, r'\[2, E\]'),
    ((torch.tensor([0]),), 'coo', None, TypeError, 'pair of tensors'),
])
def test_bad_input_leaves_store_unchanged(store, edge_index, layout, size, error, match):
    good = random_coo()
    store.put_edge_index(good, edge_type=None, layout='coo', size=(30, 20))
    is_sorted = match == 'not sorted'
    with pytest.raises(error, match=match):
        store.put_edge_index(edge_index, edge_type=None, layout=layout, size=size, is_sorted=is_sorted)
    check_csc(store, *good, (30, 20))


def test_a_csc_put_as_is_is_copied_so_the_callers_buffer_can_be_reused(store):
    """Callers reuse their buffers: a CSC the store kept by reference would change under
    the sampler (out-of-range reads: a segfault)."""
    from pyg_accel.ops import neighbor_sample
    row, col = random_coo(20, 20)
    ref = GraphStore('cpu')
    ref.put_edge_index((row, col), edge_type=None, layout='coo', size=(20, 20))
    r, cp, _ = ref.csc()
    r_buf, cp_buf = r.clone().to(store.device), cp.clone().to(store.device)
    store.put_edge_index((r_buf, cp_buf), edge_type=None, layout='csc', size=(20, 20))
    r_buf.fill_(10 ** 9)
    cp_buf.copy_(torch.arange(21) * 10 ** 6)
    held_row, held_colptr, _ = store.csc()
    assert torch.equal(held_row.cpu(), r) and torch.equal(held_colptr.cpu(), cp)
    out = neighbor_sample(held_colptr, held_row, torch.arange(20, device=held_row.device), [-1], random_seed=0)
    assert out.row.numel() == row.numel()


def test_coo_returns_the_put_order(store):
    """PyG's link loaders take seed edges from coo() and pair them with labels in the put
    order; coo() derived from the CSC (perm None) would pair nearly every label with
    another edge."""
    row, col = random_coo()
    store.put_edge_index((row, col), edge_type=None, layout='coo', size=(30, 20))
    r, c, perm = store.coo()
    assert perm is None and torch.equal(r.cpu(), row) and torch.equal(c.cpu(), col)
    et = ('a', 'to', 'b')
    store.put_edge_index((col, row), edge_type=et, layout='coo', size=(20, 30))
    rows, cols, perms = store.coo([et])
    assert perms == {et: None} and torch.equal(rows[et].cpu(), col) and torch.equal(cols[et].cpu(), row)


def test_link_loader_labels_line_up_over_our_stores():
    """PyG's LinkNeighborLoader(edge_label_index=<edge type>, edge_label=...) over our
    stores gives each seed edge its own label (PyG's test_custom_hetero_link_neighbor_loader)."""
    from torch_geometric.loader import LinkNeighborLoader
    from pyg_accel.data import from_data
    from pyg_accel.sampler import NeighborSampler
    from conftest import paper_author_graph
    data = paper_author_graph(60, 40, 500)
    et = ('author', 'writes', 'paper')
    ei = data[et].edge_index
    label = torch.arange(ei.size(1))  # label i: edge i
    stores = from_data(data, 'cpu')
    loader = LinkNeighborLoader(stores, [2], neighbor_sampler=NeighborSampler(stores, [2]), batch_size=50,
                                edge_label_index=et, edge_label=label)
    seen = 0
    for batch in loader:
        b = batch[et]
        src = batch['author'].n_id[b.edge_label_index[0]]
        dst = batch['paper'].n_id[b.edge_label_index[1]]
        assert torch.equal(torch.stack([src, dst]), ei[:, b.edge_label])
        seen += b.edge_label.numel()
    assert seen == ei.size(1)
