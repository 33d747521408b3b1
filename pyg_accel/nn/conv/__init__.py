"""Drop-in PyG convolutions on pyg_accel's sparse kernels."""
from .gat_conv import GATConv
from .gcn_conv import GCNConv
from .gin_conv import GINConv
from .sage_conv import SAGEConv

__all__ = ['GCNConv', 'GATConv', 'GINConv', 'SAGEConv']
