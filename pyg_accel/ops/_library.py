"""Access to the compiled operator namespace, built on first use."""
from __future__ import annotations

from typing import Iterable

import torch
from torch import Tensor

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


def call(overload: 'torch._ops.OpOverload', grad_inputs: Iterable[Tensor], *args):
    """``overload(*args)``, past its Python autograd kernel when no gradient can flow:
    grad mode is off or none of ``grad_inputs`` requires grad. That kernel (from
    ``torch.library.register_autograd``) costs ~6 us of Python per call only to
    redispatch when nothing needs a gradient; a per-batch gather pays it every batch.
    Under ``torch.compile`` the call is left to the compiler."""
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and any(t.requires_grad for t in grad_inputs)):
        return overload(*args)
    with torch._C._AutoDispatchBelowAutograd():
        return overload(*args)
