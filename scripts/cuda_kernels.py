"""Which of csrc's CUDA kernels (``csrc/<family>/cuda``) a test run launched: the quick GPU tier's coverage check.

Reads the report that ``pytest --kernel-report FILE`` writes (one "test<TAB>kernel" line
per kernel a test launched, from torch.profiler) and matches the kernel names against
every ``__global__`` function defined in ``csrc/*/cuda`` (by name and parameter count,
which tells apart the homogeneous and heterogeneous samplers' kernels of the same name).
Prints, per source file, the kernels launched and those never launched; exits 1 when a
file defining kernels had none of them launched.

    python -m pytest tests -m "not slow" --kernel-report OUT/kernels.tsv
    python scripts/cuda_kernels.py OUT/kernels.tsv
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
# '__global__ void [__launch_bounds__(...) | MACRO] name(' (the bounds may hold one level of parentheses)
_DEFINITION = re.compile(r'__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?'
                         r'(?:void\s+)?(?:[A-Z][A-Z0-9_]*\s+)?(\w+)\s*\(')

Kernel = Tuple[str, int]  # (name, number of parameters)


def _split_top_level(text: str) -> List[str]:
    """``text`` split at the commas outside any ``<>``, ``()`` or ``[]``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in '<([':
            depth += 1
        elif ch in '>)]':
            depth -= 1
        elif ch == ',' and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (part.strip() for part in parts) if p]


def _parameters(text: str, open_paren: int) -> str:
    """The text between the parenthesis at ``open_paren`` and its match."""
    depth = 0
    for i in range(open_paren, len(text)):
        depth += {'(': 1, ')': -1}.get(text[i], 0)
        if depth == 0:
            return text[open_paren + 1:i]
    raise ValueError('unbalanced parentheses')


def defined_kernels(source_dir: Path = ROOT / 'csrc') -> Dict[str, List[Kernel]]:
    """Per CUDA source file under ``source_dir`` (``<family>/cuda/*``): its ``__global__``
    functions as (name, parameter count)."""
    found: Dict[str, List[Kernel]] = {}
    for path in sorted(source_dir.glob('*/cuda/*'), key=lambda p: p.name):
        text = path.read_text()
        kernels = [(m.group(1), len(_split_top_level(_parameters(text, m.end() - 1))))
                   for m in _DEFINITION.finditer(text)]
        if kernels:
            found[path.name] = kernels
    return found


def launched_kernel(demangled: str) -> Kernel:
    """(name, parameter count) of a demangled kernel name as the profiler reports it,
    e.g. ``void pyg_accel::(anonymous namespace)::spmm_kernel<float>(Args<float>, long)``."""
    text = demangled.replace('(anonymous namespace)', 'anon')
    depth = 0
    for i, ch in enumerate(text):
        if ch == '<':
            depth += 1
        elif ch == '>':
            depth -= 1
        elif ch == '(' and depth == 0:
            head = text[:i]
            while head.endswith('>'):  # strip the template arguments
                level, j = 0, len(head) - 1
                for j in range(len(head) - 1, -1, -1):
                    level += {'>': 1, '<': -1}.get(head[j], 0)
                    if level == 0:
                        break
                head = head[:j]
            return re.split(r'[\s:]+', head)[-1], len(_split_top_level(_parameters(text, i)))
    return text.strip(), 0


def read_report(path: Path) -> Dict[Kernel, Set[str]]:
    """The report's kernels, each with the tests that launched it."""
    tests: Dict[Kernel, Set[str]] = defaultdict(set)
    for line in path.read_text().splitlines():
        test, _, name = line.partition('\t')
        if name:
            tests[launched_kernel(name)].add(test)
    return tests


def coverage(defined: Dict[str, List[Kernel]], launched: Iterable[Kernel]) -> Dict[str, Tuple[List[str], List[str]]]:
    """Per file: (kernels launched, kernels never launched), by name."""
    launched = set(launched)
    return {file: ([n for n, c in kernels if (n, c) in launched], [n for n, c in kernels if (n, c) not in launched])
            for file, kernels in defined.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('report', type=Path, help='the file pytest --kernel-report wrote')
    args = p.parse_args(argv)
    tests = read_report(args.report)
    table = coverage(defined_kernels(), tests)
    total = sum(len(hit) + len(missed) for hit, missed in table.values())
    print(f'{"file":<22} {"launched":>8}  never launched')
    for file, (hit, missed) in table.items():
        print(f'{file:<22} {len(hit):>3} / {len(hit) + len(missed):<3} {", ".join(missed) or "-"}')
    launched = sum(len(hit) for hit, _ in table.values())
    untested = [file for file, (hit, _) in table.items() if not hit]
    print(f'{launched} of {total} kernels launched by {len({t for ts in tests.values() for t in ts})} tests'
          + (f'; files with no kernel launched: {", ".join(untested)}' if untested else ''))
    return 1 if untested else 0


if __name__ == '__main__':
    sys.exit(main())
