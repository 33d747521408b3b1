"""pyg_accel._build: cache keys, toolchain errors, failed builds, concurrent first use."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import pyg_accel
from pyg_accel import _build

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def csrc_copy(tmp_path):
    src = tmp_path / 'csrc'
    shutil.copytree(_build.build_config().source_dir, src)
    return src


def test_info_reports_the_build():
    facts = pyg_accel.info(verbose=False)
    assert facts['loaded'] and facts['torch'] == torch.__version__
    assert facts['cuda_ops_built'] == (torch.cuda.is_available() and torch.version.cuda is not None
                                       and _build._cuda_home() is not None)
    assert Path(facts['library']).is_file()
    if not facts['cuda_ops_built']:
        assert facts['why_no_cuda_ops']


def test_cache_key_tracks_sources_and_torch(csrc_copy, tmp_path, monkeypatch):
    key = _build.build_config(csrc_copy, tmp_path).key
    assert _build.build_config(csrc_copy, tmp_path).key == key  # stable
    (csrc_copy / 'README.txt').write_text('not a source file')
    assert _build.build_config(csrc_copy, tmp_path).key == key
    kernel = csrc_copy / 'gather' / 'cpu' / 'gather.cpp'
    kernel.write_text(kernel.read_text() + '\n// edited\n')
    edited = _build.build_config(csrc_copy, tmp_path).key
    assert edited != key
    header = csrc_copy / 'gather' / 'gather_common.h'
    header.write_text(header.read_text() + '\n// edited\n')
    assert _build.build_config(csrc_copy, tmp_path).key != edited
    monkeypatch.setattr(torch, '__version__', '0.0.1')
    assert _build.build_config(csrc_copy, tmp_path).key not in (key, edited)


def test_cache_key_tracks_the_toolchain_paths(csrc_copy, tmp_path, monkeypatch):
    """build.ninja embeds the interpreter's and torch's include paths and the compiler:
    two environments with the same torch version must not share (and rebuild in turn)
    one cache folder."""
    import sysconfig
    from torch.utils import cpp_extension
    key = _build.build_config(csrc_copy, tmp_path).key
    include_paths = cpp_extension.include_paths
    monkeypatch.setattr(cpp_extension, 'include_paths', lambda *a, **k: ['/other/venv/torch/include'])
    other_torch = _build.build_config(csrc_copy, tmp_path).key
    monkeypatch.setattr(cpp_extension, 'include_paths', include_paths)
    get_paths = sysconfig.get_paths
    monkeypatch.setattr(sysconfig, 'get_paths', lambda *a, **k: {**get_paths(), 'include': '/other/python'})
    other_python = _build.build_config(csrc_copy, tmp_path).key
    monkeypatch.setattr(sysconfig, 'get_paths', get_paths)
    monkeypatch.setenv('CXX', 'clang++')
    other_compiler = _build.build_config(csrc_copy, tmp_path).key
    assert len({key, other_torch, other_python, other_compiler}) == 4


def test_cache_key_tracks_cuda_arch(csrc_copy, tmp_path, monkeypatch):
    if torch.version.cuda is None or _build._cuda_home() is None:
        pytest.skip('needs a CUDA build of torch and nvcc')
    monkeypatch.setenv('PYG_ACCEL_BUILD_CUDA', '1')
    monkeypatch.setenv('TORCH_CUDA_ARCH_LIST', '8.0')
    a = _build.build_config(csrc_copy, tmp_path)
    monkeypatch.setenv('TORCH_CUDA_ARCH_LIST', '9.0')
    b = _build.build_config(csrc_copy, tmp_path)
    assert a.with_cuda and a.key != b.key


def test_missing_toolchain_says_what_to_install(tmp_path, monkeypatch):
    config = _build.build_config(cache_root=tmp_path)
    monkeypatch.setenv('CXX', 'no-such-compiler-xyz')
    with pytest.raises(_build.BuildError, match='no C\\+\\+ compiler found.*apt-get install g\\+\\+'):
        _build.compile_library(config)
    monkeypatch.delenv('CXX')
    import torch.utils.cpp_extension as ext
    monkeypatch.setattr(ext, 'is_ninja_available', lambda: False)
    with pytest.raises(_build.BuildError, match='pip install ninja'):
        _build.compile_library(config)


@pytest.mark.slow  # compiles the C++ ops from scratch
def test_failed_build_is_summarised(tmp_path):
    # (a source tree of one broken file: the compiler fails at once, where a copy of csrc/
    # with one file broken compiled the rest first, half a minute on a 2-core CI machine)
    source = tmp_path / 'csrc'
    source.mkdir()
    (source / 'ops.cpp').write_text('#include <torch/library.h>\nnamespace pyg_accel { this is not C++; }\n')
    config = _build.build_config(source, tmp_path / 'cache')
    with pytest.raises(_build.BuildError) as info:
        _build.compile_library(config)
    message = str(info.value)
    assert 'failed' in message and 'error' in message and 'build-error.log' in message
    assert (config.build_dir / 'build-error.log').is_file()


def test_missing_sources_error(tmp_path, monkeypatch):
    monkeypatch.setattr(_build, '__file__', str(tmp_path / 'pkg' / '_build.py'))
    with pytest.raises(_build.BuildError, match='were not found'):
        _build._source_dir()


def _seeded_build_dir(env: dict, recompile: tuple = ()) -> Path:
    """The build folder a process with ``env`` builds into, made to hold the CPU build of
    the running tests' cache (when there is one) less its library, its lock and the
    objects named in ``recompile``: a build there then compiles just those and links,
    instead of every op (what the tests exercise is the build's locking, not the compiler)."""
    code = 'from pyg_accel import _build; print(_build.build_config().build_dir)'

    def build_dir_of(env):
        return Path(subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                                   check=True).stdout.strip())
    build_dir = build_dir_of(env)
    built = build_dir_of({**os.environ, 'PYG_ACCEL_BUILD_CUDA': '0'})  # (the same key in the running tests' cache)
    if built.is_dir() and any(built.glob('*.so')):
        shutil.copytree(built, build_dir, ignore=shutil.ignore_patterns('*.so', 'lock', *recompile))
    else:
        build_dir.mkdir(parents=True)
    return build_dir


@pytest.mark.slow  # links the C++ ops (compiles them from scratch if the tests' cache has no CPU build yet)
def test_concurrent_first_use_builds_once(tmp_path):
    """Two processes import and use the ops at once on a cache without the library (the
    tests' compiled objects copied in, so the build links them): both succeed, one library
    is built."""
    script = textwrap.dedent('''
        import torch
        from pyg_accel.ops import gather
        t = torch.arange(12.).view(6, 2)
        assert torch.equal(gather(t, torch.tensor([5, 0])), t[[5, 0]])
        print('ok')
    ''')
    env = {**os.environ, 'PYG_ACCEL_CACHE_DIR': str(tmp_path), 'PYG_ACCEL_BUILD_CUDA': '0'}
    _seeded_build_dir(env)
    procs = [subprocess.Popen([sys.executable, '-c', script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=900) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        assert out.strip().endswith('ok')
    built = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(built) == 1 and len(list(built[0].glob('*.so'))) == 1
    assert sum('compiling' in err for _, err in outputs) == 1


def test_prebuild_command():
    out = subprocess.run([sys.executable, '-m', 'pyg_accel.build'], capture_output=True, text=True, cwd=REPO,
                         timeout=900)
    assert out.returncode == 0, out.stderr
    assert 'cuda_ops_built' in out.stdout and 'build_dir' in out.stdout


@pytest.mark.slow  # links the C++ ops (compiles them from scratch if the tests' cache has no CPU build yet)
def test_stale_build_baton_does_not_hang(tmp_path):
    """A process killed mid-build leaves torch's 'lock' file; the next build must not wait on it.
    The killed build had compiled the objects (copied from the running tests' CPU build,
    when there is one): the build still has to take the baton, only it then just links."""
    env = {**os.environ, 'PYG_ACCEL_CACHE_DIR': str(tmp_path), 'PYG_ACCEL_BUILD_CUDA': '0'}
    build_dir = _seeded_build_dir(env)
    (build_dir / 'lock').write_text('')
    out = subprocess.run([sys.executable, '-m', 'pyg_accel.build'], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
