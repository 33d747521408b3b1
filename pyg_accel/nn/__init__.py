"""Drop-in replacements for PyG layers and models: change the import, keep the code
(same constructor arguments, parameters and ``state_dict``)."""
from . import models
from .conv import GATConv, GCNConv, GINConv, SAGEConv

__all__ = ['GCNConv', 'GATConv', 'GINConv', 'SAGEConv', 'models']
