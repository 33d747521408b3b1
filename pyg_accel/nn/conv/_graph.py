"""What the accelerated convs share: which ``edge_index`` inputs they take, and the
graph object built from them."""
from __future__ import annotations

import os
from typing import Callable, Optional, Tuple, TypeVar

import torch
from torch import Tensor
from torch_geometric.nn import MessagePassing

from ... import _build
from ...ops import CooGraph
from ...ops._marks import attach, attached, record, recorded
from ...ops.sparse import is_trusted_dst_sorted, is_trusted_edge_index

T = TypeVar('T')


class PyGPropagate:
    """Base of our convs, before PyG's conv: names ``MessagePassing.propagate`` as the
    ``propagate`` they start from. PyG generates a ``propagate`` per class from templates
    and keeps the one the class had as ``_orig_propagate``, the method explain mode
    (GNNExplainer's edge masks) switches to. A subclass first built after its PyG parent
    had generated its own would keep the parent's generated method there, which ignores
    edge masks, and the explainer would find no gradient for them."""
    propagate = MessagePassing.propagate

    def __init__(self, *args, **kwargs) -> None:
        # The compiled ops are loaded (built on first use) with the layer, before any
        # forward: torch.compile traces a model's first call, and the ops must be
        # registered by then (dynamo cannot build them while it traces).
        _build.load_library()
        super().__init__(*args, **kwargs)

    def __prepare_scriptable__(self):
        """What ``torch.jit.script`` compiles instead of this layer: PyG's own layer class
        over the same parameters (our fast path is not TorchScript; PyG's is, where PyG's
        layer is scriptable at all), so a scripted model computes what PyG's would."""
        pyg_cls = next(c for c in type(self).__mro__[1:]
                       if c.__module__.startswith('torch_geometric.') and issubclass(c, MessagePassing))
        twin = pyg_cls.__new__(pyg_cls)
        state = {k: v for k, v in self.__dict__.items() if k not in ('_cached_graph', 'propagate')}
        twin.__dict__.update(state, _parameters=dict(self._parameters), _buffers=dict(self._buffers),
                             _modules=dict(self._modules))
        twin._set_jittable_templates()  # (PyG's class gets its generated `propagate`, if it has none yet)
        return twin


def plain_edge_index(edge_index) -> Optional[Tensor]:
    """``edge_index`` as a plain ``[2, E]`` integer tensor, or ``None`` when the layer
    should defer to PyG (``SparseTensor``, ``torch.sparse`` or other layouts)."""
    if not isinstance(edge_index, Tensor) or edge_index.layout != torch.strided:
        return None
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or edge_index.is_floating_point():
        return None
    as_tensor = getattr(edge_index, 'as_tensor', None)  # PyG's EdgeIndex subclass
    return as_tensor() if callable(as_tensor) else edge_index


def accelerated(conv, x) -> bool:
    """Whether ``conv`` can skip PyG's ``propagate`` for node features ``x`` (a tensor or
    a pair): ``[N, F]`` matrices (PyG also takes a static graph's ``[B, N, F]`` batch,
    which its own path handles), default flow, no explainer and no message-passing hooks
    (those need PyG's own path)."""
    parts = x if isinstance(x, (tuple, list)) else (x,)
    if not all(p is None or (isinstance(p, Tensor) and p.dim() == 2) for p in parts):
        return False
    return (conv.flow == 'source_to_target' and not getattr(conv, '_explain', False)
            and not conv._propagate_forward_pre_hooks and not conv._propagate_forward_hooks
            and not conv._message_forward_pre_hooks and not conv._message_forward_hooks
            and not conv._aggregate_forward_pre_hooks and not conv._aggregate_forward_hooks
            and getattr(conv, 'decomposed_layers', 1) == 1)


def is_row_prefix(x_dst: Optional[Tensor], x_src: Tensor) -> bool:
    """Whether ``x_dst`` is ``x_src[:n]``: the first rows of the same storage, same layout
    (how a trimmed layer is given its destinations, ``(x, x[:num_dst])``), so that what a
    layer computes on ``x_src``'s rows can be sliced for them instead of computed again."""
    if x_dst is x_src:
        return True
    return (isinstance(x_dst, Tensor) and x_dst.dim() == 2 and x_src.dim() == 2 and x_dst.size(1) == x_src.size(1)
            and x_dst.size(0) <= x_src.size(0) and x_dst.dtype == x_src.dtype and x_dst.device == x_src.device
            and x_dst.data_ptr() == x_src.data_ptr() and (x_dst.size(0) <= 1 or x_dst.stride() == x_src.stride()))


def _memo_enabled() -> bool:
    return not torch.compiler.is_compiling() and os.environ.get('PYG_ACCEL_GRAPH_MEMO', '1') != '0'


def cached_on(t: Tensor, slot: str, key: tuple, build: Callable[[], T]) -> T:
    """``build()``, memoised on the tensor object ``t`` while its version and ``key``
    match: the layers of one model share what they derive from one ``edge_index``
    (one sorted graph, one transpose, one normalisation per batch), and full-graph
    training derives it once. Not memoised under ``torch.compile``, nor with
    ``PYG_ACCEL_GRAPH_MEMO=0`` (the memo lives as long as the ``edge_index`` tensor: a
    full products-size graph keeps about 2 GB of sorted copies)."""
    if not _memo_enabled():
        return build()
    hit = recorded(t, slot)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    record(t, slot, (key, value))  # (not on inference tensors: they have no version counter)
    return value


def coo_graph(edge_index: Tensor, size: Tuple[int, int]) -> CooGraph:
    """The destination-sorted graph of ``edge_index`` (memoised on it). Edge indices
    from pyg_accel's loaders are known to be in range and are sorted without the
    validating host sync (not at all when marked sorted); others are checked first."""
    def build() -> CooGraph:
        if is_trusted_edge_index(edge_index, size):
            return CooGraph._from_trusted(edge_index, int(size[0]), int(size[1]), is_trusted_dst_sorted(edge_index))
        return CooGraph.from_edge_index(edge_index, size)
    return cached_on(edge_index, _COO_SLOT, (int(size[0]), int(size[1])), build)


_COO_SLOT = '_pyg_accel_coo'


def looped_graph(edge_index: Tensor, looped: Tensor, size: Tuple[int, int], num_nodes: int) -> CooGraph:
    """``coo_graph(looped, size)`` for ``looped``, ``edge_index`` followed by one self-loop
    per node below ``num_nodes`` (as ``with_loops_masked`` appends them). When
    ``edge_index`` is known sorted by destination (a loader's batch, a trimmed layer's
    prefix), the loops are merged into its graph instead of sorting every edge again."""
    if looped.size(1) != edge_index.size(1) + num_nodes or not (
            is_trusted_dst_sorted(edge_index) and is_trusted_edge_index(edge_index, size)):
        return coo_graph(looped, size)
    def build() -> CooGraph:  # (edge_index's own graph is not memoised here: only the looped one is used)
        graph = memoized_graph(edge_index, size)
        if graph is None:
            graph = CooGraph._from_trusted(edge_index, int(size[0]), int(size[1]), dst_sorted=True)
        return graph.with_self_loops(num_nodes)
    return cached_on(looped, _COO_SLOT, (int(size[0]), int(size[1])), build)


def memoized_graph(edge_index: Tensor, size: Tuple[int, int]) -> Optional[CooGraph]:
    """The graph :func:`coo_graph` memoised on ``edge_index`` for ``size``, if any (nothing is built)."""
    hit = recorded(edge_index, _COO_SLOT) if _memo_enabled() else None
    return hit[1] if hit is not None and hit[0] == (int(size[0]), int(size[1])) else None


def memoize_graph(edge_index: Tensor, size: Tuple[int, int], graph: CooGraph) -> None:
    """Makes ``graph`` what :func:`coo_graph` returns for ``edge_index`` and ``size``
    (for a graph derived without building one, e.g. a trimmed layer's)."""
    if _memo_enabled():
        record(edge_index, _COO_SLOT, ((int(size[0]), int(size[1])), graph))


_TRIMMED_SLOT = '_pyg_accel_trimmed_from'


def mark_trimmed(trimmed: Tensor, edge_index: Tensor, num_nodes: int, edge_weight: Optional[Tensor]) -> None:
    """Records that ``trimmed`` is a prefix of ``edge_index`` (over ``num_nodes`` nodes,
    with ``[E]`` weights or edge features ``edge_weight``), as PyG's ``trim_to_layer``
    cuts it, so that a layer can find the untrimmed batch (GCN normalises by its degrees).
    Chains of trims point at the first, untrimmed ``edge_index``. (Not under
    ``torch.compile``, which cannot trace it.)"""
    if torch.compiler.is_compiling():
        return
    root = trimmed_from(edge_index) or (edge_index, int(num_nodes), edge_weight)
    attach(trimmed, _TRIMMED_SLOT, root)


def trimmed_from(edge_index: Tensor) -> Optional[Tuple[Tensor, int, Optional[Tensor]]]:
    """``(edge_index, num_nodes, edge_weight)`` of the untrimmed batch ``edge_index`` was
    cut from by :func:`mark_trimmed`, while ``edge_index`` is still a view of its first
    edges (checked from the views' storage: nothing to go stale); otherwise ``None``."""
    if torch.compiler.is_compiling():
        return None
    root = attached(edge_index, _TRIMMED_SLOT)
    if root is None:
        return None
    full = root[0]
    is_prefix = (edge_index.data_ptr() == full.data_ptr() and edge_index.stride() == full.stride()
                 and edge_index.dtype == full.dtype and edge_index.size(0) == full.size(0)
                 and edge_index.size(1) <= full.size(1))
    return root if is_prefix else None
