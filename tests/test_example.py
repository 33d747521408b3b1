"""The README's main example runs end to end on the embedded default dataset."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'examples'))
import node_classification  # noqa: E402


@pytest.mark.parametrize('model', ['sage', 'gcn'])
def test_main_example_trains(tmp_path, model):
    summary = node_classification.main(['--epochs', '15', '--model', model, '--out', str(tmp_path)])
    assert summary['test_acc'] > 0.5  # 8 classes: chance is 0.125
    metrics = json.loads((tmp_path / 'metrics.json').read_text())
    assert len(metrics['history']) == 15
    assert metrics['history'][-1]['loss'] < metrics['history'][0]['loss']
    assert (tmp_path / 'curves.png').is_file()
