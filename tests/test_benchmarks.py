"""The benchmark scripts run (a small CPU-sized pass; timings are not asserted)."""
import sys
from pathlib import Path

import pytest
import torch
from conftest import requires_cuda, requires_stock_sampler

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))
import common as bench_common  # noqa: E402
import gather as gather_bench  # noqa: E402


def test_gather_benchmark_smoke(tmp_path):
    result = gather_bench.main(['--quick', '--row-bytes', '64', '400', '--out', str(tmp_path)])
    assert [r['row_bytes'] for r in result['rows']] == [64, 400]
    assert all(r['ours_ms'] > 0 and r['index_select_ms'] > 0 for r in result['rows'])
    assert (tmp_path / 'gather.json').is_file()


import sampling as sampling_bench  # noqa: E402


def test_sampling_benchmark_smoke(tmp_path):
    result = sampling_bench.main(['--preset', 'tiny', '--device', 'cpu', '--batch-sizes', '64', '--fanouts', '15-10-5',
                                  '--batches', '2', '--baseline-batches', '2', '--out', str(tmp_path)])
    row = result['rows'][0]
    assert row['ours ms'] > 0 and row['per-hop torch ms'] > 0
    assert (tmp_path / 'sampling.json').is_file()
    with pytest.raises(SystemExit):  # a pinned graph is read by a GPU
        sampling_bench.main(['--preset', 'tiny', '--device', 'cpu', '--graph-location', 'pinned'])


def test_sampling_benchmark_on_a_generated_topology(tmp_path):
    result = sampling_bench.main(['--preset', 'small', '--generator', 'topology', '--device', 'cpu',
                                  '--batch-sizes', '64', '--fanouts', '10-10-10', '--batches', '2',
                                  '--baseline-batches', '1', '--out', str(tmp_path)])
    assert 'synthetic-small-topology' in result['graph'] and 'synthetic-small-topology' in result['table']
    row = result['rows'][0]
    assert row['ours ms'] > 0 and row['per-hop torch ms'] > 0
    import torch_geometric.typing as pyg_typing
    assert ('stock PyG (CPU) ms' in row) == pyg_typing.WITH_TORCH_SPARSE  # (on the same CSC, given as adj_t)
    assert (tmp_path / 'sampling_topology.json').is_file()
    assert (tmp_path / 'sampling_topology.png').is_file() or bench_common.pyplot() is None
    again = sampling_bench.main(['--replot', str(tmp_path / 'sampling_topology.json'), '--out', str(tmp_path / 're')])
    assert again['rows'] == result['rows']
    assert (tmp_path / 're' / 'sampling_topology.png').is_file() or bench_common.pyplot() is None


@requires_cuda
def test_sampling_benchmark_pinned_graph_smoke(tmp_path):
    result = sampling_bench.main(['--preset', 'tiny', '--device', 'cuda', '--graph-location', 'pinned',
                                  '--batch-sizes', '64', '--fanouts', '15-10-5', '--batches', '2',
                                  '--baseline-batches', '2', '--out', str(tmp_path)])
    row = result['rows'][0]
    assert row['ours ms'] > 0 and row['ours, CPU kernel ms'] > 0 and 'per-hop torch ms' not in row
    assert (tmp_path / 'sampling_pinned.json').is_file()


import sparse as sparse_bench  # noqa: E402


def test_sparse_benchmark_smoke(tmp_path):
    result = sparse_bench.main(['--preset', 'tiny', '--device', 'cpu', '--features', '16', '--reps', '2',
                                '--out', str(tmp_path)])
    row = result['rows'][0]
    assert row['spmm ours ms'] > 0 and row['sddmm ours ms'] > 0
    assert (tmp_path / 'sparse.json').is_file()


import spmm_adjoint as adjoint_bench  # noqa: E402


def test_spmm_adjoint_benchmark_smoke(tmp_path):
    result = adjoint_bench.main(['--device', 'cpu', '--edges', '2048', '--features', '16', '--reps', '2',
                                 '--out', str(tmp_path)])
    row = result['rows'][0]
    assert row['scatter device ms'] > 0 and row['transpose device ms'] > 0 and row['auto takes'] == 'scatter'
    assert (tmp_path / 'spmm_adjoint.json').is_file()


import layers as layers_bench  # noqa: E402


def test_layers_benchmark_smoke(tmp_path):
    result = layers_bench.main(['--preset', 'tiny', '--device', 'cpu', '--widths', '16', '--reps', '1',
                                '--out', str(tmp_path)])
    assert [r['layer'] for r in result['rows']] == ['GCNConv', 'SAGEConv', 'SAGEConv-max', 'GATConv-8h']
    assert all(r['ours ms'] > 0 and r['PyG ms'] > 0 for r in result['rows'])


import end_to_end as e2e_bench  # noqa: E402


def test_end_to_end_benchmark_smoke(tmp_path):
    result = e2e_bench.main(['--preset', 'tiny', '--device', 'cpu', '--configs', 'accel-sync', 'accel',
                             '--max-batches', '2', '--split-batches', '1', '--no-trim', '--out', str(tmp_path)])
    assert [r['config'] for r in result['rows']] == ['accel-sync', 'accel']
    assert all(r['epoch s'] > 0 for r in result['rows'])
    assert (tmp_path / 'end_to_end_15_10_5_b1024_untrimmed.json').is_file()
    result = e2e_bench.main(['--preset', 'tiny', '--device', 'cpu', '--configs', 'accel', 'accel-untrimmed', 'accel-graph',
                             '--max-batches', '2', '--split-batches', '1', '--amp', '--out', str(tmp_path)])
    assert all(r['epoch s'] > 0 for r in result['rows']) and 'bf16 autocast' in result['table']  # mixed precision
    assert (tmp_path / 'end_to_end_15_10_5_b1024_amp.json').is_file()
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):  # pinned features need a GPU to read them
            e2e_bench.main(['--preset', 'tiny', '--device', 'cpu', '--features', 'pinned', '--out', str(tmp_path)])
        with pytest.raises(SystemExit):  # and so does a pinned graph
            e2e_bench.main(['--preset', 'tiny', '--device', 'cpu', '--graph', 'pinned', '--out', str(tmp_path)])


@requires_stock_sampler
def test_end_to_end_benchmark_times_stock_pyg_tuned_and_untuned(tmp_path):
    """The stock PyG baseline runs with DataLoader workers (persistent, pinned) and
    without, both in the table, each row's ratio to each; ':tf32' is per configuration."""
    result = e2e_bench.main(['--preset', 'tiny', '--device', 'cpu', '--configs', 'pyg', 'pyg-0w', 'accel:tf32',
                             '--pyg-workers', '1', '--max-batches', '2', '--pyg-batches', '1', '--split-batches', '1',
                             '--out', str(tmp_path)])
    rows = {r['config']: r for r in result['rows']}
    assert list(rows) == ['pyg', 'pyg-0w', 'accel:tf32'] and rows['pyg']['workers'] == 1
    assert 'load ms/batch' not in rows['pyg'] and 'load ms/batch' in rows['pyg-0w']
    assert rows['pyg']['vs pyg'] == 1 and rows['pyg-0w']['vs pyg-0w'] == 1
    assert rows['accel:tf32']['vs pyg'] == pytest.approx(rows['pyg']['epoch s'] / rows['accel:tf32']['epoch s'])
    assert 'workers' in result['table'].splitlines()[1]  # the header
    with pytest.raises(SystemExit):
        e2e_bench.main(['--preset', 'tiny', '--device', 'cpu', '--configs', 'accel:fp8', '--out', str(tmp_path)])


@requires_stock_sampler
def test_end_to_end_benchmark_times_the_tuned_loader_in_its_steady_state(tmp_path):
    """--pyg-steady-batches times that many batches of one epoch after every worker's
    first batches (2 x workers x prefetch_factor) and scales their rate to the epoch."""
    result = e2e_bench.main(['--preset', 'tiny', '--device', 'cpu', '--configs', 'pyg', '--pyg-workers', '1',
                             '--batch-size', '8', '--pyg-steady-batches', '3', '--out', str(tmp_path)])
    row = result['rows'][0]
    assert row['batches/epoch'] == 13
    assert (row['warm-up batches'], row['timed batches']) == (4, 3)
    assert row['epoch s'] > 0 and row['host ms/step'] > 0


@requires_cuda
def test_end_to_end_benchmark_with_pinned_features(tmp_path):
    result = e2e_bench.main(['--preset', 'tiny', '--configs', 'accel-sync', 'accel', '--max-batches', '2',
                             '--split-batches', '1', '--profile-batches', '2', '--features', 'pinned',
                             '--out', str(tmp_path)])
    assert all(r['epoch s'] > 0 for r in result['rows'])
    assert (tmp_path / 'end_to_end_15_10_5_b1024_pinned.json').is_file()
    result = e2e_bench.main(['--preset', 'tiny', '--configs', 'accel', '--max-batches', '2', '--split-batches', '1',
                             '--profile-batches', '2', '--features', 'pinned', '--graph', 'pinned',
                             '--out', str(tmp_path)])
    assert all(r['epoch s'] > 0 for r in result['rows'])
    assert (tmp_path / 'end_to_end_15_10_5_b1024_pinned_pinned_graph.json').is_file()


import feature_cache as cache_bench  # noqa: E402


@requires_cuda
def test_feature_cache_benchmark_smoke(tmp_path):
    result = cache_bench.main(['--preset', 'tiny', '--batches', '2', '--batch-size', '16', '--fractions', '0.5',
                               '--out', str(tmp_path)])
    assert result['rows'][-1]['hit rate'] > 0.5 and (tmp_path / 'feature_cache.json').is_file()


import hetero_sampling as hetero_bench  # noqa: E402


def test_hetero_sampling_benchmark_smoke(tmp_path):
    result = hetero_bench.main(['--scale', '0.002', '--device', 'cpu', '--fanouts', '10-10', '--batch-size', '64',
                                '--batches', '2', '--baseline-batches', '1', '--out', str(tmp_path)])
    row = result['rows'][0]
    assert row['ours ms'] > 0 and row['ours Medges/s'] > 0
    assert (tmp_path / 'hetero_sampling.json').is_file()
    again = hetero_bench.main(['--replot', str(tmp_path / 'hetero_sampling.json'), '--out', str(tmp_path)])
    assert again['rows'] == result['rows']


import sharded_gather as sharded_bench  # noqa: E402


def test_sharded_gather_plot_from_a_saved_run(tmp_path):
    """The benchmark itself needs several GPUs (tests/test_distributed.py covers the
    sharded reads on the CPU); its plot is drawn from a saved run."""
    saved = Path(__file__).resolve().parents[1] / 'benchmarks' / 'results' / 'sharded_gather_h200x2.json'
    result = sharded_bench.main(['--replot', str(saved), '--out', str(tmp_path)])
    assert result['world_size'] == 2 and result['rows']
    assert (tmp_path / 'sharded_gather.png').is_file() or sharded_bench.pyplot() is None


def test_full_graph_benchmark_smoke(tmp_path):
    """One process (a world of one): stock PyG's GCN and ours in every node order."""
    import full_graph as full_graph_bench
    result = full_graph_bench.main(['--preset', 'tiny', '--device', 'cpu', '--epochs', '1', '--hidden', '16',
                                    '--out', str(tmp_path)])
    rows = result['rows']
    assert [(r['config'].split(' ')[0], r['order']) for r in rows] == [
        ('pyg', 'none'), ('ours', 'none'), ('ours', 'cluster'), ('ours', 'rcm')]
    assert all(r['epoch ms'] > 0 and r['GPUs'] == 1 for r in rows)
    assert (tmp_path / 'full_graph_tiny_1gpu.json').is_file()


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'scripts'))
import cuda_kernels  # noqa: E402


def test_cuda_kernel_report_matches_launches_to_definitions(tmp_path):
    """The quick tier's coverage check: every __global__ function of csrc/*/cuda is found,
    and a profiler name is matched by name and parameter count (template arguments
    stripped), so the sampling engine's one draw kernel counts for both samplers."""
    defined = cuda_kernels.defined_kernels()
    assert {'gather.cu', 'hetero_sample.cu', 'sample_engine.cuh', 'sample_kernels.cuh', 'sparse.cu',
            'sparse_vec.cuh'} <= set(defined)
    names = {name for kernels in defined.values() for name, _ in kernels}
    assert {'gather_kernel', 'spmm_kernel', 'spmm_vec_kernel', 'hub_draw_kernel', 'emit_kernel'} <= names
    engine = dict(defined['sample_engine.cuh'])
    assert engine['draw_kernel'] == 3 and engine['seed_kernel'] == 1  # (one of each, for every graph)
    assert all('draw_kernel' not in dict(defined[f]) for f in ('sample_kernels.cuh', 'hetero_sample.cu'))
    assert dict(defined['sample_hub_draw.cuh'])['hub_draw_kernel'] == 1  # (both samplers' one, a template)
    assert cuda_kernels.launched_kernel(
        'void pyg_accel::(anonymous namespace)::spmm_kernel<float, (pyg_accel::(anonymous namespace)::Reduce)0>'
        '(pyg_accel::(anonymous namespace)::SpmmArgs<float, long>, long)') == ('spmm_kernel', 2)
    report = tmp_path / 'kernels.tsv'
    ns = 'pyg_accel::(anonymous namespace)::'
    report.write_text(f'tests/a.py::t\tvoid {ns}draw_kernel<{ns}ManyTypes, true, {ns}NoSideWork>'
                      f'({ns}HopArgs<{ns}ManyTypes>, long, {ns}NoSideWork)\n'
                      'tests/a.py::t\tvoid at::native::vectorized_elementwise_kernel<4>(int, float)\n')
    table = cuda_kernels.coverage(defined, cuda_kernels.read_report(report))
    assert table['sample_engine.cuh'][0] == ['draw_kernel']
    assert 'seed_kernel' in table['sample_engine.cuh'][1]  # not launched
    assert cuda_kernels.main([str(report)]) == 1  # files with no kernel launched


import time_to_accuracy as tta_bench  # noqa: E402


def test_time_to_accuracy_benchmark_smoke(tmp_path):
    result = tta_bench.main(['--preset', 'tiny', '--device', 'cpu', '--max-epochs', '2', '--target-epochs', '1',
                             '--seeds', '1', '--configs', 'accel', 'accel-graph', '--pyg-epoch-s', '20',
                             '--out', str(tmp_path)])
    rows = {r['config']: r for r in result['rows']}
    assert list(rows) == ['pyg', 'accel', 'accel-graph']
    assert result['target'] == result['histories']['pyg'][0][0]['valid']  # (one seed: PyG's epoch-1 accuracy)
    assert rows['pyg']['epochs to target'] == 1  # (PyG's own run reaches its own mean with one seed)
    assert rows['pyg']['stock PyG s to target (tuned epochs)'] == 20
    assert all(len(h) == 2 for h in result['histories']['accel'])
    assert (tmp_path / 'time_to_accuracy_sage_15_10_5_b1024.json').is_file()


import step_floor  # noqa: E402


def test_step_floor_counts_the_trimmed_layers():
    """Layer l of a trimmed L-layer step computes hops 0..L-l-1 from hops 0..L-l over the
    edges of hops 1..L-l; the GEMM FLOPs of a products-size SAGE 3x256 batch are ~35 G."""
    nodes, edges = [1024, 13072, 96605, 256596], [14457, 130495, 483016]
    assert step_floor.trimmed_layers(nodes, edges, 3) == [(367297, 110701, 627968), (110701, 14096, 144952),
                                                          (14096, 1024, 14457)]
    cost = step_floor.step_cost('sage', nodes, edges, [100, 256, 256, 47])
    # layer 1: 2 passes x 2 GEMMs (lin_l, lin_r) over 110,701 rows; layer 2: 3 passes; layer 3 projects first
    expected = 2 * 2 * (2 * 110701) * 100 * 256 + 3 * 2 * (2 * 14096) * 256 * 256 + 3 * 2 * (14096 + 1024) * 256 * 47
    assert cost['flops'] == expected and 34e9 < expected < 36e9
    half = step_floor.step_cost('sage', nodes, edges, [100, 256, 256, 47], value_bytes=2, feature_bytes=2)
    assert half['flops'] == cost['flops'] and half['bytes'] < 0.6 * cost['bytes']
    assert step_floor.floor_ms(cost, 1e15, 1e12) == (cost['flops'] / 1e15 + cost['bytes'] / 1e12) * 1e3


def test_sharded_gather_says_how_to_get_wholegraph():
    """--wholegraph without pylibwholegraph installed: a clear exit naming the package."""
    import importlib.util
    if importlib.util.find_spec('pylibwholegraph') is not None:
        pytest.skip('pylibwholegraph is installed here')
    with pytest.raises(SystemExit, match='pip install pylibwholegraph-cu13'):
        sharded_bench.wholegraph_comm(0, 1)


@pytest.mark.slow  # processes under torchrun
def test_scaling_benchmark_runs_the_example_at_each_count(tmp_path):
    """benchmarks/scaling.py on the CPU: the data-parallel example at 1 and 2 processes,
    each a torchrun run of its own, with speed-up and efficiency against one process."""
    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        pytest.skip('the example takes one GPU per process; this machine has one')
    import scaling
    result = scaling.main(['--nprocs', '2', '1', '--out', str(tmp_path), '--', '--epochs', '2'])
    rows = result['rows']
    assert [r['processes'] for r in rows] == [1, 2] and rows[0]['speed-up'] == 1.0
    assert rows[1]['speed-up'] == pytest.approx(rows[0]['epoch ms'] / rows[1]['epoch ms'])
    assert rows[1]['efficiency'] == pytest.approx(rows[1]['speed-up'] / 2)
    assert all(r['test acc'] > 0.2 for r in rows)  # (8 classes: chance is 0.125)
    assert (tmp_path / 'scaling' / 'scaling.json').is_file()
    assert (tmp_path / 'scaling' / 'scaling.png').is_file() or scaling.pyplot() is None


import trace_summary  # noqa: E402


def test_trace_summary_reads_a_training_loop_trace(tmp_path):
    """scripts/trace_summary.py on a hand-made trace: graph launch gaps, GPU busy as the
    union over streams, per-stream busy time, syncs, what ran during a long sync, captures."""
    import gzip
    import json

    def x(name, cat, ts, dur, stream=None):
        return {'ph': 'X', 'name': name, 'cat': cat, 'ts': ts, 'dur': dur,
                **({'args': {'stream': stream}} if stream is not None else {})}
    events = [x('cudaGraphLaunch', 'cuda_runtime', 0, 5), x('cudaGraphLaunch', 'cuda_runtime', 100, 5),
              x('cudaGraphLaunch', 'cuda_runtime', 300, 5),
              x('step_kernel', 'kernel', 10, 80, stream=7), x('gather_kernel', 'kernel', 50, 100, stream=32),
              x('cudaStreamSynchronize', 'cuda_runtime', 200, 400), x('allreduce', 'kernel', 250, 100, stream=7),
              x('cudaStreamBeginCapture', 'cuda_runtime', 700, 1), {'ph': 'i', 'name': 'marker', 'ts': 5}]
    path = tmp_path / 'rank0.json.gz'
    with gzip.open(path, 'wt') as f:
        json.dump({'traceEvents': events}, f)
    s = trace_summary.main([str(path)])[0]
    assert s['window_us'] == 701 and s['graph_launches'] == 3
    assert s['between_launches_us'] == {'median': 150, 'p90': 200, 'max': 200}
    assert s['gpu_busy_us'] == 140 + 100  # [10, 150) and [250, 350)
    assert {st['stream']: st['busy_us'] for st in s['streams']} == {7: 180, 32: 100}
    assert s['syncs'] == {'cudaStreamSynchronize': {'calls': 1, 'total_us': 400, 'max_us': 400}}
    assert s['long_syncs']['gpu_during'] == [((7, 'allreduce'), 100)]
    assert s['captures_at_us'] == [700]


@pytest.mark.slow  # processes under torchrun
def test_nccl_probe_runs_on_gloo():
    """scripts/nccl_probe.py's dry run without GPUs: both exchanges move the data and rank
    0 reports a line per exchange and size."""
    import os
    import subprocess
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, 'CUDA_VISIBLE_DEVICES': '', 'PYTHONPATH': str(root)}
    done = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
                           str(root / 'scripts' / 'nccl_probe.py'), '--mb', '0.01', '--reps', '1'],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith('nccl_probe:')]
    assert [line.split(', ')[2].split(':')[0] for line in lines] == ['all_to_all_single', 'batch_isend_irecv']


import hetero_end_to_end as hetero_e2e_bench  # noqa: E402


def test_hetero_end_to_end_benchmark_smoke(tmp_path):
    """Ours eager and through TrainStep: an epoch each after the warm-up, a row each."""
    result = hetero_e2e_bench.main(['--scale', '0.003', '--device', 'cpu', '--epochs', '1', '--batch-size', '128',
                                    '--configs', 'accel', 'accel-graph', '--out', str(tmp_path)])
    rows = {r['config']: r for r in result['rows']}
    assert list(rows) == ['accel', 'accel-graph'] and 'replayed' in rows['accel-graph']
    assert all(r['epoch s'] > 0 and r['host ms/step'] > 0 and r['loader ms/batch'] > 0 and r['steps/epoch'] > 1
               for r in rows.values())
    assert (tmp_path / 'hetero_end_to_end_0.003.json').is_file()


@pytest.mark.parametrize('task', ['node', 'link'])
def test_hetero_end_to_end_benchmark_over_stores(tmp_path, task):
    """--stores: ours read the graph from pyg_accel's stores rather than the HeteroData;
    the same rows, the JSON named for it."""
    result = hetero_e2e_bench.main(['--scale', '0.003', '--device', 'cpu', '--epochs', '1', '--batch-size', '128',
                                    '--task', task, '--label-edges', '512', '--stores', '--configs', 'accel',
                                    'accel-graph', '--out', str(tmp_path)])
    rows = {r['config']: r for r in result['rows']}
    assert list(rows) == ['accel', 'accel-graph'] and all(r['epoch s'] > 0 for r in rows.values())
    assert 'ours over its stores' in result['table']
    assert (tmp_path / f"hetero_end_to_end_0.003{'_link' if task == 'link' else ''}_stores.json").is_file()


@requires_stock_sampler
def test_hetero_end_to_end_benchmark_link_task(tmp_path):
    """--task link: stock PyG's LinkNeighborLoader beside ours, eager and through TrainStep
    (heterogeneous label edges), a row each, the label edges counted in the title."""
    result = hetero_e2e_bench.main(['--scale', '0.003', '--device', 'cpu', '--epochs', '1', '--batch-size', '128',
                                    '--task', 'link', '--label-edges', '512', '--pyg-workers', '0',
                                    '--out', str(tmp_path)])
    rows = {r['config']: r for r in result['rows']}
    assert list(rows) == ['pyg', 'accel', 'accel-graph'] and all(r['steps/epoch'] == 4 for r in rows.values())
    assert 'link prediction of 512 writes edges' in result['table']
    assert (tmp_path / 'hetero_end_to_end_0.003_link.json').is_file()


@requires_stock_sampler
def test_hetero_end_to_end_benchmark_times_stock_pyg_tuned(tmp_path):
    result = hetero_e2e_bench.main(['--scale', '0.003', '--device', 'cpu', '--epochs', '1', '--batch-size', '128',
                                    '--configs', 'pyg', 'accel', '--pyg-workers', '1', '--out', str(tmp_path)])
    rows = {r['config']: r for r in result['rows']}
    assert rows['pyg']['workers'] == 1 and rows['pyg']['vs pyg'] == 1
    assert rows['accel']['vs pyg'] == pytest.approx(rows['pyg']['epoch s'] / rows['accel']['epoch s'])


def test_sample_ahead_ab_alternates_the_modes_in_one_process():
    """scripts/sample_ahead_ab.py's comparison on a CPU loader and an eager step: half of
    the timed epochs each way, the mode restored per epoch, one row per mode."""
    import sample_ahead_ab
    from pyg_accel.data import from_data
    from pyg_accel.loader import NeighborLoader
    from conftest import community_data
    loader = NeighborLoader(from_data(community_data(), 'cpu'), [3, 2], input_nodes=torch.arange(64), batch_size=16)
    modes = []

    def step(batch):
        modes.append(loader.sample_ahead)
    rows = sample_ahead_ab.compare('tiny', loader, step, torch.device('cpu'), epochs=4)
    assert modes == [True] * 4 + [False] * 4 + [True] * 4 + [False] * 4 + [True] * 4 + [False] * 4
    assert [r['sample ahead'] for r in rows] == [True, False] and rows[0]['inline / ahead'] > 0
    assert all(r['batches/epoch'] == 4 and len(r['epochs s'].split()) == 2 and r['loader ms/batch'] > 0 for r in rows)
