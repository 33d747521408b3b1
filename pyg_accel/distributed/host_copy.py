"""One copy of a graph in host memory for every process of a host.

Under ``torchrun`` every process loads the dataset and, with ``GraphStore('pinned')``,
pins its own copy of the graph: N GPUs, N copies in host memory. WholeGraph keeps one
copy that every GPU reads. :func:`share_graph_store` does that for our stores: rank
0's tensors are copied once into shared-memory files, every process maps them, and
every process page-locks its mapping in place (:func:`pyg_accel.ops.host_register`),
so its GPU sampler reads the one copy over the bus (:func:`pyg_accel.ops.uva_view`).
The processes' own copies are dropped. Without a GPU the mapping is shared unpinned,
and the CPU sampler of every process reads it.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from ..data.graph_store import CSCGraph, GraphStore
from ..ops import host_register
from ..data.shards import _all_gather, _share_cpu, _world

__all__ = ['share_host_tensor', 'share_graph_store']


def share_host_tensor(tensor: Tensor, group=None, pin: bool = True) -> Tensor:
    """Collective over ``group`` (default: the world): rank 0's ``tensor`` in one
    shared-memory copy that every process maps, page-locked in each process when
    ``pin`` and a GPU is there. Every rank passes a tensor of the same dtype; only rank
    0's values are read. Returns the mapped tensor (rank 0's shape); the files are
    unlinked once mapped, so the memory goes with the last process's tensor."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f'share_host_tensor: expected a torch.Tensor, got {type(tensor).__name__}')
    rank, world_size = _world(group)
    if world_size == 1:
        shared = tensor.cpu()
    else:
        local = tensor.cpu() if rank == 0 else tensor.new_empty(0, device='cpu')
        shared = _share_cpu(local, rank, world_size, group)[0]
    if pin and torch.cuda.is_available():
        shared = host_register(shared.contiguous())
    return shared


def share_graph_store(graph_store: Optional[GraphStore], group=None) -> GraphStore:
    """Collective over ``group``: afterwards every process holds views of one copy of
    rank 0's graph in shared host memory (page-locked for ``'pinned'``).

    Rank 0 passes its :class:`GraphStore` in ``'pinned'`` (or ``'cpu'``) memory. Every
    other rank passes either a store holding the same graph (checked; its own copy is
    freed once nothing else holds it) or ``None``, so that only rank 0 loads the graph:
    ``share_graph_store(gs if rank == 0 else None)``. Returns the store: the one passed,
    or a new one in rank 0's location (on this process's GPU) where ``None`` was passed.
    Every rank raises the same error if the stores cannot be shared, so none is left
    waiting in a collective."""
    if graph_store is not None and not isinstance(graph_store, GraphStore):
        raise TypeError(f"share_graph_store: expected pyg_accel's GraphStore (or None on ranks other than 0), got "
                        f"{type(graph_store).__name__}")
    rank, world_size = _world(group)
    mine = _describe(graph_store)
    everyone = [mine] if world_size == 1 else _all_gather(mine, group, world_size)
    layout = _check_shareable(everyone)
    kind, _, pinned = layout[0]
    store = graph_store if graph_store is not None else GraphStore(kind)

    def share(t: Optional[Tensor], dtype: torch.dtype) -> Tensor:
        return share_host_tensor(t if t is not None else torch.empty(0, dtype=dtype), group, pin=pinned)

    for edge_type, size, has_perm, features in layout[1]:  # (one order on every rank)
        held = graph_store.graph(edge_type) if graph_store is not None else None
        row = share(held.row if held else None, torch.long)
        colptr = share(held.colptr if held else None, torch.long)
        perm = share(held.perm if held else None, torch.long) if has_perm else None
        shared = {name: share(held.features[name] if held else None, getattr(torch, dtype))
                  for name, dtype in features}
        store._set_graph(edge_type, CSCGraph(row, colptr, perm, size, shared))
    return store


def _describe(graph_store: Optional[GraphStore]) -> Optional[tuple]:
    """What every rank must agree on to share ``graph_store`` (``None`` for none): its
    location (name, in host memory, pinned), and per edge type (in a fixed order) the size, edge count, whether
    it has a permutation, and its per-edge tensors' names and dtypes."""
    if graph_store is None:
        return None
    edge_types = sorted((attr.edge_type for attr in graph_store.get_all_edge_attrs()), key=repr)
    described = []
    for edge_type in edge_types:
        csc = graph_store.graph(edge_type)
        features = tuple((name, str(csc.features[name].dtype).replace('torch.', ''))
                         for name in sorted(csc.features))
        described.append((edge_type, tuple(csc.size), csc.num_edges, csc.perm is not None, features))
    location = graph_store.location
    return (location.kind, location.storage_device.type == 'cpu', location.zero_copy), tuple(described)


def _check_shareable(everyone: List[Optional[tuple]]) -> Tuple[tuple, List[tuple]]:
    """Rank 0's ((location name, in host memory, pinned), [(edge type, size, has perm,
    features)]), after checking every rank's description (raised on every rank alike)."""
    first = everyone[0]
    if first is None:
        raise ValueError('share_graph_store: rank 0 must pass its GraphStore (the other ranks may pass None)')
    kind, in_host, _ = first[0]
    if not in_host:
        raise ValueError(f"share_graph_store: the graph must be in host memory ('pinned' or 'cpu'), not {kind!r}; "
                         "a 'cuda' graph lives in each GPU's own memory")
    differ = [r for r, theirs in enumerate(everyone) if theirs is not None and theirs != first]
    if differ:
        raise ValueError(f'share_graph_store: the stores of ranks {differ} hold another graph than rank 0 '
                         f'(location, edge types, sizes, edge counts or per-edge tensors differ); every process '
                         f'must pass the same graph, or None')
    return first[0], [(edge_type, size, has_perm, features) for edge_type, size, _, has_perm, features in first[1]]
