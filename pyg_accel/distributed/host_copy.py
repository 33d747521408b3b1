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

import torch
from torch import Tensor

from ..data.graph_store import GraphStore
from ..ops import host_register
from .shards import _all_gather, _share_cpu, _world

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


def share_graph_store(graph_store: GraphStore, group=None) -> GraphStore:
    """Collective over ``group``: every process passes its :class:`GraphStore` holding
    the same graph in ``'pinned'`` (or ``'cpu'``) memory; afterwards every store holds
    views of one copy of rank 0's tensors in shared host memory (page-locked for
    ``'pinned'``), and the processes' own copies are freed once nothing else holds
    them. Returns ``graph_store``."""
    if not isinstance(graph_store, GraphStore):
        raise TypeError(f"share_graph_store: expected pyg_accel's GraphStore, got {type(graph_store).__name__}")
    kind = graph_store.location.kind
    if kind not in ('pinned', 'cpu'):
        raise ValueError(f"share_graph_store: the graph must be in host memory ('pinned' or 'cpu'), not {kind!r}; "
                         "a 'cuda' graph lives in each GPU's own memory")
    _check_same_graph(graph_store, group)
    return graph_store.replace_tensors_(lambda t: share_host_tensor(t, group, pin=kind == 'pinned'))


def _check_same_graph(graph_store: GraphStore, group) -> None:
    """Raises on every rank (so that none waits in a collective the others skip) unless
    every rank's store holds the same edge types, sizes, edge counts and per-edge
    tensors: the tensors are shared one by one, in one order, by one collective each."""
    rank, world_size = _world(group)
    if world_size == 1:
        return
    mine = [(repr(attr.edge_type), tuple(attr.size), graph_store.graph(attr.edge_type).num_edges,
             graph_store.graph(attr.edge_type).perm is None,
             [(name, str(graph_store.get_edge_feature(name, attr.edge_type).dtype))
              for name in graph_store.edge_feature_names(attr.edge_type)])
            for attr in sorted(graph_store.get_all_edge_attrs(), key=lambda a: repr(a.edge_type))]
    everyone = _all_gather(mine, group, world_size)
    differ = [r for r, theirs in enumerate(everyone) if theirs != everyone[0]]
    if differ:
        raise ValueError(f'share_graph_store: the stores of ranks {differ} hold another graph than rank 0 '
                         f'(edge types, sizes, edge counts or per-edge tensors differ); every process must pass '
                         f'the same graph')
