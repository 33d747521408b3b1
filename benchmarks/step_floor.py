"""The floor of a trimmed mini-batch training step: the FLOPs and compulsory bytes of
one GraphSAGE or GAT step on a batch with given per-hop counts, and the time they take
at the GPU's measured matmul and copy rates. ``benchmarks/end_to_end.py`` reports each
configuration's GPU time per step against it.

Counted (trimmed layers: layer ``l`` of ``L`` computes the rows of hops ``0..L-l-1``
from those of hops ``0..L-l`` over the edges of hops ``1..L-l``):

* FLOPs: the GEMMs (2 per multiply-add), forward, the weight gradients, and the input
  gradients of every layer but the first (the features need none); SpMM / SDDMM /
  softmax FLOPs are negligible beside them and not counted.
* Bytes: the feature gather (rows read and written), each SpMM's edge ids, source rows
  and output rows, forward and (but the first layer) backward, each layer's inputs and
  output read or written once per GEMM pass, and the activation's read and write. Rows
  are read once per edge (no L2 reuse assumed) in the activation dtype.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import torch

from common import median_time


def trimmed_layers(nodes: Sequence[int], edges: Sequence[int], num_layers: int) -> List[Tuple[int, int, int]]:
    """(source rows, output rows, edges) of each trimmed layer, for per-hop counts
    ``nodes`` (``[H + 1]``) and ``edges`` (``[H]``), ``H >= num_layers``."""
    hops = len(edges)
    layers = []
    for layer in range(num_layers):
        keep = hops - layer  # hops of edges this layer aggregates over
        layers.append((sum(nodes[:keep + 1]), sum(nodes[:keep]), sum(edges[:keep])))
    return layers


def step_cost(model: str, nodes: Sequence[int], edges: Sequence[int], widths: Sequence[int], heads: int = 1,
              value_bytes: int = 4, feature_bytes: int = 4, id_bytes: int = 4) -> Dict[str, float]:
    """FLOPs and bytes of one trimmed training step of ``model`` (``'sage'`` or
    ``'gat'``) with layer widths ``widths`` (``[in, hidden, ..., out]``)."""
    flops = 0.0
    bytes_ = sum(nodes) * widths[0] * feature_bytes * 2  # the feature gather
    for layer, (sources, rows, num_edges) in enumerate(trimmed_layers(nodes, edges, len(widths) - 1)):
        f_in, f_out = widths[layer], widths[layer + 1]
        passes = 2 if layer == 0 else 3  # forward, weight gradient, input gradient (not for the features)
        if model == 'sage':
            gemm_rows = rows if f_out >= f_in else sources  # aggregate first, or project first (narrower SpMM)
            width = f_in if f_out >= f_in else f_out
            flops += passes * 2 * (gemm_rows + rows) * f_in * f_out  # lin_l and lin_r
        else:  # gat: one projection of every source row, attention per edge and head
            width = f_out
            flops += passes * 2 * sources * f_in * f_out
        spmm = num_edges * (id_bytes * 2 + width * value_bytes) + rows * width * value_bytes
        if model == 'gat':
            spmm += num_edges * heads * value_bytes * 4  # logits, softmax, attention read by the SpMM
        bytes_ += spmm * (1 if layer == 0 else 2)
        bytes_ += passes * (sources * f_in + rows * f_out) * value_bytes  # GEMM operands per pass
        bytes_ += 4 * rows * f_out * value_bytes  # activation forward and backward, read and written
    return {'flops': flops, 'bytes': bytes_}


def matmul_rate(device: torch.device, dtype: torch.dtype = torch.float32, n: int = 8192) -> float:
    """FLOPs/s of an ``n``-cube matmul in ``dtype`` under the current matmul precision."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    seconds = median_time(lambda: a @ b, device, reps=10)
    return 2 * n ** 3 / seconds


def floor_ms(cost: Dict[str, float], flops_per_s: float, bytes_per_s: float) -> float:
    """The step's floor: its FLOPs at the matmul rate plus its bytes at the copy rate
    (a GEMM-bound and a bandwidth-bound part, which a step cannot overlap fully)."""
    return (cost['flops'] / flops_per_s + cost['bytes'] / bytes_per_s) * 1e3
