"""The embedded default dataset: a 10,000-node community graph shipped inside the
package (``data/community10k.npz``, made by ``scripts/make_default_dataset.py`` from
:func:`pyg_accel.datasets.synthetic_graph`), so the quick start needs no download.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from .base import NodeDataset
from .synthetic import SyntheticSpec

__all__ = ['DEFAULT_SPEC', 'DEFAULT_PATH', 'load_default', 'pack_default', 'SPLIT_CODES']

DEFAULT_SPEC = SyntheticSpec(10_000, 200_000, 32, 8, split=(0.2, 0.1, 0.7))
DEFAULT_PATH = Path(__file__).parent / 'data' / 'community10k.npz'
SPLIT_CODES = {'train': 1, 'valid': 2, 'test': 3}


def pack_default(dataset: NodeDataset, path: Path = DEFAULT_PATH) -> None:
    """Stores ``dataset`` compactly: one direction of each undirected edge as int16
    pairs, fp16 features, int8 labels and a per-node split code."""
    data = dataset.data
    n = data.num_nodes
    if n > 32767:
        raise ValueError('the embedded format stores node ids as int16')
    row, col = data.edge_index
    upper = row < col
    split = np.zeros(n, dtype=np.int8)
    for key, code in SPLIT_CODES.items():
        split[dataset.split[key].numpy()] = code
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, pairs=torch.stack([row[upper], col[upper]]).numpy().astype(np.int16),
                        x=data.x.numpy().astype(np.float16), y=data.y.numpy().astype(np.int8), split=split,
                        num_classes=np.array(dataset.num_classes))


def load_default() -> NodeDataset:
    """The embedded graph: 10,000 nodes, 200,000 directed edges, 32 features, 8 classes."""
    blob = np.load(DEFAULT_PATH)
    pairs = torch.from_numpy(blob['pairs'].astype(np.int64))
    edge_index = torch.cat([pairs, pairs.flip(0)], dim=1)
    edge_index = edge_index[:, torch.argsort(edge_index[1] * 32768 + edge_index[0])]
    x = torch.from_numpy(blob['x'].astype(np.float32))
    split_code = torch.from_numpy(blob['split'].astype(np.int64))
    split = {key: (split_code == code).nonzero().view(-1) for key, code in SPLIT_CODES.items()}
    data = Data(x=x, y=torch.from_numpy(blob['y'].astype(np.int64)), edge_index=edge_index, num_nodes=x.shape[0])
    return NodeDataset('default', data, split, int(blob['num_classes']))
