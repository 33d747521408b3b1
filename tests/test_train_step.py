"""pyg_accel.training: batches padded to fixed shapes give the unpadded step's loss and
gradients; TrainStep (eager on the CPU, CUDA graphs on a GPU) trains as the plain loop."""
import copy

import pytest
import torch
import torch.nn.functional as F

import pyg_accel.nn.models as accel_models
from pyg_accel.data import from_data
from pyg_accel.loader import NeighborLoader
from pyg_accel.ops.hops import sampled_hops
from pyg_accel.training import PaddedBatch, TrainStep, bucket_of
from pyg_accel.ops.hops import record_hops
from pyg_accel.training.padding import PADDING_FAN, covering_bucket, fits, round_up

from conftest import DEVICES, HAS_CUDA, community_data, requires_cuda


def loader_on(device, batch_size=64, fanout=(5, 4, 3), **kwargs):
    fs, gs = from_data(community_data(), device)
    return NeighborLoader((fs, gs), list(fanout), input_nodes=torch.arange(500), batch_size=batch_size,
                          shuffle=True, **kwargs)


def test_round_up_grid():
    assert round_up(1) == 32 and round_up(32) == 32 and round_up(33) == 34
    assert round_up(1025) == 1088 and round_up(1024) == 1024
    for n in range(1, 5000, 7):
        assert n <= round_up(n) <= max(32, n * 17 / 16)
    nodes, edges = bucket_of([64, 300, 900], [320, 1200])
    assert all(p > n for p, n in zip(nodes, [64, 300, 900])) and all(p >= e for p, e in zip(edges, [320, 1200]))


def test_a_new_shape_is_served_by_a_slightly_larger_one_held():
    nodes, edges = [1024, 13072, 96605, 256596], [14457, 130495, 483016]
    own = bucket_of(nodes, edges)
    assert fits(own, nodes, edges) and covering_bucket([], nodes, edges) is None
    assert covering_bucket([own], nodes, edges) == own

    def grown(factor):
        return bucket_of([int(n * factor) for n in nodes], [int(e * factor) for e in edges])
    near, far = grown(1.05), grown(1.5)
    assert near != own and covering_bucket([far, near], nodes, edges) == near  # the least padding
    assert covering_bucket([far], nodes, edges) is None  # more than two grid steps larger
    assert covering_bucket([far], nodes, edges, slack_steps=16) == far
    assert covering_bucket([grown(0.95)], nodes, edges) is None  # too small for the batch
    # one count over (edges of the last hop) or a hop too few: no fit
    assert not fits((near[0], near[1][:2] + (edges[2] - 1,)), nodes, edges)
    assert not fits(near, nodes[:3], edges[:2])
    # enough room for the edges but too few padding nodes for the padding edges' fan-in
    tight = ((nodes[0] + 1, nodes[1] + 1, nodes[2] + 1, nodes[3] + 1), (edges[0], edges[1], edges[2] + 2 * PADDING_FAN))
    assert not fits(tight, nodes, edges)
    assert fits((tight[0][:2] + (nodes[2] + 2, nodes[3] + 2), tight[1]), nodes, edges)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('name', ['GraphSAGE', 'GCN', 'GAT', 'GIN'])
def test_padded_batch_gives_the_unpadded_loss_and_gradients(device, name):
    """Padding nodes and edges feed only padding nodes; padding seeds are masked out."""
    torch.manual_seed(0)
    batch = next(iter(loader_on(device, pipeline=False)))
    small = next(iter(loader_on(device, batch_size=40, pipeline=False)))
    nodes, edges = sampled_hops(batch.edge_index, batch.num_nodes)
    s_nodes, s_edges = sampled_hops(small.edge_index, small.num_nodes)
    bucket = tuple(tuple(map(max, a, b)) for a, b in zip(bucket_of(nodes, edges, 4), bucket_of(s_nodes, s_edges, 4)))
    padded = PaddedBatch(bucket, 16, batch.x.dtype, (), batch.y.dtype, batch.x.device)
    padded.load(batch.x, batch.edge_index, batch.y[:batch.batch_size], nodes, edges)
    assert padded.x.size(0) > batch.num_nodes and padded.edge_index.size(1) >= batch.edge_index.size(1)
    model = getattr(accel_models, name)(16, 8, 3, 4).to(device)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), capture=False)
    expected = F.cross_entropy(model(batch.x, batch.edge_index), batch.y[:batch.batch_size])
    grads = torch.autograd.grad(expected, list(model.parameters()))
    loss = step._loss(padded.inputs, padded.y, padded)
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    for g, h in zip(torch.autograd.grad(loss, list(model.parameters())), grads):
        torch.testing.assert_close(g, h, atol=1e-5, rtol=1e-4)
    # a smaller batch into the same buffers: the slots its predecessor filled are padding again
    assert padded.fits(s_nodes, s_edges) and padded.fits(nodes, edges)
    padded.load(small.x, small.edge_index, small.y[:small.batch_size], s_nodes, s_edges)
    torch.testing.assert_close(step._loss(padded.inputs, padded.y, padded),
                               F.cross_entropy(model(small.x, small.edge_index), small.y[:small.batch_size]),
                               atol=1e-5, rtol=1e-5)


def seed_loss(model, batch):
    """The plain loop's loss: cross-entropy of the seeds' outputs."""
    return F.cross_entropy(model(batch.x, batch.edge_index)[:batch.batch_size], batch.y[:batch.batch_size])


def train(loader, model, opt, step=None, epochs=2, loss_of=seed_loss):
    """Each batch's loss over ``epochs``: the plain loop (``loss_of(model, batch)``), or
    ``step(batch)`` when a TrainStep is given."""
    losses = []
    for _ in range(epochs):
        for batch in loader:
            if step is not None:
                losses.append(step(batch))
                continue
            opt.zero_grad()
            loss = loss_of(model, batch)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    return torch.stack(losses)


def step_trains_as_the_plain_loop(loader, a, b, loss_of=seed_loss, epochs=2, **step_kwargs) -> TrainStep:
    """Trains ``a`` with the plain loop and its copy ``b`` with ``TrainStep(b, ...,
    **step_kwargs)`` over the same batches, both with Adam, and checks that they give
    the same losses and parameters: exactly on the CPU, within float rounding on a GPU,
    where most steps must be replays of captured graphs. Returns the step."""
    on_gpu = next(a.parameters()).is_cuda
    opt_a = torch.optim.Adam(a.parameters(), lr=0.01, fused=on_gpu)
    opt_b = torch.optim.Adam(b.parameters(), lr=0.01, fused=on_gpu)
    torch.manual_seed(1)
    expected = train(loader, a, opt_a, epochs=epochs, loss_of=loss_of)
    torch.manual_seed(1)
    step = TrainStep(b, opt_b, **step_kwargs)
    got = train(loader, b, opt_b, step, epochs=epochs)
    tolerance = dict(atol=1e-4, rtol=1e-3) if on_gpu else {}
    torch.testing.assert_close(got, expected, **tolerance)
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, **tolerance)
    if on_gpu:
        assert step.stats['replayed'] > step.stats['captured'] + step.stats['eager'], step.stats
    return step


def same_models(device, name='GraphSAGE', **kwargs):
    torch.manual_seed(0)
    a = getattr(accel_models, name)(16, 32, 3, 4, **kwargs).to(device)
    b = getattr(accel_models, name)(16, 32, 3, 4, **kwargs).to(device)
    b.load_state_dict(a.state_dict())
    return a, b


def test_eager_step_is_the_plain_loop():
    """On the CPU TrainStep is the plain loop: same losses, same parameters."""
    step_trains_as_the_plain_loop(loader_on('cpu'), *same_models('cpu'))


def test_bad_arguments_are_clear():
    model = accel_models.GraphSAGE(16, 8, 2, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match='capture'):
        TrainStep(model, opt, capture='yes')
    batch = next(iter(loader_on('cpu', fanout=(3, 3))))
    with pytest.raises(ValueError, match="'label'"):
        TrainStep(model, opt, target='label')(batch)
    with pytest.raises(ValueError, match='one loss per seed'):
        TrainStep(model, opt, loss_fn=F.cross_entropy)(batch)  # a mean, not per-seed losses
    del batch.batch_size
    with pytest.raises(ValueError, match='batch_size'):
        TrainStep(model, opt)(batch)


@requires_cuda
@pytest.mark.parametrize('name', ['GraphSAGE', 'GCN', 'GAT', 'GIN'])
def test_captured_steps_train_as_the_eager_loop(name):
    """CUDA graphs replayed over padded batches: the losses and parameters of the plain
    loop (within float rounding), most steps replayed, few graphs."""
    # (a coarse grid: this small graph's batch shapes vary widely)
    step = step_trains_as_the_plain_loop(loader_on('cuda'), *same_models('cuda', name), epochs=3, steps_per_octave=1)
    assert 1 <= step.num_graphs <= 4


def smaller_fits(held, nodes, edges, fewer: int) -> bool:
    """Whether the counts less ``fewer`` edges of the last hop have an own bucket other
    than ``held`` and ``held`` covers them."""
    less = edges[:-1] + [edges[-1] - fewer]
    return bucket_of(nodes, less) != held and covering_bucket([held], nodes, less) == held


@requires_cuda
def test_a_batch_of_a_new_shape_replays_a_slightly_larger_graph():
    """A batch whose own shape is new, but which a held shape at most two grid steps
    larger fits, replays that shape's graph: no warm-up, no capture, the eager loss."""
    loader = loader_on('cuda', pipeline=False)
    model, _ = same_models('cuda')
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.0))  # (lr 0: the same parameters throughout)
    batch = next(iter(loader))
    nodes, edges = sampled_hops(batch.edge_index, batch.num_nodes)
    step(batch), step(batch)  # warm-up, capture
    assert step.num_graphs == 1 and len(step.buckets()) == 1
    # the batch less the last few edges of its last hop (still sorted by destination), as few as give it
    # an own shape other than the held one that the held one still covers
    held = step.buckets()[0]
    fewer = next(k for k in range(1, edges[-1]) if smaller_fits(held, nodes, edges, k))
    smaller = batch.clone()
    smaller.edge_index = batch.edge_index[:, :batch.edge_index.size(1) - fewer].contiguous()
    assert record_hops(smaller.edge_index, smaller.num_nodes, nodes, edges[:-1] + [edges[-1] - fewer])
    before = dict(step.stats)
    loss = step(smaller)
    assert step.stats['replayed'] == before['replayed'] + 1 and step.stats['captured'] == before['captured']
    assert step.buckets() == [held] and step.num_graphs == 1
    expected = F.cross_entropy(model(smaller.x, smaller.edge_index), smaller.y[:smaller.batch_size])
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-4)


@requires_cuda
def test_shapes_past_max_graphs_train_eagerly_unpadded():
    loader = loader_on('cuda', pipeline=False)
    model, _ = same_models('cuda')
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), max_graphs=1)
    batches = [next(iter(loader)), next(iter(loader_on('cuda', batch_size=40, pipeline=False)))]  # two shapes
    with pytest.warns(UserWarning, match='max_graphs=1'):
        for batch in batches * 2:
            step(batch)
    assert len(step.buckets()) == 1 and step.num_graphs <= 1


def test_clear_releases_and_the_step_goes_on():
    loader = loader_on('cuda' if HAS_CUDA else 'cpu', pipeline=False)
    model, _ = same_models(loader.data[0].device.type)
    step = TrainStep(model, torch.optim.Adam(model.parameters(), lr=0.01))
    batch = next(iter(loader))
    for _ in range(3):
        step(batch)
    step.clear()
    assert step.num_graphs == 0 and step.buckets() == [] and all(p.grad is None for p in model.parameters())
    assert torch.isfinite(step(batch))


@requires_cuda
def test_dropout_draws_fresh_masks_on_every_replay():
    loader = loader_on('cuda', pipeline=False)
    torch.manual_seed(0)
    model = accel_models.GraphSAGE(16, 32, 3, 4, dropout=0.5).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # parameters fixed: only the masks change
    step = TrainStep(model, opt)
    batch = next(iter(loader))
    losses = torch.stack([step(batch) for _ in range(6)])  # eager, captured, then replays
    assert step.stats['replayed'] == 4
    assert torch.unique(losses[2:]).numel() == 4


@requires_cuda
def test_learning_rate_changes_recapture():
    loader = loader_on('cuda', pipeline=False)
    model, _ = same_models('cuda')
    opt = torch.optim.Adam(model.parameters(), lr=0.01, fused=True)
    step = TrainStep(model, opt)
    batch = next(iter(loader))
    for _ in range(3):
        step(batch)
    before = [p.detach().clone() for p in model.parameters()]
    opt.param_groups[0]['lr'] = 0.0
    captured, replayed = step.stats['captured'], step.stats['replayed']
    with pytest.warns(UserWarning, match='captured again'):
        step(batch)
    for _ in range(3):  # captured again once, then replayed (the new lr is the state from now on)
        step(batch)
    assert step.stats['captured'] == captured + 1 and step.stats['replayed'] == replayed + 3
    for p, q in zip(model.parameters(), before):
        torch.testing.assert_close(p, q)  # lr 0: nothing moved (the new lr was used)


def _swap_weight(model, how):
    """Replaces the first layer's weight (or the layer) the way ``how`` names."""
    lin = model.convs[0].lin_l
    if how == 'setattr':
        lin.weight = torch.nn.Parameter(lin.weight.detach().clone())
    elif how == 'data':
        lin.weight.data = lin.weight.detach().clone()
    elif how == 'dict':  # (as model.to() does with torch.__future__'s overwrite_module_params_on_conversion)
        lin._parameters['weight'] = torch.nn.Parameter(lin.weight.detach().clone())
    elif how == 'delete':
        del model.convs[0].lin_l
    else:
        model.convs[0].lin_l = copy.deepcopy(lin)  # (a new module: new parameters)


@pytest.mark.parametrize('how', ['setattr', 'data', 'dict', 'module', 'delete'])
def test_the_state_key_sees_every_way_of_swapping_a_parameter(how):
    """What a captured step baked in (each parameter's storage) is read without walking
    model.parameters() per step: a swap by any of four routes, or a deleted submodule,
    changes the key; steps without one keep it."""
    model, _ = same_models('cpu')
    step = TrainStep(model, torch.optim.Adam(model.parameters(), lr=0.01))
    key = step._current_state_key()
    assert step._current_state_key() == key
    _swap_weight(model, how)
    assert step._current_state_key() != key


@requires_cuda
@pytest.mark.parametrize('how', ['setattr', 'module'])
def test_a_swapped_parameter_recaptures(how):
    """A captured step replays on the parameters it was captured with; swapping one (and
    handing the optimizer the new set) captures again, and the new weights train."""
    loader = loader_on('cuda', pipeline=False)
    model, _ = same_models('cuda')
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = TrainStep(model, opt)
    batch = next(iter(loader))
    for _ in range(3):
        step(batch)
    _swap_weight(model, how)
    opt.param_groups[0]['params'] = list(model.parameters())
    before = model.convs[0].lin_l.weight.detach().clone()
    with pytest.warns(UserWarning, match='captured again'):
        step(batch)
    step(batch)
    assert not torch.equal(model.convs[0].lin_l.weight, before)


@requires_cuda
def test_uncapturable_steps_train_eagerly_and_say_why():
    """A loss that reads a value on the host (a sync no capture can hold): the warm-up
    finds it, the step says so once and trains eagerly, as the plain loop does."""
    loader = loader_on('cuda', pipeline=False)
    a, b = same_models('cuda')
    opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
    torch.manual_seed(1)
    expected = train(loader, a, opt_a, epochs=1)

    def syncing_loss(out, y):
        return F.cross_entropy(out, y, reduction='none') * float(y.max().item() >= 0)

    torch.manual_seed(1)
    step = TrainStep(b, opt_b, loss_fn=syncing_loss)
    with pytest.warns(UserWarning, match='could not be captured'):
        got = train(loader, b, opt_b, step, epochs=1)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-3)
    assert step.num_graphs == 0


@requires_cuda
@pytest.mark.parametrize('torch_warns', [True, False])
def test_a_plain_loops_graph_kept_alive_delays_the_capture_until_freed(torch_warns):
    """The README's order: a plain loop first, whose losses (their autograd graphs, with
    the parameters' gradient accumulators made on the default stream, which a capture
    may not wait on) the caller still holds. The step goes on training (eagerly where the
    capture fails, found by PyTorch's warning at the warm-up or by the capture's error),
    never gives up for good, and is captured and replayed once they are freed."""
    import warnings
    loader = loader_on('cuda', pipeline=False)
    model = accel_models.GraphSAGE(16, 32, 3, 4).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    kept = []
    for batch in loader:
        opt.zero_grad()
        loss = seed_loss(model, batch)
        loss.backward()
        opt.step()
        kept.append(loss)  # (not detached: the graph stays alive)
    del loss
    step = TrainStep(model, opt, steps_per_octave=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(torch_warns)
        try:
            losses = [step(batch) for batch in loader]
            assert kept[0].grad_fn is not None
            kept.clear()
            replayed_while_kept = step.stats['replayed']
            losses += [step(batch) for _ in range(3) for batch in loader]
        finally:
            torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(True)
    messages = [str(w.message) for w in caught]
    assert not any('could not be captured' in m for m in messages), messages
    assert step.num_graphs >= 1 and step.stats['replayed'] > replayed_while_kept + 8, (step.stats, messages)
    assert torch.isfinite(torch.stack(losses)).all()


@requires_cuda
def test_a_failed_capture_trains_eagerly_and_random_ops_still_work():
    """A step that passes its warm-up but fails inside the capture (here a host sync on
    the second call) trains eagerly, says why, and leaves the RNG usable: dropout and
    torch.randn after it."""
    loader = loader_on('cuda', pipeline=False)
    model = accel_models.GraphSAGE(16, 32, 3, 4, dropout=0.3).cuda()
    calls = []

    def loss_fn(out, y):
        calls.append(1)
        if len(calls) == 2:  # (the capture)
            torch.cuda.synchronize()
        return F.cross_entropy(out, y, reduction='none')

    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), loss_fn=loss_fn)
    batch = next(iter(loader))
    with pytest.warns(UserWarning, match='could not be captured'):
        for _ in range(4):
            assert torch.isfinite(step(batch))
    assert step.num_graphs == 0 and torch.randn(3, device='cuda').isfinite().all()


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('name,options,edges', [
    ('GCN', {}, None), ('GCN', {}, 'weight'), ('GCN', {'improved': True}, 'weight'),
    ('GAT', {}, None), ('GAT', {'heads': 2, 'concat': False}, None),
    ('GAT', {'edge_dim': 3}, 'attr'), ('GAT', {'edge_dim': 3, 'fill_value': 'add'}, 'attr'),
    ('GAT', {'edge_dim': 3, 'fill_value': 'max'}, 'attr'), ('GAT', {'edge_dim': 3, 'fill_value': 0.5}, 'attr'),
    ('GAT', {'edge_dim': 3, 'fill_value': torch.tensor([1.0, -2.0, 0.5])}, 'attr')])
@pytest.mark.parametrize('marked_sorted', [False, True])
def test_self_loops_without_a_sync_give_pyg_values(device, name, options, edges, marked_sorted):
    """Inside sync_free() (as TrainStep runs its padded steps) GCN and GAT keep the graph's
    own self-loops with no effect instead of dropping them: PyG's values and gradients on
    a graph full of self-loops (duplicated ones too), weighted GCN included, and GAT with
    edge attributes, whose appended loops get PyG's fill (a reduction over the edges that
    are not loops, or a value); also on edges marked sorted by destination (as a loader's
    batch), whose graph the loops are merged into without a sort."""
    import torch_geometric.nn.models as pyg_models
    from pyg_accel.nn.conv._self_loops import sync_free
    from pyg_accel.ops.sparse import trust_edge_index
    g = torch.Generator().manual_seed(0)
    n = 60
    ei = torch.randint(0, n, (2, 400), generator=g)
    loops = torch.randint(0, n, (40,), generator=g)
    ei = torch.cat([ei, torch.stack([loops, loops])], 1)
    if marked_sorted:
        ei = ei[:, torch.argsort(ei[1], stable=True)]
    ei = ei.to(device)
    if marked_sorted:
        trust_edge_index(ei, n, n, dst_sorted=True)
    x = torch.randn(n, 16, generator=g).to(device)
    kwargs = {}
    if edges == 'weight':  # a node's duplicated loops share one weight: which of them PyG keeps is up to the device
        weight = torch.rand(ei.size(1), generator=g) + 0.1
        node_weight = torch.rand(n, generator=g) + 0.1
        weight = torch.where(ei[0].cpu() == ei[1].cpu(), node_weight[ei[0].cpu()], weight)
        kwargs = {'edge_weight': weight.to(device)}
    elif edges == 'attr':
        kwargs = {'edge_attr': torch.randn(ei.size(1), 3, generator=g).to(device)}
    torch.manual_seed(0)
    ref = getattr(pyg_models, name)(16, 8, 2, 4, **options).to(device)
    ours = getattr(accel_models, name)(16, 8, 2, 4, **options).to(device)
    ours.load_state_dict(ref.state_dict())
    expected = ref(x, ei, **kwargs)
    with sync_free():
        out = ours(x, ei, **kwargs)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    out.square().sum().backward()
    expected.square().sum().backward()
    for (key, p), q in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=key)


@requires_cuda
def test_data_parallel_steps_are_captured_with_their_all_reduce(tmp_path):
    """The module with process_group= (one NCCL process here; two in
    tests/distributed_worker.py, where the gradients are averaged by an all-reduce
    between the step's two graphs): the step is captured and trains as the plain DDP
    loop; a group of one process has nothing to average, so its step is one graph. A
    DDP model itself trains eagerly, saying how to capture it."""
    import torch.distributed as dist
    dist.init_process_group('nccl', init_method=f'file://{tmp_path}/rendezvous', rank=0, world_size=1)
    try:
        a, b = same_models('cuda')
        a = torch.nn.parallel.DistributedDataParallel(a)
        opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
        loader = loader_on('cuda', pipeline=False)
        torch.manual_seed(1)
        expected = train(loader, a, opt_a)
        torch.manual_seed(1)
        step = TrainStep(b, opt_b, process_group=dist.group.WORLD)
        got = train(loader, b, opt_b, step)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-3)
        assert step.num_graphs >= 1 and all(g.update is None for g in step._graphs.values())
        with pytest.warns(UserWarning, match='process_group='):
            TrainStep(a, opt_a)(next(iter(loader)))
        with pytest.raises(ValueError, match='model.module'):
            TrainStep(a, opt_a, process_group=dist.group.WORLD)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('norm,cls', [('batch_norm', 'BatchNorm'), ('graph_norm', 'GraphNorm'),
                                      ('layer_norm', 'LayerNorm'), (None, None)])
def test_models_that_normalise_across_nodes_train_eagerly(device, norm, cls):
    """Padding nodes would enter a batch norm's statistics: such models are not padded
    (PyG's LayerNorm defaults to mode='graph', across nodes; mode='node' is per node)."""
    from pyg_accel.training.step import _cross_node_norms
    model = accel_models.GraphSAGE(16, 8, 2, 4, norm=norm).to(device)
    assert _cross_node_norms(model) == cls
    per_node = accel_models.GraphSAGE(16, 8, 2, 4, norm='layer_norm', norm_kwargs={'mode': 'node'})
    assert _cross_node_norms(per_node) is None
    if device == 'cuda' and cls is not None:
        step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1))
        with pytest.warns(UserWarning, match=f'{cls} normalises across nodes'):
            step(next(iter(loader_on(device, pipeline=False))))
        assert step.stats['eager'] == 1 and step.buckets() == []


def test_batches_without_counts_train_eagerly():
    from torch_geometric.data import Data
    model = accel_models.GraphSAGE(16, 8, 2, 4)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), capture=True)
    data = community_data()
    batch = Data(x=data.x, edge_index=data.edge_index, y=data.y, batch_size=600)
    with pytest.warns(UserWarning, match='GPU'):
        loss = step(batch)
    assert loss.dim() == 0 and step.stats['eager'] == 1
    assert step.num_graphs == 0 and step.buckets() == []  # (unpadded: no buffers were made for it)


def reference_pad(x, edge_index, nodes, edges, padded_nodes, padded_edges, x_out, edge_index_out):
    """pad_hops in plain PyTorch: rows and ids shifted group by group, padding edges after."""
    real_starts = [sum(nodes[:g]) for g in range(len(nodes))]
    padded_starts = [sum(padded_nodes[:g]) for g in range(len(nodes))]
    x_out, out = x_out.clone(), edge_index_out.clone()
    mapping = torch.empty(x.size(0), dtype=torch.long)
    for g, n in enumerate(nodes):
        x_out[padded_starts[g]:padded_starts[g] + n] = x[real_starts[g]:real_starts[g] + n]
        mapping[real_starts[g]:real_starts[g] + n] = torch.arange(padded_starts[g], padded_starts[g] + n)
    col = 0
    for k, e in enumerate(edges):
        first = sum(edges[:k])
        out[:, col:col + e] = mapping[edge_index[:, first:first + e].cpu()].to(out.device)
        q = padded_edges[k] - e  # padding edges: sources in turn, destinations spread in order
        p = torch.arange(q)
        src_slots, dst_slots = padded_nodes[k + 1] - nodes[k + 1], padded_nodes[k] - nodes[k]
        out[0, col + e:col + padded_edges[k]] = (padded_starts[k + 1] + nodes[k + 1] + p % src_slots).to(out.device)
        out[1, col + e:col + padded_edges[k]] = (padded_starts[k] + nodes[k] + p * dst_slots // max(q, 1)).to(out.device)
        col += padded_edges[k]
    return x_out, out


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype,width', [(torch.float32, 16), (torch.bfloat16, 3), (torch.float64, 5),
                                         (torch.float16, 1)])
def test_pad_hops_matches_its_reference(device, dtype, width):
    """Every row and id where the reference puts it (16-byte, 4-byte and 1-byte row paths;
    an empty hop); the padding rows keep what they held."""
    from pyg_accel.ops import pad_hops
    g = torch.Generator().manual_seed(0)
    nodes, edges = [4, 7, 3, 0], [9, 0, 6]  # (an empty hop of edges, an empty last group of nodes)
    padded_nodes, padded_edges = [5, 9, 4, 2], [12, 3, 6]
    n = sum(nodes)
    x = torch.randn(n, width, generator=g).to(dtype)
    dst = torch.cat([torch.randint(0, 4, (9,), generator=g).sort().values,
                     torch.randint(11, 14, (6,), generator=g).sort().values])
    src = torch.randint(0, n, (15,), generator=g)
    edge_index = torch.stack([src, dst])
    x_out = torch.full((sum(padded_nodes), width), 7.0, dtype=dtype, device=device)
    ei_out = torch.full((2, sum(padded_edges)), -1, dtype=torch.long, device=device)
    expected = reference_pad(x, edge_index, nodes, edges, padded_nodes, padded_edges, x_out.cpu(), ei_out.cpu())
    pad_hops(x.to(device), edge_index.to(device), nodes, edges, padded_nodes, padded_edges, x_out, ei_out)
    assert torch.equal(x_out.cpu(), expected[0]) and torch.equal(ei_out.cpu(), expected[1])


@pytest.mark.parametrize('device', DEVICES)
def test_pad_hops_bad_input_is_a_clear_error(device):
    from pyg_accel.ops import pad_hops
    x, ei = torch.randn(6, 4, device=device), torch.tensor([[1, 2], [0, 0]], device=device)
    x_out, ei_out = torch.zeros(8, 4, device=device), torch.zeros(2, 3, dtype=torch.long, device=device)
    with pytest.raises(IndexError):  # an id past the batch's nodes
        pad_hops(x, torch.tensor([[1, 6], [0, 0]], device=device), [2, 4], [2], [3, 5], [3], x_out, ei_out)
    with pytest.raises(ValueError, match='at least one padding node'):
        pad_hops(x, ei, [2, 4], [2], [2, 6], [3], x_out, ei_out)
    with pytest.raises(ValueError, match='nodes one more'):
        pad_hops(x, ei, [6], [2], [8], [3], x_out, ei_out)
    with pytest.raises(ValueError, match='x_out has'):
        pad_hops(x, ei, [2, 4], [2], [3, 6], [3], x_out, ei_out)
    with pytest.raises(ValueError, match='edge_index_out has'):
        pad_hops(x, ei, [2, 4], [2], [3, 5], [4], x_out, ei_out)
    with pytest.raises(ValueError, match='int64'):
        pad_hops(x, ei.int(), [2, 4], [2], [3, 5], [3], x_out, ei_out)
    with pytest.raises(TypeError, match='x_out'):
        pad_hops(x, ei, [2, 4], [2], [3, 5], [3], None, ei_out)


@pytest.mark.parametrize('device', DEVICES)
def test_pad_hops_bumps_the_version_of_what_it_writes(device):
    """Facts memoised on the buffers (a sorted graph, the in-range mark) are keyed by the
    version: a rewrite that did not bump it would serve the last batch's graph."""
    from pyg_accel.ops import pad_hops
    x, ei = torch.randn(6, 4, device=device), torch.tensor([[1, 2], [0, 0]], device=device)
    x_out, ei_out = torch.zeros(8, 4, device=device), torch.zeros(2, 3, dtype=torch.long, device=device)
    before = (x_out._version, ei_out._version)
    pad_hops(x, ei, [2, 4], [2], [3, 5], [3], x_out, ei_out)
    assert x_out._version > before[0] and ei_out._version > before[1]
