"""pyg_accel: fast GNN training on NVIDIA GPUs inside PyTorch Geometric.

Sub-packages: :mod:`pyg_accel.ops` (C++/CUDA operators, JIT-built on first use),
:mod:`pyg_accel.data` (``FeatureStore`` / ``GraphStore``), :mod:`pyg_accel.sampler` and
:mod:`pyg_accel.loader` (GPU neighbour sampling behind PyG's loaders), :mod:`pyg_accel.nn`
(drop-in layers), :mod:`pyg_accel.training` (a training step replayed as a CUDA graph),
:mod:`pyg_accel.distributed` (features sharded across GPUs, full-graph training on
partitioned graphs),
:mod:`pyg_accel.datasets`.
"""
from __future__ import annotations

from typing import Dict

__version__ = '0.1.0'

from . import ops, data, datasets, sampler, loader, training, distributed  # noqa: E402

__all__ = ['info', 'ops', 'data', 'datasets', 'sampler', 'loader', 'training', 'distributed', '__version__']


def info(build: bool = True, verbose: bool = True) -> Dict[str, object]:
    """Versions, whether the CUDA ops were built and for which GPU architectures, and
    where the build cache is. Compiles the ops first when ``build`` is true.

    Returns the same facts as a dict (and prints them when ``verbose``).
    """
    import torch
    import torch_geometric

    from . import _build
    if build:
        _build.load_library()
    facts: Dict[str, object] = {
        'pyg_accel': __version__,
        'torch': torch.__version__,
        'torch_cuda': torch.version.cuda,
        'torch_geometric': torch_geometric.__version__,
        'gpus': [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if torch.cuda.is_available() else [],
    }
    facts.update(_build.describe())
    if verbose:
        width = max(len(k) for k in facts)
        for key, value in facts.items():
            print(f'{key:<{width}}  {value}')
    return facts
