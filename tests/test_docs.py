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


README = Path(__file__).resolve().parents[1] / 'README.md'


def _code_blocks(text: str, language: str):
    blocks, inside = [], None
    for line in text.splitlines():
        if inside is None and line.strip() == f'```{language}':
            inside = []
        elif inside is not None and line.strip() == '```':
            blocks.append('\n'.join(inside))
            inside = None
        elif inside is not None:
            inside.append(line)
    return blocks


def test_readme_snippet_runs_as_written():
    """The README's training loop, then its captured-step loop, run as pasted (one after
    the other, as a reader would), on whatever device this machine has, and train: the
    loss goes down."""
    snippets = _code_blocks(README.read_text(), 'python')
    assert len(snippets) == 2 and 'TrainStep' in snippets[1]
    namespace = {}
    for snippet in snippets:
        exec(compile(snippet, 'README.md', 'exec'), namespace)
    assert namespace['loss'].dim() == 0
    model, loader, F = namespace['model'], namespace['loader'], namespace['F']
    batch = next(iter(loader))
    with __import__('torch').no_grad():
        loss = F.cross_entropy(model(batch.x, batch.edge_index)[:batch.batch_size], batch.y[:batch.batch_size])
    assert float(loss) < 1.5  # 8 classes: an untrained model's loss is ~2.1


def test_readme_is_a_users_page():
    """At most 150 lines, the two quick-start commands, and the test command CI runs."""
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    quick = _code_blocks(text.split('## Quick start', 1)[1], 'bash')[0].splitlines()
    assert [line.split('#')[0].strip() for line in quick] == [
        'pip install -e ".[test]" && python examples/node_classification.py', 'python -m pytest tests']
    ci = (README.parent / '.ci' / 'run').read_text().strip().splitlines()
    assert ci[-1] == 'python -m pytest tests'
