"""Self-loop handling without a host sync, for steps captured as CUDA graphs.

PyG's GCN and GAT replace a graph's own self-loops with one per node: they drop the old
loops through a boolean mask, whose result size the host must read (a sync no CUDA graph
can hold). Inside :func:`sync_free` (which :class:`pyg_accel.training.TrainStep` enters)
our layers keep the old loops in place with no effect instead: zero weight in GCN
(degrees and sums alike), ``-inf`` attention logits in GAT, so that they get exactly zero
attention. The loops appended get the weights and edge attributes PyG gives them,
computed over the edges that are not loops themselves. Sums over finite features are
PyG's, bit for bit up to the summation order of zeros; an infinite feature at a node with
a loop of its own becomes NaN there (``0 * inf``) where PyG keeps it infinite.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Optional, Tuple, Union

import torch
from torch import Tensor

_state = threading.local()


@contextlib.contextmanager
def sync_free() -> Iterator[None]:
    """Within the block, GCN and GAT handle self-loops without a host sync."""
    previous = getattr(_state, 'on', False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = previous


def sync_free_mode() -> bool:
    """Whether :func:`sync_free` is in force (on this thread)."""
    return getattr(_state, 'on', False)


def with_loops_masked(edge_index: Tensor, num_nodes: int) -> Tuple[Tensor, Tensor]:
    """``edge_index`` ``[2, E]`` followed by one loop per node (``[2, E + num_nodes]``),
    and ``[E + num_nodes]`` bool, true at the edge's own self-loops (which stay, to be
    given no effect)."""
    loops = torch.arange(num_nodes, device=edge_index.device, dtype=edge_index.dtype)
    is_old_loop = torch.cat([edge_index[0] == edge_index[1], loops.new_zeros(num_nodes, dtype=torch.bool)])
    return torch.cat([edge_index, torch.stack([loops, loops])], dim=1), is_old_loop


def gcn_self_loops(edge_index: Tensor, edge_weight: Optional[Tensor], fill_value: float, num_nodes: int,
                   dtype: torch.dtype) -> Tuple[Tensor, Tensor]:
    """PyG's ``add_remaining_self_loops`` as ``gcn_norm`` uses it, without a sync: the
    graph's own loops keep weight 0 and one loop per node is appended, weighted as PyG
    weights it (the node's own loop weight when there is one, else ``fill_value``; 1 for
    an unweighted graph, as in PyG). Returns ``edge_index`` ``[2, E + N]`` and the weights."""
    e, is_old_loop = with_loops_masked(edge_index, num_nodes)
    num_edges = edge_index.size(1)
    if edge_weight is None:
        weight = torch.ones(num_edges, dtype=dtype, device=edge_index.device)
        loop_weight = torch.ones(num_nodes, dtype=dtype, device=edge_index.device)
    else:
        weight = edge_weight
        loop_weight = torch.full((num_nodes + 1, ), fill_value, dtype=weight.dtype, device=weight.device)
        # a node's own loop weight where it has one (any of them when several, as in PyG); slot N for the rest
        slot = torch.where(is_old_loop[:num_edges], edge_index[0], num_nodes)
        loop_weight = loop_weight.scatter(0, slot, weight)[:num_nodes]
    weight = torch.where(is_old_loop[:num_edges], torch.zeros((), dtype=weight.dtype, device=weight.device), weight)
    return e, torch.cat([weight, loop_weight])


def gat_loop_attr(edge_index: Tensor, edge_attr: Tensor, is_old_loop: Tensor,
                  fill_value: Union[None, float, Tensor, str], num_nodes: int) -> Tensor:
    """The edge attributes PyG's ``add_self_loops`` gives the loop it appends at each
    node (``[num_nodes, ...]``; ``edge_attr`` ``[E, ...]`` of ``edge_index`` ``[2, E]``,
    whose own loops ``is_old_loop[:E]`` marks), without a sync: ``fill_value`` ``None``
    gives ones, a number or tensor itself, a reduction (``'mean'``, ``'add'``, ``'max'``,
    ...) that of the node's incoming attributes over the edges that are not loops, as
    PyG reduces them after ``remove_self_loops`` (here the old loops are routed to a
    spare slot instead of being dropped)."""
    from torch_geometric.utils import scatter
    shape = (num_nodes,) + tuple(edge_attr.shape[1:])
    if fill_value is None:
        return edge_attr.new_ones(shape)
    if isinstance(fill_value, (int, float)):
        return edge_attr.new_full(shape, fill_value)
    if isinstance(fill_value, Tensor):
        value = fill_value.to(edge_attr.device, edge_attr.dtype)
        return (value.unsqueeze(0) if value.dim() == edge_attr.dim() - 1 else value).expand(shape)
    dst = torch.where(is_old_loop[:edge_index.size(1)], num_nodes, edge_index[1])
    return scatter(edge_attr, dst, 0, num_nodes + 1, reduce=fill_value)[:num_nodes]
