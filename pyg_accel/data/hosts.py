"""Which processes share a host: the layout a sharded table follows (blocks on the
processes of one host are read in place, blocks on other hosts are fetched through
torch.distributed).

torchrun numbers the processes of a job host by host (``RANK = GROUP_RANK *
LOCAL_WORLD_SIZE + LOCAL_RANK``), so a host is a contiguous run of ranks. The run's
length comes from, in order: the ``ranks_per_host`` argument,
``PYG_ACCEL_RANKS_PER_HOST`` (one machine declaring *virtual* hosts, e.g. 2 hosts × 2
processes on a 4-GPU machine, or 2 × 2 CPU processes with gloo, to exercise the
cross-host path), torchrun's ``LOCAL_WORLD_SIZE``, and otherwise the whole group (one
host).
"""
from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Any, List, Optional

import torch.distributed as dist

__all__ = ['HostLayout', 'new_exchange_group']


def new_exchange_group(ranks: Optional[List[int]] = None):
    """A process group over ``ranks`` (global ranks; default: the whole world) for data
    exchanges: its own communicator, so that its traffic never queues behind the
    collectives of other groups (a training step's gradient all-reduce), and on NCCL a
    high-priority stream, so that an exchange overlapped with compute gets SMs as soon as
    blocks retire. Collective: every process calls it, in the same order, as
    ``torch.distributed.new_group``. ``None`` without an initialised process group."""
    if not dist.is_initialized():
        return None
    if dist.get_backend() == 'nccl':
        options = dist.ProcessGroupNCCL.Options()
        options.is_high_priority_stream = True
        return dist.new_group(ranks, pg_options=options)
    return dist.new_group(ranks)


@dataclass(frozen=True)
class HostLayout:
    """The hosts of a process group.

    Attributes:
        group: the whole group (``None``: the default one, or no distributed run).
        rank, world_size: this process's rank in ``group`` and the group's size.
        ranks_per_host: processes per host (ranks ``h * ranks_per_host`` onwards are host ``h``).
        host_group: the processes of this host (``group`` itself with one host).
        exchange_group: the processes of ``group`` in a communicator of their own, which
            the cross-host reads exchange ids and rows over (``group`` itself with one
            host). A pipelined loader's exchange for the next batch then does not queue
            behind the collectives the caller runs on ``group`` (the training step's
            gradient all-reduce) on NCCL's one stream per communicator.
    """
    group: Any
    rank: int
    world_size: int
    ranks_per_host: int
    host_group: Any
    exchange_group: Any = None

    @classmethod
    def of(cls, group=None, ranks_per_host: Optional[int] = None) -> 'HostLayout':
        """The layout of ``group`` (collective with several hosts: every process of the
        default group makes the per-host groups, in the same order)."""
        if not (dist.is_available() and dist.is_initialized()):
            return cls(group, 0, 1, 1, group, group)
        rank, world_size = dist.get_rank(group), dist.get_world_size(group)
        per_host = _ranks_per_host(ranks_per_host, world_size)
        _check_torchrun_numbering(group, rank, per_host, ranks_per_host)
        if per_host == world_size:
            return cls(group, rank, world_size, per_host, group, group)
        global_ranks = [dist.get_global_rank(group, r) if group is not None else r for r in range(world_size)]
        host_groups = [dist.new_group(global_ranks[h * per_host:(h + 1) * per_host])
                       for h in range(world_size // per_host)]
        return cls(group, rank, world_size, per_host, host_groups[rank // per_host], new_exchange_group(global_ranks))

    @property
    def num_hosts(self) -> int:
        """How many hosts the group spans."""
        return self.world_size // self.ranks_per_host

    @property
    def host(self) -> int:
        """This process's host."""
        return self.rank // self.ranks_per_host

    def ranks_of(self, host: int) -> List[int]:
        """The ranks (in ``group``) of host ``host``."""
        return list(range(host * self.ranks_per_host, (host + 1) * self.ranks_per_host))


def _check_torchrun_numbering(group, rank: int, per_host: int, given: Optional[int]) -> None:
    """With real hosts (torchrun's ``LOCAL_WORLD_SIZE``, no override), this process's host
    (torchrun's ``GROUP_RANK``) must be the run of ranks it falls in."""
    if given is not None or os.environ.get('PYG_ACCEL_RANKS_PER_HOST') or group is not None:
        return
    node = os.environ.get('GROUP_RANK')
    if node is not None and os.environ.get('LOCAL_WORLD_SIZE') and node.isdigit() and int(node) != rank // per_host:
        raise ValueError(f'pyg_accel: rank {rank} runs on host GROUP_RANK={node}, but hosts of {per_host} processes '
                         f'numbered in order would put it on host {rank // per_host}; launch with torchrun, which '
                         'numbers ranks host by host, or pass ranks_per_host=')


def _ranks_per_host(given: Optional[int], world_size: int) -> int:
    source, value = 'ranks_per_host', given
    if value is None and os.environ.get('PYG_ACCEL_RANKS_PER_HOST'):
        source, value = 'PYG_ACCEL_RANKS_PER_HOST', os.environ['PYG_ACCEL_RANKS_PER_HOST']
    elif value is None and os.environ.get('LOCAL_WORLD_SIZE'):
        source, value = 'LOCAL_WORLD_SIZE', os.environ['LOCAL_WORLD_SIZE']
    if value is None:
        return world_size
    try:
        value = int(value) if not isinstance(value, bool) and isinstance(value, (numbers.Integral, str)) else None
    except ValueError:
        value = None
    if value is None or value < 1 or world_size % value:
        got = given if source == 'ranks_per_host' else os.environ[source]
        raise ValueError(f'pyg_accel: {source} must be a positive int that divides the {world_size} processes '
                         f'into hosts of equal size, got {got!r}')
    return value
