"""pyg_accel.data.from_data on Data and HeteroData."""
import pytest
import torch
from torch_geometric.data import Data

from pyg_accel.data import from_data

from conftest import locations, paper_author_graph


@pytest.mark.parametrize('location', locations())
def test_from_data_homogeneous(location):
    n, e = 50, 300
    edge_index = torch.randint(0, n, (2, e))
    data = Data(x=torch.randn(n, 8), y=torch.randint(0, 3, (n,)), train_mask=torch.rand(n) < 0.5,
                edge_index=edge_index, edge_weight=torch.rand(e), edge_attr=torch.randn(e, 4))
    fs, gs = from_data(data, location)
    assert {a.attr_name for a in fs.get_all_tensor_attrs()} == {'x', 'y', 'train_mask'}
    index = torch.randint(0, n, (20,))
    assert torch.equal(fs[None, 'x', index].cpu(), data.x[index])
    (attr,) = gs.get_all_edge_attrs()
    assert attr.size == (n, n)
    perm = gs.csc()[2].cpu()
    assert torch.equal(gs.get_edge_feature('edge_weight').cpu(), data.edge_weight[perm])
    assert torch.equal(gs.get_edge_feature('edge_attr').cpu(), data.edge_attr[perm])
    r, c = gs.get_edge_index(edge_type=None, layout='coo')
    assert torch.equal(torch.stack([r, c]).cpu(), edge_index)


def test_from_data_without_edges_and_warnings():
    data = Data(x=torch.randn(5, 2), num_nodes=5)
    fs, gs = from_data(data, 'cpu')
    assert gs.get_all_edge_attrs()[0].size == (5, 5)
    data = Data(x=torch.randn(5, 2), edge_index=torch.tensor([[0], [1]]), graph_label=torch.tensor([1, 2, 3]))
    with pytest.warns(UserWarning, match='graph_label'):
        from_data(data, 'cpu')
    with pytest.raises(TypeError, match='Data or HeteroData'):
        from_data({'x': 1}, 'cpu')


def test_from_data_heterogeneous():
    data = paper_author_graph(20, 10, 40)
    data['paper', 'cites', 'paper'].edge_index = torch.randint(0, 20, (2, 60))
    fs, gs = from_data(data, 'cpu')
    assert {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()} == \
        {('paper', 'x'), ('paper', 'y'), ('author', 'x')}
    sizes = {a.edge_type: a.size for a in gs.get_all_edge_attrs()}
    assert sizes == {('author', 'writes', 'paper'): (10, 20), ('paper', 'cites', 'paper'): (20, 20)}
