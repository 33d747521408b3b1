"""Per-edge tensors of pyg_accel's :class:`~pyg_accel.data.GraphStore` (``edge_attr``,
``edge_weight``, edge times, ...) attached to sampled batches.

PyG's loaders over a remote backend fetch node features only (its
``filter_custom_store`` leaves edge features as a TODO), while over a ``Data`` they
slice every edge-level tensor by ``e_id``. pyg_accel's loaders do the latter for our
stores, so ``GATConv(edge_dim=...)`` or a weighted ``GCNConv`` sees the same batch
either way.
"""
from __future__ import annotations

import warnings
from typing import Dict, Optional, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from ..data import GraphStore
from ..data.host_memory import pinned_copy
from ..ops.gather import gather, uva_view
from ..ops.sparse import take_rows

__all__ = ['attach_edge_features', 'csc_positions']


def attach_edge_features(batch: Union[Data, HeteroData], graph_store: GraphStore,
                         positions: Union[Tensor, Dict[tuple, Tensor]]) -> Union[Data, HeteroData]:
    """Sets every per-edge tensor of ``graph_store`` on ``batch`` at the sampled edges.

    Args:
        batch: the loader's batch (its ``edge_index`` per edge type).
        graph_store: where the per-edge tensors are kept, in CSC order.
        positions: ``[E']`` CSC position of each of the batch's edges (a dict per edge
            type for heterogeneous batches), as the sampler returns them.
    """
    if isinstance(batch, HeteroData):
        for edge_type, where in positions.items():
            if where is not None:
                _attach(batch[edge_type], graph_store, edge_type, where)
    elif positions is not None:
        _attach(batch, graph_store, None, positions)
    return batch


def _attach(store, graph_store: GraphStore, edge_type: Optional[tuple], where: Tensor) -> None:
    where = where.to(torch.long)
    for name in graph_store.edge_feature_names(edge_type):
        if name in store:  # a node feature of the same name (a Data could not hold both): kept
            warnings.warn(f'pyg_accel loader: the per-edge tensor {name!r} is not attached, the batch already has '
                          f'a node attribute of that name')
            continue
        feature = graph_store.get_edge_feature(name, edge_type)
        if where.is_cuda and feature.is_cpu and feature.is_pinned():  # the GPU reads the rows in place
            store[name] = gather(feature, where, check_bounds=False)
        else:  # (pageable host tensors are gathered on the host, then moved to the batch)
            store[name] = take_rows(feature, where.to(feature.device)).to(where.device)


def csc_positions(batch: Union[Data, HeteroData], graph_store: GraphStore,
                  inverse_perms: Dict[Optional[tuple], Tensor]) -> Union[Tensor, Dict[tuple, Tensor]]:
    """CSC positions of a batch's edges, from their input edge ids (``e_id``).

    ``inverse_perms`` keeps each edge type's inverse permutation (input id -> CSC
    position, ``[E]``) between calls; it is built on first use.
    """
    hetero = isinstance(batch, HeteroData)
    stores = [(et, batch[et]) for et in batch.edge_types] if hetero else [(None, batch)]
    positions: Dict[Optional[tuple], Tensor] = {}
    for edge_type, store in stores:
        if 'e_id' not in store:
            continue
        perm = graph_store.graph(edge_type).perm
        if perm is None:  # stored in input order
            positions[edge_type] = store.e_id
            continue
        if edge_type not in inverse_perms:
            inverse = torch.empty_like(perm)
            inverse[perm] = torch.arange(perm.numel(), device=perm.device, dtype=perm.dtype)
            if perm.is_cpu and perm.is_pinned() and store.e_id.is_cuda:  # a pinned graph sampled on the GPU
                inverse = uva_view(pinned_copy(inverse), store.e_id.device)
            inverse_perms[edge_type] = inverse
        inverse = inverse_perms[edge_type]
        positions[edge_type] = inverse[store.e_id.to(inverse.device)]
    return positions if hetero else positions.get(None)
