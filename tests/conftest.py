import inspect
import random
import zlib

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.typing
from torch_geometric.data import Data, HeteroData

HAS_CUDA = torch.cuda.is_available()
DEVICES = ['cpu'] + (['cuda'] if HAS_CUDA else [])

requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason='needs a CUDA GPU')
# Stock PyG's CPU sampler, the baseline of several tests, needs pyg-lib or torch-sparse
# (an optional extra, `pip install ".[sparse]"`: the tests that need it skip without it).
requires_stock_sampler = pytest.mark.skipif(
    not (torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE),
    reason="stock PyG's sampler needs pyg-lib or torch-sparse")
requires_two_gpus = pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason='needs 2 GPUs')


def _torch_scatter_without_cuda() -> bool:
    """Whether an installed torch-scatter is a CPU-only build (as baseline wheels built
    for stock PyG's CPU sampler are): PyG would route CUDA scatter-max through it and fail."""
    try:
        import torch_scatter  # noqa: F401
    except ImportError:
        return False
    try:
        return int(torch.ops.torch_scatter.cuda_version()) == -1
    except (AttributeError, RuntimeError):
        return True


def pytest_collection_modifyitems(config, items):
    """The quick tier (``-m "not slow"``) thins every parameter sweep: of a test's cases
    it keeps, per device, a set in which every value of every other parameter appears at
    least once, and marks the rest ``slow`` (the full tier runs them all). On a machine
    with a GPU it also leaves out the CPU cases of tests that have GPU cases (CPU-only CI
    runs those). Tests marked ``slow`` by hand (multi-process runs, builds from scratch)
    stay out of it whole."""
    groups = {}
    for item in items:
        params = getattr(getattr(item, 'callspec', None), 'params', None)
        if params:
            device = tuple(str(v) for k, v in sorted(params.items()) if k in DEVICE_PARAMETERS)
            groups.setdefault((item.module.__name__, item.originalname, device), []).append(item)
    with_gpu_cases = {(module, name) for module, name, device in groups if device and device != ('cpu',)}
    for (module, name, device), cases in groups.items():
        if HAS_CUDA and device == ('cpu',) and (module, name) in with_gpu_cases:
            for item in cases:
                item.add_marker(pytest.mark.slow)
            continue
        seen, kept = set(), False
        for item in cases:
            if item.get_closest_marker('slow'):  # (out by hand: it covers nothing in the quick tier)
                continue
            values = {(k, _case_value(v)) for k, v in item.callspec.params.items() if k not in DEVICE_PARAMETERS}
            if values - seen or not kept:  # (the first case always: a sweep over the device alone has no values)
                seen |= values
                kept = True
            else:
                item.add_marker(pytest.mark.slow)


DEVICE_PARAMETERS = ('device', 'sample_device', 'location')  # the quick tier thins sweeps within each


def _case_value(value) -> str:
    return repr(value) if not callable(value) else getattr(value, '__name__', repr(value))


def pytest_addoption(parser):
    parser.addoption('--kernel-report', default=None, metavar='FILE',
                     help='write the CUDA kernels each test launched (torch.profiler), one "test<TAB>kernel" per '
                          'line; scripts/cuda_kernels.py checks them against csrc/*/cuda (the quick tier\'s coverage)')
    parser.addoption('--duration-log', default=None, metavar='FILE',
                     help='append "seconds<TAB>outcome<TAB>test" as each test finishes (readable while the run '
                          'goes on, and after a run cut short)')


_options = {}  # command-line options the report hooks read


def pytest_configure(config):
    if not hasattr(config, 'workerinput'):  # (under pytest-xdist the controller logs every worker's reports)
        _options['duration_log'] = config.getoption('--duration-log')
    torch.manual_seed(0)
    if HAS_CUDA and _torch_scatter_without_cuda():  # PyG's references then use torch.scatter_reduce
        import torch_geometric.typing
        torch_geometric.typing.WITH_TORCH_SCATTER = False


@pytest.fixture(autouse=True)
def _seed_per_test(request) -> None:
    """Seeds torch's (CPU and CUDA) and Python's generators from the test's id, so a test
    draws the same inputs whichever tests run before it, alone or in the whole suite."""
    seed = zlib.crc32(request.node.nodeid.encode())
    torch.manual_seed(seed)
    random.seed(seed)


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    return torch.device(request.param)


def locations():
    """Storage tiers testable on this machine."""
    return ['cpu'] + (['cuda', 'pinned'] if HAS_CUDA else [])


def poison_cuda_allocator(num_bytes: int = 64 << 20) -> None:
    """Fills the caching allocator's free blocks with 0xFF bytes (NaN for floats), so
    a kernel output that reuses them and leaves an element unwritten fails an exact
    comparison."""
    if HAS_CUDA:  # large blocks (> 1 MB) and the small-block pool
        blocks = [torch.empty(num_bytes, dtype=torch.uint8, device='cuda')]
        blocks += [torch.empty(1 << 20, dtype=torch.uint8, device='cuda') for _ in range(32)]
        for b in blocks:
            b.fill_(0xFF)
        del blocks


def paper_author_graph(num_papers: int, num_authors: int, num_writes: int) -> HeteroData:
    """A small heterogeneous graph: papers (x, y), authors (x), author-writes-paper edges."""
    data = HeteroData()
    data['paper'].x = torch.randn(num_papers, 4)
    data['paper'].y = torch.randint(0, 3, (num_papers,))
    data['author'].x = torch.randn(num_authors, 2)
    data['author', 'writes', 'paper'].edge_index = torch.stack([torch.randint(0, num_authors, (num_writes,)),
                                                                torch.randint(0, num_papers, (num_writes,))])
    return data


def cuda_sampling_built() -> bool:
    """Whether CUDA graphs are sampled on the GPU (the CUDA ops were built)."""
    from pyg_accel.ops import cuda_sampling_available
    return HAS_CUDA and cuda_sampling_available()


@pytest.fixture(params=DEVICES)
def sample_device(request) -> torch.device:
    return torch.device(request.param)


# What PyTorch prints at exit for a process whose shared CUDA memory a peer still maps.
IPC_EXIT_WARNING = 'Producer process has been terminated before all shared CUDA tensors released'


def worker_main(check) -> None:
    """The entry point of a tests/*_worker.py process under torchrun: the process group
    and this process's device set up, ``check(rank, world_size, device)`` run, the run
    torn down once check's frame, and every tensor the group touched, is gone
    (:func:`pyg_accel.distributed.teardown`), then 'rank R on DEVICE' written to
    $PYG_ACCEL_WORKER_OUT/rank-R: every check passed and the processes parted cleanly."""
    import os
    from pathlib import Path

    import torch.distributed as dist

    from pyg_accel.distributed import setup, teardown
    rank, world_size, device = setup()
    try:
        check(rank, world_size, device)
    except BaseException:
        dist.destroy_process_group()  # (no teardown: its barrier would wait for the ranks that failed)
        raise
    teardown()
    (Path(os.environ['PYG_ACCEL_WORKER_OUT']) / f'rank-{rank}').write_text(f'rank {rank} on {device.type}')


def check_sharded_generation(device) -> None:
    """Inside a torchrun worker: a synthetic dataset generated into a sharded store, each
    process keeping only its block of x (FeatureStore.put_block), reads the same rows as
    the same dataset generated whole, in float32 and in bfloat16; a block of the wrong
    rows is refused on every process at once."""
    import torch
    import torch.distributed as dist
    from pyg_accel.data import FeatureStore
    from pyg_accel.datasets import synthetic_stores
    whole = synthetic_stores('products', scale=0.0005, seed=3, device=device)  # (held on the CPU)
    index = torch.randint(0, whole.num_nodes, (200,), generator=torch.Generator().manual_seed(dist.get_rank()))
    expected = whole.feature_store.get_tensor(group_name=None, attr_name='x', index=index)
    for dtype in (None, torch.bfloat16):
        sharded = synthetic_stores('products', scale=0.0005, seed=3, device=device, feature_location='sharded',
                                   float_dtype=dtype)
        got = sharded.feature_store.get_tensor(group_name=None, attr_name='x', index=index.to(device)).cpu()
        assert got.dtype == (dtype or torch.float32) and torch.equal(got, expected.to(got.dtype))
        assert torch.equal(sharded.feature_store.get_tensor(group_name=None, attr_name='y', index=index.to(device))
                           .cpu(), whole.feature_store.get_tensor(group_name=None, attr_name='y', index=index))
    fs = FeatureStore('sharded')
    wrong = torch.zeros(3 + dist.get_rank(), 4)  # (1000 rows over 2 or 4 processes: 500 or 250 each)
    with pytest.raises(ValueError, match='put_block: process .* must hold rows'):
        fs.put_block(wrong, 1000, 'x')


def run_torchrun_worker(script: str, tmp_path, gpus: bool, nproc: int = 2, timeout: int = 600) -> None:
    """tests/SCRIPT under torchrun with ``nproc`` processes, on as many GPUs or on the CPU
    (CUDA hidden). Each rank writes 'rank R on DEVICE' to $PYG_ACCEL_WORKER_OUT/rank-R
    once every check passed; the run may take ``timeout`` seconds."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    paths = [str(root), str(root / 'tests'), os.environ.get('PYTHONPATH', '')]
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(paths), 'PYG_ACCEL_WORKER_OUT': str(tmp_path)}
    if not gpus:
        env['CUDA_VISIBLE_DEVICES'] = ''
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', str(nproc),
           str(root / 'tests' / script)]
    # (a session of its own: on a timeout the workers go down with torchrun rather than hold their GPUs)
    run = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        stdout, stderr = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        stdout, stderr = run.communicate()
        pytest.fail(f'{script} still ran after {timeout} s:\n' + stdout[-4000:] + stderr[-4000:])
    assert run.returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert IPC_EXIT_WARNING not in stdout + stderr, 'a process exited while a peer still mapped its memory'
    expected = 'cuda' if gpus else 'cpu'
    assert [(Path(tmp_path) / f'rank-{r}').read_text() for r in range(nproc)] == [
        f'rank {r} on {expected}' for r in range(nproc)]


def assert_freed_without_gc(objects: list) -> None:
    """Empties ``objects`` (which must hold the only references the caller keeps) with
    the garbage collector off and asserts each object was freed at once: none of them
    is kept alive by a reference cycle."""
    import gc
    import weakref
    refs = [weakref.ref(o) for o in objects]
    gc.collect()
    gc.disable()
    try:
        objects.clear()
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """With ``--kernel-report``, the test runs under torch.profiler (CUDA activity only)
    and the names of the kernels it launched are appended to the report. Tests that
    profile themselves run unobserved (profilers do not nest)."""
    path = item.config.getoption('--kernel-report')
    if not (path and HAS_CUDA) or 'profile' in inspect.getsource(item.function):
        yield
        return
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        yield
        try:  # (every kernel finished, so each is in the trace; a test may have patched torch.cuda)
            torch._C._cuda_synchronize()
        except RuntimeError:
            pass
    names = {event.name() for event in prof.profiler.kineto_results.events()
             if event.device_type() == torch.autograd.DeviceType.CUDA}
    with open(path, 'a') as report:
        report.writelines(f'{item.nodeid}\t{name}\n' for name in sorted(names))


def pytest_runtest_logreport(report):
    path = _options.get('duration_log')
    if path and (report.when == 'call' or report.outcome != 'passed'):
        with open(path, 'a') as log:
            log.write(f'{report.duration:.3f}\t{report.when}:{report.outcome}\t{report.nodeid}\n')


def community_data(n=600, e=6000, classes=4, seed=0):
    """Labels a GNN can learn: each node's features carry a noisy copy of its class."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    x = torch.randn(n, 16, generator=g) + 2 * F.one_hot(y, 16).float()
    src = torch.randint(0, n, (e,), generator=g)
    order, counts = torch.argsort(y), torch.bincount(y, minlength=classes)
    starts, cls = counts.cumsum(0) - counts, y[src]
    dst = order[starts[cls] + (torch.rand(e, generator=g) * counts[cls]).long()]  # a node of src's class
    return Data(x=x, y=y, edge_index=torch.stack([src, dst]), num_nodes=n)
