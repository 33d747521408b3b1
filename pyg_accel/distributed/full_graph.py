"""Full-graph training across the GPUs of one host (1-D partitioning by node blocks, on NCCL).

The nodes, optionally renumbered for locality first (:mod:`pyg_accel.data.reorder`), are
split into one contiguous block per process, balanced by edges. A process owns its
block's rows (features, activations, labels) and the edges that end in it. The sources
of those edges that other processes own are its *halo*. Before every layer,
:meth:`GraphPartition.exchange` appends the halo's current rows to the local ones with
one all-to-all (only the rows a peer needs travel, each once), and its backward sends
the halo's gradients back to their owners, which add them up (in
``GraphPartition.exchange_dtype``, e.g. bfloat16, if set: half the bytes of fp32 rows,
each row rounded once on the way). Every layer then runs as
a bipartite layer from ``num_local + num_halo`` source rows to ``num_local`` targets on
the local edges, with our SpMM layers; gradients of the (replicated) weights are
averaged by DDP. Sums and means over a node's in-edges see every in-edge, so a model
gives the same outputs and gradients as on one GPU.

    rank, world_size, device = pyg_accel.distributed.setup()
    part, local = partition_data(data, reorder='cluster', device=device)
    h = local.x
    for conv in convs:                                   # e.g. SAGEConv / GATConv
        h = conv((part.exchange(h), h), part.edge_index)
    # GCNConv: edge_index, weight = part.gcn_norm(); conv(part.exchange(h), edge_index, weight)[:part.num_local]
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch_geometric.data import Data

from ..data import hosts
from ..data.reorder import _check_edge_index, node_order, reorder_data

__all__ = ['GraphPartition', 'ExchangeTimer', 'balanced_bounds', 'partition_graph', 'partition_data',
           'new_exchange_group', 'EXCHANGE_DTYPES']

# The dtypes halo rows can travel in (GraphPartition.exchange_dtype), by the names the
# scripts take; 'fp32' leaves the rows in their own dtype.
EXCHANGE_DTYPES = {'fp32': None, 'bf16': torch.bfloat16, 'fp16': torch.float16}


def balanced_bounds(edge_index: Tensor, num_nodes: int, world_size: int, balance: str = 'edges') -> List[int]:
    """``world_size + 1`` bounds of contiguous node blocks with near-equal work:
    ``'edges'`` balances in-edges + nodes (the SpMM's work), ``'nodes'`` the node count."""
    if balance not in ('edges', 'nodes'):
        raise ValueError(f"balance must be 'edges' or 'nodes', got {balance!r}")
    if world_size < 1:
        raise ValueError(f'world_size must be positive, got {world_size}')
    weight = torch.ones(num_nodes, dtype=torch.float64, device=edge_index.device)
    if balance == 'edges':
        weight += torch.bincount(edge_index[1].long(), minlength=num_nodes).double()
    prefix = torch.cat([weight.new_zeros(1), torch.cumsum(weight, 0)])  # prefix[b]: the first b nodes' work
    targets = prefix[-1] * torch.arange(1, world_size, dtype=torch.float64, device=prefix.device) / world_size
    above = torch.searchsorted(prefix, targets).clamp(max=num_nodes)  # the first bound reaching each target
    below = (above - 1).clamp(min=0)
    nearer = torch.where(prefix[above] - targets <= targets - prefix[below], above, below)
    return [0, *nearer.tolist(), num_nodes]


class ExchangeTimer:
    """Time spent in halo exchanges (forward and backward), without a host sync per
    exchange: CUDA events on the GPU, read once by :meth:`seconds`."""

    def __init__(self) -> None:
        self._spans: list = []

    def start(self, device: torch.device):
        """Marks the start of an exchange on ``device`` (a CUDA event, or the host clock)."""
        if device.type == 'cuda':
            begin = torch.cuda.Event(enable_timing=True)
            begin.record()
            return begin
        return time.perf_counter()

    def stop(self, begin) -> None:
        """Marks the end of the exchange that ``start`` returned ``begin`` for."""
        if isinstance(begin, float):
            self._spans.append(time.perf_counter() - begin)
        else:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._spans.append((begin, end))

    def seconds(self) -> float:
        """Total seconds of the exchanges since the last call (synchronises with them)."""
        total = 0.0
        for span in self._spans:
            if isinstance(span, float):
                total += span
            else:
                span[1].synchronize()
                total += span[0].elapsed_time(span[1]) / 1e3
        self._spans.clear()
        return total


class _HaloExchange(torch.autograd.Function):
    """``[num_local, *] -> [num_local + num_halo, *]``; backward returns the halo's
    gradients to their owners and adds them into the rows they came from. Rows travel in
    ``part.wire_dtype`` of theirs."""

    @staticmethod
    def forward(ctx, x: Tensor, part: 'GraphPartition') -> Tensor:
        ctx.part = part
        begin = part.timer.start(x.device) if part.timer is not None else None
        wire = part.wire_dtype(x.dtype)
        send = x.index_select(0, part.send_index).to(wire)
        out = x.new_empty((part.num_local + part.num_halo, *x.shape[1:]))
        out[:part.num_local].copy_(x)
        # the halo rows land in place, after the local ones (no concatenation pass)
        recv = out[part.num_local:] if wire == x.dtype else x.new_empty((part.num_halo, *x.shape[1:]), dtype=wire)
        dist.all_to_all_single(recv, send, part.recv_counts, part.send_counts, group=part.group)
        if wire != x.dtype:
            out[part.num_local:].copy_(recv)
        if begin is not None:
            part.timer.stop(begin)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        part = ctx.part
        begin = part.timer.start(grad.device) if part.timer is not None else None
        grad = grad.contiguous()
        wire = part.wire_dtype(grad.dtype)
        back = grad.new_empty((part.send_index.numel(), *grad.shape[1:]), dtype=wire)
        dist.all_to_all_single(back, grad[part.num_local:].to(wire), part.send_counts, part.recv_counts,
                               group=part.group)
        out = grad[:part.num_local].index_add(0, part.send_index, back.to(grad.dtype))
        if begin is not None:
            part.timer.stop(begin)
        return out, None


def _exchange_bits(mask: Tensor, part: 'GraphPartition') -> Tensor:
    """:meth:`GraphPartition.exchange` of a boolean ``[num_local, *]`` tensor, each row
    packed into bytes of 8 entries for the all-to-all (a 100-wide row: 13 bytes)."""
    shape = mask.shape[1:]
    width = shape.numel()
    padded = -(-width // 8) * 8
    flat = mask.reshape(mask.size(0), width)
    if padded != width:
        flat = torch.cat([flat, flat.new_zeros(flat.size(0), padded - width)], 1)
    shifts = torch.arange(8, device=mask.device, dtype=torch.uint8)
    packed = (flat.view(-1, padded // 8, 8).to(torch.uint8) << shifts).sum(-1, dtype=torch.uint8)
    send = packed.index_select(0, part.send_index)
    recv = packed.new_empty((part.num_halo, padded // 8))
    dist.all_to_all_single(recv, send, part.recv_counts, part.send_counts, group=part.group)
    halo = ((recv.unsqueeze(-1) >> shifts) & 1).view(part.num_halo, padded)[:, :width].bool()
    return torch.cat([mask, halo.view(part.num_halo, *shape)])


@dataclass(eq=False)
class GraphPartition:
    """One process's block of a graph partitioned by contiguous node ranges.

    Local ids: ``[0, num_local)`` are the block's nodes (global ids ``lo + i``),
    ``[num_local, num_local + num_halo)`` the halo (global ids ``halo_ids``, grouped by
    owner, ascending).

    Attributes:
        edge_index: ``[2, E_local]`` the edges ending in the block, ``[src; dst]`` in local
            ids (``dst < num_local``), sorted by destination then source.
        edge_id: ``[E_local]`` their positions in the global ``edge_index``.
        halo_ids: ``[num_halo]`` global ids of the halo rows.
        send_index: ``[S]`` local rows this process sends, grouped by receiving rank.
        send_counts / recv_counts: rows sent to / received from each rank.
        ext_degree: ``[num_local + num_halo]`` (weighted) in-degree of every local and halo
            node in the whole graph, self-loops excluded; ``ext_loop_weight`` the weight of
            one of its self-loops (NaN: none), ``ext_loop_sum`` their sum. They make
            :meth:`gcn_norm` global.
        edge_weight: ``[E_local]`` the local edges' weights, if the graph had any.
        exchange_dtype: the floating dtype halo rows and their gradients travel in when it
            is narrower than theirs (``torch.bfloat16`` or ``torch.float16``: half the
            bytes of fp32 rows, each row rounded once on the way; sums and the local rows
            stay in the layer's dtype); ``None`` (default): their own, exact. Every
            process of the group must use the same.
    """
    rank: int
    world_size: int
    bounds: List[int]
    edge_index: Tensor
    edge_id: Tensor
    halo_ids: Tensor
    send_index: Tensor
    send_counts: List[int]
    recv_counts: List[int]
    ext_degree: Tensor
    ext_loop_weight: Tensor
    ext_loop_sum: Tensor
    edge_weight: Optional[Tensor] = None
    group: Optional[object] = field(default=None, repr=False)
    timer: Optional[ExchangeTimer] = field(default=None, repr=False)  # set one to time the exchanges
    exchange_dtype: Optional[torch.dtype] = None

    def __post_init__(self) -> None:
        self.wire_dtype(torch.float32)  # (checks exchange_dtype)

    @property
    def lo(self) -> int:
        """The block's first global node id."""
        return self.bounds[self.rank]

    @property
    def hi(self) -> int:
        """One past the block's last global node id."""
        return self.bounds[self.rank + 1]

    @property
    def num_local(self) -> int:
        """The number of nodes in the block."""
        return self.hi - self.lo

    @property
    def num_halo(self) -> int:
        """The number of halo rows: other blocks' nodes with an edge into this one."""
        return self.halo_ids.numel()

    def wire_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype rows of ``dtype`` travel in: :attr:`exchange_dtype` if it is a
        narrower floating type than a floating ``dtype``, else ``dtype`` itself."""
        wire = self.exchange_dtype
        if wire is None:
            return dtype
        if not isinstance(wire, torch.dtype) or not wire.is_floating_point:
            raise ValueError(f'GraphPartition: exchange_dtype must be None or a floating dtype (e.g. torch.bfloat16), '
                             f'got {wire!r}')
        narrower = dtype.is_floating_point and wire.itemsize < dtype.itemsize
        return wire if narrower else dtype

    def local(self, tensor: Tensor) -> Tensor:
        """This block's rows of a global node-level tensor (``[N, *] -> [num_local, *]``)."""
        if tensor.size(0) != self.bounds[-1]:
            raise ValueError(f'expected a node-level tensor of {self.bounds[-1]} rows, got {tuple(tensor.shape)}')
        return tensor[self.lo:self.hi]

    def exchange(self, x: Tensor) -> Tensor:
        """``x`` (``[num_local, *]``, this block's rows) followed by the halo's rows from
        their owners: ``[num_local + num_halo, *]``. Differentiable; every process of the
        group must call it (same order, same trailing shape and dtype). Boolean rows (e.g.
        a dropout mask) travel packed, one bit per entry."""
        if x.dim() == 0 or x.size(0) != self.num_local:
            raise ValueError(f'exchange: expected {self.num_local} local rows, got {tuple(x.shape)}')
        if self.world_size == 1:
            return x
        if x.dtype == torch.bool:
            return _exchange_bits(x, self)
        return _HaloExchange.apply(x, self)

    def ext_ids(self) -> Tensor:
        """``[num_local + num_halo]`` the global ids of :meth:`exchange`'s rows."""
        return torch.cat([torch.arange(self.lo, self.hi, device=self.halo_ids.device), self.halo_ids])

    def gcn_norm(self, improved: bool = False, add_self_loops: bool = True) -> Tuple[Tensor, Tensor]:
        """``(edge_index, edge_weight)`` normalised as PyG's ``gcn_norm`` normalises the
        whole graph (``D^-1/2 (A + I) D^-1/2`` with global degrees), for
        ``GCNConv(normalize=False)`` on ``exchange``'s output. Self-loops are those of
        PyG's ``add_remaining_self_loops`` (fill value 1, or 2 if ``improved``; like
        PyG's ``gcn_norm``, ``improved`` only changes graphs with edge weights)."""
        src, dst = self.edge_index
        weight = self.edge_weight if self.edge_weight is not None else torch.ones(
            src.numel(), device=src.device, dtype=torch.float)
        degree = self.ext_degree.to(weight.dtype)
        if not add_self_loops:  # the graph's own self-loops count, as in PyG
            degree = degree + self.ext_loop_sum.to(weight.dtype)
        else:  # one self-loop per node: the graph's (one of them), else the fill value
            fill = 2.0 if improved and self.edge_weight is not None else 1.0  # (PyG: unweighted ignores it)
            loop = torch.nan_to_num(self.ext_loop_weight.to(weight.dtype), nan=fill)
            degree = degree + loop
            keep = src != dst
            loops = torch.arange(self.num_local, device=src.device, dtype=src.dtype)
            src, dst = torch.cat([src[keep], loops]), torch.cat([dst[keep], loops])
            weight = torch.cat([weight[keep], loop[:self.num_local]])
        inv_sqrt = degree.pow(-0.5).masked_fill(degree == 0, 0.0)
        return torch.stack([src, dst]), inv_sqrt[src] * weight * inv_sqrt[dst]


def new_exchange_group():
    """A process group over the whole world for halo exchanges (every process must call
    it, in the same order, as for ``torch.distributed.new_group``): its own communicator,
    so that halo traffic never queues behind DDP's gradient all-reduces; on NCCL with a
    high-priority stream, so that an exchange overlapped with an SpMM
    (:class:`~pyg_accel.distributed.HaloGraph`) gets SMs as soon as blocks retire.
    ``None`` without an initialised process group."""
    return hosts.new_exchange_group()


def partition_graph(edge_index: Tensor, num_nodes: int, rank: int, world_size: int,
                    bounds: Optional[List[int]] = None, balance: str = 'edges',
                    edge_weight: Optional[Tensor] = None, group=None,
                    device: Optional[Union[str, torch.device]] = None,
                    exchange_dtype: Optional[torch.dtype] = None) -> GraphPartition:
    """Rank ``rank``'s :class:`GraphPartition` of the graph (every rank computes its own
    from the same global ``edge_index``; no communication).

    Args:
        edge_index: ``[2, E]`` global edges (``src -> dst``), int32/int64.
        num_nodes: the number of nodes.
        rank, world_size: this process and how many share the graph.
        bounds: ``world_size + 1`` block bounds (default: :func:`balanced_bounds`).
        balance: ``'edges'`` or ``'nodes'`` for the default bounds.
        edge_weight: optional ``[E]`` weights (for :meth:`GraphPartition.gcn_norm`).
        group: the process group of the exchange (default: the whole world's default
            group; :func:`new_exchange_group` gives one that DDP's traffic does not share).
        device: where the partition's tensors live (default: ``edge_index``'s device).
        exchange_dtype: the dtype halo rows travel in (see :class:`GraphPartition`).
    """
    _check_edge_index(edge_index, num_nodes)
    if not 0 <= rank < world_size:
        raise ValueError(f'rank {rank} is not in a world of {world_size}')
    if edge_weight is not None and (edge_weight.dim() != 1 or edge_weight.numel() != edge_index.size(1)):
        raise ValueError(f'edge_weight must be [{edge_index.size(1)}], got {tuple(edge_weight.shape)}')
    bounds = balanced_bounds(edge_index, num_nodes, world_size, balance) if bounds is None else [int(b) for b in bounds]
    if len(bounds) != world_size + 1 or bounds[0] != 0 or bounds[-1] != num_nodes or any(
            a > b for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f'bounds must be {world_size + 1} rising values from 0 to {num_nodes}, got {bounds}')
    lo, hi = bounds[rank], bounds[rank + 1]
    src_all, dst_all = edge_index[0].long(), edge_index[1].long()
    weight_all = edge_weight if edge_weight is not None else torch.ones(
        src_all.numel(), dtype=torch.float, device=src_all.device)
    mine = lambda ids: (ids >= lo) & (ids < hi)  # noqa: E731

    # The edges ending here in local ids, sorted by (destination, source).
    edge_id = mine(dst_all).nonzero().view(-1)
    src, dst = src_all[edge_id], dst_all[edge_id] - lo
    remote = ~mine(src)
    halo_ids = torch.unique(src[remote])
    local_src = src - lo
    local_src[remote] = (hi - lo) + torch.searchsorted(halo_ids, src[remote])
    order = torch.argsort(dst * max(hi - lo + halo_ids.numel(), 1) + local_src)
    edge_id, local_src, dst = edge_id[order], local_src[order], dst[order]
    bounds_t = torch.tensor(bounds, device=src.device)
    recv_counts = torch.bincount(torch.bucketize(halo_ids, bounds_t, right=True) - 1, minlength=world_size)

    # What every other block needs from this one: sources here of edges ending there.
    out = mine(src_all) & ~mine(dst_all)
    owner = torch.bucketize(dst_all[out], bounds_t, right=True) - 1
    keys = torch.unique(owner * max(num_nodes, 1) + src_all[out])
    send_owner = keys // max(num_nodes, 1)
    send_index = keys % max(num_nodes, 1) - lo
    send_counts = torch.bincount(send_owner, minlength=world_size)

    # Global (weighted) in-degrees without self-loops, and self-loop weights, of the ext nodes.
    loop = src_all == dst_all
    degree = torch.zeros(num_nodes, dtype=weight_all.dtype, device=src_all.device)
    degree.index_add_(0, dst_all[~loop], weight_all[~loop])
    loop_sum = torch.zeros(num_nodes, dtype=weight_all.dtype, device=src_all.device)
    loop_sum.index_add_(0, src_all[loop], weight_all[loop])
    loop_weight = torch.full((num_nodes,), float('nan'), dtype=weight_all.dtype, device=src_all.device)
    loop_weight[src_all[loop]] = weight_all[loop]  # (one loop's weight, as add_remaining_self_loops keeps)
    ext = torch.cat([torch.arange(lo, hi, device=src_all.device), halo_ids])

    device = torch.device(device) if device is not None else edge_index.device
    return GraphPartition(
        rank=rank, world_size=world_size, bounds=bounds,
        edge_index=torch.stack([local_src, dst]).to(device), edge_id=edge_id.to(device),
        halo_ids=halo_ids.to(device), send_index=send_index.to(device),
        send_counts=send_counts.tolist(), recv_counts=recv_counts.tolist(),
        ext_degree=degree[ext].to(device), ext_loop_weight=loop_weight[ext].to(device),
        ext_loop_sum=loop_sum[ext].to(device),
        edge_weight=None if edge_weight is None else edge_weight[edge_id].to(device), group=group,
        exchange_dtype=exchange_dtype)


def partition_data(data: Data, group=None, reorder: Optional[str] = None, balance: str = 'edges',
                   device: Optional[Union[str, torch.device]] = None,
                   edge_weight: Optional[str] = None,
                   exchange_dtype: Optional[torch.dtype] = None) -> Tuple[GraphPartition, Data]:
    """This process's partition of a whole graph and its block of the node data.

    Every process of ``group`` calls it with the same ``data`` (e.g. each loads the
    dataset). ``reorder`` (``'cluster'``, ``'rcm'`` or ``'degree'``) renumbers the nodes
    first, the same way on every process (:func:`pyg_accel.data.reorder.node_order`);
    ``'cluster'`` puts most neighbours in the same block, so fewer rows cross between GPUs.
    ``exchange_dtype`` (e.g. ``torch.bfloat16``) makes the halo rows travel narrower (see
    :class:`GraphPartition`).

    Returns ``(partition, local)``: ``local`` holds this block's rows of every node-level
    tensor of ``data`` (``x``, ``y``, masks, ...) on ``device``, and ``global_id``, their
    ids in ``data``'s original numbering.
    """
    group = new_exchange_group() if group is None else group
    rank = dist.get_rank(group) if dist.is_initialized() else 0
    world_size = dist.get_world_size(group) if dist.is_initialized() else 1
    num_nodes = data.num_nodes
    global_id = torch.arange(num_nodes, device=data.edge_index.device)
    if reorder is not None:
        order = node_order(data.edge_index, num_nodes, reorder)
        data, global_id = reorder_data(data, order), order
    weight = None if edge_weight is None else data[edge_weight]
    part = partition_graph(data.edge_index, num_nodes, rank, world_size, balance=balance, edge_weight=weight,
                           group=group, device=device, exchange_dtype=exchange_dtype)
    device = part.edge_index.device
    local = Data(num_nodes=part.num_local, global_id=part.local(global_id).to(device))
    for key, value in data.items():
        if (key != 'edge_index' and isinstance(value, Tensor) and data.is_node_attr(key) and value.dim() > 0
                and value.size(0) == num_nodes):
            local[key] = part.local(value).to(device)
    return part, local
