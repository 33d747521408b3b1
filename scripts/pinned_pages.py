"""Diagnosis: why does the GPU sampler slow down on a large graph in pinned host memory?

The CUDA sampler reading a products-size graph (0.5 GB) in pinned memory took 0.75 ms
per 1024 x [15, 10, 5] batch; on a papers100M-size graph (27 GB) it took 6.8 ms for
about as many sampled edges. Hypothesis: address translation. Random reads spread over
27 GB of 4 KB host pages miss the GPU's translation caches (and the IOMMU's), where
0.5 GB mostly hit; with 2 MB pages the same reads would need 512x fewer entries.

For each scale of the topology this times the sampler over the graph placed in host
memory three ways:
* ``pin_memory``: PyTorch's pinned allocator (``cudaHostAlloc``), what
  ``GraphStore('pinned')`` uses;
* ``thp``: anonymous memory with ``madvise(MADV_HUGEPAGE)`` (transparent huge pages),
  then ``cudaHostRegister`` (``pyg_accel.ops.host_register``);
* ``colptr_device``: the column pointers on the GPU, the rows in pinned memory;
* ``vmm``: host memory from the driver's virtual-memory API (``cuMemCreate`` with a
  host location), mapped for the GPU at the allocation's granularity;
* ``device``: the graph in GPU memory (the reference).

    python scripts/pinned_pages.py --scales 0.02 0.25 1.0 --out OUT
"""
from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import statistics
import time
from pathlib import Path

import torch

from pyg_accel.datasets import synthetic_topology
from pyg_accel.ops import host_register, neighbor_sample, uva_view


def meminfo_kb(key: str) -> int:
    for line in Path('/proc/meminfo').read_text().splitlines():
        if line.startswith(key + ':'):
            return int(line.split()[1])
    return -1


def thp_setting() -> str:
    try:
        return Path('/sys/kernel/mm/transparent_hugepage/enabled').read_text().strip()
    except OSError:
        return 'unknown'


def huge_page_copy(t: torch.Tensor) -> torch.Tensor:
    """A host copy of ``t`` in anonymous memory advised to use huge pages, page-locked in place."""
    nbytes = t.numel() * t.element_size()
    buf = mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf.madvise(mmap.MADV_HUGEPAGE)
    host = torch.frombuffer(buf, dtype=t.dtype, count=t.numel())  # (keeps buf alive)
    host.copy_(t)
    return host_register(host)


class _Location(ctypes.Structure):
    _fields_ = [('type', ctypes.c_int), ('id', ctypes.c_int)]


class _AllocProp(ctypes.Structure):  # CUmemAllocationProp (cuda.h)
    _fields_ = [('type', ctypes.c_int), ('handle_types', ctypes.c_int), ('location', _Location),
                ('win32', ctypes.c_void_p), ('compression', ctypes.c_ubyte), ('rdma', ctypes.c_ubyte),
                ('usage', ctypes.c_ushort), ('reserved', ctypes.c_ubyte * 4)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [('location', _Location), ('flags', ctypes.c_int)]


class _CudaArray:
    def __init__(self, ptr, numel, typestr):
        self.__cuda_array_interface__ = {'shape': (numel,), 'typestr': typestr, 'data': (ptr, False), 'version': 3}


def _check(name: str, rc: int) -> None:
    if rc != 0:
        raise RuntimeError(f'{name}: CUresult {rc}')


def vmm_host_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` in host memory allocated by the driver's virtual-memory API
    (``cuMemCreate`` with a host location, mapped at the allocation granularity) and
    readable by GPU 0: a CUDA tensor over it. (Leaks the mapping: a diagnosis.)"""
    cu = ctypes.CDLL('libcuda.so.1')
    prop = _AllocProp(type=1, handle_types=0, location=_Location(3, 0))  # pinned, host NUMA node 0
    gran = ctypes.c_size_t()
    rc = cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 1)
    if rc != 0:
        prop.location = _Location(2, 0)  # host, any node
        rc = cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 1)
    assert rc == 0, f'cuMemGetAllocationGranularity: {rc}'
    nbytes = t.numel() * t.element_size()
    size = -(-nbytes // gran.value) * gran.value
    handle, ptr = ctypes.c_ulonglong(), ctypes.c_ulonglong()
    size_t, u64 = ctypes.c_size_t, ctypes.c_ulonglong
    _check('cuMemCreate', cu.cuMemCreate(ctypes.byref(handle), size_t(size), ctypes.byref(prop), u64(0)))
    _check('cuMemAddressReserve', cu.cuMemAddressReserve(ctypes.byref(ptr), size_t(size), size_t(gran.value),
                                                         u64(0), u64(0)))
    _check('cuMemMap', cu.cuMemMap(ptr, size_t(size), size_t(0), handle, u64(0)))
    access = _AccessDesc(_Location(1, 0), 3)  # GPU 0, read-write
    _check('cuMemSetAccess', cu.cuMemSetAccess(ptr, size_t(size), ctypes.byref(access), size_t(1)))
    typestr = {torch.int64: '<i8', torch.int32: '<i4'}[t.dtype]
    out = torch.as_tensor(_CudaArray(ptr.value, t.numel(), typestr), device='cuda')
    out.copy_(t)
    print(f'  vmm host allocation: granularity {gran.value} B, location type {prop.location.type}', flush=True)
    return out


def time_sampler(colptr, row, train, fanouts, batch, batches=20, warmup=3):
    gen = torch.Generator().manual_seed(0)
    seeds = [train[torch.randperm(train.numel(), generator=gen)[:batch]].cuda() for _ in range(batches + warmup)]
    times, edges = [], []
    for i, s in enumerate(seeds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = neighbor_sample(colptr, row, s, fanouts)
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
            edges.append(out.row.numel())
    ms = statistics.median(times) * 1e3
    return ms, statistics.median(edges) / ms / 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--preset', default='papers100M')
    p.add_argument('--scales', type=float, nargs='*', default=[0.02, 0.25, 1.0])
    p.add_argument('--modes', nargs='*', default=['device', 'pin_memory', 'thp'])
    p.add_argument('--batch', type=int, default=1024)
    p.add_argument('--out', default='.')
    args = p.parse_args(argv)
    fanouts = [15, 10, 5]
    rows = []
    print(f'transparent huge pages: {thp_setting()}', flush=True)
    for scale in args.scales:
        topo = synthetic_topology(args.preset, scale=scale, device='cuda')
        gb = (topo.row.numel() + topo.colptr.numel()) * 8 / 1e9
        for mode in args.modes:
            before = meminfo_kb('AnonHugePages')
            t0 = time.perf_counter()
            if mode == 'device':
                colptr, row = topo.colptr, topo.row
            elif mode == 'pin_memory':
                colptr, row = (torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t)
                               for t in (topo.colptr, topo.row))
            elif mode == 'colptr_device':  # the pointers on the GPU, the rows in pinned memory
                colptr, row = topo.colptr, torch.empty(topo.row.shape, dtype=torch.long, pin_memory=True)
                row.copy_(topo.row)
            elif mode == 'vmm':
                colptr, row = vmm_host_copy(topo.colptr), vmm_host_copy(topo.row)
            else:
                colptr, row = huge_page_copy(topo.colptr), huge_page_copy(topo.row)
            placed_s = time.perf_counter() - t0
            huge_gb = (meminfo_kb('AnonHugePages') - before) / 1e6
            views = tuple(t if t.is_cuda else uva_view(t) for t in (colptr, row))
            ms, medges = time_sampler(*views, topo.train, fanouts, args.batch)
            rows.append({'scale': scale, 'graph GB': round(gb, 2), 'mode': mode, 'ms': round(ms, 3),
                         'M edges/s': round(medges), 'placed s': round(placed_s, 1),
                         'huge pages GB': round(huge_gb, 2)})
            print(rows[-1], flush=True)
            del colptr, row, views
        del topo
        torch.cuda.empty_cache()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    payload = {'thp': thp_setting(), 'gpu': torch.cuda.get_device_name(), 'fanouts': fanouts,
               'batch': args.batch, 'rows': rows}
    (Path(args.out) / 'pinned_pages.json').write_text(json.dumps(payload, indent=1))
    return payload


if __name__ == '__main__':
    main()
