"""Sampling ahead against sampling each batch as it is built, in one process: one
pipelined loader and one captured step (``TrainStep``) per setting, epochs alternating
``NeighborLoader.sample_ahead`` on and off after a warm-up epoch of each (the shapes
captured once, host noise shared by both modes). Per mode: the median epoch, and per
batch (medians) the sampler's wait for the GPU as each batch arrives
(``last_sample_wait_us``), the host time inside the call for the next batch and inside
the step call. TF32 matmuls.

Settings: ``sage``: GraphSAGE 3 x 256 on the products-size graph, fanout [15, 10, 5],
batch 1024; ``sage-2x256``: 2 x 256, [25, 10], batch 512 (gSampler's setting);
``hetero``: the heterogeneous example's model on synthetic-mag at a tenth of ogbn-mag's
size, [10, 10], batch 512, over pyg_accel's stores.

    python scripts/sample_ahead_ab.py [--settings sage sage-2x256 hetero] [--epochs 12] [--out DIR]
"""
import argparse
import statistics
import sys
from pathlib import Path
from typing import Dict, List

import torch
import torch_geometric.transforms as T

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'examples'))
from common import environment, print_table, save_json, timed_pass  # noqa: E402
import hetero_node_classification as hetero_example  # noqa: E402
from results import prepare  # noqa: E402

import pyg_accel.nn  # noqa: E402
import pyg_accel.nn.models as models  # noqa: E402
from pyg_accel.data import from_data  # noqa: E402
from pyg_accel.datasets import load_hetero_dataset, synthetic_dataset  # noqa: E402
from pyg_accel.loader import NeighborLoader  # noqa: E402
from pyg_accel.ops import last_sample_wait_us  # noqa: E402
from pyg_accel.training import TrainStep  # noqa: E402

SAGE = {'sage': ([15, 10, 5], 1024, 3), 'sage-2x256': ([25, 10], 512, 2)}  # fanout, batch, layers


def sage_setting(name: str, device: torch.device):
    """``(loader, step)`` of a GraphSAGE setting over GPU stores of the products-size graph."""
    fanout, batch_size, layers = SAGE[name]
    dataset = synthetic_dataset('products', device=device).to('cpu')  # (generated on the GPU)
    loader = NeighborLoader(from_data(dataset.data, device=device), num_neighbors=fanout,
                            input_nodes=dataset.split['train'], batch_size=batch_size, shuffle=True)
    torch.manual_seed(0)
    model = models.GraphSAGE(dataset.num_features, 256, layers, dataset.num_classes).to(device)
    return loader, TrainStep(model, torch.optim.Adam(model.parameters(), lr=0.003, fused=True))


def hetero_setting(device: torch.device):
    """``(loader, step)`` of the heterogeneous example (captured step) over GPU stores."""
    args = hetero_example.parse_args(['--batch-size', '512', '--num-neighbors', '10,10'])
    dataset = load_hetero_dataset('synthetic-mag', scale=0.1, seed=0)
    data_cpu = T.ToUndirected()(dataset.data)
    in_types = [t for t in data_cpu.node_types if 'x' in data_cpu[t]]
    torch.manual_seed(0)
    model = hetero_example.HeteroSAGE(data_cpu.metadata(), {t: data_cpu[t].num_nodes for t in data_cpu.node_types},
                                      in_types, dataset.target, args.hidden, dataset.num_classes, args.layers,
                                      args.dropout, pyg_accel.nn.SAGEConv).to(device)
    loader = hetero_example.make_loader(args, from_data(data_cpu, device=device),
                                        (dataset.target, dataset.split['train'].to(device)), shuffle=True)
    with torch.no_grad():  # (the lazy layers made before the optimiser sees them)
        batch = next(iter(loader))
        model(batch.x_dict, batch.edge_index_dict, batch.n_id_dict)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, fused=True)
    return loader, hetero_example.training_step(model, opt, dataset.target, device, args)


def epoch(loader, step, device) -> Dict[str, float]:
    """One epoch's wall time and per-batch medians (wait µs, loader ms, step ms)."""
    waits: List[float] = []
    seconds, loading, stepping = timed_pass(step, loader, device, lambda: waits.append(last_sample_wait_us()))
    return {'epoch s': seconds, 'wait us': statistics.median(waits),
            'loader ms/batch': statistics.median(loading) * 1e3, 'host ms/step': statistics.median(stepping) * 1e3}


def compare(name: str, loader, step, device, epochs: int) -> List[Dict[str, object]]:
    """The setting's two rows, ahead and inline, from ``epochs`` alternating epochs."""
    for ahead in (True, False):  # (warm-up: every batch shape captured)
        loader.sample_ahead = ahead
        epoch(loader, step, device)
    runs: Dict[bool, List[Dict[str, float]]] = {True: [], False: []}
    for k in range(epochs):
        loader.sample_ahead = k % 2 == 0
        runs[loader.sample_ahead].append(epoch(loader, step, device))
    rows = []
    for ahead, measured in runs.items():
        row: Dict[str, object] = {'setting': name, 'sample ahead': ahead, 'batches/epoch': len(loader)}
        row.update({key: statistics.median(m[key] for m in measured) for key in measured[0]})
        row['epochs s'] = ' '.join(f"{m['epoch s']:.3f}" for m in measured)
        rows.append(row)
        print(row, flush=True)
    rows[0]['inline / ahead'] = rows[1]['epoch s'] / rows[0]['epoch s']
    return rows


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--settings', nargs='+', choices=[*SAGE, 'hetero'], default=[*SAGE, 'hetero'])
    p.add_argument('--epochs', type=int, default=12, help='timed epochs, alternating (half each way)')
    p.add_argument('--out', default='bench-out')
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit('sample_ahead_ab.py needs a GPU (sampling ahead applies to GPU batches)')
    device = torch.device('cuda')
    prepare('cuda')  # (the ops built before anything is timed)
    torch.set_float32_matmul_precision('high')
    rows = []
    for name in args.settings:
        loader, step = hetero_setting(device) if name == 'hetero' else sage_setting(name, device)
        rows += compare(name, loader, step, device, args.epochs)
        del loader, step
    columns = ['setting', 'sample ahead', 'batches/epoch', 'epoch s', 'wait us', 'loader ms/batch', 'host ms/step',
               'inline / ahead', 'epochs s']
    payload = {'env': environment(), 'args': vars(args), 'rows': rows}
    payload['table'] = print_table(rows, columns, f'sampling ahead against inline, {args.epochs} alternating epochs '
                                                  f'({torch.cuda.get_device_name(device)}), medians')
    save_json(Path(args.out) / 'sample_ahead_ab.json', payload)
    return payload


if __name__ == '__main__':
    main()
