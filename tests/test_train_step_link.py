"""TrainStep on link-prediction batches (LinkNeighborLoader, binary labels), homogeneous
and heterogeneous: label edges padded with the nodes give the unpadded step's loss and
gradients; the captured step trains as the eager loop."""
import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn

from pyg_accel.data import from_data
from pyg_accel.loader import LinkNeighborLoader
from pyg_accel.ops.hops import sampled_hops
from pyg_accel.training import PaddedBatch, TrainStep, bucket_of
from pyg_accel.training.padding import PaddedHeteroBatch, typed_bucket_of
from pyg_accel.training.step import _hetero_hops

from conftest import DEVICES, community_data, requires_cuda
from test_train_step import same_models, step_trains_as_the_plain_loop
from test_train_step_hetero import TwoLayers, assert_same_gradients, featured_mag, mag  # noqa: F401 (fixtures)


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


# -- heterogeneous link prediction -----------------------------------------------------
WRITES, CITES = ('author', 'writes', 'paper'), ('paper', 'cites', 'paper')


def hetero_link_loader_on(featured_mag, device, label_type=WRITES, batch_size=32, neg_sampling='binary', **kwargs):
    """LinkNeighborLoader batches of the mag-shaped graph whose label edges are 200 edges
    of ``label_type``, binary negatives."""
    data = featured_mag[0].to(device)
    return LinkNeighborLoader(data, [4, 3], edge_label_index=(label_type, data[label_type].edge_index[:, :200]),
                              neg_sampling=neg_sampling, batch_size=batch_size, shuffle=True, **kwargs)


def hetero_link_models(featured_mag, device):
    """Two copies of a to_hetero GraphSAGE (dict outputs per node type)."""
    batch = next(iter(hetero_link_loader_on(featured_mag, device)))
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        model = pyg_nn.to_hetero(TwoLayers(), batch.metadata(), aggr='sum').to(device)
        with torch.no_grad():
            model(batch.x_dict, batch.edge_index_dict)
        models.append(model)
    return models


def hetero_link_loss(label_type):
    """The plain loop's loss (PyG's heterogeneous link tutorial's): binary cross-entropy
    of the dot products of the label edges' source and destination outputs."""
    def loss_of(model, batch):
        out = model(batch.x_dict, batch.edge_index_dict)
        src, dst = batch[label_type].edge_label_index
        score = (out[label_type[0]][src] * out[label_type[-1]][dst]).sum(-1)
        return F.binary_cross_entropy_with_logits(score, batch[label_type].edge_label.float())
    return loss_of


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('label_type', [WRITES, CITES])
def test_padded_hetero_link_batch_gives_the_unpadded_loss_and_gradients(featured_mag, device, label_type):
    """Label edges of one edge type (between two node types, or within one) padded with
    the batch: padding pairs join the two types' first padding seeds and are masked
    out; a smaller batch into the same buffers gives its own loss."""
    big, small = (next(iter(hetero_link_loader_on(featured_mag, device, label_type, batch_size=b, pipeline=False)))
                  for b in (40, 12))
    hops, s_hops = _hetero_hops(big), _hetero_hops(small)
    assert hops.label_type == label_type and hops.seed_type is None and hops.labels == 80
    bucket = typed_bucket_of(tuple(tuple(map(max, a, b)) for a, b in zip(hops.nodes, s_hops.nodes)),
                             tuple(tuple(map(max, a, b)) for a, b in zip(hops.edges, s_hops.edges)), hops.links, 4)
    keys = {t: ['x'] for t in hops.node_types}
    padded = PaddedHeteroBatch(bucket, hops.node_types, hops.edge_types, hops.links, big, keys,
                               (label_type, 'edge_label'), ('x_dict', 'edge_index_dict'), label_slots=90)
    model, _ = hetero_link_models(featured_mag, device)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), capture=False)
    step._label_type = label_type
    for batch, counts in ((big, hops), (small, s_hops)):
        padded.load(batch, counts.nodes, counts.edges)
        labels = counts.labels
        src, dst = (hops.node_types.index(t) for t in (label_type[0], label_type[-1]))
        assert padded.edge_label_index[0, labels:].eq(counts.nodes[src][0]).all()
        assert padded.edge_label_index[1, labels:].eq(counts.nodes[dst][0]).all()
        expected = hetero_link_loss(label_type)(model, batch)
        loss = step._loss(padded.inputs, padded.y, padded, padded.edge_label_index)
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
        assert_same_gradients(loss, expected, list(model.parameters()))
    with pytest.raises(ValueError, match='slots'):
        PaddedHeteroBatch(bucket, hops.node_types, hops.edge_types, hops.links, big, keys, (label_type, 'edge_label'),
                          label_slots=79).load(big, hops.nodes, hops.edges)


def test_eager_hetero_link_step_is_the_plain_loop(featured_mag):
    """On the CPU a heterogeneous link TrainStep is the plain loop (the default decoder:
    the label type's source and destination outputs' dot product)."""
    step_trains_as_the_plain_loop(hetero_link_loader_on(featured_mag, 'cpu'), *hetero_link_models(featured_mag, 'cpu'),
                                  loss_of=hetero_link_loss(WRITES), epochs=1)


def test_hetero_link_decoder_reads_the_dict_of_outputs(featured_mag):
    batch = next(iter(hetero_link_loader_on(featured_mag, 'cpu')))
    model, _ = hetero_link_models(featured_mag, 'cpu')

    def decoder(out, edge_label_index):  # (a user's: scaled, reading the types itself)
        return 0.5 * (out['author'][edge_label_index[0]] * out['paper'][edge_label_index[1]]).sum(-1)
    out = model(batch.x_dict, batch.edge_index_dict)
    expected = F.binary_cross_entropy_with_logits(decoder(out, batch[WRITES].edge_label_index),
                                                  batch[WRITES].edge_label)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.0), decoder=decoder)
    torch.testing.assert_close(step(batch), expected)


def test_hetero_link_batches_without_binary_labels_are_clear_errors(featured_mag):
    model, _ = hetero_link_models(featured_mag, 'cpu')
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    triplet = next(iter(hetero_link_loader_on(featured_mag, 'cpu', neg_sampling='triplet')))
    with pytest.raises(ValueError, match="neg_sampling='binary'"):
        TrainStep(model, opt)(triplet)
    batch = next(iter(hetero_link_loader_on(featured_mag, 'cpu')))
    batch[WRITES].edge_label = batch[WRITES].edge_label[:-1]
    with pytest.raises(ValueError, match='label edges'):
        TrainStep(model, opt)(batch)


@requires_cuda
@pytest.mark.parametrize('label_type', [WRITES, CITES])
def test_captured_hetero_link_steps_train_as_the_eager_loop(featured_mag, label_type):
    """CUDA graphs over padded heterogeneous link batches (the epoch's smaller last batch
    included): the plain loop's losses and parameters, most steps replayed."""
    step = step_trains_as_the_plain_loop(hetero_link_loader_on(featured_mag, 'cuda', label_type),
                                         *hetero_link_models(featured_mag, 'cuda'),
                                         loss_of=hetero_link_loss(label_type), epochs=4, steps_per_octave=1)
    assert all(len(shape) == 3 for shape in step.buckets())  # (types, typed bucket, label-edge slots)
