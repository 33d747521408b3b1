"""The seed indices of each batch, drawn as tensors instead of through
``torch.utils.data.DataLoader``'s per-item machinery.

PyG's loaders are DataLoaders over ``range(num_seeds)``: with ``num_workers=0`` the
DataLoader pulls every seed position as a Python int from its sampler, lists them and
``collate_fn`` turns the list back into a tensor. For a batch of 1024 seeds that is
~0.5 ms of host time (an H100 machine's CPU), a third of what producing a GPU batch
costs. When the loader uses the DataLoader's default samplers, :func:`index_batches`
draws the same permutation with the same random numbers in one call and splits it, so
iteration yields the same batches as PyG's, faster.
"""
from __future__ import annotations

from typing import Iterator, Optional

import torch
from torch import Tensor
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

__all__ = ['index_batches']


def index_batches(loader: DataLoader, device: Optional[torch.device] = None) -> Optional[Iterator[Tensor]]:
    """Seed positions per batch as int64 tensors, in the order ``loader``'s own sampler
    would give them, or ``None`` when the loader needs the DataLoader's machinery
    (workers, memory pinning, a custom or with-replacement sampler). With ``device``
    the epoch's order is moved there once and each batch's positions are a slice of it."""
    batch_sampler = loader.batch_sampler
    if loader.num_workers != 0 or loader.pin_memory or type(batch_sampler) is not BatchSampler:
        return None
    sampler = batch_sampler.sampler
    if type(sampler) is RandomSampler:
        if sampler.replacement or sampler._num_samples is not None:
            return None
    elif type(sampler) is not SequentialSampler:
        return None
    # the DataLoader's iterator draws a base seed for its workers even without workers
    torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
    return _split(sampler, len(loader.dataset), batch_sampler.batch_size, batch_sampler.drop_last, device)


def _split(sampler, num_items: int, batch_size: int, drop_last: bool,
           device: Optional[torch.device]) -> Iterator[Tensor]:
    if isinstance(sampler, RandomSampler):  # RandomSampler.__iter__'s random numbers, one permutation
        generator = sampler.generator
        if generator is None:
            generator = torch.Generator()
            generator.manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
        order = torch.randperm(num_items, generator=generator)
    else:
        order = torch.arange(num_items)
    if device is not None:
        order = order.to(device, non_blocking=True)
    for chunk in order.split(batch_size):  # (an empty order splits into one empty chunk: no batch, as PyG)
        if chunk.numel() == 0 or (drop_last and chunk.numel() < batch_size):
            break
        yield chunk
    if isinstance(sampler, RandomSampler) and sampler.generator is not None:
        torch.randperm(num_items, generator=sampler.generator)  # RandomSampler draws its (empty) remainder too
