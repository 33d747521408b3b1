"""The one place that JIT-compiles ``csrc/`` into the ``torch.ops.pyg_accel`` library.

The library is compiled with ninja through :func:`torch.utils.cpp_extension.load` on
first use and cached. The cache folder is keyed by a hash of the sources, the torch
version and the CUDA architectures, so editing a kernel rebuilds and nothing else does.
CPU sources are always built; CUDA sources when torch has CUDA, nvcc is found and a GPU
(or ``PYG_ACCEL_BUILD_CUDA=1``) is present. A file lock makes concurrent imports from
several processes build once.

Environment variables:

* ``PYG_ACCEL_CACHE_DIR``: cache root (default ``$XDG_CACHE_HOME/pyg_accel`` or
  ``~/.cache/pyg_accel``).
* ``PYG_ACCEL_BUILD_CUDA``: ``1`` forces the CUDA sources to be compiled (e.g. on a
  machine with nvcc but no GPU), ``0`` skips them.
* ``TORCH_CUDA_ARCH_LIST``: architectures to compile for (default: those of the visible
  GPUs).
* ``PYG_ACCEL_VERBOSE_BUILD=1``: print the compiler's output.
* ``PYG_ACCEL_CUDA_FLAGS``: extra nvcc flags (part of the cache key), for kernel tuning
  experiments such as ``-DPYG_ACCEL_GATHER_UNROLL=8``.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

import torch

__all__ = ['BuildError', 'BuildConfig', 'build_config', 'compile_library', 'load_library', 'is_loaded',
           'on_load', 'describe']

_LIB_NAME = 'pyg_accel_ops'
# -fopenmp: ATen's parallel_for is inline OpenMP; without it the CPU kernels run serially.
CXX_FLAGS = ('-O3', '-fopenmp')
LD_FLAGS = ('-fopenmp',)
CUDA_FLAGS = ('-O3', '-lineinfo')


class BuildError(RuntimeError):
    """Raised when the C++/CUDA operators cannot be compiled or loaded."""


@dataclass(frozen=True)
class BuildConfig:
    """What will be built, where, and under which cache key."""
    source_dir: Path
    cpu_sources: List[Path]
    cuda_sources: List[Path]
    with_cuda: bool
    cuda_arch_list: Optional[str]
    cache_root: Path
    key: str
    reason_no_cuda: Optional[str] = None
    extra_cflags: List[str] = field(default_factory=lambda: list(CXX_FLAGS))
    extra_cuda_cflags: List[str] = field(default_factory=lambda: list(CUDA_FLAGS))

    @property
    def name(self) -> str:
        return f'{_LIB_NAME}_{self.key}'

    @property
    def build_dir(self) -> Path:
        return self.cache_root / self.name

    @property
    def library_path(self) -> Path:
        return self.build_dir / f'{self.name}.so'


def _source_dir() -> Path:
    """``csrc/`` of a source checkout, else the copy installed as ``pyg_accel/_csrc``."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / 'csrc', here / '_csrc'):
        if (candidate / 'ops.cpp').is_file():
            return candidate
    raise BuildError(f'pyg_accel: the C++ sources (csrc/ops.cpp) were not found next to {here}; '
                     'reinstall the package (pip install -e . from a checkout).')


def _cache_root() -> Path:
    env = os.environ.get('PYG_ACCEL_CACHE_DIR')
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get('XDG_CACHE_HOME')
    return (Path(xdg) if xdg else Path.home() / '.cache') / 'pyg_accel'


def _cuda_home() -> Optional[str]:
    from torch.utils.cpp_extension import CUDA_HOME
    return CUDA_HOME


def _cuda_decision() -> tuple[bool, Optional[str]]:
    """Whether to compile the CUDA sources, and if not, why."""
    forced = os.environ.get('PYG_ACCEL_BUILD_CUDA')
    if forced == '0':
        return False, 'PYG_ACCEL_BUILD_CUDA=0'
    if torch.version.cuda is None:
        return False, f'torch {torch.__version__} is a CPU-only build'
    if _cuda_home() is None:
        return False, 'nvcc was not found (set CUDA_HOME to the CUDA toolkit)'
    if forced == '1':
        return True, None
    if not torch.cuda.is_available():
        return False, 'no CUDA GPU is visible'
    return True, None


def _arch_list(with_cuda: bool) -> Optional[str]:
    if not with_cuda:
        return None
    env = os.environ.get('TORCH_CUDA_ARCH_LIST')
    if env:
        return env
    if torch.cuda.is_available():
        caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        return ';'.join(f'{major}.{minor}' for major, minor in caps)
    return '9.0'


def _hash_sources(files: List[Path], root: Path, extra: List[str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    for item in extra:
        h.update(item.encode())
    return h.hexdigest()[:16]


def _extra_cuda_flags() -> List[str]:
    """Developer knob: PYG_ACCEL_CUDA_FLAGS adds nvcc flags (e.g. -D tuning macros)."""
    return os.environ.get('PYG_ACCEL_CUDA_FLAGS', '').split()


def _toolchain_paths(with_cuda: bool) -> List[str]:
    """What the generated build.ninja embeds besides sources and flags: the interpreter's
    and torch's include and library paths, the compilers and the CUDA toolkit. Two
    environments with the same torch version but different interpreters or installs
    then build into folders of their own instead of rebuilding one shared folder in
    turn (each rebuild holding every other importer behind the build lock)."""
    import sysconfig
    from torch.utils import cpp_extension
    paths = sysconfig.get_paths()
    items = [paths.get('include', ''), paths.get('platinclude', ''),
             *cpp_extension.include_paths(), *cpp_extension.library_paths(),
             os.environ.get('CXX', ''), os.environ.get('CC', '')]
    if with_cuda:
        items += [str(_cuda_home()), os.environ.get('CUDA_INC_PATH', ''), os.environ.get('NVCC_CCBIN', '')]
    return items


def build_config(source_dir: Optional[Path] = None, cache_root: Optional[Path] = None) -> BuildConfig:
    """Describes the build for this machine (cheap; compiles nothing). ``source_dir`` and
    ``cache_root`` override the package's ``csrc/`` and the cache folder."""
    src = Path(source_dir) if source_dir is not None else _source_dir()
    # csrc/ is laid out by op family, then device: <family>/*.cpp (shared host code),
    # <family>/cpu/*.cpp, <family>/cuda/*.cu; ops.cpp holds every schema
    cpu_sources = list(dict.fromkeys([src / 'ops.cpp', *sorted(src.rglob('*.cpp'))]))
    cuda_sources = sorted(src.rglob('*.cu'))
    with_cuda, reason = _cuda_decision()
    arch = _arch_list(with_cuda)
    headers = [p for p in src.rglob('*') if p.suffix in ('.h', '.cuh')]
    hashed = cpu_sources + headers + (cuda_sources if with_cuda else [])
    key = _hash_sources(hashed, src, [torch.__version__, str(torch.version.cuda), str(with_cuda), str(arch),
                                      *CXX_FLAGS, *LD_FLAGS, *CUDA_FLAGS, *_extra_cuda_flags(),
                                      *_toolchain_paths(with_cuda)])
    return BuildConfig(source_dir=src, cpu_sources=cpu_sources, cuda_sources=cuda_sources,
                       with_cuda=with_cuda, cuda_arch_list=arch, cache_root=Path(cache_root or _cache_root()), key=key,
                       reason_no_cuda=reason, extra_cuda_cflags=[*CUDA_FLAGS, *_extra_cuda_flags()])


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'a+') as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_toolchain(config: BuildConfig) -> None:
    from torch.utils.cpp_extension import is_ninja_available
    cxx = os.environ.get('CXX', 'c++')
    if shutil.which(cxx) is None:
        raise BuildError(f"pyg_accel: no C++ compiler found ('{cxx}' is not on PATH). Install one, "
                         "e.g. 'apt-get install g++' (Debian/Ubuntu) or 'conda install -c conda-forge gxx', "
                         'or set CXX to your compiler.')
    if not is_ninja_available():
        raise BuildError("pyg_accel: the 'ninja' build tool is missing. Install it with 'pip install ninja'.")


_ERROR_LINE = re.compile(r'(error|Error|undefined reference|fatal)')


def _summarise_failure(config: BuildConfig, exc: BaseException) -> BuildError:
    text = str(exc)
    log = config.build_dir / 'build-error.log'
    try:
        log.write_text(text)
    except OSError:
        pass
    errors = [line.strip() for line in text.splitlines() if _ERROR_LINE.search(line)][:12]
    summary = '\n  '.join(errors) if errors else text[-2000:]
    return BuildError(f'pyg_accel: compiling the C++/CUDA ops in {config.build_dir} failed:\n  {summary}\n'
                      f'Full compiler output: {log}. Set PYG_ACCEL_VERBOSE_BUILD=1 to see it live.')


_lock = threading.Lock()
_loaded_config: Optional[BuildConfig] = None
_on_load: List[Callable[[], None]] = []


def on_load(fn: Callable[[], None]) -> Callable[[], None]:
    """Registers ``fn`` to run once right after the library is loaded (fake kernels,
    autograd). Runs at once if the library is already loaded."""
    _on_load.append(fn)
    if _loaded_config is not None:
        fn()
    return fn


def is_loaded() -> bool:
    return _loaded_config is not None


def compile_library(config: BuildConfig) -> None:
    """Compiles (or finds up to date) and loads the library described by ``config``.

    Holds a file lock so that concurrent processes build it once; raises
    :class:`BuildError` with the compiler's errors when the build fails.
    """
    _check_toolchain(config)
    from torch.utils.cpp_extension import load
    verbose = os.environ.get('PYG_ACCEL_VERBOSE_BUILD') == '1'
    config.build_dir.mkdir(parents=True, exist_ok=True)
    old_arch = os.environ.get('TORCH_CUDA_ARCH_LIST')
    with _file_lock(config.cache_root / f'{config.name}.lock'):
        # torch's own build baton: a process killed mid-build leaves it behind and every
        # later load() would wait on it forever. Under our lock nobody else is building.
        (config.build_dir / 'lock').unlink(missing_ok=True)
        if not config.library_path.exists():
            what = 'C++ and CUDA' if config.with_cuda else 'C++'
            print(f'pyg_accel: compiling the {what} ops into {config.build_dir} (first use: a few minutes; cached afterwards)...',
                  file=sys.stderr, flush=True)
        try:
            if config.cuda_arch_list:
                os.environ['TORCH_CUDA_ARCH_LIST'] = config.cuda_arch_list
            load(name=config.name,
                 sources=[str(p) for p in config.cpu_sources + (config.cuda_sources if config.with_cuda else [])],
                 extra_cflags=list(config.extra_cflags), extra_cuda_cflags=list(config.extra_cuda_cflags),
                 extra_ldflags=list(LD_FLAGS),
                 extra_include_paths=[str(config.source_dir)], build_directory=str(config.build_dir),
                 with_cuda=config.with_cuda, is_python_module=False, verbose=verbose)
        except (RuntimeError, OSError, ImportError) as exc:
            raise _summarise_failure(config, exc) from None
        finally:
            if old_arch is None:
                os.environ.pop('TORCH_CUDA_ARCH_LIST', None)
            else:
                os.environ['TORCH_CUDA_ARCH_LIST'] = old_arch


def load_library() -> BuildConfig:
    """Compiles (if needed) and loads the operator library; idempotent and thread-safe."""
    global _loaded_config
    if _loaded_config is not None:
        return _loaded_config
    with _lock:
        if _loaded_config is not None:
            return _loaded_config
        config = build_config()
        compile_library(config)
        _loaded_config = config
        for fn in _on_load:
            fn()
        return config


def describe() -> Dict[str, object]:
    """What was (or would be) built, for :func:`pyg_accel.info`."""
    config = _loaded_config or build_config()
    return {
        'loaded': _loaded_config is not None,
        'cuda_ops_built': config.with_cuda,
        'why_no_cuda_ops': config.reason_no_cuda,
        'cuda_arch_list': config.cuda_arch_list,
        'build_dir': str(config.build_dir),
        'library': str(config.library_path),
        'sources': str(config.source_dir),
    }
