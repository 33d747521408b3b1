"""The dataset record every loader in :mod:`pyg_accel.datasets` returns."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import torch
from torch import Tensor
from torch_geometric.data import Data

__all__ = ['NodeDataset']


@dataclass
class NodeDataset:
    """A node-classification graph with an OGB-style split.

    Attributes:
        name: e.g. ``'ogbn-products'`` or ``'synthetic-products'``.
        data: ``Data`` with ``x`` ``[N, F]`` float, ``y`` ``[N]`` int64 (``-1`` = no label)
            and ``edge_index`` ``[2, E]`` int64.
        split: ``{'train', 'valid', 'test'}`` -> int64 node ids.
        num_classes: number of label classes.
    """
    name: str
    data: Data
    split: Dict[str, Tensor]
    num_classes: int

    @property
    def num_features(self) -> int:
        """Width of ``data.x``."""
        return int(self.data.x.shape[1])

    def to(self, device) -> 'NodeDataset':
        """The dataset with its graph and split on ``device``."""
        return NodeDataset(self.name, self.data.to(device), {k: v.to(device) for k, v in self.split.items()},
                           self.num_classes)

    def __repr__(self) -> str:
        d = self.data
        sizes = ', '.join(f'{k}={v.numel()}' for k, v in self.split.items())
        return (f'NodeDataset({self.name}: {d.num_nodes} nodes, {d.num_edges} edges, '
                f'{self.num_features} features, {self.num_classes} classes; {sizes})')


def check_split(split: Dict[str, Tensor], num_nodes: int) -> Dict[str, Tensor]:
    """Validates a split dict and returns it as int64 tensors."""
    out = {}
    for key in ('train', 'valid', 'test'):
        if key not in split:
            raise KeyError(f"split is missing '{key}' (has {sorted(split)})")
        ids = torch.as_tensor(split[key]).long().view(-1)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
            raise ValueError(f"split '{key}' holds node ids outside [0, {num_nodes})")
        out[key] = ids
    return out
