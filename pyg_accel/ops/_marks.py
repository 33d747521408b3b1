"""Facts recorded about a tensor (ids in range, sorted by destination, a graph derived
from it), valid while the tensor is unchanged.

The facts live in a side table keyed by the tensor's identity (:class:`_FactTable`),
not on the tensor: an entry goes when its tensor does, and nothing travels with the
tensor through ``torch.save``, pickling or ``copy.deepcopy`` (a loaded tensor restarts
its version counter, so a fact carried along could pass for current after the tensor
had changed, and a trusted-ids fact would then let a kernel read out of bounds).

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

import weakref
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

_CONTENTS = '_contents'  # (the CPU snapshot the facts of one tensor version share)


class _FactTable:
    """Per live tensor, a dict of its facts by slot, found by the tensor's identity. An
    entry holds a weak reference to its tensor and is dropped when the tensor is freed
    (the callback runs before the tensor's memory, and so its ``id``, can be reused)."""

    def __init__(self) -> None:
        self._entries: Dict[int, Tuple['weakref.ref[Tensor]', Dict[str, Any]]] = {}

    def get(self, t: Tensor) -> Optional[Dict[str, Any]]:
        """``t``'s facts, or ``None``."""
        entry = self._entries.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def setdefault(self, t: Tensor) -> Dict[str, Any]:
        """``t``'s facts, an empty dict made for it if it has none."""
        facts = self.get(t)
        if facts is None:
            key, entries = id(t), self._entries

            def drop(ref, key=key, entries=entries):
                if entries.get(key, (None,))[0] is ref:
                    del entries[key]
            facts = {}
            entries[key] = (weakref.ref(t, drop), facts)
        return facts

    def __len__(self) -> int:
        return len(self._entries)


_FACTS = _FactTable()


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
        facts = _FACTS.setdefault(t)
        facts[slot] = (current, value, None if t.is_cuda else _snapshot(t, current, facts))


def _snapshot(t: Tensor, current: int, facts: Dict[str, Any]) -> Tensor:
    """A copy of CPU tensor ``t``'s contents, one per tensor: the facts recorded on it
    share it while the tensor is unchanged (a trusted mark, its graph and its GCN
    normalisation would otherwise each keep a copy)."""
    held = facts.get(_CONTENTS)
    if held is not None and held[0] == current and held[1].shape == t.shape and torch.equal(held[1], t.detach()):
        return held[1]
    copy = t.detach().clone()
    facts[_CONTENTS] = (current, copy)
    return copy


def recorded(t: Tensor, slot: str) -> Optional[Any]:
    """What :func:`record` put on ``t`` under ``slot``, if ``t`` is unchanged since
    (``None`` under ``torch.compile``)."""
    if torch.compiler.is_compiling():
        return None
    facts = _FACTS.get(t)
    mark = facts.get(slot) if facts is not None else None
    if mark is None:
        return None
    current = version(t)
    if current is None or mark[0] != current:
        return None
    contents = mark[2]
    if contents is not None and not (contents.shape == t.shape and torch.equal(contents, t.detach())):
        del facts[slot]
        return None
    return mark[1]


def attach(t: Tensor, slot: str, value: Any) -> None:
    """Keeps ``value`` with ``t`` under ``slot`` for ``t``'s lifetime, unversioned: for
    facts the reader checks itself (e.g. that a view still starts where it did)."""
    _FACTS.setdefault(t)[slot] = value


def attached(t: Tensor, slot: str) -> Optional[Any]:
    """What :func:`attach` kept with ``t`` under ``slot``, or ``None``."""
    facts = _FACTS.get(t)
    return facts.get(slot) if facts is not None else None
