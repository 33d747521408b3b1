"""TrainStep's inputs= on homogeneous batches: node attributes and edge attributes
(edge_weight, ...) padded with the batch give the unpadded step's loss and gradients;
inputs that are neither train eagerly, saying why."""
import pytest
import torch
import torch.nn.functional as F

import pyg_accel.nn.models as accel_models
from pyg_accel.data import from_data
from pyg_accel.loader import NeighborLoader
from pyg_accel.ops.hops import sampled_hops
from pyg_accel.training import PaddedBatch, TrainStep, bucket_of
from pyg_accel.training.padding import pad_hop_edge_rows

from conftest import DEVICES, community_data, requires_cuda
from test_train_step import step_trains_as_the_plain_loop

INPUTS = ('x', 'edge_index', 'edge_weight')


def weighted_loader_on(device, batch_size=48, fanout=(5, 4, 3), **kwargs):
    """Batches of a graph with a weight per edge (carried to each batch's edge_weight)."""
    data = community_data()
    data.edge_weight = torch.rand(data.num_edges, generator=torch.Generator().manual_seed(3)) + 0.1
    fs, gs = from_data(data, device)
    return NeighborLoader((fs, gs), list(fanout), input_nodes=torch.arange(500), batch_size=batch_size,
                          shuffle=True, **kwargs)


def weighted_loss(model, batch):
    out = model(batch.x, batch.edge_index, batch.edge_weight)[:batch.batch_size]
    return F.cross_entropy(out, batch.y[:batch.batch_size])


def gcn_pair(device):
    torch.manual_seed(0)
    a = accel_models.GCN(16, 32, 3, 4).to(device)
    b = accel_models.GCN(16, 32, 3, 4).to(device)
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize('device', DEVICES)
def test_padded_edge_weights_give_the_unpadded_loss_and_gradients(device):
    """A weighted GCN: each hop's edge weights at its padded start, so they stay with
    their edges; a smaller batch into the same buffers gives its own loss."""
    big, small = (next(iter(weighted_loader_on(device, batch_size=b, pipeline=False))) for b in (48, 16))
    (nodes, edges), (s_nodes, s_edges) = (sampled_hops(b.edge_index, b.num_nodes) for b in (big, small))
    bucket = tuple(tuple(map(max, a, b)) for a, b in zip(bucket_of(nodes, edges, 4), bucket_of(s_nodes, s_edges, 4)))
    padded = PaddedBatch(bucket, 16, big.x.dtype, (), big.y.dtype, big.x.device,
                         node_attrs={'n_id': big.n_id}, edge_attrs={'edge_weight': big.edge_weight}, inputs=INPUTS)
    assert padded.inputs[2] is padded.edge_attrs['edge_weight']
    model, _ = gcn_pair(device)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), capture=False, inputs=INPUTS)
    for batch, counts in ((big, (nodes, edges)), (small, (s_nodes, s_edges))):
        padded.load(batch.x, batch.edge_index, batch.y[:batch.batch_size], *counts,
                    attrs={'n_id': batch.n_id, 'edge_weight': batch.edge_weight})
        assert torch.equal(padded.node_attrs['n_id'][:counts[0][0]], batch.n_id[:counts[0][0]])
        expected = weighted_loss(model, batch)
        loss = step._loss(padded.inputs, padded.y, padded)
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
        params = list(model.parameters())
        for g, h in zip(torch.autograd.grad(loss, params), torch.autograd.grad(expected, params)):
            torch.testing.assert_close(g, h, atol=1e-5, rtol=1e-4)


def test_pad_hop_edge_rows_puts_each_hop_at_its_padded_start():
    values = torch.arange(7.0).unsqueeze(1).repeat(1, 2)
    out = torch.full((10, 2), -1.0)
    pad_hop_edge_rows(values, [3, 0, 4], [4, 1, 5], out)
    assert out[:, 0].tolist() == [0, 1, 2, 0, 0, 3, 4, 5, 6, 0]  # (padding rows: zeros)
    with pytest.raises(ValueError, match='edge_attr has shape'):
        pad_hop_edge_rows(values[:6], [3, 0, 4], [4, 1, 5], out, 'edge_attr')


def test_eager_step_with_edge_weights_is_the_plain_loop():
    step_trains_as_the_plain_loop(weighted_loader_on('cpu'), *gcn_pair('cpu'), loss_of=weighted_loss, inputs=INPUTS)


@requires_cuda
def test_captured_steps_with_edge_weights_train_as_the_eager_loop():
    step_trains_as_the_plain_loop(weighted_loader_on('cuda'), *gcn_pair('cuda'), loss_of=weighted_loss, epochs=3,
                                  inputs=INPUTS, steps_per_octave=1)


class ReadsAThirdInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = accel_models.GraphSAGE(16, 8, 3, 4)

    def forward(self, x, edge_index, extra):  # (extra: read, not used)
        return self.inner(x, edge_index)


@requires_cuda
def test_inputs_that_are_neither_node_nor_edge_attributes_train_eagerly():
    """input_id (one per seed) is neither: eager, with a warning naming it."""
    model = ReadsAThirdInput().cuda()
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), inputs=('x', 'edge_index', 'input_id'))
    batch = next(iter(weighted_loader_on('cuda')))
    with pytest.warns(UserWarning, match="'input_id'"):
        step(batch)
    assert step.stats['eager'] == 1


KEYWORDS = {'x': 'x', 'edge_index': 'edge_index', 'edge_attr': 'edge_attr'}


def attributed_loader_on(device, batch_size=48, fanout=(5, 4, 3), **kwargs):
    """Batches of a graph with 3 features per edge (carried to each batch's edge_attr)."""
    data = community_data()
    data.edge_attr = torch.randn(data.num_edges, 3, generator=torch.Generator().manual_seed(4))
    fs, gs = from_data(data, device)
    return NeighborLoader((fs, gs), list(fanout), input_nodes=torch.arange(500), batch_size=batch_size,
                          shuffle=True, **kwargs)


def attributed_loss(model, batch):
    """PyG's BasicGNN takes edge_attr by keyword only in practice (edge_weight comes first)."""
    out = model(batch.x, batch.edge_index, edge_attr=batch.edge_attr)[:batch.batch_size]
    return F.cross_entropy(out, batch.y[:batch.batch_size])


def gat_pair(device):
    torch.manual_seed(0)
    a = accel_models.GAT(16, 32, 3, 4, edge_dim=3).to(device)
    b = accel_models.GAT(16, 32, 3, 4, edge_dim=3).to(device)
    b.load_state_dict(a.state_dict())
    return a, b


def test_keyword_inputs_call_the_model_with_keywords():
    """inputs= as a dict: the model's argument names to the batch's attributes (a GAT
    reading edge_attr), eagerly the plain loop."""
    step_trains_as_the_plain_loop(attributed_loader_on('cpu'), *gat_pair('cpu'), loss_of=attributed_loss,
                                  inputs=KEYWORDS)


@requires_cuda
def test_captured_steps_with_keyword_edge_attributes_train_as_the_eager_loop():
    step = step_trains_as_the_plain_loop(attributed_loader_on('cuda'), *gat_pair('cuda'), loss_of=attributed_loss,
                                         epochs=3, inputs=KEYWORDS, steps_per_octave=1)
    assert step._buffers and all(isinstance(b, PaddedBatch) and 'edge_attr' in b.edge_attrs
                                 for b in step._buffers.values())


@pytest.mark.parametrize('inputs', [{}, {'x': 1}, {'not an identifier': 'x'}, ['x', 2]])
def test_bad_keyword_inputs_are_clear(inputs):
    model, _ = gat_pair('cpu')
    with pytest.raises(ValueError, match='inputs must be'):
        TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), inputs=inputs)
