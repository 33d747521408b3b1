"""pyg_accel: a pure-Python install; the C++/CUDA ops are JIT-built on first use
(see pyg_accel/_build.py). ``python -m pyg_accel.build`` prebuilds them."""
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
CSRC_FILES = [str(p.relative_to(HERE / 'csrc')) for p in (HERE / 'csrc').rglob('*')
              if p.suffix in ('.cpp', '.cu', '.cuh', '.h')]

setup(
    name='pyg_accel',
    version='0.1.0',
    description='GPU neighbor sampling, GPU/pinned/sharded feature stores and fast GNN layers for PyG',
    long_description=(HERE / 'README.md').read_text(),
    long_description_content_type='text/markdown',
    license='MIT',
    license_files=['LICENSE'],
    classifiers=['License :: OSI Approved :: MIT License', 'Programming Language :: Python :: 3',
                 'Programming Language :: C++', 'Environment :: GPU :: NVIDIA CUDA',
                 'Topic :: Scientific/Engineering :: Artificial Intelligence'],
    python_requires='>=3.10',
    packages=find_packages(include=['pyg_accel', 'pyg_accel.*']) + ['pyg_accel._csrc'],
    # The C++/CUDA sources travel inside the package so a wheel can JIT-build them.
    package_dir={'pyg_accel._csrc': 'csrc'},
    package_data={'pyg_accel._csrc': CSRC_FILES, 'pyg_accel.datasets': ['data/*.npz']},
    install_requires=['torch>=2.4', 'torch_geometric>=2.6', 'numpy', 'ninja', 'tqdm'],
    extras_require={
        'test': ['pytest', 'matplotlib', 'hypothesis'],
        'ogb': ['ogb>=1.3.6'],
        'plot': ['matplotlib'],
        'sparse': ['torch_sparse', 'torch_scatter'],
    },
)
