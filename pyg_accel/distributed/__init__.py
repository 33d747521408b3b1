"""Several GPUs of one host, one process each (``torchrun``): row-sharded tables that
every process reads in place (peer-to-peer over NVLink), one host copy of a graph that
every process samples, full-graph training on partitioned graphs with halo exchange,
and process-group setup."""
from .full_graph import (EXCHANGE_DTYPES, ExchangeTimer, GraphPartition, balanced_bounds, new_exchange_group,
                         partition_data, partition_graph)
from .host_copy import share_graph_store, share_host_tensor
from .models import PartitionedGNN
from .overlap import HaloGraph
from .setup import setup, teardown
from ..data.shards import ShardedTensor, row_partition, share_shards

__all__ = ['ShardedTensor', 'share_shards', 'row_partition', 'setup', 'teardown', 'GraphPartition', 'ExchangeTimer',
           'balanced_bounds', 'partition_graph', 'partition_data', 'PartitionedGNN', 'HaloGraph',
           'new_exchange_group', 'share_host_tensor', 'share_graph_store', 'EXCHANGE_DTYPES']
