"""What the accelerated convs share: which ``edge_index`` inputs they take, and the
graph object built from them."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from ...ops import CooGraph


def plain_edge_index(edge_index) -> Optional[Tensor]:
    """``edge_index`` as a plain ``[2, E]`` integer tensor, or ``None`` when the layer
    should defer to PyG (``SparseTensor``, ``torch.sparse`` or other layouts)."""
    if not isinstance(edge_index, Tensor) or edge_index.layout != torch.strided:
        return None
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or edge_index.is_floating_point():
        return None
    as_tensor = getattr(edge_index, 'as_tensor', None)  # PyG's EdgeIndex subclass
    return as_tensor() if callable(as_tensor) else edge_index


def accelerated(conv) -> bool:
    """Whether ``conv`` can skip PyG's ``propagate``: default flow, no explainer and no
    message-passing hooks (those need PyG's own path)."""
    return (conv.flow == 'source_to_target' and not getattr(conv, '_explain', False)
            and not conv._propagate_forward_pre_hooks and not conv._propagate_forward_hooks
            and not conv._message_forward_pre_hooks and not conv._message_forward_hooks
            and not conv._aggregate_forward_pre_hooks and not conv._aggregate_forward_hooks
            and getattr(conv, 'decomposed_layers', 1) == 1)


def coo_graph(edge_index: Tensor, size: Tuple[int, int]) -> CooGraph:
    return CooGraph.from_edge_index(edge_index, size)
