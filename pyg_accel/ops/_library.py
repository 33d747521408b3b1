"""Access to the compiled operator namespace, built on first use."""
from __future__ import annotations

import torch

from .. import _build


def ops():
    """``torch.ops.pyg_accel``, compiling and loading the library on first use."""
    if not _build.is_loaded() and not torch.compiler.is_compiling():
        _build.load_library()
    return torch.ops.pyg_accel


def check_cuda_built(device: torch.device) -> None:
    """Raises a clear error if a CUDA tensor reaches a library built without CUDA."""
    if device.type != 'cuda' or torch.compiler.is_compiling():
        return
    config = _build.load_library()
    if not config.with_cuda:
        raise RuntimeError(f'pyg_accel: CUDA inputs were given but the CUDA kernels were not built '
                           f'({config.reason_no_cuda}). Install the CUDA toolkit matching torch '
                           f'{torch.version.cuda}, set CUDA_HOME, and clear {config.build_dir}.')
