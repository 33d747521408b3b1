"""What the examples share: their dataset options, the metrics JSON, the training-curve
and epoch-time plot they save, and the per-stage time columns."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List


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
    """Writes ``out/metrics.json`` and ``out/curves.png``: the training loss, each history
    key of ``metrics`` (key -> legend label) against the epoch, and, when the history has
    stage columns, each epoch's time split into its stages (sampling, gathering, compute;
    with pipelining the stages overlap, so the stack can exceed the epoch's time, drawn
    as a line)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / 'metrics.json').write_text(json.dumps({'args': vars(args), 'summary': summary, 'history': history},
                                                 indent=2))
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return
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
    fig.savefig(out / 'curves.png', dpi=110)
    plt.close(fig)


def accuracy_summary(history: List[dict], **facts) -> dict:
    """``facts`` plus the epoch with the best validation accuracy (its validation and
    test accuracy) and the median epoch time."""
    best = max(history, key=lambda h: h['valid_acc'])
    return {**facts, 'best_epoch': best['epoch'], 'valid_acc': best['valid_acc'], 'test_acc': best['test_acc'],
            'median_epoch_s': sorted(h['seconds'] for h in history)[len(history) // 2]}


def report_accuracy(history: List[dict], args, summary: dict, title: str, where: str = '') -> None:
    """Prints the best epoch and the median epoch time (``where``: e.g. ' on 2 processes'),
    then saves the metrics JSON and curves (train / valid / test accuracy) to ``args.out``."""
    print(f"best valid {summary['valid_acc']:.4f} at epoch {summary['best_epoch']}: test {summary['test_acc']:.4f}; "
          f"median epoch {summary['median_epoch_s'] * 1e3:.0f} ms{where}")
    save_results(history, args, Path(args.out), summary, {f'{k}_acc': k for k in ('train', 'valid', 'test')},
                 'accuracy', title)
    print(f'metrics and curves in {args.out}/')
