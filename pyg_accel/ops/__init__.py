"""Typed wrappers over ``torch.ops.pyg_accel.*``: input validation, autograd and fake
(meta) kernels for ``torch.compile``. One module per op family."""
from .gather import gather, host_register, multi_gather, sharded_gather, uva_view
from .sparse import CooGraph, edge_softmax, sddmm, spmm, spmm_add_
from .reorder import rcm_order
from .padding import pad_hop_edges, pad_hop_rows, pad_hops
from ._pending import Pending
from .sampling import (HeteroSampledSubgraph, SampledSubgraph, clear_sampler_cache, cuda_sampling_available,
                       columns_sorted_by_time, hetero_neighbor_sample, last_sample_wait_us, neighbor_sample,
                       sort_columns_by_time, start_hetero_neighbor_sample, start_neighbor_sample)

__all__ = ['gather', 'multi_gather', 'sharded_gather', 'uva_view', 'host_register', 'neighbor_sample',
           'SampledSubgraph', 'cuda_sampling_available', 'hetero_neighbor_sample', 'HeteroSampledSubgraph', 'CooGraph',
           'spmm', 'spmm_add_', 'sddmm', 'edge_softmax', 'clear_sampler_cache', 'last_sample_wait_us', 'rcm_order',
           'sort_columns_by_time', 'columns_sorted_by_time', 'pad_hops', 'pad_hop_rows', 'pad_hop_edges',
           'start_neighbor_sample', 'start_hetero_neighbor_sample', 'Pending']
