"""The README's main example runs end to end on the embedded default dataset."""
import json
import sys
from pathlib import Path
from typing import Dict, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'examples'))
import hetero_node_classification  # noqa: E402
import node_classification  # noqa: E402
from conftest import IPC_EXIT_WARNING, requires_stock_sampler  # noqa: E402


@pytest.mark.parametrize('model,trim', [('sage', True), ('gcn', True), ('sage', False)])
def test_main_example_trains(tmp_path, model, trim):
    summary = node_classification.main(['--epochs', '15', '--model', model, '--out', str(tmp_path)]
                                       + ([] if trim else ['--no-trim']))
    assert summary['test_acc'] > 0.5  # 8 classes: chance is 0.125
    metrics = json.loads((tmp_path / 'metrics.json').read_text())
    assert len(metrics['history']) == 15
    assert metrics['history'][-1]['loss'] < metrics['history'][0]['loss']
    assert all(h[f'{stage}_s'] > 0 for h in metrics['history'] for stage in ('sampling', 'gathering', 'compute'))
    assert (tmp_path / 'curves.png').is_file()


def test_example_output_reads_well_in_a_log(tmp_path, capsys, monkeypatch):
    """Off a terminal (a CI log, a file) no progress bar is drawn, so the per-epoch lines
    stay lines; the last line names the test accuracy at the best validation epoch and
    the median epoch time; without matplotlib no curves are claimed."""
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # (importing it now fails)
    summary = node_classification.main(['--epochs', '3', '--out', str(tmp_path)])
    out, err = capsys.readouterr()
    assert '\r' not in out + err and 'epoch/s' not in err  # no bar redraws
    lines = out.strip().splitlines()
    assert [line.split()[1] for line in lines if line.startswith('epoch ')] == ['1', '2', '3']
    assert lines[-1] == (f"test accuracy {summary['test_acc']:.4f} at the best validation epoch "
                         f"{summary['best_epoch']} (valid {summary['valid_acc']:.4f}); median epoch "
                         f"{summary['median_epoch_s'] * 1e3:.0f} ms")
    assert 'no curves: matplotlib is not installed' in lines[-2] and not (tmp_path / 'curves.png').exists()


def test_ops_are_built_before_any_timed_loop(capsys):
    """ensure_built compiles (or loads) the ops and says how long on its own line, so an
    example never books the one-time build inside an epoch."""
    import subprocess
    from pyg_accel import _build
    from pyg_accel.build import ensure_built
    _build.load_library()
    assert ensure_built() == 0.0 and capsys.readouterr().out == ''  # already loaded: nothing to say
    fresh = subprocess.run([sys.executable, '-c', 'from pyg_accel.build import ensure_built; ensure_built()'],
                           capture_output=True, text=True, timeout=900, check=True)
    assert fresh.stdout.startswith('pyg_accel: C++') and 'ops loaded from the build cache in' in fresh.stdout


@pytest.mark.parametrize('mode,model', [('neighbor', 'sage'), ('neighbor', 'gat'), ('full', 'gcn')])
def test_main_example_trains_in_mixed_precision(tmp_path, mode, model):
    """--amp: the forward in bfloat16 autocast (on the CPU here, the GPU's bf16 on the
    device) still learns the embedded graph."""
    summary = node_classification.main(['--amp', '--mode', mode, '--model', model, '--epochs', '15', '--out',
                                        str(tmp_path)])
    history = json.loads((tmp_path / 'metrics.json').read_text())['history']
    assert history[-1]['loss'] < history[0]['loss'] and summary['test_acc'] > 0.5


@pytest.mark.parametrize('model', ['gcn', 'gat'])
def test_full_graph_mode_trains_and_times_its_compute(tmp_path, model):
    summary = node_classification.main(['--mode', 'full', '--model', model, '--epochs', '30', '--dataset',
                                        'synthetic-arxiv', '--scale', '0.02', '--out', str(tmp_path)])
    history = json.loads((tmp_path / 'metrics.json').read_text())['history']
    assert all(h['compute_s'] > 0 and 'sampling_s' not in h for h in history)
    assert history[-1]['loss'] < history[0]['loss'] and summary['test_acc'] > 0.2


@pytest.mark.parametrize('policy', ['degree', 'access'])
def test_main_example_with_a_feature_cache_reports_hit_rates(tmp_path, policy):
    node_classification.main(['--epochs', '2', '--cache-fraction', '0.2', '--cache-policy', policy,
                              '--out', str(tmp_path)])
    history = json.loads((tmp_path / 'metrics.json').read_text())['history']
    assert all(0.2 <= h['cache_hit_rate'] <= 1.0 for h in history)  # ranked rows beat their share


def test_main_example_generates_a_large_dataset_into_the_stores(tmp_path):
    """--large: the synthetic task generated straight into the stores (no edge_index),
    evaluated on sampled mini-batches; with a feature cache where there is a GPU."""
    import torch
    cache = ['--cache-fraction', '0.2'] if torch.cuda.is_available() else []
    summary = node_classification.main(['--dataset', 'synthetic-small', '--large', '--epochs', '4', '--out',
                                        str(tmp_path)] + cache)
    history = json.loads((tmp_path / 'metrics.json').read_text())['history']
    assert history[-1]['loss'] < history[0]['loss'] and summary['test_acc'] > 0.5  # 10 classes
    assert all(0 < h['train_acc'] <= 1 for h in history)
    if cache:
        assert all(0.2 <= h['cache_hit_rate'] <= 1.0 for h in history)
    for bad in (['--mode', 'full'], ['--baseline', 'pyg'], ['--eval', 'full']):
        with pytest.raises(SystemExit):
            node_classification.main(['--dataset', 'synthetic-small', '--large'] + bad)
    with pytest.raises(SystemExit):
        node_classification.main(['--dataset', 'default', '--large'])


def test_sampled_evaluation_agrees_with_the_whole_graph_pass(tmp_path):
    full = node_classification.main(['--epochs', '6', '--out', str(tmp_path / 'full')])
    sampled = node_classification.main(['--epochs', '6', '--eval', 'sampled', '--out', str(tmp_path / 'sampled')])
    assert abs(full['test_acc'] - sampled['test_acc']) < 0.05  # same training; fanouts [15, 10] approximate


import link_prediction  # noqa: E402


def test_link_prediction_example_learns(tmp_path):
    summary = link_prediction.main(['--dataset', 'synthetic-tiny', '--epochs', '4', '--batch-size', '256',
                                    '--out', str(tmp_path)])
    assert summary['test_auc'] > 0.6  # chance is 0.5
    history = json.loads((tmp_path / 'metrics.json').read_text())['history']
    assert all(h['sampling_s'] > 0 and h['compute_s'] > 0 for h in history)
    assert (tmp_path / 'curves.png').is_file()


def test_roc_auc_matches_the_definition():
    import torch
    pos, neg = torch.tensor([0.9, 0.4, 0.4]), torch.tensor([0.1, 0.4])
    # pairs (pos > neg): 0.9>0.1, 0.9>0.4, 0.4>0.1 twice, ties 0.4=0.4 twice count half
    assert link_prediction.roc_auc(pos, neg) == pytest.approx((1 + 1 + 1 + 1 + 0.5 + 0.5) / 6)


def run_two_processes(example: str, tmp_path, *args: str, env_extra: Optional[Dict[str, str]] = None) -> dict:
    """examples/EXAMPLE under torchrun with two processes: on two GPUs where there are
    two, else on the CPU (gloo); its metrics JSON, after checking the run and its plot.
    ``env_extra``: more environment variables."""
    import os
    import subprocess

    import torch
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(root), os.environ.get('PYTHONPATH', '')]),
           **(env_extra or {})}
    if torch.cuda.device_count() == 1:
        env['CUDA_VISIBLE_DEVICES'] = ''  # two processes on one GPU would share it: run them on the CPU
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
           str(root / 'examples' / example), *args, '--out', str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert IPC_EXIT_WARNING not in done.stdout + done.stderr, 'a process exited while a peer still mapped its memory'
    metrics = json.loads((tmp_path / 'metrics.json').read_text())
    assert metrics['summary']['processes'] == 2 and metrics['summary']['test_acc'] > 0.5
    assert metrics['history'][-1]['loss'] < metrics['history'][0]['loss']
    assert (tmp_path / 'curves.png').is_file()
    return metrics


@pytest.mark.parametrize('graph', ['device', 'shared'])
@pytest.mark.slow  # processes under torchrun
def test_multi_process_example_trains_with_sharded_features(tmp_path, graph):
    """examples/multi_gpu.py: features read peer-to-peer on two GPUs, or from
    shared-memory shards on the CPU; the graph on every device, or one host copy that
    both processes sample."""
    run_two_processes('multi_gpu.py', tmp_path, '--epochs', '15', '--graph', graph)


@pytest.mark.slow  # processes under torchrun
def test_multi_process_example_trains_with_replicated_features(tmp_path):
    """--features replicated: every process holds all the feature rows (no peer reads)
    and trains as with sharded ones; with --large, the option is refused."""
    metrics = run_two_processes('multi_gpu.py', tmp_path, '--epochs', '15', '--features', 'replicated')
    assert metrics['args']['features'] == 'replicated'
    import multi_gpu
    with pytest.raises(SystemExit):
        multi_gpu.parse_args(['--dataset', 'synthetic-products', '--large', '--features', 'replicated'])


@pytest.mark.slow  # processes under torchrun
def test_multi_process_example_generates_a_large_dataset_into_sharded_stores(tmp_path):
    """--large --bf16: each process generates the synthetic graph and keeps only its block
    of the features, stored in bfloat16 and trained under bfloat16 autocast."""
    metrics = run_two_processes('multi_gpu.py', tmp_path, '--dataset', 'synthetic-products', '--scale', '0.01',
                                '--large', '--bf16', '--batch-size', '128', '--epochs', '2')
    assert metrics['args']['large'] and metrics['args']['bf16']


@pytest.mark.slow  # processes under torchrun
def test_multi_process_example_trains_the_same_across_two_virtual_hosts(tmp_path):
    """The two processes declared as two hosts: every row of the other process crosses
    torch.distributed instead of being read in place, and training goes as on one host
    (the same batches and rows: the same losses, up to the GPU's atomic sums)."""
    one = run_two_processes('multi_gpu.py', tmp_path / 'one', '--epochs', '5')
    two = run_two_processes('multi_gpu.py', tmp_path / 'two', '--epochs', '5',
                            env_extra={'PYG_ACCEL_RANKS_PER_HOST': '1'})
    for a, b in zip(one['history'], two['history']):
        assert a['loss'] == pytest.approx(b['loss'], rel=1e-3) and abs(a['test_acc'] - b['test_acc']) < 0.01


@pytest.mark.parametrize('model,flags', [('gcn', []), ('sage', []), ('gcn', ['--no-overlap'])])
@pytest.mark.slow  # processes under torchrun
def test_multi_process_full_graph_example(tmp_path, model, flags):
    """examples/full_graph_multi_gpu.py: the graph partitioned across two processes,
    halos exchanged every layer (behind the local edges or before each layer); the
    exchange takes part of every epoch."""
    metrics = run_two_processes('full_graph_multi_gpu.py', tmp_path, '--model', model, '--epochs', '20', *flags)
    assert metrics['summary']['halo_rows'] > 0 and metrics['summary']['reorder'] == 'cluster'
    assert all(h['exchange_s'] > 0 for h in metrics['history'])


def test_full_graph_example_in_one_process(tmp_path):
    """Without torchrun the same script trains on one device (no halo)."""
    import full_graph_multi_gpu
    summary = full_graph_multi_gpu.main(['--model', 'gat', '--epochs', '20', '--out', str(tmp_path)])
    assert summary['processes'] == 1 and summary['halo_rows'] == 0 and summary['test_acc'] > 0.5


def test_hetero_example_trains_on_synthetic_mag(tmp_path):
    """The heterogeneous example learns ogbn-mag's task on 0.5% of its size: PyG's
    HeteroConv over our SAGEConv, our sampler driving PyG's loader over a HeteroData."""
    summary = hetero_node_classification.main(['--scale', '0.005', '--epochs', '4', '--out', str(tmp_path)])
    assert summary['test_acc'] > 0.4  # 32 classes: chance is ~0.03
    history = json.loads((tmp_path / 'metrics.json').read_text())['history']
    assert len(history) == 4 and history[-1]['loss'] < history[0]['loss']
    assert all(h[f'{stage}_s'] > 0 for h in history for stage in ('sampling', 'gathering', 'compute'))
    assert (tmp_path / 'curves.png').is_file()


@requires_stock_sampler
def test_hetero_example_baseline_matches_ours(tmp_path):
    """--baseline pyg (PyG's SAGEConv, stock PyG's loader) learns the same task as well."""
    args = ['--scale', '0.005', '--epochs', '4']
    ours = hetero_node_classification.main(args + ['--out', str(tmp_path / 'ours')])
    pyg = hetero_node_classification.main(args + ['--baseline', 'pyg', '--pyg-workers', '1',  # (tuned, small)
                                                  '--out', str(tmp_path / 'pyg')])
    assert abs(ours['test_acc'] - pyg['test_acc']) < 0.15 and pyg['test_acc'] > 0.4


@requires_stock_sampler
def test_accuracy_parity_script_runs_the_heterogeneous_example(tmp_path):
    """scripts/accuracy_parity.py --models hetero-sage: ours and stock PyG on the
    heterogeneous example, a table and its JSON."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'scripts'))
    import accuracy_parity
    accuracy_parity.main(['--models', 'hetero-sage', '--seeds', '0', '--epochs', '2', '--hetero-scale', '0.003',
                          '--out', str(tmp_path)])
    rows = json.loads((tmp_path / 'parity.json').read_text())['rows']
    assert [r['model'] for r in rows] == ['hetero-sage'] and 0 < rows[0]['pyg_accel'] <= 1
    assert (tmp_path / 'parity.md').is_file()
