"""OGB node-property datasets read from OGB's own on-disk format, offline.

The files are read with the ``ogb`` package's own readers (``pip install
pyg_accel[ogb]``), using its ``master.csv`` for each dataset's layout; nothing is
downloaded. :func:`save_ogb_node_dataset` writes a :class:`NodeDataset` in the same
format (tests use it; it also exports synthetic graphs for other tools).

Layout under ``root`` (``ogbn-products`` shown; ``papers100M`` is binary ``.npz``)::

    root/ogbn_products/raw/{edge,node-feat,node-label,num-node-list,num-edge-list}.csv.gz
    root/ogbn_products/split/sales_ranking/{train,valid,test}.csv.gz

Heterogeneous datasets (``ogbn-mag``) keep a folder per relation and per node type::

    root/ogbn_mag/raw/{num-node-dict,triplet-type-list,nodetype-has-label}.csv.gz
    root/ogbn_mag/raw/relations/author___writes___paper/{edge,num-edge-list}.csv.gz
    root/ogbn_mag/raw/node-feat/paper/node-feat.csv.gz
    root/ogbn_mag/raw/node-label/paper/node-label.csv.gz
    root/ogbn_mag/split/time/nodetype-has-split.csv.gz
    root/ogbn_mag/split/time/paper/{train,valid,test}.csv.gz
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import warnings
from pathlib import Path
from typing import Callable, Dict, Iterator, List, TypeVar, Union

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData

from .base import NodeDataset, check_split
from .hetero import HeteroNodeDataset

__all__ = ['load_ogb_node_dataset', 'save_ogb_node_dataset', 'load_ogb_hetero_node_dataset',
           'save_ogb_hetero_node_dataset', 'ogb_meta']

_CACHE_NAME = 'pyg_accel_processed.pt'
T = TypeVar('T')


def _source_files(folder: Path, meta: Dict[str, str]) -> List[Path]:
    """Every file a load reads: all of ``raw/`` and the split's folder."""
    places = [folder / 'raw', folder / 'split' / meta['split']]
    return sorted(f for place in places if place.is_dir() for f in place.rglob('*') if f.is_file())


def _content_key(folder: Path, meta: Dict[str, str]) -> str:
    """A key of the files the processed cache is built from: each file's path, size,
    modification time (exactly: an older file put back, as unzipping an archive does,
    changes it too) and a hash of its first and last 64 KiB."""
    h = hashlib.sha256()
    for f in _source_files(folder, meta):
        stat = f.stat()
        h.update(f'{f.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\0'.encode())
        with open(f, 'rb') as handle:
            h.update(handle.read(1 << 16))
            if stat.st_size > 1 << 17:
                handle.seek(-(1 << 16), 2)
                h.update(handle.read())
    return h.hexdigest()


def _load_cache(cached: Path, key: str):
    """The processed blob if it was built from files with this key, else ``None`` (a
    stale or unreadable cache, e.g. cut short by a full disk, is rebuilt)."""
    if not cached.is_file():
        return None
    try:
        blob = torch.load(cached, weights_only=True)
    except Exception as exc:  # (torch's zip reader raises RuntimeError, others OSError / EOFError)
        warnings.warn(f'{cached} could not be read ({exc}); rebuilding it from the raw files', stacklevel=3)
        return None
    return blob if isinstance(blob, dict) and blob.get('source_key') == key else None


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """Re-raises a parse error (gzip, zip, pandas, numpy) as a ValueError naming ``path``."""
    try:
        yield
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise ValueError(f'OGB file {path}: {type(exc).__name__}: {exc}') from exc


def _parsed(path: Path, read: Callable[[], T]) -> T:
    with _naming(path):
        return read()


def _csv(path: Path) -> np.ndarray:
    import pandas as pd
    return _parsed(path, lambda: pd.read_csv(path, compression='gzip', header=None).values)


def _count_rows(path: Path) -> int:
    """Lines of a gzipped CSV (no parsing)."""
    def count() -> int:
        n = 0
        with gzip.open(path, 'rb') as handle:
            for chunk in iter(lambda: handle.read(1 << 24), b''):
                n += chunk.count(b'\n')
        return n
    return _parsed(path, count)


def _integral_ids(values: np.ndarray, path: Path) -> torch.Tensor:
    """One column of whole numbers as int64 (a fractional id is an error, not truncated)."""
    values = np.asarray(values)
    if values.ndim == 2 and values.shape[1] != 1:
        raise ValueError(f'OGB file {path}: expected one column of node ids, got {values.shape[1]}')
    values = values.reshape(-1)
    if values.dtype.kind == 'f' and not np.all(np.isfinite(values) & (values == np.round(values))):
        raise ValueError(f'OGB file {path}: node ids must be whole numbers')
    if values.dtype.kind not in 'fiu':
        raise ValueError(f'OGB file {path}: node ids must be numbers, got {values.dtype}')
    return torch.from_numpy(values.astype(np.int64))


def _require_ogb():
    try:
        import ogb  # noqa: F401
        from ogb.io import read_graph_raw
    except ImportError as exc:
        raise ImportError("reading OGB datasets needs the 'ogb' package: pip install 'pyg_accel[ogb]'") from exc
    return read_graph_raw


def ogb_meta(name: str) -> Dict[str, str]:
    """OGB's ``master.csv`` entry for ``name`` (e.g. ``'ogbn-products'``)."""
    _require_ogb()
    import ogb.nodeproppred
    import pandas as pd
    master = pd.read_csv(Path(ogb.nodeproppred.__file__).parent / 'master.csv', index_col=0,
                         keep_default_na=False)
    if name not in master:
        raise ValueError(f"unknown OGB node dataset '{name}'; known: {sorted(master.keys())}")
    return {k: str(v) for k, v in master[name].items()}


def _dataset_dir(name: str, root: Union[str, Path]) -> Path:
    return Path(root).expanduser() / name.replace('-', '_')


def _raw_files(meta: Dict[str, str]):
    if meta['binary'] == 'True':
        return ['data.npz', 'node-label.npz']
    return ['edge.csv.gz', 'num-node-list.csv.gz', 'num-edge-list.csv.gz', 'node-label.csv.gz']


def _missing_message(name: str, root: Path, folder: Path, meta: Dict[str, str], missing) -> str:
    return (f"OGB dataset '{name}' was not found: {', '.join(missing)} missing under {folder}. "
            f"This package never downloads. Get {meta['url']} on a machine with network access, "
            f"unzip it into {root} (so that {folder / 'raw'} and {folder / 'split'} exist), "
            f"and pass --root {root}.")


def _labels(raw: Path, meta: Dict[str, str], num_nodes: int) -> torch.Tensor:
    if meta['binary'] == 'True':
        path = raw / 'node-label.npz'
        y = _parsed(path, lambda: np.load(path)['node_label'])
    else:
        path = raw / 'node-label.csv.gz'
        y = _csv(path)
    y = np.asarray(y)
    if y.ndim > 2 or (y.ndim == 2 and y.shape[1] != 1) or y.shape[0] != num_nodes:
        raise ValueError(f'OGB file {path}: expected one label per node ({num_nodes} x 1), got {tuple(y.shape)}')
    y = y.astype(np.float64).reshape(-1)
    out = np.full(y.shape, -1, dtype=np.int64)  # unlabelled (NaN in papers100M) -> -1
    ok = ~np.isnan(y)
    out[ok] = y[ok].astype(np.int64)
    return torch.from_numpy(out)


def _split(folder: Path, meta: Dict[str, str]) -> Dict[str, torch.Tensor]:
    path = folder / 'split' / meta['split']
    out = {}
    for key in ('train', 'valid', 'test'):
        file = path / f'{key}.csv.gz'
        if not file.is_file():
            raise FileNotFoundError(f'OGB split file {file} is missing')
        out[key] = _integral_ids(_csv(file), file)
    return out


def _check_edge_counts(raw: Path, meta: Dict[str, str], edge_index: np.ndarray) -> None:
    """The edges read against the edge file and the declared count: OGB's reader keeps
    num-edge-list's count of the file's edges, so a smaller count drops edges silently."""
    if meta['binary'] == 'True':
        path = raw / 'data.npz'
        declared = int(np.sum(_parsed(path, lambda: np.load(path)['num_edges_list'])))
        in_file = int(_parsed(path, lambda: np.load(path)['edge_index'].shape[1]))
    else:
        declared = int(np.sum(_csv(raw / 'num-edge-list.csv.gz')))
        in_file = _count_rows(raw / 'edge.csv.gz')
    if declared != in_file:
        raise ValueError(f"OGB files {raw}: num-edge-list declares {declared} edges, the edge file holds {in_file}")
    read = edge_index.shape[1] // (2 if meta['add_inverse_edge'] == 'True' else 1)
    if read != declared:
        raise ValueError(f'OGB files {raw}: {declared} edges declared, {read} read')


def load_ogb_node_dataset(name: str, root: Union[str, Path] = 'data/ogb', cache: bool = True) -> NodeDataset:
    """Loads ``name`` (``'ogbn-arxiv'``, ``'ogbn-products'``, ``'ogbn-papers100M'``, ...)
    from OGB's files under ``root``.

    The parsed tensors are cached next to the raw files (``processed/``) so later loads
    skip the CSV parsing.

    Raises:
        FileNotFoundError: with instructions, when the files are not there.
    """
    read_graph_raw = _require_ogb()
    meta = ogb_meta(name)
    if meta['is hetero'] == 'True':
        raise ValueError(f"'{name}' is heterogeneous: load it with load_ogb_hetero_node_dataset or "
                         "load_hetero_dataset (see examples/hetero_node_classification.py)")
    root = Path(root).expanduser()
    folder = _dataset_dir(name, root)
    raw = folder / 'raw'
    missing = [f for f in _raw_files(meta) if not (raw / f).is_file()]
    if missing:
        raise FileNotFoundError(_missing_message(name, root, folder, meta, missing))

    cached = folder / 'processed' / _CACHE_NAME
    key = _content_key(folder, meta)
    blob = _load_cache(cached, key) if cache else None
    if blob is not None:
        data = Data(x=blob['x'], y=blob['y'], edge_index=blob['edge_index'], num_nodes=int(blob['num_nodes']))
        return NodeDataset(name, data, blob['split'], int(blob['num_classes']))

    with _naming(raw):  # (OGB's readers name no file in their errors)
        if meta['binary'] == 'True':
            graph = read_graph_raw.read_binary_graph_raw(str(raw), add_inverse_edge=False)[0]
        else:
            # Additional node/edge files (e.g. arxiv's node_year) are not needed for training.
            graph = read_graph_raw.read_csv_graph_raw(str(raw),
                                                      add_inverse_edge=meta['add_inverse_edge'] == 'True')[0]
    _check_edge_counts(raw, meta, graph['edge_index'])
    num_nodes = int(graph['num_nodes'])
    x = torch.from_numpy(np.ascontiguousarray(graph['node_feat'])).float() if graph['node_feat'] is not None \
        else torch.ones(num_nodes, 1)
    if x.shape[0] != num_nodes:
        raise ValueError(f'OGB files {raw}: node features for {x.shape[0]} nodes, num-node-list says {num_nodes}')
    data = Data(x=x, y=_labels(raw, meta, num_nodes), edge_index=torch.from_numpy(graph['edge_index']).long(),
                num_nodes=num_nodes)
    split = check_split(_split(folder, meta), num_nodes)
    dataset = NodeDataset(name, data, split, int(meta['num classes']))
    if cache:
        cached.parent.mkdir(parents=True, exist_ok=True)
        torch.save({'x': data.x, 'y': data.y, 'edge_index': data.edge_index, 'num_nodes': num_nodes,
                    'split': split, 'num_classes': dataset.num_classes, 'source_key': key}, cached)
    return dataset


def save_ogb_node_dataset(dataset: NodeDataset, name: str, root: Union[str, Path]) -> Path:
    """Writes ``dataset`` in OGB's raw format for ``name`` (CSV or binary, as OGB ships
    that dataset). Where OGB adds inverse edges on load, ``edge_index`` is written as
    given and will come back with its inverse edges added. Returns the dataset folder."""
    meta = ogb_meta(name)
    import pandas as pd
    folder = _dataset_dir(name, root)
    raw, split_dir = folder / 'raw', folder / 'split' / meta['split']
    raw.mkdir(parents=True, exist_ok=True)
    split_dir.mkdir(parents=True, exist_ok=True)
    data = dataset.data
    edge_index = data.edge_index.cpu().numpy().astype(np.int64)
    x = data.x.cpu().numpy().astype(np.float32)
    y = data.y.cpu().numpy().reshape(-1, 1)

    def csv(array, path):
        pd.DataFrame(array).to_csv(path, header=False, index=False, compression='gzip')

    if meta['binary'] == 'True':
        np.savez_compressed(raw / 'data.npz', edge_index=edge_index, node_feat=x,
                            num_nodes_list=np.array([data.num_nodes]), num_edges_list=np.array([edge_index.shape[1]]))
        labels = y.astype(np.float32)
        labels[y < 0] = np.nan
        np.savez_compressed(raw / 'node-label.npz', node_label=labels)
    else:
        csv(edge_index.T, raw / 'edge.csv.gz')
        csv(x, raw / 'node-feat.csv.gz')
        csv(y, raw / 'node-label.csv.gz')
        csv(np.array([[data.num_nodes]]), raw / 'num-node-list.csv.gz')
        csv(np.array([[edge_index.shape[1]]]), raw / 'num-edge-list.csv.gz')
    for key, ids in dataset.split.items():
        csv(ids.cpu().numpy().reshape(-1, 1), split_dir / f'{key}.csv.gz')
    (folder / f"RELEASE_v{meta['version']}.txt").write_text('written by pyg_accel.datasets.save_ogb_node_dataset\n')
    return folder


_HETERO_RAW = ['num-node-dict.csv.gz', 'triplet-type-list.csv.gz', 'nodetype-has-label.csv.gz']


def load_ogb_hetero_node_dataset(name: str = 'ogbn-mag', root: Union[str, Path] = 'data/ogb',
                                 cache: bool = True) -> HeteroNodeDataset:
    """Loads a heterogeneous OGB node dataset (``'ogbn-mag'``) from OGB's files under
    ``root``, as a :class:`~pyg_accel.datasets.HeteroNodeDataset`: every relation's
    ``edge_index`` as OGB stores it (PyG's examples then add reverse edges with
    ``T.ToUndirected()``), node features where OGB has them (ogbn-mag: papers only),
    labels and the split of the one labelled node type. Parsed tensors are cached in
    ``processed/``, as by :func:`load_ogb_node_dataset`.

    Raises:
        FileNotFoundError: with instructions, when the files are not there.
        ValueError: for a homogeneous dataset, or several labelled node types.
    """
    _require_ogb()
    from ogb.io.read_graph_raw import read_csv_heterograph_raw, read_node_label_hetero, \
        read_nodesplitidx_split_hetero
    meta = ogb_meta(name)
    if meta['is hetero'] != 'True':
        raise ValueError(f"'{name}' is homogeneous: load it with load_ogb_node_dataset")
    root = Path(root).expanduser()
    folder = _dataset_dir(name, root)
    raw = folder / 'raw'
    missing = [f for f in _HETERO_RAW if not (raw / f).is_file()]
    if missing:
        raise FileNotFoundError(_missing_message(name, root, folder, meta, missing))
    cached = folder / 'processed' / _CACHE_NAME
    key = _content_key(folder, meta)  # (every relation's folder too)
    blob = _load_cache(cached, key) if cache else None
    if blob is not None:
        return HeteroNodeDataset(name, HeteroData.from_dict(blob['data']), blob['target'], blob['split'],
                                 int(blob['num_classes']))

    with _naming(raw):  # (OGB's readers name no file in their errors)
        graph = read_csv_heterograph_raw(str(raw), add_inverse_edge=meta['add_inverse_edge'] == 'True')[0]
        labels = read_node_label_hetero(str(raw))
    if len(labels) != 1:
        raise ValueError(f"'{name}': expected one labelled node type, found {sorted(labels)}")
    target = next(iter(labels))
    data = HeteroData()
    for node_type, count in graph['num_nodes_dict'].items():
        data[node_type].num_nodes = int(np.sum(count))
    for node_type, feat in (graph['node_feat_dict'] or {}).items():
        data[node_type].x = torch.from_numpy(np.ascontiguousarray(feat)).float()
    for edge_type, edge_index in graph['edge_index_dict'].items():
        relation = raw / 'relations' / '___'.join(edge_type)
        declared = int(np.sum(_csv(relation / 'num-edge-list.csv.gz')))
        in_file = _count_rows(relation / 'edge.csv.gz')
        read = edge_index.shape[1] // (2 if meta['add_inverse_edge'] == 'True' else 1)
        if not declared == in_file == read:
            raise ValueError(f'OGB files {relation}: num-edge-list declares {declared} edges, the edge file holds '
                             f'{in_file}, {read} were read')
        data[tuple(edge_type)].edge_index = torch.from_numpy(np.ascontiguousarray(edge_index)).long()
    y = np.asarray(labels[target], dtype=np.float64)
    label_file = raw / 'node-label' / target / 'node-label.csv.gz'
    if y.ndim > 2 or (y.ndim == 2 and y.shape[1] != 1) or y.shape[0] != data[target].num_nodes:
        raise ValueError(f'OGB file {label_file}: expected one label per {target} node '
                         f'({data[target].num_nodes} x 1), got {tuple(y.shape)}')
    y = y.reshape(-1)
    data[target].y = torch.from_numpy(np.where(np.isnan(y), -1, y).astype(np.int64))
    split_dir = folder / 'split' / meta['split']
    with _naming(split_dir):
        splits = read_nodesplitidx_split_hetero(str(split_dir))
    split = check_split({part: _integral_ids(np.array(splits[i][target]), split_dir / target / f'{part}.csv.gz')
                         for i, part in enumerate(('train', 'valid', 'test'))}, data[target].num_nodes)
    dataset = HeteroNodeDataset(name, data, target, split, int(meta['num classes']))
    if cache:
        cached.parent.mkdir(parents=True, exist_ok=True)
        torch.save({'data': data.to_dict(), 'target': target, 'split': split,
                    'num_classes': dataset.num_classes, 'source_key': key}, cached)
    return dataset


def save_ogb_hetero_node_dataset(dataset: HeteroNodeDataset, name: str, root: Union[str, Path]) -> Path:
    """Writes ``dataset`` in OGB's raw heterogeneous format for ``name`` (tests use it;
    it also exports :func:`~pyg_accel.datasets.synthetic_mag` for other tools). Returns
    the dataset folder."""
    meta = ogb_meta(name)
    import pandas as pd
    folder = _dataset_dir(name, root)
    raw, split_dir = folder / 'raw', folder / 'split' / meta['split']
    data, target = dataset.data, dataset.target

    def csv(array, path: Path, header=False):
        path.parent.mkdir(parents=True, exist_ok=True)
        frame = array if isinstance(array, pd.DataFrame) else pd.DataFrame(array)
        frame.to_csv(path, header=header, index=False, compression='gzip')

    node_types = data.node_types
    csv(pd.DataFrame({t: [data[t].num_nodes] for t in node_types}), raw / 'num-node-dict.csv.gz', header=True)
    csv(np.array([list(et) for et in data.edge_types]), raw / 'triplet-type-list.csv.gz')
    for et in data.edge_types:
        edge_index = data[et].edge_index.cpu().numpy().astype(np.int64)
        csv(edge_index.T, raw / 'relations' / '___'.join(et) / 'edge.csv.gz')
        csv(np.array([[edge_index.shape[1]]]), raw / 'relations' / '___'.join(et) / 'num-edge-list.csv.gz')
    for t in node_types:
        if 'x' in data[t]:
            csv(data[t].x.cpu().numpy().astype(np.float32), raw / 'node-feat' / t / 'node-feat.csv.gz')
    csv(pd.DataFrame({t: [t == target] for t in node_types}), raw / 'nodetype-has-label.csv.gz', header=True)
    csv(data[target].y.cpu().numpy().reshape(-1, 1), raw / 'node-label' / target / 'node-label.csv.gz')
    csv(pd.DataFrame({t: [t == target] for t in node_types}), split_dir / 'nodetype-has-split.csv.gz', header=True)
    for key, ids in dataset.split.items():
        csv(ids.cpu().numpy().reshape(-1, 1), split_dir / target / f'{key}.csv.gz')
    note = 'written by pyg_accel.datasets.save_ogb_hetero_node_dataset\n'
    (folder / f"RELEASE_v{meta['version']}.txt").write_text(note)
    return folder
