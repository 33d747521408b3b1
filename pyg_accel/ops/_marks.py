"""Facts recorded on a tensor object (ids in range, sorted by destination, a graph
derived from it), valid while the tensor is unchanged: each is keyed by the tensor's
version counter, which every in-place change bumps.

Inference tensors (made under ``torch.inference_mode()``) have no version counter, so an
in-place change to them could not be seen: nothing is recorded on them, and callers
take their checked, unmemoised paths.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor


def version(t: Tensor) -> Optional[int]:
    """``t``'s version counter, or ``None`` for an inference tensor. (Under
    ``torch.compile``, which cannot trace ``is_inference()``, the counter is read as is.)"""
    if not torch.compiler.is_compiling() and t.is_inference():
        return None
    return t._version


def record(t: Tensor, slot: str, value: Any) -> None:
    """Records ``value`` on ``t`` under ``slot`` for as long as ``t`` is unchanged."""
    current = version(t)
    if current is not None:
        setattr(t, slot, (current, value))


def recorded(t: Tensor, slot: str) -> Optional[Any]:
    """What :func:`record` put on ``t`` under ``slot``, if ``t`` is unchanged since."""
    mark = getattr(t, slot, None)
    current = version(t)
    return mark[1] if mark is not None and current is not None and mark[0] == current else None
