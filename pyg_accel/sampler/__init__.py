"""Neighbour samplers for PyG's loaders."""
from .neighbor_sampler import NeighborSampler

__all__ = ['NeighborSampler']
