"""A PyG ``FeatureStore`` whose batched reads are one gather launch per index.

Each tensor is held by a storage tier (:mod:`pyg_accel.data.tiers`) that the store's
:class:`~pyg_accel.data.Location` makes: GPU memory, pinned host memory read by the GPU,
CPU memory, or row blocks sharded across the GPUs of a host and read peer-to-peer; a
row cache is a tier in front of another. The store asks its tiers and never tests what
they are. Keys are
PyG's ``(group_name, attr_name)``: ``group_name`` is ``None`` for homogeneous graphs and
a node-type string for heterogeneous ones.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch_geometric.data
from torch import Tensor
from torch_geometric.data import TensorAttr
from torch_geometric.data.feature_store import _FieldStatus

from ._rows import slice_ids
from .hosts import HostLayout
from .location import Location, LocationLike, resolve_location
from .row_cache import RowCache
from .tiers import Tier, read_together, tier_for_block

_UNSET = _FieldStatus.UNSET

__all__ = ['FeatureStore']

Key = Tuple[Optional[object], str]


def _as_tensor(value: object, what: str) -> Tensor:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, Tensor):
        return value
    raise TypeError(f'{what}: expected a torch.Tensor or numpy.ndarray, got {type(value).__name__}')


def _index_tensor(index: object, num_rows: int) -> Tensor:
    """A 1-D int64/int32 tensor of row ids from a tensor, array, boolean mask or list."""
    index = _as_tensor(np.asarray(index) if isinstance(index, (list, tuple)) else index, 'index')
    if index.dtype == torch.bool:
        if index.dim() != 1 or index.numel() != num_rows:
            raise IndexError(f'a boolean mask index must have shape [{num_rows}], got {tuple(index.shape)}')
        return index.nonzero().view(-1)
    return index


class FeatureStore(torch_geometric.data.FeatureStore):
    r"""Node (and edge) features for PyG's loaders, held on the GPU, in pinned host
    memory, on the CPU, or sharded across the GPUs of a host.

    Args:
        location: ``'auto'`` (default), ``'cuda'``, ``'cuda:N'``, ``'pinned'``, ``'cpu'``
            or ``'sharded'``.
        device: the GPU for ``'cuda'`` / ``'pinned'`` / ``'sharded'`` (default: the
            current one); with ``'auto'``, where the store goes (``'cpu'`` or a GPU).
        group: the process group of a ``'sharded'`` store (default: the world).
        ranks_per_host: the processes per host of a ``'sharded'`` store's group
            (default: ``PYG_ACCEL_RANKS_PER_HOST``, else torchrun's ``LOCAL_WORLD_SIZE``,
            else all of them: :class:`~pyg_accel.data.hosts.HostLayout`).
        float_dtype: the dtype floating-point tensors are stored in (e.g.
            ``torch.bfloat16`` or ``torch.float16``: half the memory and half the bytes of
            every gather); reads return it. Integer and boolean tensors (labels, masks)
            are kept as they are. Default: as put. Models reading 16-bit features run
            under ``torch.autocast`` (or ``TrainStep(amp_dtype=...)``); every pyg_accel
            kernel accumulates in fp32.

    A ``'sharded'`` store is made and filled collectively: every process of ``group``
    puts the same tensors (e.g. loaded from the same files) and keeps a block of rows on
    its own GPU. On one host every read gathers the rows from all blocks, local and
    peer, in one launch (:class:`~pyg_accel.data.tiers.ShardedTier`). Across hosts, this
    host's blocks are read in place and the rest fetched from their owners through
    torch.distributed (:class:`~pyg_accel.data.tiers.HostShardedTier`): then every read
    is collective, every process reading as often as the others (as data-parallel
    training's loaders do, batch for batch). A row update through
    ``put_tensor(..., index=rows)`` must come from the process that holds the rows.

    Reads with a tensor index (a CPU or CUDA int32/int64 tensor, e.g. a sampler's
    ``node``) return tensors on :attr:`device`; ``multi_get_tensor`` serves all
    attributes that share one index with a single kernel launch.

    A tensor that already lives in the store's tier is kept without a copy (as PyG's own
    stores do), so a row update through ``put_tensor(..., index=rows)`` writes into it.

    Example::

        fs = FeatureStore('cuda')
        fs[None, 'x', None] = data.x          # [N, F]
        fs[None, 'y', None] = data.y          # [N]
        x, y = fs.multi_get_tensor([TensorAttr(None, 'x', idx), TensorAttr(None, 'y', idx)])
    """

    def __init__(self, location: LocationLike = 'auto', device=None, group=None,
                 float_dtype: Optional[torch.dtype] = None, ranks_per_host: Optional[int] = None) -> None:
        super().__init__()
        if float_dtype is not None and not (isinstance(float_dtype, torch.dtype) and float_dtype.is_floating_point):
            raise TypeError(f'FeatureStore: float_dtype must be a floating-point torch.dtype (e.g. torch.bfloat16) '
                            f'or None, got {float_dtype!r}')
        self.location: Location = resolve_location(location, device)
        self.group = group
        # (collective across several hosts: the per-host process groups)
        self.hosts: Optional[HostLayout] = HostLayout.of(group, ranks_per_host) if self.location.sharded else None
        self.float_dtype = float_dtype
        self._tiers: Dict[Key, Tier] = {}

    # GPU row cache ###########################################################

    def cache_rows(self, attr_name: str = 'x', group_name=None, rows: Optional[Tensor] = None,
                   num_rows: Optional[int] = None, memory_fraction: Optional[float] = None) -> RowCache:
        """Puts a cache of hot rows of a stored tensor in front of it: the rows ``rows``
        (hottest first; e.g. :func:`pyg_accel.data.rows_by_degree`) copied to the GPU.

        Meant for features in ``'pinned'`` host memory (graphs larger than the GPU):
        every read then serves cached rows from GPU memory and the rest from host
        memory in one gather launch. ``num_rows`` keeps the first rows of ``rows``;
        ``memory_fraction`` sizes the cache from the GPU's free memory instead. A whole
        new tensor put under the same name drops the cache; row updates reach it.
        Returns the :class:`RowCache` (``hit_rate()``, ``reset_stats()``)."""
        key = (group_name, attr_name)
        tier = self._tier(self._tensor_attr_cls.cast(group_name, attr_name)).uncached()
        if rows is None:
            raise ValueError('FeatureStore.cache_rows: give the rows to cache, hottest first '
                             '(pyg_accel.data.rows_by_degree(graph_store) ranks nodes by degree)')
        rows = torch.as_tensor(rows).reshape(-1)
        if memory_fraction is not None:
            if self.device.type != 'cuda' or not 0 < memory_fraction <= 1:
                raise ValueError('FeatureStore.cache_rows: memory_fraction in (0, 1] sizes a GPU cache')
            row_bytes = max(1, tier.shape[1:].numel() * tier.element_size())
            free = torch.cuda.mem_get_info(self.device)[0]
            num_rows = int(free * memory_fraction) // row_bytes
        if num_rows is not None:
            rows = rows[:max(0, int(num_rows))]
        cache = self._tiers[key] = RowCache(tier, rows, self.device)
        return cache

    def row_cache(self, attr_name: str = 'x', group_name=None) -> Optional[RowCache]:
        """The cache in front of a stored tensor, if any."""
        tier = self._tiers.get((group_name, attr_name))
        return tier if tier is not None and tier.uncached() is not tier else None

    def tier(self, attr_name: str = 'x', group_name=None) -> Tier:
        """The :class:`~pyg_accel.data.tiers.Tier` holding a stored tensor (its row cache,
        if it has one)."""
        return self._tier(self._tensor_attr_cls.cast(group_name, attr_name))

    @property
    def device(self) -> torch.device:
        """Where reads with an index land."""
        return self.location.device

    @staticmethod
    def _key(attr: TensorAttr) -> Key:
        return (attr.group_name, attr.attr_name)

    def _tier(self, attr: TensorAttr) -> Tier:
        key = self._key(attr)
        if key not in self._tiers:
            known = ', '.join(f'{g!r}/{a!r}' for g, a in self._tiers) or 'none'
            raise KeyError(f"FeatureStore: no tensor for group {attr.group_name!r}, attribute "
                           f"{attr.attr_name!r} (stored: {known})")
        return self._tiers[key]

    # Writes ##################################################################

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        tensor = _as_tensor(tensor, 'FeatureStore.put_tensor')
        if self.float_dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(self.float_dtype)  # (a new tensor when it converts: the caller's is left alone)
        if attr.index is not None and self._key(attr) not in self._tiers:
            tensor = self._rows_placed(tensor, attr.index)  # a new attribute put by rows (as PyG's stores take it)
            attr.index = None
        if attr.index is None:
            if tensor.dim() < 1:
                raise ValueError('FeatureStore.put_tensor: expected a tensor with a row dimension, got a 0-d tensor')
            # (a new tensor: any cache of the old one is dropped with it; sharded: collective)
            self._tiers[self._key(attr)] = self.location.tier(tensor, self.hosts)
            return True
        tier = self._tier(attr)  # a partial write updates rows of an existing tensor
        rows = self._row_ids(attr.index, tier.shape[0])
        if tensor.dtype != tier.dtype:
            raise TypeError(f'FeatureStore.put_tensor: dtype mismatch for {attr.attr_name!r}: the store '
                            f'holds {tier.dtype}, got {tensor.dtype}')
        if tuple(tensor.shape) != (rows.numel(), *tier.shape[1:]):
            raise ValueError(f'FeatureStore.put_tensor: expected shape {(rows.numel(), *tier.shape[1:])} '
                             f'for {rows.numel()} rows of {attr.attr_name!r}, got {tuple(tensor.shape)}')
        tier.write_rows(rows, tensor)
        return True

    def put_block(self, block: Tensor, num_rows: int, attr_name: str, group_name: Optional[str] = None) -> None:
        """Collective, for a sharded store: puts attribute ``attr_name`` of ``[num_rows, *]``
        from each process's own block of rows (``block``: rows ``bounds[rank]:bounds[rank +
        1]`` of :func:`~pyg_accel.distributed.row_partition` over the store's processes),
        for tables no process holds whole (generated or read block by block). The block
        moves to the store's device, in ``float_dtype`` if set, and is kept without a
        further copy."""
        if not self.location.sharded:
            raise ValueError(f"FeatureStore.put_block: a block of rows makes a sharded table; this store's "
                             f"location is {self.location}: use put_tensor")
        block = _as_tensor(block, 'FeatureStore.put_block')
        if self.float_dtype is not None and block.is_floating_point():
            block = block.to(self.float_dtype)
        attr = self._tensor_attr_cls.cast(group_name=group_name, attr_name=attr_name, index=None)
        try:
            self._tiers[self._key(attr)] = tier_for_block(self.location, block, num_rows, self.hosts)
        except (TypeError, ValueError) as error:
            raise type(error)(f'FeatureStore.put_block: {error}') from None

    def update_tensor(self, tensor, *args, **kwargs) -> bool:
        """PyG's ``update_tensor``: replaces the whole tensor (``index`` unset or ``None``)
        or, with an index, writes just those rows in place (a row cache follows). PyG's
        default removes and re-puts the attribute, which cannot work for a partial update."""
        attr = self._tensor_attr_cls.cast(*args, **kwargs)
        if attr.index is _UNSET:
            attr.index = None
        return self.put_tensor(tensor, attr)

    @staticmethod
    def _rows_placed(tensor: Tensor, index: object) -> Tensor:
        """A new attribute's tensor from ``tensor``'s rows put at the ids of ``index``
        (rows not named are zero): ``[max id + 1, *tensor.shape[1:]]``."""
        ids = torch.arange(tensor.shape[0])[index] if isinstance(index, slice) else \
            torch.tensor([index]) if isinstance(index, int) else _index_tensor(index, tensor.shape[0])
        if ids.dtype not in (torch.int32, torch.int64) or ids.dim() != 1 or ids.numel() != tensor.shape[0]:
            raise ValueError(f'FeatureStore.put_tensor: index must give one row id per row of the tensor '
                             f'({tensor.shape[0]}), got {ids.dtype} of shape {tuple(ids.shape)}')
        ids = ids.cpu().long()
        if ids.numel() and int(ids.min()) < 0:
            raise IndexError(f'FeatureStore.put_tensor: negative row id {int(ids.min())}')
        out = tensor.new_zeros((int(ids.max()) + 1 if ids.numel() else 0, *tensor.shape[1:]))
        out[ids.to(out.device)] = tensor
        return out

    @staticmethod
    def _row_ids(index: object, n: int) -> Tensor:
        """Validated int64 row ids (on the CPU) of a table of ``n`` rows, from a slice,
        int, mask or id tensor."""
        if isinstance(index, slice):
            return slice_ids(index, n)
        if isinstance(index, int):
            if not -n <= index < n:
                raise IndexError(f'FeatureStore: row {index} is out of range for {n} rows')
            return torch.tensor([index % n])
        ids = _index_tensor(index, n)
        if ids.dtype not in (torch.int32, torch.int64) or ids.dim() != 1:
            raise TypeError(f'FeatureStore: index must be a 1-D integer tensor, got {ids.dtype} '
                            f'of shape {tuple(ids.shape)}')
        ids = ids.cpu().long()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise IndexError(f'FeatureStore: index out of range for {n} rows '
                             f'(min {int(ids.min())}, max {int(ids.max())})')
        return ids

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        if attr.index is not None:
            raise ValueError('FeatureStore.remove_tensor removes whole tensors; leave index=None')
        return self._tiers.pop(self._key(attr), None) is not None

    # Reads ###################################################################

    def _get_tensor(self, attr: TensorAttr) -> Tensor:
        tier = self._tier(attr)
        index = attr.index
        if index is None:
            return tier.whole()
        if isinstance(index, slice):
            return tier.read_slice(index)
        if isinstance(index, int):
            return tier.read(self._row_ids(index, tier.shape[0]).to(self.device))
        return tier.read(self._gather_index(index, tier.shape[0]))

    def _gather_index(self, index: object, num_rows: int) -> Tensor:
        return _index_tensor(index, num_rows).to(self.device, non_blocking=True)

    def multi_get_tensor(self, attrs: List[TensorAttr], convert_type: bool = False) -> List[Tensor]:
        """PyG's ``multi_get_tensor`` (same checks and result) without its per-field
        ``is_set`` calls, which compare each field, index tensors included, against a
        sentinel: ~20 µs each, a tenth of a GPU batch's loading time."""
        attrs = [self._tensor_attr_cls.cast(attr) for attr in attrs]
        bad = [attr for attr in attrs if any(getattr(attr, f) is _UNSET for f in attr.__dataclass_fields__)]
        if bad:
            raise ValueError(f"The input TensorAttr(s) '{bad}' are not fully specified. Please fully-specify them "
                             f"by specifying all 'UNSET' fields")
        tensors = self._multi_get_tensor(attrs)
        if convert_type:
            tensors = [self._to_type(attr, tensor) for attr, tensor in zip(attrs, tensors)]
        return tensors

    def _multi_get_tensor(self, attrs: List[TensorAttr]) -> List[Tensor]:
        """All attributes that share one index tensor are read together
        (:func:`~pyg_accel.data.tiers.read_together`: one launch for the whole tables)."""
        out: List[Optional[Tensor]] = [None] * len(attrs)
        groups: Dict[int, List[int]] = {}
        for i, attr in enumerate(attrs):
            if isinstance(attr.index, (Tensor, np.ndarray)):
                groups.setdefault(id(attr.index), []).append(i)
            else:
                out[i] = self._get_tensor(attr)
        for members in groups.values():
            tiers = [self._tier(attrs[i]) for i in members]
            index = self._gather_index(attrs[members[0]].index, min(t.shape[0] for t in tiers))
            for i, rows in zip(members, read_together(tiers, index)):
                out[i] = rows
        return out

    def _get_tensor_size(self, attr: TensorAttr) -> Tuple[int, ...]:
        tier = self._tier(attr)
        if attr.index is None:
            return tuple(tier.shape)
        return (self._row_ids(attr.index, tier.shape[0]).numel(), *tier.shape[1:])  # (an int index: one row)

    def get_all_tensor_attrs(self) -> List[TensorAttr]:
        # Fresh objects every call: PyG's loader sets `.index` on them.
        return [self._tensor_attr_cls.cast(group, name) for group, name in self._tiers]

    def __len__(self) -> int:
        return len(self._tiers)

    def __repr__(self) -> str:
        items = ', '.join(f'{g!r}/{a}: {tuple(t.shape)} {str(t.dtype).replace("torch.", "")}'
                          for (g, a), t in self._tiers.items())
        return f'{type(self).__name__}(location={self.location}, {items})'
