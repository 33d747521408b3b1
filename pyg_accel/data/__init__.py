"""PyG ``FeatureStore`` / ``GraphStore`` subclasses and their storage tiers."""
from .convert import from_data
from .feature_store import FeatureStore
from .graph_store import CSCGraph, GraphStore
from .location import Location, resolve_location
from .row_cache import RowCache, rows_by_degree

__all__ = ['FeatureStore', 'GraphStore', 'CSCGraph', 'Location', 'resolve_location', 'from_data', 'RowCache',
           'rows_by_degree']
