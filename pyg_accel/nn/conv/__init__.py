"""Drop-in PyG convolutions on pyg_accel's sparse kernels."""
from .gat_conv import GATConv
from .gcn_conv import GCNConv
from .sage_conv import SAGEConv

__all__ = ['GCNConv', 'GATConv', 'SAGEConv']
