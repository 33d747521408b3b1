"""What the examples share: their dataset options, the one-time build before any timed
loop, the progress bar, the metrics JSON, the training-curve and epoch-time plot they
save, the per-stage time columns and the final summary line."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Iterable, List

import torch
from tqdm import tqdm

from pyg_accel.build import ensure_built


def prepare(device_name: str) -> torch.device:
    """The device an example trains on (``'auto'``: the GPU when one is visible), with
    pyg_accel's ops compiled or loaded first, so the one-time compilation is reported on
    its own line and never counted in an epoch."""
    from pyg_accel.data import resolve_device
    device = resolve_device(device_name)
    ensure_built()
    return device


def progress(iterable: Iterable, **kwargs) -> tqdm:
    """A tqdm bar over ``iterable``, drawn only on a terminal: elsewhere (CI logs, files,
    captured output) its redraws would run into one long line, so only the per-epoch
    lines, printed through ``tqdm.write``, appear there."""
    return tqdm(iterable, disable=kwargs.pop('disable', False) or None, **kwargs)


def default_workers() -> int:
    """DataLoader workers for stock PyG's CPU loader, tuned as a user would: the cores
    this process may use, less two (one for the training loop, one for the rest)."""
    return max(len(os.sched_getaffinity(0)) - 2, 0)


def tuned_loader_options(num_workers: int) -> Dict[str, object]:
    """DataLoader options of a tuned CPU loader: ``num_workers`` processes kept across
    epochs, batches in pinned memory (for the copy to the GPU)."""
    return dict(num_workers=num_workers, persistent_workers=num_workers > 0,
                pin_memory=num_workers > 0 and torch.cuda.is_available())


def add_dataset_arguments(parser) -> None:
    """``--dataset``, ``--root`` and ``--scale``: which graph an example trains on."""
    parser.add_argument('--dataset', default='default', help="'default', 'synthetic-<preset>' or 'ogbn-…'")
    parser.add_argument('--root', default='data/ogb', help='folder holding OGB datasets (never downloaded)')
    parser.add_argument('--scale', type=float, default=1.0, help='size factor for synthetic presets')


STAGES = ('sampling', 'gathering', 'exchange', 'compute')


def stage_columns(stages: Dict[str, float]) -> Dict[str, float]:
    """History columns ``sampling_s``, ``gathering_s``, ``exchange_s`` (full-graph halo
    exchanges), ``compute_s`` of an epoch from a summary of its stages' seconds."""
    return {f'{name}_s': stages[name] for name in STAGES if name in stages}


def format_stages(stages: Dict[str, float]) -> str:
    """``'; sampling 12 / gathering 3 / compute 40 ms'`` (empty without stages)."""
    parts = [f'{name} {stages[name] * 1e3:.0f}' for name in STAGES if name in stages]
    return f"; {' / '.join(parts)} ms" if parts else ''


def save_results(history: List[dict], args, out: Path, summary: dict, metrics: Dict[str, str], ylabel: str,
                 title: str) -> None:
    """Writes ``out/metrics.json`` and ``out/curves.png`` and says which were written:
    the training loss, each history key of ``metrics`` (key -> legend label) against the
    epoch, and, when the history has stage columns, each epoch's time split into its
    stages (sampling, gathering, compute; with pipelining the stages overlap, so the
    stack can exceed the epoch's time, drawn as a line). Without matplotlib only the
    JSON is written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / 'metrics.json').write_text(json.dumps({'args': vars(args), 'summary': summary, 'history': history},
                                                 indent=2))
    if _plot_curves(history, out / 'curves.png', metrics, ylabel, title):
        print(f'metrics in {out}/metrics.json, training curves in {out}/curves.png')
    else:
        print(f'metrics in {out}/metrics.json (no curves: matplotlib is not installed)')


def _plot_curves(history: List[dict], path: Path, metrics: Dict[str, str], ylabel: str, title: str) -> bool:
    """Draws :func:`save_results`' figure into ``path``; False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    timed = [name for name in STAGES if history and all(f'{name}_s' in h for h in history)]
    staged = bool(timed)
    fig, axes = plt.subplots(1, 3 if staged else 2, figsize=(15 if staged else 10, 3.8))
    ax1, ax2 = axes[0], axes[1]
    epochs = [h['epoch'] for h in history]
    ax1.plot(epochs, [h['loss'] for h in history])
    ax1.set(xlabel='epoch', ylabel='training loss', title='loss')
    for key, label in metrics.items():
        ax2.plot(epochs, [h[key] for h in history], label=label)
    ax2.set(xlabel='epoch', ylabel=ylabel, title=title)
    ax2.legend()
    if staged:
        ax3, bottom = axes[2], [0.0] * len(history)
        for name in timed:
            ms = [h[f'{name}_s'] * 1e3 for h in history]
            ax3.bar(epochs, ms, bottom=bottom, label=name)
            bottom = [b + m for b, m in zip(bottom, ms)]
        ax3.plot(epochs, [h['seconds'] * 1e3 for h in history], color='black', marker='.', label='epoch (wall)')
        ax3.set(xlabel='epoch', ylabel='ms', title='epoch time by stage')
        ax3.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def accuracy_summary(history: List[dict], **facts) -> dict:
    """``facts`` plus the epoch with the best validation accuracy (its validation and
    test accuracy) and the median epoch time."""
    best = max(history, key=lambda h: h['valid_acc'])
    return {**facts, 'best_epoch': best['epoch'], 'valid_acc': best['valid_acc'], 'test_acc': best['test_acc'],
            'median_epoch_s': sorted(h['seconds'] for h in history)[len(history) // 2]}


def report_accuracy(history: List[dict], args, summary: dict, title: str, where: str = '') -> None:
    """Saves the metrics JSON and curves (train / valid / test accuracy, those the history
    has) to ``args.out``,
    then prints the final line: the test accuracy at the best validation epoch and the
    median epoch time (``where``: e.g. ' on 2 processes')."""
    splits = {f'{k}_acc': k for k in ('train', 'valid', 'test') if all(f'{k}_acc' in h for h in history)}
    save_results(history, args, Path(args.out), summary, splits, 'accuracy', title)
    print(final_line('test accuracy', summary['test_acc'], summary['best_epoch'], summary['valid_acc'],
                     summary['median_epoch_s'], where), flush=True)


def final_line(metric: str, test: float, best_epoch: int, valid: float, median_epoch_s: float,
               where: str = '') -> str:
    """``'test accuracy 0.8123 at the best validation epoch 17 (valid 0.8201); median
    epoch 212 ms'``: what every example prints last."""
    return (f'{metric} {test:.4f} at the best validation epoch {best_epoch} (valid {valid:.4f}); '
            f'median epoch {median_epoch_s * 1e3:.0f} ms{where}')
