"""TrainStep on link-prediction batches (LinkNeighborLoader, binary labels): label edges
padded with the nodes give the unpadded step's loss and gradients; the captured step
trains as the eager loop."""
import pytest
import torch
import torch.nn.functional as F

from pyg_accel.data import from_data
from pyg_accel.loader import LinkNeighborLoader
from pyg_accel.ops.hops import sampled_hops
from pyg_accel.training import PaddedBatch, TrainStep, bucket_of

from conftest import DEVICES, community_data, requires_cuda
from test_train_step import same_models, step_trains_as_the_plain_loop


def link_loader_on(device, batch_size=32, fanout=(5, 4), neg_sampling='binary', **kwargs):
    data = community_data()
    fs, gs = from_data(data, device)
    return LinkNeighborLoader((fs, gs), list(fanout), edge_label_index=data.edge_index[:, :300],
                              neg_sampling=neg_sampling, batch_size=batch_size, shuffle=True, **kwargs)


def link_loss(model, batch):
    """The plain loop's loss (examples/link_prediction.py's): binary cross-entropy of the
    label edges' dot products."""
    z = model(batch.x, batch.edge_index)
    src, dst = batch.edge_label_index
    return F.binary_cross_entropy_with_logits((z[src] * z[dst]).sum(-1), batch.edge_label.float())


@pytest.mark.parametrize('device', DEVICES)
def test_padded_link_batch_gives_the_unpadded_loss_and_gradients(device):
    """Padding label edges (a padding seed joined to itself) are masked out; the real
    ones keep their ends, which are seeds (the first node group never shifts)."""
    big, small = (next(iter(link_loader_on(device, batch_size=b, pipeline=False))) for b in (40, 12))
    (nodes, edges), (s_nodes, s_edges) = (sampled_hops(b.edge_index, b.num_nodes) for b in (big, small))
    bucket = tuple(tuple(map(max, a, b)) for a, b in zip(bucket_of(nodes, edges, 4), bucket_of(s_nodes, s_edges, 4)))
    slots = big.edge_label_index.size(1) + 5
    padded = PaddedBatch(bucket, 16, big.x.dtype, (), big.edge_label.dtype, big.x.device, label_slots=slots)
    model, _ = same_models(device)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), capture=False)
    for batch, counts in ((big, (nodes, edges)), (small, (s_nodes, s_edges))):
        padded.load(batch.x, batch.edge_index, batch.edge_label, *counts, batch.edge_label_index)
        assert padded.edge_label_index.size(1) == slots and padded.x.size(0) > batch.num_nodes
        expected = link_loss(model, batch)
        loss = step._loss(padded.inputs, padded.y, padded, padded.edge_label_index)
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
        params = list(model.parameters())
        for g, h in zip(torch.autograd.grad(loss, params), torch.autograd.grad(expected, params)):
            torch.testing.assert_close(g, h, atol=1e-5, rtol=1e-4)


def test_eager_link_step_is_the_plain_loop():
    """On the CPU a link-prediction TrainStep is the plain loop: same losses and parameters."""
    step_trains_as_the_plain_loop(link_loader_on('cpu'), *same_models('cpu'), loss_of=link_loss)


def test_link_decoder_and_loss_fn_are_the_users():
    """A decoder of the user's (here a scaled dot product) and a per-edge loss_fn."""
    batch = next(iter(link_loader_on('cpu')))
    model, _ = same_models('cpu')

    def decoder(z, edge_label_index):
        return 0.5 * (z[edge_label_index[0]] * z[edge_label_index[1]]).sum(-1)

    def loss_fn(out, target):
        return F.mse_loss(out, target.float(), reduction='none')
    z = model(batch.x, batch.edge_index)
    expected = F.mse_loss(decoder(z, batch.edge_label_index), batch.edge_label.float())
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.0), decoder=decoder, loss_fn=loss_fn)
    torch.testing.assert_close(step(batch), expected)


def test_link_batches_without_binary_labels_are_clear_errors():
    model, _ = same_models('cpu')
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    triplet = next(iter(link_loader_on('cpu', neg_sampling='triplet')))
    with pytest.raises(ValueError, match="neg_sampling='binary'"):
        TrainStep(model, opt)(triplet)
    batch = next(iter(link_loader_on('cpu')))
    batch.edge_label = batch.edge_label[:-1]
    with pytest.raises(ValueError, match='label edges'):
        TrainStep(model, opt)(batch)


@requires_cuda
@pytest.mark.parametrize('name', ['GraphSAGE', 'GAT'])
def test_captured_link_steps_train_as_the_eager_loop(name):
    """CUDA graphs over padded link batches (the epoch's smaller last batch included): the
    losses and parameters of the plain loop, most steps replayed."""
    step = step_trains_as_the_plain_loop(link_loader_on('cuda'), *same_models('cuda', name), loss_of=link_loss,
                                         epochs=4, steps_per_octave=1)
    assert any(len(shape) == 3 for shape in step.buckets())  # (shapes with label-edge slots)
