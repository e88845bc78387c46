"""Lexical helpers for regex-based symbol extraction.

The regex extractors do not parse; they look at lines.  To keep them from
matching inside comments and string literals, and to find where a braced body
ends, the text is first "cleaned": comments and literal contents become spaces
while every newline stays put, so offsets and line numbers are unchanged.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

_LINE_COMMENT = r"//[^\n]*"
_BLOCK_COMMENT = r"/\*[\s\S]*?\*/"
_DQ_STRING = r'"(?:\\.|[^"\\\n])*"'
_SQ_STRING = r"'(?:\\.|[^'\\\n])*'"
# A single character literal only: Rust lifetimes ('a) and labels must survive.
_CHAR_LITERAL = r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^'\\\n])'"

_CLEANERS: dict[str, re.Pattern[str]] = {
    "javascript": re.compile(
        "|".join([_LINE_COMMENT, _BLOCK_COMMENT, _DQ_STRING, _SQ_STRING, r"`(?:\\[\s\S]|[^`\\])*`"])
    ),
    "java": re.compile(
        "|".join([r'"""[\s\S]*?"""', _LINE_COMMENT, _BLOCK_COMMENT, _DQ_STRING, _CHAR_LITERAL])
    ),
    "go": re.compile("|".join([_LINE_COMMENT, _BLOCK_COMMENT, _DQ_STRING, _CHAR_LITERAL, r"`[^`]*`"])),
    "rust": re.compile(
        "|".join([_LINE_COMMENT, _BLOCK_COMMENT, r'b?r(#*)"[\s\S]*?"\1', _DQ_STRING, _CHAR_LITERAL])
    ),
}
_CLEANERS["typescript"] = _CLEANERS["javascript"]
# C#: raw and verbatim strings (@"a ""b"""), interpolated ones ($"..."); Kotlin: raw strings; PHP: # comments.
_CLEANERS["csharp"] = re.compile("|".join([r'"""[\s\S]*?"""', r'\$?@"(?:""|[^"])*"', _LINE_COMMENT, _BLOCK_COMMENT,
                                            r"\$?" + _DQ_STRING, _CHAR_LITERAL]))
_CLEANERS["kotlin"] = re.compile("|".join([r'"""[\s\S]*?"""', _LINE_COMMENT, _BLOCK_COMMENT, _DQ_STRING,
                                           _CHAR_LITERAL]))
_CLEANERS["php"] = re.compile("|".join([_LINE_COMMENT, r"#(?!\[)[^\n]*", _BLOCK_COMMENT, _DQ_STRING, _SQ_STRING]))
# Swift: multi-line and raw strings (#"a "quoted" b"#); Scala: multi-line strings, interpolated ones (s"...").
_CLEANERS["swift"] = re.compile("|".join([r'#+"""[\s\S]*?"""#+', r'"""[\s\S]*?"""', r'#+"[^\n]*?"#+', _LINE_COMMENT,
                                          _BLOCK_COMMENT, _DQ_STRING]))
_CLEANERS["scala"] = re.compile("|".join([r'\w*"""[\s\S]*?"""', _LINE_COMMENT, _BLOCK_COMMENT, r"\w*" + _DQ_STRING,
                                          _CHAR_LITERAL]))
_NOT_NEWLINE = re.compile(r"[^\n]")

# A declaration header continues onto the next line when its line ends with
# one of these, or the next line starts with one of _CONTINUATION_STARTS.
_CONTINUATION_ENDS: tuple[str, ...] = (
    ",",
    "=",
    "=>",
    "->",
    "(",
    ":",
    "||",
    "&&",
    "+",
    "?",
    "where",
)
_CONTINUATION_STARTS: tuple[str, ...] = (
    "{",
    "where",
    "->",
    ":",
    "throws",
    "extends",
    "implements",
    ".",
    "|",
    "&",
    "=>",
    "?",
)
# Longest header scanned for the opening brace; beyond that we give up.
_MAX_HEADER_CHARS = 4000


def clean_code(text: str, language: str) -> str:
    """``text`` with comments and string contents blanked, layout preserved."""
    pattern = _CLEANERS.get(language)
    if pattern is None:
        return text
    return pattern.sub(lambda m: _NOT_NEWLINE.sub(" ", m.group()), text)


class BraceMap:
    """Curly-brace structure of cleaned text: nesting depth and matching pairs.

    Built once per file so each declaration's body end is a dictionary lookup.
    """

    def __init__(self, clean: str) -> None:
        self.length = len(clean)
        self.line_starts: list[int] = [0] + [m.end() for m in re.finditer("\n", clean)]
        self._offsets: list[int] = []
        self._depth_after: list[int] = []
        self.close_of: dict[int, int] = {}
        stack: list[int] = []
        depth = 0
        for match in re.finditer(r"[{}]", clean):
            offset = match.start()
            if match.group() == "{":
                stack.append(offset)
                depth += 1
            elif stack:
                self.close_of[stack.pop()] = offset
                depth -= 1
            self._offsets.append(offset)
            self._depth_after.append(depth)
        for offset in stack:  # unbalanced text: the body runs to the end
            self.close_of[offset] = max(self.length - 1, 0)

    def depth_at(self, offset: int) -> int:
        """Brace depth just before ``offset``."""
        index = bisect.bisect_left(self._offsets, offset)
        return self._depth_after[index - 1] if index else 0

    def line_of(self, offset: int) -> int:
        """0-based line index containing ``offset``."""
        return bisect.bisect_right(self.line_starts, offset) - 1


def _next_code_line(clean: str, offset: int) -> str:
    """The next non-blank line after ``offset`` (a newline), stripped."""
    for line in clean[offset + 1 : offset + 1 + _MAX_HEADER_CHARS].split("\n"):
        if line.strip():
            return line.strip()
    return ""


def declaration_extent(clean: str, offset: int, braces: BraceMap) -> tuple[int | None, int]:
    """Where a declaration starting at ``offset`` opens its body and ends.

    Returns ``(open_brace_offset or None, 0-based end line)``.  The header is
    scanned at parenthesis depth 0: a ``{`` opens the body, a ``;`` ends a
    bodiless declaration, and a newline ends it unless the header visibly
    continues (trailing comma/operator, Allman brace, ``where`` clause, ...).
    """
    parens = 0
    limit = min(len(clean), offset + _MAX_HEADER_CHARS)
    index = offset
    while index < limit:
        char = clean[index]
        if char in "([":
            parens += 1
        elif char in ")]":
            parens = max(0, parens - 1)
        elif parens == 0:
            if char == "{":
                return index, braces.line_of(braces.close_of.get(index, braces.length - 1))
            if char == ";":
                return None, braces.line_of(index)
            if char == "\n":
                before = clean[max(offset, index - 200) : index].rstrip()
                after = _next_code_line(clean, index)
                if not (before.endswith(_CONTINUATION_ENDS) or after.startswith(_CONTINUATION_STARTS)):
                    return None, braces.line_of(max(offset, index - 1))
        index += 1
    return None, braces.line_of(offset)


def indent_of(line: str) -> int:
    """Indentation width, tabs counting as 8 columns like Python does."""
    expanded = line.expandtabs(8)
    return len(expanded) - len(expanded.lstrip(" "))


def _bracket_balance(line: str) -> int:
    return sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")


def indented_block_end(
    lines: Sequence[str], start: int, comment: str = "#", closer: str | None = None
) -> int:
    """0-based last line of the indented block whose header is ``lines[start]``.

    The header may span lines while brackets are open.  With ``closer`` (Ruby's
    ``end``) a closing keyword at the header's indentation is part of the block.
    """
    indent = indent_of(lines[start])
    balance = _bracket_balance(lines[start])
    index = start + 1
    while balance > 0 and index < len(lines):  # multi-line signature
        balance += _bracket_balance(lines[index])
        index += 1
    last = index - 1
    for current in range(index, len(lines)):
        stripped = lines[current].strip()
        if not stripped or stripped.startswith(comment):
            continue
        if indent_of(lines[current]) <= indent:
            word = stripped.split(None, 1)[0].rstrip(";")
            if closer is not None and word == closer and indent_of(lines[current]) == indent:
                return current
            return last
        last = current
    return last
