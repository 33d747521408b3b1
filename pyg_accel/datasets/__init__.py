"""Datasets: OGB node-property data from its on-disk format, synthetic OGB-like graphs,
and the embedded default graph.

:func:`load_dataset` takes one name for all of them::

    load_dataset('default')                   # embedded, 10k nodes
    load_dataset('synthetic-products')        # 2.45 M nodes, 123.7 M edges (see PRESETS)
    load_dataset('synthetic-papers100M', scale=0.1, device='cuda')
    load_dataset('ogbn-products', root='data/ogb')

and :func:`load_hetero_dataset` for heterogeneous ones::

    load_hetero_dataset('synthetic-mag', scale=0.01)   # ogbn-mag's schema, 1% of its size
    load_hetero_dataset('ogbn-mag', root='data/ogb')

:func:`synthetic_topology` generates only a preset's graph, straight into CSC, for
sampling at sizes (papers100M's 3.2 G edges) whose full dataset would not fit;
:func:`synthetic_stores` generates the whole task at such sizes straight into
pyg_accel's stores (features in pinned host memory if need be).
"""
from __future__ import annotations

from pathlib import Path
from typing import Union

import torch

from ..data.location import resolve_device
from .base import NodeDataset
from .default import load_default
from .hetero import HeteroNodeDataset, synthetic_mag
from .ogb import (load_ogb_hetero_node_dataset, load_ogb_node_dataset, save_ogb_hetero_node_dataset,
                  save_ogb_node_dataset)
from .synthetic import PRESETS, SyntheticSpec, synthetic_dataset, synthetic_graph
from .stored import StoredNodeDataset, synthetic_stores
from .topology import SyntheticTopology, synthetic_topology

__all__ = ['NodeDataset', 'load_dataset', 'load_default', 'load_ogb_node_dataset', 'save_ogb_node_dataset',
           'synthetic_graph', 'synthetic_dataset', 'SyntheticSpec', 'PRESETS', 'SyntheticTopology',
           'synthetic_topology', 'StoredNodeDataset', 'synthetic_stores', 'HeteroNodeDataset', 'load_hetero_dataset',
           'synthetic_mag', 'load_ogb_hetero_node_dataset', 'save_ogb_hetero_node_dataset']


def load_dataset(name: str = 'default', root: Union[str, Path] = 'data/ogb', scale: float = 1.0, seed: int = 0,
                 device: Union[str, torch.device] = 'cpu') -> NodeDataset:
    """``'default'``, ``'synthetic-<preset>'`` or an OGB name (``'ogbn-…'``, read from
    ``root``). Synthetic graphs are generated on ``device`` (a GPU is much faster) and
    everything is returned on ``device``: ``'cpu'``, ``'cuda[:N]'`` or ``'auto'`` (the GPU
    when one is visible, else the CPU)."""
    device = resolve_device(device)
    if name == 'default':
        return load_default().to(device)
    if name == 'synthetic-mag':
        raise ValueError("'synthetic-mag' is heterogeneous: load it with load_hetero_dataset (see "
                         "examples/hetero_node_classification.py)")
    if name.startswith('synthetic-'):
        return synthetic_dataset(name[len('synthetic-'):], scale=scale, seed=seed, device=device)
    if name.startswith('ogbn-'):
        return load_ogb_node_dataset(name, root).to(device)
    raise ValueError(f"unknown dataset '{name}': use 'default', 'synthetic-<{'|'.join(PRESETS)}>' "
                     "or an OGB node dataset name such as 'ogbn-products'")


def load_hetero_dataset(name: str = 'synthetic-mag', root: Union[str, Path] = 'data/ogb', scale: float = 0.01,
                        seed: int = 0, device: Union[str, torch.device] = 'cpu') -> HeteroNodeDataset:
    """``'synthetic-mag'`` (:func:`synthetic_mag` at ``scale``) or a heterogeneous OGB
    name (``'ogbn-mag'``, read from ``root``), on ``device`` (as in :func:`load_dataset`)."""
    device = resolve_device(device)
    if name == 'synthetic-mag':
        return synthetic_mag(scale=scale, seed=seed, device=device)
    if name.startswith('ogbn-'):
        return load_ogb_hetero_node_dataset(name, root).to(device)
    raise ValueError(f"unknown heterogeneous dataset '{name}': use 'synthetic-mag' or 'ogbn-mag'")
