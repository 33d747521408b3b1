"""The API reference (docs/api.md) is generated from docstrings and covers every public name."""
import importlib
import inspect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'scripts'))
import make_api_docs  # noqa: E402


def test_api_reference_covers_every_public_name(tmp_path):
    text = make_api_docs.main(['--out', str(tmp_path / 'api.md')])
    assert '*(no docstring)*' not in text
    for module_name in make_api_docs.MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if not inspect.ismodule(getattr(module, name)) and not name.startswith('__'):
                assert f'{module_name}.{name}' in text, f'{module_name}.{name} is missing from the API reference'


def test_committed_api_reference_is_current(tmp_path):
    """docs/api.md names the same public objects as a fresh generation (signatures may
    differ across torch versions, so only the headings are compared)."""
    fresh = make_api_docs.main(['--out', str(tmp_path / 'api.md')])
    committed = (Path(__file__).resolve().parents[1] / 'docs' / 'api.md').read_text()
    heads = lambda t: [line.split('(')[0] for line in t.splitlines() if line.startswith('#')]  # noqa: E731
    assert heads(committed) == heads(fresh), 'regenerate docs/api.md: python scripts/make_api_docs.py'
