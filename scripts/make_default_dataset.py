"""Regenerates pyg_accel/datasets/data/community10k.npz, the embedded default dataset."""
from pyg_accel.datasets.default import DEFAULT_PATH, DEFAULT_SPEC, load_default, pack_default
from pyg_accel.datasets.synthetic import synthetic_graph

if __name__ == '__main__':
    pack_default(synthetic_graph(DEFAULT_SPEC, seed=0, name='default'))
    print(load_default(), '->', DEFAULT_PATH, f'({DEFAULT_PATH.stat().st_size / 1e6:.2f} MB)')
