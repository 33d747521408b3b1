"""Multi-hop neighbour sampling over a CSC graph (``torch.ops.pyg_accel.neighbor_sample``)."""
from __future__ import annotations

import numbers
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .. import _build
from ._library import check_cuda_built, ops
from ._pending import Pending
from ._marks import record, recorded, version

__all__ = ['SampledSubgraph', 'HeteroSampledSubgraph', 'neighbor_sample', 'hetero_neighbor_sample',
           'start_neighbor_sample', 'start_hetero_neighbor_sample',
           'cuda_sampling_available', 'clear_sampler_cache', 'last_sample_wait_us', 'sort_columns_by_time',
           'columns_sorted_by_time']

EdgeType = Tuple[str, str, str]


class SampledSubgraph(NamedTuple):
    """What :func:`neighbor_sample` returns (PyG's ``SamplerOutput`` fields).

    Attributes:
        node: ``[N']`` global ids: the seeds first (input order), then each hop's new nodes.
        row: ``[E']`` local id of each sampled neighbour (edge source).
        col: ``[E']`` local id of the node it was sampled for (edge destination), in
            non-decreasing order: each node's edges are consecutive, in node order.
        edge: ``[E']`` CSC position of each sampled edge.
        batch: ``[N']`` seed index of every node (``disjoint=True``), else ``None``.
        num_sampled_nodes: nodes added per hop, hop 0 being the seeds.
        num_sampled_edges: edges sampled per hop.
    """
    node: Tensor
    row: Tensor
    col: Tensor
    edge: Tensor
    batch: Optional[Tensor]
    num_sampled_nodes: List[int]
    num_sampled_edges: List[int]


def cuda_sampling_available() -> bool:
    """Whether CUDA graphs can be sampled on the GPU (the CUDA ops were built)."""
    global _CUDA_SAMPLING
    if _CUDA_SAMPLING is None:
        _build.load_library()
        _CUDA_SAMPLING = torch._C._dispatch_has_kernel_for_dispatch_key('pyg_accel::neighbor_sample', 'CUDA')
    return _CUDA_SAMPLING


_CUDA_SAMPLING: Optional[bool] = None


def clear_sampler_cache() -> int:
    """Frees the CUDA samplers' cached plans, homogeneous and heterogeneous (their
    buffers, CUDA graphs and the spare output tensors each keeps for its next call;
    each holds memory sized by its batch's upper bounds, up to eight plans of each kind
    are kept) and returns how many were dropped. Plans are rebuilt on demand; plans of
    freed graphs go by themselves."""
    if not cuda_sampling_available():
        return 0
    return int(ops().clear_sampler_plans())


def last_sample_wait_us() -> float:
    """Microseconds (wall clock) the calling thread waited for the GPU in its last CUDA
    :func:`neighbor_sample` or :func:`hetero_neighbor_sample` call; 0.0 before any, or
    without the CUDA sampler. A call's host time, what it costs the CPU beyond waiting
    for the sample, is its wall time minus this."""
    if not cuda_sampling_available():
        return 0.0
    return float(ops().sampler_last_wait_us())


_LONG_SLOT = 'long_copy'


def _graph_long(t: Tensor) -> Tensor:
    """``t`` as int64. A GPU int32 graph tensor's copy is kept while the tensor lives and
    is unmodified (by its version counter), so repeated calls reuse it (and the CUDA
    sampler's plan keyed by it). A CPU tensor is converted per call: numpy can write
    into it without bumping its version, and a kept copy would then go stale."""
    if t.dtype == torch.int64:
        return t
    if version(t) is None or not t.is_cuda:  # (inference tensors have no version counter)
        return t.long()
    hit = recorded(t, _LONG_SLOT)
    if hit is None:
        hit = t.long()
        record(t, _LONG_SLOT, hit)
    return hit


_INDEX_DTYPES = (torch.int32, torch.int64)


def _same_device(a: Tensor, b: Tensor) -> bool:
    """Whether two CPU/CUDA tensors live on one device (without building device objects,
    which this per-batch check would otherwise do twice)."""
    return a.is_cuda == b.is_cuda and a.get_device() == b.get_device()


def _check_graph(colptr: Tensor, row: Tensor) -> None:
    if isinstance(colptr, Tensor) and isinstance(row, Tensor) and colptr.dtype in _INDEX_DTYPES and \
            row.dtype in _INDEX_DTYPES and colptr.dim() == 1 and row.dim() == 1 and colptr.numel() >= 1 and \
            _same_device(colptr, row):
        return  # (the common case, in one test: this runs per edge type per batch)
    for name, t in (('colptr', colptr), ('row', row)):
        if not isinstance(t, Tensor):
            raise TypeError(f'neighbor_sample: {name} must be a tensor, got {type(t).__name__}')
        if t.dtype not in _INDEX_DTYPES or t.dim() != 1:
            raise TypeError(f'neighbor_sample: {name} must be a 1-D int64/int32 tensor, got {t.dtype} '
                            f'of shape {tuple(t.shape)}')
    if colptr.numel() < 1:
        raise ValueError('neighbor_sample: colptr must have num_nodes + 1 entries')
    if not _same_device(colptr, row):
        raise ValueError(f'neighbor_sample: colptr and row are on {colptr.device} and {row.device}')


def _check_fanouts(num_neighbors: Sequence[int]) -> List[int]:
    if type(num_neighbors) is list and all(type(k) is int and -1 <= k <= _MAX_FANOUT for k in num_neighbors):
        return num_neighbors  # the common case, checked cheaply
    if isinstance(num_neighbors, (int, Tensor, str)) or not isinstance(num_neighbors, Sequence) or \
            not all(isinstance(k, int) and not isinstance(k, bool) for k in num_neighbors):
        raise TypeError(f'neighbor_sample: num_neighbors must be a list of ints (one per hop), got {num_neighbors!r}')
    bad = [k for k in num_neighbors if k < -1]
    if bad:
        raise ValueError(f'neighbor_sample: fanouts must be >= 0 or -1 (all neighbours), got {bad}')
    huge = [k for k in num_neighbors if k > _MAX_FANOUT]
    if huge:
        raise ValueError(f'neighbor_sample: fanouts must be at most {_MAX_FANOUT} (use -1 for all neighbours), got '
                         f'{huge}')
    return list(num_neighbors)


_MAX_FANOUT = 2 ** 31 - 1  # (with replacement a node draws `fanout` times: room is made for them up front)


def _check_modes(op: str, strategy, temporal: bool, disjoint: bool, weighted: bool) -> None:
    """The rules of the sampling modes for either op, as the kernels' own check
    (``check_sampling_modes`` in csrc/sampling/sampler_inputs.cpp) with the argument
    named: temporal_strategy 'uniform' or 'last'; temporal sampling needs disjoint
    trees; no weighted temporal sampling."""
    if strategy not in ('uniform', 'last'):
        raise ValueError(f"{op}: temporal_strategy must be 'uniform' or 'last', got {strategy!r}")
    if temporal and not disjoint:
        raise ValueError(f'{op}: temporal sampling needs disjoint=True (one tree per seed and time)')
    if temporal and weighted:
        raise ValueError(f'{op}: weighted temporal sampling is not supported')


def _bias_tensor(op: str, name: str, t: Any, size: int, floating: bool, device: torch.device) -> Tensor:
    """``t`` as a sampling input of ``op`` (a bias or a seed time): a float tensor
    (``floating``) or an integer one of shape ``[size]``, on ``device``; else a TypeError
    naming ``name``."""
    ok_dtype = isinstance(t, Tensor) and (t.is_floating_point() if floating else
                                          not (t.is_floating_point() or t.dtype == torch.bool))
    if not ok_dtype or t.shape != (size,):
        raise TypeError(f"{op}: {name} must be {'a float' if floating else 'an integer'} tensor of shape [{size}], "
                        f'got {getattr(t, "dtype", type(t).__name__)} {tuple(getattr(t, "shape", ()))}')
    return t.to(device)


def _check_times(node_time, edge_time, seed_time, seed, num_nodes, num_edges, disjoint, strategy, edge_weight,
                 device):
    """Validated (node_time, edge_time, seed_time) on ``device`` for temporal sampling."""
    temporal = node_time is not None or edge_time is not None
    _check_modes('neighbor_sample', strategy, temporal, disjoint, edge_weight is not None)
    if not temporal:
        if seed_time is not None:
            raise ValueError('neighbor_sample: seed_time was given without node_time or edge_time')
        return None, None, None
    node_time, edge_time, seed_time = (
        None if t is None else _bias_tensor('neighbor_sample', name, t, n, False, device)
        for name, t, n in (('node_time', node_time, num_nodes), ('edge_time', edge_time, num_edges),
                           ('seed_time', seed_time, seed.numel())))
    if seed_time is None:
        if node_time is None:
            raise ValueError('neighbor_sample: temporal sampling with edge times needs seed_time')
        seed_time = node_time[seed]
    return node_time, edge_time, seed_time


def sort_columns_by_time(colptr: Tensor, row: Tensor, node_time: Optional[Tensor] = None,
                         edge_time: Optional[Tensor] = None) -> Tuple[Tensor, Optional[Tensor], Tensor]:
    """Each column of a CSC graph in ascending time, as stock PyG sorts a temporal graph.

    An edge's time is the later of its own (``edge_time``, ``[E]``) and its source
    node's (``node_time[row]``, ``node_time`` ``[N]``), of those given; ties keep the
    CSC order. Then ``temporal_strategy='last'`` takes the most recent eligible edges,
    and the eligible edges of each column are a prefix of it, which both sampling
    kernels find by binary search instead of a scan (they check the order once per
    graph: :func:`columns_sorted_by_time`).

    Returns:
        ``(row, edge_time, perm)``: the sorted ``row`` ``[E]``, the sorted ``edge_time``
        (or ``None``) and ``perm`` ``[E]``, the old CSC position of each new one
        (``colptr`` is unchanged).
    """
    if node_time is None and edge_time is None:
        raise ValueError('sort_columns_by_time: give node_time or edge_time')
    key = None if node_time is None else node_time.to(row.device)[row]
    if edge_time is not None:
        edge_time = edge_time.to(row.device)
        key = edge_time if key is None else torch.maximum(key, edge_time)
    col = torch.repeat_interleave(torch.arange(colptr.numel() - 1, device=row.device),
                                  (colptr[1:] - colptr[:-1]).to(row.device), output_size=row.numel())
    key = key.long()
    lo, hi = (int(v) for v in torch.aminmax(key)) if key.numel() else (0, 0)
    if (colptr.numel() - 1) * (hi - lo + 1) < 2 ** 62:  # one stable sort of (column, time), as PyG does
        order = torch.sort(col * (hi - lo + 1) + (key - lo), stable=True).indices
    else:  # (the combined key would overflow: by time, then stably by column)
        order = torch.sort(key, stable=True).indices
        order = order[torch.sort(col[order], stable=True).indices]
    return row[order], None if edge_time is None else edge_time[order], order


def columns_sorted_by_time(colptr: Tensor, row: Tensor, node_time: Optional[Tensor] = None,
                           edge_time: Optional[Tensor] = None) -> bool:
    """Whether each column of a CSC graph is in ascending time, as
    :func:`sort_columns_by_time` leaves it (an edge's time: the later of
    ``node_time[row]`` and ``edge_time``, of those given; ``False`` if neither is).
    Then both sampling kernels find a node's eligible neighbours by binary search
    instead of a scan (they check this once per graph, by the tensors' identity).
    Raises an ``IndexError`` if a row is outside ``node_time``."""
    _check_graph(colptr, row)
    move = lambda t: None if t is None else t.to(row.device)  # noqa: E731
    return bool(ops().columns_sorted_by_time(colptr, row, move(node_time), move(edge_time)))


def neighbor_sample(colptr: Tensor, row: Tensor, seed: Tensor, num_neighbors: Sequence[int],
                    replace: bool = False, disjoint: bool = False, random_seed: Optional[int] = None,
                    edge_weight: Optional[Tensor] = None, node_time: Optional[Tensor] = None,
                    edge_time: Optional[Tensor] = None, seed_time: Optional[Tensor] = None,
                    temporal_strategy: str = 'uniform') -> SampledSubgraph:
    """Samples ``len(num_neighbors)`` hops of in-neighbours of ``seed`` (PyG semantics).

    Args:
        colptr: ``[N + 1]`` CSC column pointers; row: ``[E]`` source node of each edge.
        seed: ``[B]`` int64/int32 node ids to start from.
        num_neighbors: fanout per hop; ``-1`` takes all neighbours.
        replace: draw with replacement (``fanout`` draws per node with neighbours).
        disjoint: one tree per seed (a node reached from two seeds appears twice).
        random_seed: keys the counter-based RNG; the same value gives the same sample.
            ``None`` draws one from torch's default generator (``torch.manual_seed``
            makes runs reproducible).
        edge_weight: ``[E]`` non-negative weights in CSC order: neighbours are drawn with
            probability proportional to their weight (without replacement: one at a time,
            renormalising; zero-weight edges are never drawn). float32 and float64 are
            read as given (the same sample either way); other float dtypes are widened
            to float64 per call.
        node_time, edge_time: ``[N]`` / ``[E]`` (CSC order) integer times for temporal
            sampling (needs ``disjoint=True``): in seed ``i``'s tree only neighbours with
            ``node_time <= seed_time[i]`` over edges with ``edge_time <= seed_time[i]``
            are drawn.
        seed_time: ``[B]`` integer time of each seed (default: ``node_time[seed]``).
        temporal_strategy: ``'uniform'`` draws among the eligible neighbours, ``'last'``
            takes the last eligible ones in CSC order (sort each column by time:
            :func:`sort_columns_by_time`; both kernels then find each node's
            eligible neighbours by binary search rather than a scan, for either
            strategy, with the same result).

    Without replacement every node gets ``min(fanout, degree)`` distinct neighbours,
    each with probability ``fanout / degree``; the work is proportional to the fanout.

    On the GPU all hops run without a host synchronisation; the counts are read once
    at the end. Each (graph, batch size, fanouts, options) gets a sampling plan with
    preallocated buffers, replayed as one CUDA graph from its second batch on, so keep
    the graph tensors (int64) and the batch size fixed for the fast path. Set
    ``PYG_ACCEL_SAMPLER_CUDA_GRAPHS=0`` to run the kernels without graph capture.
    """
    args, finish = _neighbor_sample_call(colptr, row, seed, num_neighbors, replace, disjoint, random_seed,
                                         edge_weight, node_time, edge_time, seed_time, temporal_strategy)
    return finish(ops().neighbor_sample.default(*args))  # (the overload itself: no resolution per call)


def start_neighbor_sample(colptr: Tensor, row: Tensor, seed: Tensor, num_neighbors: Sequence[int],
                          replace: bool = False, disjoint: bool = False, random_seed: Optional[int] = None,
                          edge_weight: Optional[Tensor] = None, node_time: Optional[Tensor] = None,
                          edge_time: Optional[Tensor] = None, seed_time: Optional[Tensor] = None,
                          temporal_strategy: str = 'uniform') -> Pending[SampledSubgraph]:
    """:func:`neighbor_sample`, started: on a GPU this returns once the sample's kernels
    are enqueued (its random seed drawn, its arguments checked), and ``.result()`` waits
    for the per-hop counts that size the outputs and returns the sample. Host work done
    in between (e.g. enqueueing a training step) overlaps the sampling instead of waiting
    behind it. Started samples may be read in any order; a start on the configuration
    (graph, batch size, fanouts, options) of an unread one first waits for that one. On
    the CPU the sample is made at once."""
    args, finish = _neighbor_sample_call(colptr, row, seed, num_neighbors, replace, disjoint, random_seed,
                                         edge_weight, node_time, edge_time, seed_time, temporal_strategy)
    started = ops().neighbor_sample_start.default(*args)
    return Pending(lambda: finish(started.finish()))


def _neighbor_sample_call(colptr, row, seed, num_neighbors, replace, disjoint, random_seed, edge_weight, node_time,
                          edge_time, seed_time, temporal_strategy) -> Tuple[tuple, Callable[[Any], SampledSubgraph]]:
    """neighbor_sample's arguments checked: the op's arguments, and what makes its outputs a
    :class:`SampledSubgraph`."""
    _check_graph(colptr, row)
    if not isinstance(seed, Tensor) or seed.dtype not in _INDEX_DTYPES or seed.dim() != 1:
        raise TypeError(f'neighbor_sample: seed must be a 1-D int64/int32 tensor, got '
                        f'{getattr(seed, "dtype", type(seed).__name__)}')
    fanouts = _check_fanouts(num_neighbors)
    on_gpu = colptr.is_cuda
    if on_gpu and not cuda_sampling_available():
        check_cuda_built(colptr.device)
    if not _same_device(seed, colptr):
        seed = seed.to(colptr.device)
    device = colptr.device
    num_nodes = colptr.numel() - 1
    # On the GPU the op checks the seeds on the device and raises after the sample
    # (no extra sync), and checks the graph and weights once per sampling plan.
    if seed.numel() and not on_gpu:
        lo, hi = (int(v) for v in torch.aminmax(seed))
        if lo < 0 or hi >= num_nodes:
            raise IndexError(f'neighbor_sample: seed {lo if lo < 0 else hi} is out of range for {num_nodes} nodes')
    if edge_weight is not None:  # (the CPU op checks each weight it reads, the CUDA op once per plan)
        edge_weight = _bias_tensor('neighbor_sample', 'edge_weight', edge_weight, row.numel(), True, device)
    if node_time is not None or edge_time is not None or seed_time is not None or temporal_strategy != 'uniform':
        node_time, edge_time, seed_time = _check_times(node_time, edge_time, seed_time, seed, num_nodes,
                                                       row.numel(), disjoint, temporal_strategy, edge_weight, device)
    # (random_seed None: the op draws one from torch's default generator)
    args = (_graph_long(colptr), _graph_long(row), seed if seed.dtype == torch.int64 else seed.long(), fanouts,
            bool(replace), bool(disjoint), None if random_seed is None else int(random_seed),
            _bias_inputs([edge_weight], [edge_time]), _bias_inputs([node_time]), seed_time, temporal_strategy)

    def finish(out) -> SampledSubgraph:
        node, row_out, col_out, edge, batch, nodes_per_hop, edges_per_hop = out
        return SampledSubgraph(node, row_out, col_out, edge, batch if disjoint else None,
                               nodes_per_hop.tolist(), edges_per_hop.tolist())  # one host read, after all hops
    return args, finish


def _bias_inputs(*per_input: List[Optional[Tensor]]) -> List[Optional[Tensor]]:
    """The ops' ``edge_bias`` or ``node_bias`` list (order: csrc/sampling/sampler_inputs.h):
    given each input's per-type tensors (``edge_bias``: edge_weight, edge_time; ``node_bias``:
    node_time), type by type, each type's inputs in that order; empty when none is given."""
    if all(t is None for values in per_input for t in values):
        return []
    return [t for per_type in zip(*per_input) for t in per_type]


def _fake_neighbor_sample(colptr, row, seed, num_neighbors, replace, disjoint, random_seed, edge_bias, node_bias,
                          seed_time=None, temporal_strategy='uniform'):
    ctx = torch.library.get_ctx()
    num_nodes, num_edges = ctx.new_dynamic_size(), ctx.new_dynamic_size()
    new = lambda n: colptr.new_empty((n,), dtype=torch.long)  # noqa: E731
    counts = lambda n: torch.empty((n,), dtype=torch.long, device='cpu')  # noqa: E731  (host-side counts)
    return (new(num_nodes), new(num_edges), new(num_edges), new(num_edges), new(num_nodes if disjoint else 0),
            counts(len(num_neighbors) + 1), counts(len(num_neighbors)))


def _fake_hetero_neighbor_sample(num_nodes, src_type, dst_type, colptr, row, seed, num_neighbors, num_hops, replace,
                                 disjoint, random_seed, edge_bias, node_bias, seed_time, temporal_strategy):
    ctx = torch.library.get_ctx()
    like = colptr[0] if colptr else seed[0]
    new = lambda n: like.new_empty((n,), dtype=torch.long)  # noqa: E731
    node_sizes = [ctx.new_dynamic_size() for _ in num_nodes]
    num_edges = ctx.new_dynamic_size()  # (all edge types' edges in one tensor)
    return ([new(n) for n in node_sizes], [new(n) for n in node_sizes] if disjoint else [],
            new(num_edges), new(num_edges), new(num_edges),
            torch.empty((len(num_nodes), num_hops + 1), dtype=torch.long, device='cpu'),  # (host-side counts)
            torch.empty((len(src_type), num_hops), dtype=torch.long, device='cpu'))


@_build.on_load
def _register() -> None:
    torch.library.register_fake('pyg_accel::neighbor_sample')(_fake_neighbor_sample)
    torch.library.register_fake('pyg_accel::hetero_neighbor_sample')(_fake_hetero_neighbor_sample)


def _check_nonnegative(weight: Tensor, what: str) -> None:
    """Raises unless every weight is finite and non-negative. A sampler passes the same
    weights with every batch, so a tensor that passed is marked (until it changes) and
    not scanned again."""
    if not weight.numel() or recorded(weight, '_pyg_accel_weights_ok'):
        return
    if not bool(torch.isfinite(weight).all() & (weight >= 0).all()):
        raise ValueError(f'{what} must be finite and non-negative')
    record(weight, '_pyg_accel_weights_ok', True)


def _per_type(values: Optional[Dict], types: List, sizes: Dict, name: str, device: torch.device,
              floating: bool = False) -> List[Optional[Tensor]]:
    """``values[type]`` for each type as a validated tensor of ``[sizes[type]]`` on
    ``device`` (``None`` where absent): float weights (finite, non-negative) or integer
    times."""
    if not values:
        return [None] * len(types)
    unknown = [key for key in values if key not in sizes]
    if unknown:
        raise ValueError(f'hetero_neighbor_sample: {name} has unknown types {unknown}')
    out: List[Optional[Tensor]] = []
    for key in types:
        t = values.get(key)
        if t is None:
            out.append(None)
            continue
        t = _bias_tensor('hetero_neighbor_sample', f'{name} of {key}', t, sizes[key], floating, device)
        if floating and t.is_cuda:  # (the CPU op checks each weight it reads)
            _check_nonnegative(t, f'hetero_neighbor_sample: {name} of {key}')
        out.append(t)
    return out


_NO_SEEDS: Dict[torch.device, Tensor] = {}


def _no_seeds(device: torch.device) -> Tensor:
    """An empty int64 seed tensor on ``device``, made once (a node type without seeds
    would otherwise cost an allocation and a copy per call)."""
    empty = _NO_SEEDS.get(device)
    if empty is None:
        empty = _NO_SEEDS[device] = torch.empty(0, dtype=torch.long, device=device)
    return empty


class HeteroSampledSubgraph(NamedTuple):
    """What :func:`hetero_neighbor_sample` returns: PyG's ``HeteroSamplerOutput`` fields,
    keyed by node type (``node``, ``batch``, ``num_sampled_nodes``) or edge type
    (``row``, ``col``, ``edge``, ``num_sampled_edges``)."""
    node: Dict[str, Tensor]
    row: Dict[EdgeType, Tensor]
    col: Dict[EdgeType, Tensor]
    edge: Dict[EdgeType, Tensor]
    batch: Optional[Dict[str, Tensor]]
    num_sampled_nodes: Dict[str, List[int]]
    num_sampled_edges: Dict[EdgeType, List[int]]


def hetero_neighbor_sample(colptr_dict: Dict[EdgeType, Tensor], row_dict: Dict[EdgeType, Tensor],
                           seed_dict: Dict[str, Tensor], num_neighbors: Dict[EdgeType, Sequence[int]],
                           num_nodes: Dict[str, int], replace: bool = False, disjoint: bool = False,
                           random_seed: Optional[int] = None,
                           edge_weight: Optional[Dict[EdgeType, Tensor]] = None,
                           node_time: Optional[Dict[str, Tensor]] = None,
                           edge_time: Optional[Dict[EdgeType, Tensor]] = None,
                           seed_time: Optional[Dict[str, Tensor]] = None,
                           temporal_strategy: str = 'uniform') -> HeteroSampledSubgraph:
    """Multi-hop sampling over a heterogeneous graph (PyG semantics), on the graph's device.

    Args:
        colptr_dict, row_dict: CSC per edge type ``(src, rel, dst)``; ``colptr`` has
            ``num_nodes[dst] + 1`` entries, ``row`` holds ``src`` ids.
        seed_dict: seed ids per node type (types without seeds may be left out).
        num_neighbors: fanouts per hop for every edge type (equal lengths).
        num_nodes: node count per node type.
        replace, disjoint, random_seed: as in :func:`neighbor_sample`.
        edge_weight: ``[E_r]`` weights (CSC order) of the edge types drawn by weight;
            the others are drawn uniformly.
        node_time, edge_time: ``[N_t]`` node times per node type and ``[E_r]`` edge times
            (CSC order) per edge type, for temporal sampling (needs ``disjoint=True``):
            a tree only reaches neighbours and edges not later than its seed's time.
            Types without times are always eligible.
        seed_time: ``[B_t]`` time of each seed, per seed type (default: the seeds' node
            times).
        temporal_strategy: ``'uniform'`` or ``'last'``, as in :func:`neighbor_sample`.

    Each hop expands, edge type by edge type, the nodes that each type gained in the
    previous hop; node ids are deduplicated per type across hops.

    A graph on a GPU is sampled there (CUDA kernel, the same sample as the CPU kernel
    for the same ``random_seed``): all hops without a host synchronisation, one read of
    the counts at the end. Weights are read as given when float32 or float64 (others are
    converted per call).
    """
    args, finish = _hetero_neighbor_sample_call(colptr_dict, row_dict, seed_dict, num_neighbors, num_nodes, replace,
                                                disjoint, random_seed, edge_weight, node_time, edge_time, seed_time,
                                                temporal_strategy)
    return finish(ops().hetero_neighbor_sample.default(*args))


def start_hetero_neighbor_sample(colptr_dict: Dict[EdgeType, Tensor], row_dict: Dict[EdgeType, Tensor],
                                 seed_dict: Dict[str, Tensor], num_neighbors: Dict[EdgeType, Sequence[int]],
                                 num_nodes: Dict[str, int], replace: bool = False, disjoint: bool = False,
                                 random_seed: Optional[int] = None,
                                 edge_weight: Optional[Dict[EdgeType, Tensor]] = None,
                                 node_time: Optional[Dict[str, Tensor]] = None,
                                 edge_time: Optional[Dict[EdgeType, Tensor]] = None,
                                 seed_time: Optional[Dict[str, Tensor]] = None,
                                 temporal_strategy: str = 'uniform') -> Pending[HeteroSampledSubgraph]:
    """:func:`hetero_neighbor_sample`, started (as :func:`start_neighbor_sample`)."""
    args, finish = _hetero_neighbor_sample_call(colptr_dict, row_dict, seed_dict, num_neighbors, num_nodes, replace,
                                                disjoint, random_seed, edge_weight, node_time, edge_time, seed_time,
                                                temporal_strategy)
    started = ops().hetero_neighbor_sample_start.default(*args)
    return Pending(lambda: finish(started.finish()))


def _hetero_neighbor_sample_call(colptr_dict, row_dict, seed_dict, num_neighbors, num_nodes, replace, disjoint,
                                 random_seed, edge_weight, node_time, edge_time, seed_time, temporal_strategy
                                 ) -> Tuple[tuple, Callable[[Any], HeteroSampledSubgraph]]:
    """hetero_neighbor_sample's arguments checked: the op's arguments, and what makes its
    outputs a :class:`HeteroSampledSubgraph`."""
    edge_types = list(colptr_dict)
    if set(row_dict) != set(edge_types) or set(num_neighbors) != set(edge_types):
        raise ValueError('hetero_neighbor_sample: colptr_dict, row_dict and num_neighbors must share edge types')
    node_types = list(num_nodes)
    bad_counts = {t: n for t, n in num_nodes.items()
                  if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0}
    if bad_counts:
        raise ValueError(f'hetero_neighbor_sample: num_nodes must map node types to ints >= 0, got {bad_counts}')
    unknown = [et for et in edge_types if et[0] not in num_nodes or et[-1] not in num_nodes] + \
        [t for t in seed_dict if t not in num_nodes]
    if unknown:
        raise ValueError(f'hetero_neighbor_sample: unknown node types in {unknown} (num_nodes has {node_types})')
    # One pass over the edge types (this runs per batch): fanouts, graph tensors, their device.
    type_index = {t: i for i, t in enumerate(node_types)}
    fanouts, colptrs, rows, src_type, dst_type = [], [], [], [], []
    for et in edge_types:
        fanouts.append(_check_fanouts(num_neighbors[et]))
        colptr, row = colptr_dict[et], row_dict[et]
        _check_graph(colptr, row)
        colptrs.append(colptr)
        rows.append(row)
        src_type.append(type_index[et[0]])
        dst_type.append(type_index[et[-1]])
    num_hops = len(fanouts[0]) if edge_types else 0
    if any(len(f) != num_hops for f in fanouts):
        raise ValueError(f'hetero_neighbor_sample: every edge type needs {num_hops} fanouts, got '
                         f'{ {et: len(f) for et, f in zip(edge_types, fanouts)} }')
    if len({c.get_device() for c in colptrs}) > 1:  # (-1: CPU; a CUDA tensor's index)
        raise ValueError(f'hetero_neighbor_sample: every edge type must be on one device, got '
                         f'{sorted({str(c.device) for c in colptrs})}')
    device = colptrs[0].device if edge_types else torch.device('cpu')
    if device.type == 'cuda' and not cuda_sampling_available():
        check_cuda_built(device)
    seeds = []
    for t in node_types:
        s = seed_dict.get(t)
        if s is None:
            seeds.append(_no_seeds(device))
            continue
        if not isinstance(s, Tensor) or s.dtype not in (torch.int32, torch.int64) or s.dim() != 1:
            raise TypeError(f'hetero_neighbor_sample: seeds of {t!r} must be a 1-D integer tensor')
        seeds.append(s.to(device, torch.long, non_blocking=True))  # (a pageable copy then waits for nothing)
    biased = bool(edge_weight or node_time or edge_time or seed_time)
    if biased:
        sizes = {et: row.numel() for et, row in zip(edge_types, rows)}
        weights = _per_type(edge_weight, edge_types, sizes, 'edge_weight', device, floating=True)
        node_times = _per_type(node_time, node_types, num_nodes, 'node_time', device)
        edge_times = _per_type(edge_time, edge_types, sizes, 'edge_time', device)
        seed_times = _per_type(seed_time, node_types, {t: s.numel() for t, s in zip(node_types, seeds)},
                               'seed_time', device)
    else:  # (the common case: no per-type inputs to read)
        weights = edge_times = [None] * len(edge_types)
        node_times = seed_times = [None] * len(node_types)
    temporal = biased and any(t is not None for t in node_times + edge_times)
    _check_modes('hetero_neighbor_sample', temporal_strategy, temporal, disjoint,
                 biased and any(w is not None for w in weights))
    if temporal:
        for i, t in enumerate(node_types):  # seed times default to the seeds' node times
            if seed_times[i] is None and seeds[i].numel():
                if node_times[i] is None:
                    raise ValueError(f'hetero_neighbor_sample: seeds of {t!r} need seed_time (the type has no '
                                     'node_time)')
                seed_times[i] = node_times[i][seeds[i]]
    elif biased and any(t is not None for t in seed_times):
        raise ValueError('hetero_neighbor_sample: seed_time was given without node_time or edge_time')
    args = ([int(num_nodes[t]) for t in node_types], src_type, dst_type, [_graph_long(c) for c in colptrs],
            [_graph_long(r) for r in rows], seeds, [k for f in fanouts for k in f], num_hops, bool(replace),
            bool(disjoint), None if random_seed is None else int(random_seed),
            _bias_inputs(weights, edge_times), _bias_inputs(node_times), seed_times, temporal_strategy)

    def finish(out) -> HeteroSampledSubgraph:
        node, batch, row, col, edge, nodes_per_hop, edges_per_hop = out
        nodes_per_hop, edges_per_hop = nodes_per_hop.tolist(), edges_per_hop.tolist()
        # (the op returns the edges of all edge types in one tensor each, type after type)
        edges_per_type = [sum(counts) for counts in edges_per_hop]
        # (split_with_sizes: the binding itself, half Tensor.split's host time)
        row, col, edge = (dict(zip(edge_types, t.split_with_sizes(edges_per_type))) for t in (row, col, edge))
        return HeteroSampledSubgraph(
            dict(zip(node_types, node)), row, col, edge,
            dict(zip(node_types, batch)) if disjoint else None,
            dict(zip(node_types, nodes_per_hop)), dict(zip(edge_types, edges_per_hop)))
    return args, finish
