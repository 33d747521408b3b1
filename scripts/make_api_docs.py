"""Writes docs/api.md, the API reference, from the public names (``__all__``) of each
pyg_accel module: signatures and docstrings, and for classes the public methods they
define themselves (what they inherit from PyG is documented by PyG).

    python scripts/make_api_docs.py [--out docs/api.md]
"""
from __future__ import annotations

import argparse
import importlib
import inspect
from pathlib import Path
from typing import List

MODULES = ['pyg_accel', 'pyg_accel.data', 'pyg_accel.sampler', 'pyg_accel.loader', 'pyg_accel.nn',
           'pyg_accel.nn.models', 'pyg_accel.ops', 'pyg_accel.training', 'pyg_accel.datasets', 'pyg_accel.distributed']


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return '(...)'


def _doc(obj) -> str:
    return inspect.getdoc(obj) or '*(no docstring)*'


def _members(cls) -> List[str]:
    """Public methods and properties written in ``cls``'s own body (not ones a library
    attaches at run time, such as PyG's generated ``propagate``)."""
    names = []
    for name, value in vars(cls).items():
        if name.startswith('_'):
            continue
        func = value.fget if isinstance(value, property) else getattr(value, '__func__', value)
        if callable(func) and getattr(func, '__qualname__', '').startswith(cls.__qualname__ + '.'):
            names.append(name)
    return names


def document(module_name: str) -> List[str]:
    module = importlib.import_module(module_name)
    lines = [f'## `{module_name}`', '', inspect.getdoc(module) or '', '']
    for name in getattr(module, '__all__', []):
        obj = getattr(module, name)
        if inspect.ismodule(obj) or name.startswith('__'):
            continue
        if inspect.isclass(obj):
            bases = ', '.join(f'`{b.__module__}.{b.__qualname__}`' for b in obj.__bases__ if b is not object)
            lines += [f'### class `{module_name}.{name}{_signature(obj)}`', '']
            if bases:
                lines += [f'Bases: {bases}', '']
            lines += [_doc(obj), '']
            for member in _members(obj):
                value = vars(obj)[member]
                target = value.fget if isinstance(value, property) else getattr(obj, member)
                kind = 'property' if isinstance(value, property) else 'method'
                sig = '' if kind == 'property' else _signature(target)
                lines += [f'#### {kind} `{name}.{member}{sig}`', '', _doc(target), '']
        elif callable(obj):
            lines += [f'### `{module_name}.{name}{_signature(obj)}`', '', _doc(obj), '']
        else:  # a constant: its type and, for mappings, its keys
            keys = f': keys {", ".join(map(repr, obj))}' if isinstance(obj, dict) else ''
            lines += [f'### `{module_name}.{name}`', '', f'A `{type(obj).__name__}`{keys}.', '']
    return lines


def main(argv=None) -> str:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--out', default=str(Path(__file__).resolve().parents[1] / 'docs' / 'api.md'))
    args = p.parse_args(argv)
    lines = ['# API reference', '',
             'Generated from the docstrings by `python scripts/make_api_docs.py`; the user guide '
             '(docs/guide.md) shows how the pieces fit together.', '']
    for module_name in MODULES:
        lines += document(module_name)
    text = '\n'.join(lines).rstrip() + '\n'
    Path(args.out).write_text(text)
    print(f'wrote {args.out} ({len(text.splitlines())} lines)')
    return text


if __name__ == '__main__':
    main()
