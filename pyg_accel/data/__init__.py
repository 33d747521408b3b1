"""PyG ``FeatureStore`` / ``GraphStore`` subclasses and their storage tiers."""
from .convert import from_data
from .feature_store import FeatureStore
from .graph_store import CSCGraph, GraphStore
from .host_memory import pinned_copy, pinned_empty
from .location import Location, resolve_device, resolve_location
from .reorder import mean_edge_span, node_order, reorder_data
from .row_cache import RowCache, presample_node_ids, rows_by_access, rows_by_degree
from .hosts import HostLayout
from .tiers import HostShardedTier, LocalTier, ShardedTier, Tier

__all__ = ['FeatureStore', 'GraphStore', 'CSCGraph', 'Location', 'resolve_location', 'resolve_device', 'from_data',
           'RowCache', 'rows_by_degree', 'rows_by_access', 'presample_node_ids', 'node_order', 'reorder_data',
           'mean_edge_span', 'pinned_empty', 'pinned_copy', 'Tier', 'LocalTier', 'ShardedTier',
           'HostShardedTier', 'HostLayout']
