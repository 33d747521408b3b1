"""A PyG ``GraphStore`` that holds every edge type as CSC on the GPU, in pinned host
memory, or on the CPU.

COO, CSR and CSC are accepted on ``put_edge_index``; the store converts to CSC once
(sorted by destination, stable, so ties keep their input order), remembers the
permutation back to the input edge order, and always records ``EdgeAttr.size``.
``csc()`` hands the held CSC to samplers without any conversion.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch_geometric.data
from torch import Tensor
from torch_geometric.data import EdgeAttr
from torch_geometric.data.graph_store import EdgeLayout

from .location import Location, LocationLike, resolve_location

__all__ = ['GraphStore', 'CSCGraph']

EdgeType = Optional[Tuple[str, str, str]]


@dataclass
class CSCGraph:
    """One edge type in CSC form.

    Attributes:
        row: ``[E]`` int64 source node of each edge, grouped by destination.
        colptr: ``[num_dst + 1]`` int64 offsets into ``row`` per destination.
        perm: ``[E]`` int64 input-order edge id of each CSC edge, or ``None`` when the
            input was already in CSC order.
        size: ``(num_src, num_dst)``.
        features: per-edge tensors (``[E, *]``) in CSC order, e.g. weights or times.
    """
    row: Tensor
    colptr: Tensor
    perm: Optional[Tensor]
    size: Tuple[int, int]
    features: Dict[str, Tensor] = field(default_factory=dict)

    @property
    def num_edges(self) -> int:
        """Number of stored edges."""
        return int(self.row.numel())

    def col(self) -> Tensor:
        """``[E]`` destination of each CSC edge."""
        counts = self.colptr[1:] - self.colptr[:-1]
        return torch.repeat_interleave(torch.arange(self.size[1], device=self.row.device), counts,
                                       output_size=self.num_edges)


def _as_index_tensor(value: object, what: str) -> Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, Tensor):
        raise TypeError(f'GraphStore: {what} must be a tensor, got {type(value).__name__}')
    if value.dtype not in (torch.int32, torch.int64):
        raise TypeError(f'GraphStore: {what} must be int64 or int32, got {value.dtype}')
    if value.dim() != 1:
        raise ValueError(f'GraphStore: {what} must be 1-D, got shape {tuple(value.shape)}')
    return value.long()


def _check_ptr(ptr: Tensor, num_edges: int, what: str) -> None:
    if ptr.numel() == 0:
        raise ValueError(f'GraphStore: {what} must have at least one entry')
    if int(ptr[0]) != 0 or int(ptr[-1]) != num_edges:
        raise ValueError(f'GraphStore: {what} must start at 0 and end at the number of edges '
                         f'({num_edges}); got {int(ptr[0])} and {int(ptr[-1])}')
    if ptr.numel() > 1 and bool((ptr[1:] < ptr[:-1]).any()):
        raise ValueError(f'GraphStore: {what} must be non-decreasing')


def _check_ids(ids: Tensor, bound: Optional[int], what: str) -> int:
    """Checks ``0 <= ids < bound``; returns the bound (inferred as max + 1 when None)."""
    if ids.numel() == 0:
        return bound if bound is not None else 0
    lo, hi = (int(v) for v in torch.aminmax(ids))
    if lo < 0:
        raise IndexError(f'GraphStore: {what} holds a negative node id ({lo})')
    if bound is not None and hi >= bound:
        raise IndexError(f'GraphStore: {what} holds node id {hi}, out of range for size {bound}')
    return bound if bound is not None else hi + 1


def _ptr_to_ids(ptr: Tensor, num_edges: int) -> Tensor:
    counts = ptr[1:] - ptr[:-1]
    return torch.repeat_interleave(torch.arange(counts.numel(), device=ptr.device), counts,
                                   output_size=num_edges)


def _ids_to_ptr(sorted_ids: Tensor, n: int) -> Tensor:
    counts = torch.bincount(sorted_ids, minlength=n) if sorted_ids.numel() else \
        torch.zeros(n, dtype=torch.long, device=sorted_ids.device)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def to_csc(edge_index: Sequence[Tensor], layout: EdgeLayout, size: Optional[Tuple[int, int]],
           is_sorted: bool = False) -> CSCGraph:
    """Validates a COO ``(row, col)``, CSR ``(rowptr, col)`` or CSC ``(row, colptr)``
    pair and converts it to a :class:`CSCGraph` (on the input's device)."""
    if isinstance(edge_index, Tensor) and layout == EdgeLayout.COO:
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(f'GraphStore: a COO edge_index tensor must have shape [2, E], got '
                             f'{tuple(edge_index.shape)}')
        edge_index = (edge_index[0], edge_index[1])
    if not isinstance(edge_index, (tuple, list)) or len(edge_index) != 2:
        raise TypeError('GraphStore: edge_index must be a pair of tensors: COO (row, col), '
                        'CSR (rowptr, col) or CSC (row, colptr)')
    a, b = (_as_index_tensor(t, name) for t, name in zip(edge_index, ('edge_index[0]', 'edge_index[1]')))
    if a.device != b.device:
        raise ValueError(f'GraphStore: both edge_index tensors must be on one device, got {a.device} and {b.device}')
    num_src, num_dst = size if size is not None else (None, None)

    if layout == EdgeLayout.CSC:
        row, colptr = a, b
        _check_ptr(colptr, row.numel(), 'colptr')
        if num_dst is not None and colptr.numel() - 1 != num_dst:
            raise ValueError(f'GraphStore: colptr has {colptr.numel() - 1} columns but size[1] is {num_dst}')
        num_src = _check_ids(row, num_src, 'row')
        return CSCGraph(row, colptr, None, (num_src, colptr.numel() - 1))

    if layout == EdgeLayout.CSR:
        rowptr, col = a, b
        _check_ptr(rowptr, col.numel(), 'rowptr')
        if num_src is not None and rowptr.numel() - 1 != num_src:
            raise ValueError(f'GraphStore: rowptr has {rowptr.numel() - 1} rows but size[0] is {num_src}')
        row, num_src, is_sorted = _ptr_to_ids(rowptr, col.numel()), rowptr.numel() - 1, False
    else:
        row, col = a, b
        if row.numel() != col.numel():
            raise ValueError(f'GraphStore: COO row and col differ in length ({row.numel()} vs {col.numel()})')
        num_src = _check_ids(row, num_src, 'row')
    num_dst = _check_ids(col, num_dst, 'col')

    perm = None
    if is_sorted:
        if col.numel() > 1 and bool((col[1:] < col[:-1]).any()):
            raise ValueError('GraphStore: is_sorted=True but col is not sorted by destination')
    else:
        perm = torch.sort(col, stable=True).indices
        row, col = row[perm], col[perm]
    return CSCGraph(row, _ids_to_ptr(col, num_dst), perm, (num_src, num_dst))


def _shares_memory(a: Tensor, b: Tensor) -> bool:
    """Whether two tensors are views of one storage."""
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() \
        and a.untyped_storage().nbytes() > 0


class GraphStore(torch_geometric.data.GraphStore):
    r"""Graph topology for PyG's loaders and samplers, held as CSC.

    Args:
        location: ``'auto'`` (default), ``'cuda'``, ``'cuda:N'``, ``'pinned'`` or ``'cpu'``.
        device: the GPU for ``'cuda'`` / ``'pinned'``; with ``'auto'``, where the store
            goes (``'cpu'`` or a GPU).

    Homogeneous graphs use ``edge_type=None``; heterogeneous ones ``(src, rel, dst)``.
    ``get_all_edge_attrs()`` reports each edge type as sorted CSC with its ``size``.
    Per-edge tensors (weights, times, features) go in with :meth:`put_edge_feature` and
    are kept in CSC order next to the topology.
    """

    def __init__(self, location: LocationLike = 'auto', device=None) -> None:
        super().__init__()
        self.location: Location = resolve_location(location, device)
        if self.location.sharded:
            raise ValueError("GraphStore: the graph is not sharded (the sampler reads all of it); give each "
                             "process its copy with location 'cuda' (or 'pinned' / 'cpu') and shard the "
                             "features with FeatureStore('sharded')")
        self._graphs: Dict[EdgeType, CSCGraph] = {}

    @property
    def device(self) -> torch.device:
        """Where the graph's index tensors are read (the GPU for 'cuda' and 'pinned')."""
        return self.location.device

    def graph(self, edge_type: EdgeType = None) -> CSCGraph:
        """The held :class:`CSCGraph` of ``edge_type``."""
        if edge_type not in self._graphs:
            known = ', '.join(map(repr, self._graphs)) or 'none'
            raise KeyError(f'GraphStore: no edges of type {edge_type!r} (stored: {known})')
        return self._graphs[edge_type]

    # PyG's abstract interface ###############################################

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        size = tuple(int(s) for s in edge_attr.size) if edge_attr.size is not None else None
        if size is not None and (len(size) != 2 or min(size) < 0):
            raise ValueError(f'GraphStore: size must be (num_src, num_dst), got {edge_attr.size}')
        csc = to_csc(edge_index, edge_attr.layout, size, edge_attr.is_sorted)
        given = [t for t in edge_index if isinstance(t, Tensor)]

        def place(t: Tensor) -> Tensor:
            """``t`` where the store keeps it, in memory of its own: a tensor of the caller's
            (a CSC put as is) is copied, since callers reuse their buffers."""
            placed = self.location.place(t)
            if any(_shares_memory(placed, g) for g in given):
                placed = placed.clone()
            return placed
        # (replacing an edge type drops its old edge features)
        csc = CSCGraph(place(csc.row), place(csc.colptr), None if csc.perm is None else place(csc.perm), csc.size)
        self._graphs[edge_attr.edge_type] = csc
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr) -> Optional[Tuple[Tensor, Tensor]]:
        csc = self._graphs.get(edge_attr.edge_type)
        if csc is None:
            return None
        if edge_attr.layout == EdgeLayout.CSC:
            return csc.row, csc.colptr
        col = csc.col()
        if edge_attr.layout == EdgeLayout.COO:
            if edge_attr.is_sorted or csc.perm is None:
                return csc.row, col
            # Input edge order, as the graph was put.
            inv = torch.empty_like(csc.perm)
            inv[csc.perm] = torch.arange(csc.num_edges, device=csc.perm.device)
            return csc.row[inv], col[inv]
        order = torch.sort(csc.row, stable=True).indices  # CSR
        return _ids_to_ptr(csc.row[order], csc.size[0]), col[order]

    def coo(self, edge_types: Optional[List[EdgeType]] = None, store: bool = False):
        """The edges in the order they were put (PyG's ``coo()`` would derive them from
        the CSC in destination order with ``perm=None``, and PyG's link loaders pair
        ``coo()`` with labels given in the put order): ``(row, col, perm)`` with ``perm``
        ``None``, or three dicts keyed by edge type. ``store`` is accepted for PyG's
        signature; nothing is converted to store."""
        if not self._graphs:
            raise KeyError('GraphStore: no edges have been put')
        wanted = list(self._graphs) if edge_types is None else list(edge_types)
        for et in wanted:
            self.graph(et)  # (a KeyError naming the stored types for an unknown one)
        out = {et: self._get_edge_index(EdgeAttr(et, EdgeLayout.COO, False)) for et in wanted}
        if list(self._graphs) == [None]:
            row, col = out[None]
            return row, col, None
        return ({et: rc[0] for et, rc in out.items()}, {et: rc[1] for et, rc in out.items()},
                {et: None for et in out})

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return self._graphs.pop(edge_attr.edge_type, None) is not None

    def get_all_edge_attrs(self) -> List[EdgeAttr]:
        return [EdgeAttr(edge_type, EdgeLayout.CSC, True, csc.size) for edge_type, csc in self._graphs.items()]

    def csc(self, edge_types: Optional[List[EdgeType]] = None, store: bool = False):
        """The held CSC without conversion: ``(row, colptr, perm)`` for a homogeneous
        store, or three dicts keyed by edge type. ``perm`` maps CSC positions to the
        input edge ids (``None`` when they coincide)."""
        if not self._graphs:
            raise KeyError('GraphStore: no edges have been put')
        if list(self._graphs) == [None]:
            csc = self._graphs[None]
            return csc.row, csc.colptr, csc.perm
        wanted = list(self._graphs) if edge_types is None else edge_types
        graphs = {et: self.graph(et) for et in wanted}
        return ({et: g.row for et, g in graphs.items()}, {et: g.colptr for et, g in graphs.items()},
                {et: g.perm for et, g in graphs.items()})

    # Per-edge tensors #######################################################

    def put_edge_feature(self, tensor: Union[Tensor, np.ndarray], name: str, edge_type: EdgeType = None) -> None:
        """Stores a ``[E, *]`` per-edge tensor given in the input edge order; it is
        kept permuted into CSC order."""
        csc = self.graph(edge_type)
        tensor = torch.from_numpy(tensor) if isinstance(tensor, np.ndarray) else tensor
        if not isinstance(tensor, Tensor) or tensor.dim() < 1 or tensor.shape[0] != csc.num_edges:
            shape = tuple(tensor.shape) if isinstance(tensor, Tensor) else type(tensor).__name__
            raise ValueError(f'GraphStore.put_edge_feature: {name!r} must have {csc.num_edges} rows '
                             f'(one per edge), got {shape}')
        if csc.perm is not None:
            tensor = tensor[csc.perm.to(tensor.device)]
        csc.features[name] = self.location.place(tensor)

    def get_edge_feature(self, name: str, edge_type: EdgeType = None) -> Tensor:
        """The per-edge tensor ``name`` in CSC order (``[E, *]``)."""
        csc = self.graph(edge_type)
        if name not in csc.features:
            raise KeyError(f'GraphStore: no edge feature {name!r} for edge type {edge_type!r} '
                           f'(stored: {sorted(csc.features) or "none"})')
        return csc.features[name]

    def edge_feature_names(self, edge_type: EdgeType = None) -> List[str]:
        """Names of the per-edge tensors stored for ``edge_type``."""
        return sorted(self.graph(edge_type).features)

    def _set_graph(self, edge_type: EdgeType, csc: CSCGraph) -> None:
        """Holds ``csc`` as ``edge_type``'s graph as it is: its tensors must already be
        valid CSC in this store's location (for
        :func:`pyg_accel.distributed.share_graph_store`)."""
        self._graphs[edge_type] = csc

    def __repr__(self) -> str:
        items = ', '.join(f'{et!r}: {g.num_edges} edges, size={g.size}' for et, g in self._graphs.items())
        return f'{type(self).__name__}(location={self.location}, {items})'
