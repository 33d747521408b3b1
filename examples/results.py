"""What the examples share: the metrics JSON and the training-curve plot they save."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List


def save_results(history: List[dict], args, out: Path, summary: dict, metrics: Dict[str, str], ylabel: str,
                 title: str) -> None:
    """Writes ``out/metrics.json`` and ``out/curves.png``: the training loss, and each
    history key of ``metrics`` (key -> legend label) against the epoch."""
    out.mkdir(parents=True, exist_ok=True)
    (out / 'metrics.json').write_text(json.dumps({'args': vars(args), 'summary': summary, 'history': history},
                                                 indent=2))
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    epochs = [h['epoch'] for h in history]
    ax1.plot(epochs, [h['loss'] for h in history])
    ax1.set(xlabel='epoch', ylabel='training loss', title='loss')
    for key, label in metrics.items():
        ax2.plot(epochs, [h[key] for h in history], label=label)
    ax2.set(xlabel='epoch', ylabel=ylabel, title=title)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(out / 'curves.png', dpi=110)
    plt.close(fig)
