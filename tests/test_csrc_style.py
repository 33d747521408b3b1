"""Source rules for csrc/ that a compiler does not enforce.

Every value in a TORCH_CHECK message is a string: an integer streamed into the message
crashed the process (SIGSEGV in ``ostream::_M_insert<long>``) when the check was reached
from an nvcc-compiled CUDA entry point on the GPU machines, where the same check on the
CPU path raised. Numbers go through ``std::to_string`` and shapes through ``shape_str``
(``csrc/common/check_format.h``).
"""
import re
from pathlib import Path
from typing import Iterator, List, Tuple

CSRC = Path(__file__).resolve().parents[1] / 'csrc'
_CHECK = re.compile(r'\bTORCH_CHECK(?:_INDEX|_VALUE|_TYPE)?\(')
# a message part that is a string: literals, std::to_string / shape_str / std::string(...),
# a .str(), a dtype (streams its name), or one of the string-typed names csrc uses
_STRING_PART = re.compile(r'^(?:"(?:[^"\\]|\\.)*"\s*)+$|^(?:std::to_string|shape_str|std::string)\(.*\)$|\.str\(\)$'
                          r'|\.scalar_type\(\)$|^t\.dtype$|^(?:what|op|name|mode|env|list_name|input\.name)$', re.S)


def _split_top_level(text: str, separators: str) -> List[str]:
    """``text`` split at the characters of ``separators`` outside brackets and quotes."""
    parts, depth, quote, current, k = [], 0, None, '', 0
    while k < len(text):
        c = text[k]
        if quote:
            current += c
            if c == '\\':
                current += text[k + 1]
                k += 1
            elif c == quote:
                quote = None
        elif c in '"\'':
            quote = c
            current += c
        elif c in '([{':
            depth += 1
            current += c
        elif c in ')]}':
            depth -= 1
            current += c
        elif c in separators and depth == 0 and not (c == ':' and text[k:k + 2] == '::') \
                and not (c == ':' and text[k - 1:k + 1] == '::'):
            parts.append(current.strip())
            current = ''
        else:
            current += c
        k += 1
    parts.append(current.strip())
    return parts


def _checks(text: str) -> Iterator[Tuple[int, str]]:
    """(line, argument text) of every TORCH_CHECK call in ``text``."""
    for match in _CHECK.finditer(text):
        depth, quote, k = 1, None, match.end()
        while depth:
            c = text[k]
            if quote:
                if c == '\\':
                    k += 1
                elif c == quote:
                    quote = None
            elif c in '"\'':
                quote = c
            elif c == '(':
                depth += 1
            elif c == ')':
                depth -= 1
            k += 1
        yield text.count('\n', 0, match.start()) + 1, text[match.end():k - 1]


def _is_string(part: str) -> bool:
    """Whether a message argument is a string: itself, or a ternary or concatenation of strings."""
    if _STRING_PART.search(part):
        return True
    if '?' in part:  # cond ? a : b: both branches strings
        _, branches = part.split('?', 1)
        pieces = _split_top_level(branches, ':')
        return len(pieces) == 2 and all(_is_string(p) for p in pieces)
    pieces = _split_top_level(part, '+')
    return len(pieces) > 1 and all(_is_string(p) for p in pieces)


def non_string_message_parts(text: str) -> List[Tuple[int, str]]:
    """(line, argument) of every TORCH_CHECK message argument in ``text`` that is not a string."""
    return [(line, part) for line, body in _checks(text) for part in _split_top_level(body, ',')[1:]
            if not _is_string(part)]


def test_check_messages_hold_no_streamed_numbers():
    found = [f'{path.relative_to(CSRC)}:{line}: {part}'
             for path in sorted(CSRC.rglob('*')) if path.suffix in ('.h', '.cuh', '.cpp', '.cu')
             for line, part in non_string_message_parts(path.read_text())]
    assert not found, 'numbers streamed into TORCH_CHECK messages (use std::to_string):\n' + '\n'.join(found)


def test_the_rule_finds_streamed_numbers():
    source = '''
    TORCH_CHECK(n > 0, "op: got ", n, " rows");
    TORCH_CHECK(x.dim() == 2, "op: x is ", x.sizes(), ", ", x.scalar_type());
    TORCH_CHECK(ok, "op: ", what, " has ", std::to_string(n), " rows, want ", shape_str(x.sizes()));
    TORCH_CHECK(ok, "op: ", flag ? "a" : "b" + std::to_string(k), flag ? "a" : k + 1);
    '''
    assert non_string_message_parts(source) == [(2, 'n'), (3, 'x.sizes()'), (5, 'flag ? "a" : k + 1')]
