"""Node orders that improve locality: reverse Cuthill-McKee (a C++ CPU kernel) over a
symmetric CSR graph, for a node range or the whole graph."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .. import _build
from ._library import ops

__all__ = ['rcm_order']


def rcm_order(rowptr: Tensor, col: Tensor, lo: int = 0, hi: Optional[int] = None) -> Tensor:
    """Reverse Cuthill-McKee order of the nodes ``[lo, hi)`` of a symmetric CSR graph.

    Args:
        rowptr: ``[N + 1]`` row pointers (int32 or int64, same dtype as ``col``).
        col: ``[nnz]`` neighbour ids. The graph should be symmetric (both directions of
            every edge); edges leaving ``[lo, hi)`` and self-loops are ignored.
        lo, hi: the node range to order (default: all ``N`` nodes).

    Returns:
        ``[hi - lo]`` int64 on the CPU: the range's node ids in their new order
        (``order[new] = old``). Each connected component is numbered breadth-first from a
        pseudo-peripheral node, neighbours by increasing degree, and the whole order is
        reversed. Deterministic. Computed on the CPU (inputs on a GPU are copied).
    """
    for name, t in (('rowptr', rowptr), ('col', col)):
        if not isinstance(t, Tensor):
            raise TypeError(f'rcm_order: {name} must be a torch.Tensor, got {type(t).__name__}')
        if t.dtype not in (torch.int32, torch.int64) or t.dim() != 1:
            raise TypeError(f'rcm_order: {name} must be a 1-D int32/int64 tensor, got {t.dtype} '
                            f'of shape {tuple(t.shape)}')
    if rowptr.dtype != col.dtype:
        col = col.to(rowptr.dtype)
    num_nodes = rowptr.numel() - 1
    hi = num_nodes if hi is None else int(hi)
    if not 0 <= int(lo) <= hi <= num_nodes:
        raise ValueError(f'rcm_order: the range [{lo}, {hi}) is not inside the graph of {num_nodes} nodes')
    return ops().rcm_order(rowptr.cpu(), col.cpu(), int(lo), hi)


@_build.on_load
def _register() -> None:
    torch.library.register_fake('pyg_accel::rcm_order')(
        lambda rowptr, col, lo, hi: rowptr.new_empty((hi - lo,), dtype=torch.long))
