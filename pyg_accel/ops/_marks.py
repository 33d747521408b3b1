"""Facts recorded on a tensor object (ids in range, sorted by destination, a graph
derived from it), valid while the tensor is unchanged.

A GPU tensor's facts are keyed by its version counter, which every in-place change
through torch bumps. A CPU tensor's are also checked against a copy of its contents
taken when they were recorded: writes through numpy (``t.numpy()[i] = ...``, or a
tensor made by ``torch.from_numpy``) bypass the version counter, and a stale fact
could then make a kernel read out of bounds or a memo return another graph's result.
The comparison is a memcmp of the tensor, cheaper than any of the facts it guards.
(GPU memory written behind torch's back, through DLPack or ``.data``, is not seen: a
documented limit.)

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
    """Records ``value`` on ``t`` under ``slot`` for as long as ``t`` is unchanged.
    (Nothing is recorded under ``torch.compile``: a compiled graph takes its checked
    paths, traceable without host syncs.)"""
    if torch.compiler.is_compiling():
        return
    current = version(t)
    if current is not None:
        setattr(t, slot, (current, value, None if t.is_cuda else _snapshot(t, current)))


def _snapshot(t: Tensor, current: int) -> Tensor:
    """A copy of CPU tensor ``t``'s contents, one per tensor: the facts recorded on it
    share it while the tensor is unchanged (a trusted mark, its graph and its GCN
    normalisation would otherwise each keep a copy)."""
    held = getattr(t, '_pyg_accel_contents', None)
    if held is not None and held[0] == current and held[1].shape == t.shape and torch.equal(held[1], t.detach()):
        return held[1]
    copy = t.detach().clone()
    t._pyg_accel_contents = (current, copy)
    return copy


def recorded(t: Tensor, slot: str) -> Optional[Any]:
    """What :func:`record` put on ``t`` under ``slot``, if ``t`` is unchanged since
    (``None`` under ``torch.compile``)."""
    if torch.compiler.is_compiling():
        return None
    mark = getattr(t, slot, None)
    if mark is None:
        return None
    current = version(t)
    if current is None or mark[0] != current:
        return None
    contents = mark[2]
    if contents is not None and not (contents.shape == t.shape and torch.equal(contents, t.detach())):
        delattr(t, slot)
        return None
    return mark[1]
