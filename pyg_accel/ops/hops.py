"""The per-hop layout of a sampled batch, recorded on its ``edge_index``.

A neighbour sampler lists a batch's nodes hop by hop (the seeds first) and its edges hop
by hop (hop ``k``'s edges end at hop ``k - 1``'s nodes). PyG's ``trim_to_layer`` uses
that layout to let layer ``i`` of an ``L``-layer model skip the last ``i`` hops, which
no later layer needs. pyg_accel's loaders record the counts on each batch's
``edge_index`` so that pyg_accel's models trim without being handed them.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from torch import Tensor

from ._marks import record, recorded

_SLOT = '_pyg_accel_hops'

Hops = Tuple[List[int], List[int]]


def record_hops(edge_index: Tensor, num_nodes: int, nodes_per_hop: Sequence[int],
                edges_per_hop: Sequence[int]) -> bool:
    """Records that ``edge_index`` (``[2, E]``, as it is now, over ``num_nodes`` nodes)
    lists its nodes and edges hop by hop, ``nodes_per_hop`` (``[H + 1]``, the seeds first)
    and ``edges_per_hop`` (``[H]``) at a time. Counts that do not add up to the batch are
    not recorded (returns ``False``)."""
    nodes, edges = [int(n) for n in nodes_per_hop], [int(e) for e in edges_per_hop]
    if (len(nodes) != len(edges) + 1 or sum(nodes) != int(num_nodes) or sum(edges) != edge_index.size(1)
            or min(nodes + edges) < 0):
        return False
    record(edge_index, _SLOT, (int(num_nodes), nodes, edges))
    return True


def sampled_hops(edge_index: Tensor, num_nodes: int) -> Optional[Hops]:
    """``(nodes_per_hop, edges_per_hop)`` recorded on ``edge_index`` by
    :func:`record_hops` for a batch of ``num_nodes`` nodes, if it is unchanged since."""
    mark = recorded(edge_index, _SLOT)
    if mark is None or mark[0] != num_nodes:
        return None
    return list(mark[1]), list(mark[2])
