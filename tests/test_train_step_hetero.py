"""TrainStep on heterogeneous batches: each node and edge type padded hop by hop
(pad_hop_rows, pad_hop_edges) gives the unpadded step's loss and gradients; the captured
step trains as the eager loop."""
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
import torch_geometric.transforms as T

import pyg_accel.nn
from pyg_accel.datasets import load_hetero_dataset
from pyg_accel.loader import NeighborLoader
from pyg_accel.ops import pad_hop_edges, pad_hop_rows
from pyg_accel.ops.sparse import trust_edge_index
from pyg_accel.training import TrainStep
from pyg_accel.training.padding import (HETERO_HEADROOM_STEPS, HETERO_SLACK_STEPS, HOMOGENEOUS, PaddedHeteroBatch,
                                        bucket_of, covering_bucket, fits, typed_bucket_of, typed_bucket_with_headroom,
                                        typed_covering_bucket, typed_fits)
from pyg_accel.training.step import _HeteroHops, _hetero_hops

from conftest import DEVICES, requires_cuda
from test_train_step import step_trains_as_the_plain_loop


@pytest.fixture(scope='module')
def mag():
    """A small ogbn-mag-shaped graph, reverse edge types added (7 edge types, 4 node
    types, two of them without features)."""
    dataset = load_hetero_dataset('synthetic-mag', scale=0.002, seed=0)
    return T.ToUndirected()(dataset.data), dataset


class HeteroSAGE(torch.nn.Module):
    """Two rounds of HeteroConv over pyg_accel's SAGEConv; node types without features
    read an embedding at their n_id (the ogbn-mag example's model)."""

    def __init__(self, data, hidden=16, classes=32, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.embeddings = torch.nn.ModuleDict({t: torch.nn.Embedding(data[t].num_nodes, hidden)
                                               for t in data.node_types if 'x' not in data[t]})
        self.convs = torch.nn.ModuleList([
            pyg_nn.HeteroConv({et: pyg_accel.nn.SAGEConv((-1, -1), hidden) for et in data.edge_types}, aggr='sum')
            for _ in range(2)])
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x_dict, edge_index_dict, n_id_dict):
        x_dict = {**x_dict, **{t: emb.weight.index_select(0, n_id_dict[t]) for t, emb in self.embeddings.items()}}
        for conv in self.convs:
            x_dict = {t: F.dropout(x.relu(), p=self.dropout, training=self.training)
                      for t, x in conv(x_dict, edge_index_dict).items()}
        return self.head(x_dict['paper'])


def loader_on(mag, device, batch_size=32, fanout=(4, 3), **kwargs):
    data, dataset = mag
    return NeighborLoader(data.to(device), list(fanout), input_nodes=('paper', dataset.split['train'].to(device)),
                          batch_size=batch_size, shuffle=True, **kwargs)


def model_on(mag, device, **kwargs):
    torch.manual_seed(0)
    model = HeteroSAGE(mag[0], **kwargs).to(device)
    with torch.no_grad():  # (the lazy layers made before an optimizer sees them)
        batch = next(iter(loader_on(mag, device)))
        model(batch.x_dict, batch.edge_index_dict, batch.n_id_dict)
    return model


INPUTS = ('x_dict', 'edge_index_dict', 'n_id_dict')


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = pyg_accel.nn.SAGEConv((-1, -1), 16)
        self.conv2 = pyg_accel.nn.SAGEConv((-1, -1), 32)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


@pytest.fixture(scope='module')
def featured_mag(mag):
    """``mag`` with features on every node type (PyG's ``to_hetero`` models read ``x``
    of each)."""
    data = mag[0].clone()
    g = torch.Generator().manual_seed(0)
    for t in data.node_types:
        if 'x' not in data[t]:
            data[t].x = torch.randn(data[t].num_nodes, 8, generator=g)
    return data, mag[1]


def reference_pad_edges(edge_index, edges, padded_edges, src_nodes, src_padded, dst_nodes, dst_padded):
    """pad_hop_edges in plain PyTorch."""
    def mapping(nodes, padded):
        out = torch.empty(sum(nodes), dtype=torch.long)
        for g, n in enumerate(nodes):
            out[sum(nodes[:g]):sum(nodes[:g]) + n] = torch.arange(sum(padded[:g]), sum(padded[:g]) + n)
        return out
    src_map, dst_map = mapping(src_nodes, src_padded), mapping(dst_nodes, dst_padded)
    columns = []
    for k, e in enumerate(edges):
        first = sum(edges[:k])
        real = torch.stack([src_map[edge_index[0, first:first + e]], dst_map[edge_index[1, first:first + e]]])
        q = torch.arange(padded_edges[k] - e)
        src_slots, dst_slots = src_padded[k + 1] - src_nodes[k + 1], dst_padded[k] - dst_nodes[k]
        pad = torch.stack([sum(src_padded[:k + 1]) + src_nodes[k + 1] + q % src_slots,
                           sum(dst_padded[:k]) + dst_nodes[k] + q * dst_slots // max(len(q), 1)])
        columns += [real, pad]
    return torch.cat(columns, 1)


@pytest.mark.parametrize('device', DEVICES)
def test_pad_hop_edges_between_two_node_types(device):
    """Sources remapped by the source type's groups, destinations by the destination
    type's; padding edges from the source's padding nodes of hop k + 1 to the
    destination's of hop k, in order."""
    g = torch.Generator().manual_seed(0)
    src_nodes, src_padded = [0, 5, 3], [2, 7, 6]  # (no seeds of the source type)
    dst_nodes, dst_padded = [3, 4, 0], [4, 6, 1]
    edges, padded_edges = [7, 5], [9, 8]
    dst = torch.cat([torch.randint(0, 3, (7,), generator=g).sort().values,
                     torch.randint(3, 7, (5,), generator=g).sort().values])
    src = torch.randint(0, 8, (12,), generator=g)
    edge_index = torch.stack([src, dst])
    out = torch.full((2, 17), -1, dtype=torch.long, device=device)
    pad_hop_edges(edge_index.to(device), edges, padded_edges, src_nodes, src_padded, dst_nodes, dst_padded, out)
    want = reference_pad_edges(edge_index, edges, padded_edges, src_nodes, src_padded, dst_nodes, dst_padded)
    assert torch.equal(out.cpu(), want)
    assert bool((out[1, 1:] >= out[1, :-1]).all())  # (still sorted by destination)
    with pytest.raises(IndexError):  # a source id past the source type's nodes
        pad_hop_edges(torch.tensor([[8], [0]], device=device), [1, 0], [1, 0], src_nodes, src_padded,
                      dst_nodes, dst_padded, torch.zeros(2, 1, dtype=torch.long, device=device))
    with pytest.raises(ValueError, match='dst_nodes one more'):
        pad_hop_edges(edge_index.to(device), edges, padded_edges, src_nodes, src_padded, dst_nodes[:2],
                      dst_padded[:2], out)
    with pytest.raises(ValueError, match='at least one padding node'):
        pad_hop_edges(edge_index.to(device), edges, padded_edges, src_nodes, [2, 5, 6], dst_nodes, dst_padded, out)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('shape,dtype', [((), torch.long), ((3,), torch.float32), ((2, 5), torch.bfloat16)])
def test_pad_hop_rows_of_any_trailing_shape(device, shape, dtype):
    """Vectors (n_id, y), matrices and wider tensors: each group's rows at its padded
    start; the padding rows keep what they held."""
    nodes, padded = [2, 0, 3], [3, 2, 4]
    x = (torch.arange(5 * max(1, torch.Size(shape).numel())).reshape((5,) + shape) + 1).to(dtype)
    out = torch.zeros((9,) + shape, dtype=dtype, device=device)
    pad_hop_rows(x.to(device), nodes, padded, out)
    want = torch.zeros((9,) + shape, dtype=dtype)
    want[0:2], want[5:8] = x[0:2], x[2:5]
    assert torch.equal(out.cpu(), want)
    with pytest.raises(ValueError, match='x_out has'):
        pad_hop_rows(x.to(device), nodes, [3, 2, 5], out)


RAW_PAD_ERRORS = """
import sys, torch
from pyg_accel.ops._library import ops
device = sys.argv[1]
x, out = torch.ones(5, 2, device=device), torch.zeros(9, 2, device=device)
edge_index = torch.zeros(2, 2, dtype=torch.long, device=device)
edge_out = torch.zeros(2, 3, dtype=torch.long, device=device)
calls = {'pad_hop_rows': lambda: ops().pad_hop_rows(x, [2, 0, 3], [3, 2, 5], out),
         'pad_hop_edges': lambda: ops().pad_hop_edges(edge_index, [2], [1], [0, 2], [1, 3], [1, 0], [2, 1], edge_out)}
for name, call in calls.items():
    try:
        call()
    except RuntimeError as error:
        print(name, 'raised:', str(error).splitlines()[0])
    if device == 'cuda':
        torch.cuda.synchronize()
print('untouched', bool((out == 0).all()) and bool((edge_out == 0).all()))
"""


@pytest.mark.parametrize('device', DEVICES)
def test_raw_pad_ops_check_their_arguments(device):
    """The pad ops themselves refuse counts that do not fit (a direct ``torch.ops`` call,
    past the wrappers' checks) with a RuntimeError before writing anything. Run in a
    subprocess: a check that streamed integers into its message took a GPU machine's
    process down with a segmentation fault (csrc/common/check_format.h), which would then
    fail this test alone."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(root), os.environ.get('PYTHONPATH', '')])}
    done = subprocess.run([sys.executable, '-c', RAW_PAD_ERRORS, device], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f'exit {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-3000:]}'
    assert 'pad_hop_rows raised: pad_hops: x_out has 9 rows, padded_nodes adds up to 10' in done.stdout
    assert 'pad_hop_edges raised: pad_hops: hop 1 has 2 edges and 1 padded slots' in done.stdout
    assert 'untouched True' in done.stdout


@pytest.mark.parametrize('device', DEVICES)
def test_pad_errors_name_the_argument_on_the_fast_path(device):
    """The pads call their op first and check in Python only when it fails, so that a
    loader's batches skip the checks: bad arguments still get the errors that name them,
    edge ids already marked in range included, and nothing is written."""
    x, out = torch.arange(5.).to(device), torch.full((9,), -1.).to(device)
    with pytest.raises(ValueError, match='at least one padding node'):
        pad_hop_rows(x, [2, 0, 3], [3, 0, 6], out)
    with pytest.raises(TypeError, match='x must be a torch.Tensor'):
        pad_hop_rows(x.tolist(), [2, 0, 3], [3, 2, 4], out)
    wide = torch.zeros(9, 2, 3, device=device).transpose(1, 2)  # (reshaping it would write into a copy)
    with pytest.raises(ValueError, match='contiguous'):
        pad_hop_rows(torch.ones(5, 3, 2, device=device), [2, 0, 3], [3, 2, 4], wide)
    swapped = torch.zeros(9, 3, 2, device=device)  # (as wide as x's rows, another shape)
    with pytest.raises(ValueError, match='one trailing shape'):
        pad_hop_rows(torch.ones(5, 2, 3, device=device), [2, 0, 3], [3, 2, 4], swapped)
    assert bool((out == -1).all()) and not bool(wide.any()) and not bool(swapped.any())
    edge_index = torch.tensor([[0, 1], [0, 0]], device=device)
    trust_edge_index(edge_index, 2, 1, dst_sorted=True)
    ei_out = torch.full((2, 3), -1, dtype=torch.long, device=device)
    with pytest.raises(ValueError, match='hop 1 has 2 edges and 1 padded slots'):
        pad_hop_edges(edge_index, [2], [1], [0, 2], [1, 3], [1, 0], [2, 1], ei_out)
    with pytest.raises(ValueError, match='src_nodes one more'):
        pad_hop_edges(edge_index, [2], [3], [0, 2, 0], [1, 3, 1], [1, 0], [2, 1], ei_out)
    with pytest.raises(TypeError, match='edge_index_out must be a torch.Tensor'):
        pad_hop_edges(edge_index, [2], [3], [0, 2], [1, 3], [1, 0], [2, 1], None)
    assert bool((ei_out == -1).all())
    pad_hop_edges(edge_index, [2], [3], [0, 2], [1, 3], [1, 0], [2, 1], ei_out)
    assert ei_out.tolist() == [[1, 2, 3], [0, 0, 1]]  # (ids 1, 2 after the seeds' padding slot; a padding edge 3 -> 1)


def test_typed_buckets_of_one_type_are_the_homogeneous_ones():
    nodes, edges = [64, 300, 900], [320, 1200]
    typed = typed_bucket_of((tuple(nodes),), (tuple(edges),), HOMOGENEOUS)
    assert (typed[0][0], typed[1][0]) == bucket_of(nodes, edges)
    near = bucket_of([int(n * 1.05) for n in nodes], [int(e * 1.05) for e in edges])
    assert fits(near, nodes, edges) == typed_fits(((near[0],), (near[1],)), (tuple(nodes),), (tuple(edges),),
                                                  HOMOGENEOUS)
    assert covering_bucket([near], nodes, edges) == near


def test_typed_buckets_give_each_node_group_the_padding_nodes_of_its_edge_groups():
    """Two node types, an edge type each way: a node group takes padding edges from the
    edge groups that start and that end there; each padding node takes at most 64."""
    links = ((0, 1), (1, 0))
    nodes, edges = ((10, 40, 90), (0, 30, 80)), ((100, 3000), (50, 2000))
    bucket = typed_bucket_of(nodes, edges, links, steps_per_octave=1)
    assert typed_fits(bucket, nodes, edges, links)
    padded_nodes, padded_edges = bucket
    assert padded_edges == ((128, 4096), (64, 2048))
    # type 0's group 2 starts edge type 0's hop-2 edges: 4096 - 3000 = 1096 padding edges, 18 padding nodes
    assert padded_nodes[0][2] - 90 >= 18
    fewer_slots = (padded_nodes[0][:2] + (90 + 17,), padded_nodes[1])
    assert not typed_fits((fewer_slots, padded_edges), nodes, edges, links)
    assert typed_covering_bucket([bucket], nodes, edges, links, steps_per_octave=1) == bucket
    assert not typed_fits(bucket, nodes, ((100, 5000), (50, 2000)), links)  # (more edges than slots)


def test_hetero_shapes_take_wider_margins():
    """A heterogeneous batch no held shape serves gets a whole grid step of headroom
    (a homogeneous one a quarter), and a held shape up to three grid steps above the
    batch's own serves it, where homogeneous batches take two."""
    links = ((1, 0), (0, 0), (0, 2))  # author -> paper, paper -> paper, paper -> field
    hops = _HeteroHops(('paper', 'author', 'field'), (('author', 'writes', 'paper'), ('paper', 'cites', 'paper'),
                       ('paper', 'has', 'field')), links, ((512, 9000, 26000), (0, 5000, 14000), (0, 0, 850)),
                       ((3000, 20000), (5000, 24000), (0, 15000)), 'paper', None, None)
    state = SimpleNamespace(_buffers={}, _serves={}, steps_per_octave=16)
    shape = TrainStep._shape_for(state, hops)
    assert shape[1] == typed_bucket_with_headroom(hops.nodes, hops.edges, links, 16, HETERO_HEADROOM_STEPS)
    assert shape[1] != typed_bucket_with_headroom(hops.nodes, hops.edges, links, 16)  # (the quarter step)
    own = typed_bucket_of(hops.nodes, hops.edges, links, 16)
    grown = (tuple(tuple(int(n * 1.15) for n in c) for c in own[0]), own[1])  # nodes: < 1 + 3/16, > 1 + 2/16
    assert typed_fits(grown, hops.nodes, hops.edges, links)
    state = SimpleNamespace(_buffers={(shape[0], grown): True}, _serves={}, steps_per_octave=16)
    assert TrainStep._shape_for(state, hops) == (shape[0], grown)
    assert typed_covering_bucket([grown], hops.nodes, hops.edges, links, 16) is None  # (the homogeneous two steps)
    assert (HETERO_HEADROOM_STEPS, HETERO_SLACK_STEPS) == (1.0, 3)


@pytest.mark.parametrize('device', DEVICES)
def test_padded_hetero_batch_gives_the_unpadded_loss_and_gradients(mag, device):
    """Padding nodes and edges of every type feed only padding nodes; padding seeds are
    masked out; a smaller batch into the same buffers gives its own loss."""
    big, small = (next(iter(loader_on(mag, device, batch_size=b, pipeline=False))) for b in (48, 16))
    hops, s_hops = _hetero_hops(big), _hetero_hops(small)
    bucket = typed_bucket_of(tuple(tuple(map(max, a, b)) for a, b in zip(hops.nodes, s_hops.nodes)),
                             tuple(tuple(map(max, a, b)) for a, b in zip(hops.edges, s_hops.edges)), hops.links, 4)
    keys = {t: [k for k in ('x', 'n_id') if k in big[t]] for t in hops.node_types}
    keys['paper'].append('y')
    padded = PaddedHeteroBatch(bucket, hops.node_types, hops.edge_types, hops.links, big, keys, ('paper', 'y'),
                               INPUTS)
    model = model_on(mag, device)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), capture=False, inputs=INPUTS)
    for batch, counts in ((big, hops), (small, s_hops)):
        assert padded.fits(counts.nodes, counts.edges)
        padded.load(batch, counts.nodes, counts.edges)
        assert padded.data['paper'].x.size(0) > batch['paper'].num_nodes
        size = batch['paper'].batch_size
        expected = F.cross_entropy(model(batch.x_dict, batch.edge_index_dict, batch.n_id_dict)[:size],
                                   batch['paper'].y[:size])
        step._seed_type = 'paper'
        loss = step._loss(padded.inputs, padded.y, padded)
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
        assert_same_gradients(loss, expected, list(model.parameters()))


def assert_same_gradients(loss, expected, params):
    """The padded loss's gradients are the unpadded one's (a parameter the seeds' loss
    does not reach, e.g. of an edge type into another node type: none or zeros)."""
    got = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=True)
    want = torch.autograd.grad(expected, params, allow_unused=True, retain_graph=True)
    assert any(h is not None for h in want)
    for g, h in zip(got, want):
        if h is None:
            assert g is None or not g.any()
        else:
            torch.testing.assert_close(g, h, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('device', DEVICES)
def test_padded_hetero_batch_of_a_to_hetero_model(featured_mag, device):
    """A ``to_hetero`` model (dict outputs per node type) called with the default inputs
    (``x_dict, edge_index_dict``): the padded loss and gradients are the unpadded ones."""
    batch = next(iter(loader_on(featured_mag, device, batch_size=24, pipeline=False)))
    torch.manual_seed(0)
    model = pyg_nn.to_hetero(TwoLayers(), batch.metadata(), aggr='sum').to(device)
    with torch.no_grad():
        model(batch.x_dict, batch.edge_index_dict)
    hops = _hetero_hops(batch)
    bucket = typed_bucket_of(hops.nodes, hops.edges, hops.links, 4)
    keys = {t: ['x'] for t in hops.node_types}
    keys['paper'].append('y')
    padded = PaddedHeteroBatch(bucket, hops.node_types, hops.edge_types, hops.links, batch, keys, ('paper', 'y'),
                               ('x_dict', 'edge_index_dict'))
    padded.load(batch, hops.nodes, hops.edges)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), capture=False)
    step._seed_type = 'paper'
    size = batch['paper'].batch_size
    expected = F.cross_entropy(model(batch.x_dict, batch.edge_index_dict)['paper'][:size], batch['paper'].y[:size])
    loss = step._loss(padded.inputs, padded.y, padded)
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    assert_same_gradients(loss, expected, list(model.parameters()))
    # the default inputs, eagerly on the CPU (capture='auto'): the plain loop's loss
    if device == 'cpu':
        torch.testing.assert_close(TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.0))(batch), expected)


@requires_cuda
def test_captured_to_hetero_steps_replay(featured_mag):
    """A ``to_hetero`` model's step on the GPU: captured and replayed, with the eager
    loop's losses."""
    loader = loader_on(featured_mag, 'cuda')
    batch = next(iter(loader))
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        model = pyg_nn.to_hetero(TwoLayers(), batch.metadata(), aggr='sum').cuda()
        with torch.no_grad():
            model(batch.x_dict, batch.edge_index_dict)
        models.append(model)
    step_trains_as_the_plain_loop(loader, *models, loss_of=paper_loss(('x_dict', 'edge_index_dict')),
                                  steps_per_octave=1)


def paper_loss(inputs=INPUTS):
    """The plain loop's loss for a model called with the batch's ``inputs``:
    cross-entropy of the seed papers' outputs (of a dict output's papers)."""
    def loss_of(model, batch):
        size = batch['paper'].batch_size
        out = model(*(getattr(batch, name) for name in inputs))
        out = out['paper'] if isinstance(out, dict) else out
        return F.cross_entropy(out[:size], batch['paper'].y[:size])
    return loss_of


def test_eager_hetero_step_is_the_plain_loop(mag):
    """On the CPU a heterogeneous TrainStep is the plain loop: same losses, same parameters."""
    step_trains_as_the_plain_loop(loader_on(mag, 'cpu'), model_on(mag, 'cpu'), model_on(mag, 'cpu'),
                                  loss_of=paper_loss(), epochs=1, inputs=INPUTS)


def test_bad_hetero_inputs_are_clear(mag):
    model = model_on(mag, 'cpu')
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match='inputs'):
        TrainStep(model, opt, inputs='x_dict')
    batch = next(iter(loader_on(mag, 'cpu')))
    with pytest.raises(ValueError, match="'label'"):
        TrainStep(model, opt, target='label', inputs=INPUTS)(batch)
    del batch['paper'].batch_size
    with pytest.raises(ValueError, match='batch_size'):
        TrainStep(model, opt, inputs=INPUTS)(batch)


@requires_cuda
def test_captured_hetero_steps_train_as_the_eager_loop(mag):
    """CUDA graphs over padded heterogeneous batches: the losses and parameters of the
    plain loop (within float rounding), most steps replayed."""
    step = step_trains_as_the_plain_loop(loader_on(mag, 'cuda'), model_on(mag, 'cuda'), model_on(mag, 'cuda'),
                                         loss_of=paper_loss(), epochs=3, inputs=INPUTS, steps_per_octave=1)
    assert 1 <= step.num_graphs <= 8


class WithSeedIds(HeteroSAGE):
    def forward(self, x_dict, edge_index_dict, n_id_dict, input_id_dict):  # (input_id_dict: read, not used)
        return super().forward(x_dict, edge_index_dict, n_id_dict)


@requires_cuda
def test_hetero_inputs_that_cannot_be_padded_train_eagerly(mag):
    """An input that is neither a node nor an edge attribute (input_id: one per seed):
    eager, with a warning naming it."""
    torch.manual_seed(0)
    model = WithSeedIds(mag[0]).cuda()
    batch = next(iter(loader_on(mag, 'cuda')))
    with torch.no_grad():
        model(batch.x_dict, batch.edge_index_dict, batch.n_id_dict, batch.input_id_dict)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), inputs=INPUTS + ('input_id_dict',))
    with pytest.warns(UserWarning, match="'input_id_dict'"):
        step(batch)
    assert step.stats['eager'] == 1


class WeightedHetero(torch.nn.Module):
    """Two rounds of HeteroConv over PyG's GraphConv, which reads an edge weight per
    edge type (the second hop's weights reach the seeds through the first round)."""

    def __init__(self, data, hidden=16, classes=32):
        super().__init__()
        self.convs = torch.nn.ModuleList([
            pyg_nn.HeteroConv({et: pyg_nn.GraphConv((-1, -1), hidden) for et in data.edge_types}, aggr='sum')
            for _ in range(2)])
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x_dict, edge_index_dict, edge_weight_dict):
        for conv in self.convs:
            x_dict = {t: x.relu() for t, x in conv(x_dict, edge_index_dict, edge_weight_dict=edge_weight_dict).items()}
        return self.head(x_dict['paper'])


@pytest.mark.parametrize('device', DEVICES)
def test_padded_hetero_edge_attributes_stay_with_their_edges(featured_mag, device):
    """Each edge type's edge weights padded hop by hop with its edges: the unpadded loss
    and gradients."""
    data, dataset = featured_mag
    data = data.clone()
    for et in data.edge_types:
        data[et].edge_weight = torch.rand(data[et].num_edges, generator=torch.Generator().manual_seed(1))
    batch = next(iter(loader_on((data, dataset), device, batch_size=24, pipeline=False)))
    torch.manual_seed(0)
    model = WeightedHetero(batch).to(device)
    inputs = ('x_dict', 'edge_index_dict', 'edge_weight_dict')
    with torch.no_grad():
        model(*(getattr(batch, name) for name in inputs))
    hops = _hetero_hops(batch)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), capture=False, inputs=inputs)
    padded = step._new_buffers((None, typed_bucket_of(hops.nodes, hops.edges, hops.links, 4)), batch, hops)
    assert all(padded.data[et].edge_weight.size(0) == padded.data[et].edge_index.size(1) for et in hops.edge_types)
    padded.load(batch, hops.nodes, hops.edges)
    step._seed_type = 'paper'
    expected, loss = paper_loss(inputs)(model, batch), step._loss(padded.inputs, padded.y, padded)
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    assert_same_gradients(loss, expected, list(model.parameters()))
