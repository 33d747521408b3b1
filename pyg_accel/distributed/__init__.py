"""Several GPUs of one host, one process each (``torchrun``): row-sharded tables that
every process reads in place (peer-to-peer over NVLink), and process-group setup."""
from .setup import setup
from .shards import ShardedTensor, row_partition, share_shards

__all__ = ['ShardedTensor', 'share_shards', 'row_partition', 'setup']
