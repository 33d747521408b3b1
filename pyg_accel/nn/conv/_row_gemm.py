"""GEMMs over a sampled batch's rows whose shapes cuBLAS has seen before.

Every sampled mini-batch has a new node count ``M``, and cuBLAS chooses a kernel for each
new GEMM shape. For 16-bit operands on an H200 that choice costs ~100-160 us of host time
per call against ~10 us in fp32 (measured: 117-176 us per call with a new row count,
18 us with a repeated one), which left a bf16 SAGE training step
host-bound. So for 16-bit CUDA operands these split the rows into a head whose count is a
multiple of :data:`ROW_CHUNK` (a handful of shapes over an epoch) and a tail GEMM over
the last ``ROW_CHUNK`` rows (one shape), the rows they share computed twice; elsewhere
they are the plain call. ``PYG_ACCEL_ROW_GEMM_SPLIT=0`` turns the split off.
"""
from __future__ import annotations

import os
from typing import Optional

import torch
from torch import Tensor

ROW_CHUNK = 4096  # rows of the fixed-shape tail GEMM (~1.5% extra rows at 274k)
_SPLIT_DTYPES = (torch.float16, torch.bfloat16)
# (the tests add 'cpu' to check the split itself)
_SPLIT_DEVICES = ('cuda',) if os.environ.get('PYG_ACCEL_ROW_GEMM_SPLIT', '1') != '0' else ()


def _head_rows(a: Tensor) -> int:
    """Rows of the bucketed head GEMM, or 0 where the plain call is used."""
    rows = a.size(0)
    if a.device.type not in _SPLIT_DEVICES or a.dtype not in _SPLIT_DTYPES or rows <= ROW_CHUNK:
        return 0
    return rows - rows % ROW_CHUNK


def row_mm(a: Tensor, b: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``a @ b (+ bias)``: ``a`` ``[M, K]``, ``b`` ``[K, O]``, ``bias`` ``[O]``; returns
    ``[M, O]``."""
    head = _head_rows(a)
    if not head:
        return a.mm(b) if bias is None else torch.addmm(bias, a, b)
    rows = a.size(0)
    out = a.new_empty((rows, b.size(1)))
    parts = ((0, head), (rows - ROW_CHUNK, rows)) if head < rows else ((0, rows),)
    for start, end in parts:  # (the tail rewrites the rows it shares with the head, the same values)
        if bias is None:
            torch.mm(a[start:end], b, out=out[start:end])
        else:
            torch.addmm(bias, a[start:end], b, out=out[start:end])
    return out


def row_addmm_(out: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``out += a @ b`` in place and returns ``out``: ``out`` ``[M, O]``, ``a`` ``[M, K]``,
    ``b`` ``[K, O]``."""
    head = _head_rows(a)
    if not head:
        return out.addmm_(a, b)
    rows = a.size(0)
    out[:head].addmm_(a[:head], b)
    if head < rows:  # the tail's fixed-shape product, of which only the rows past the head are added
        tail = a[rows - ROW_CHUNK:].mm(b)
        out[head:].add_(tail[ROW_CHUNK - (rows - head):])
    return out
