"""Symbol extraction: ``ast`` for Python, line regexes for other languages."""

from __future__ import annotations

import ast
import re

from wfqueue.analysis.brace_langs import BRACE_LANGUAGES, braced_symbols
from wfqueue.analysis.indent_langs import python_regex_symbols, ruby_symbols
from wfqueue.analysis.pyast import parse_python
from wfqueue.analysis.symbol_model import Symbol, SymbolKind, first_doc_line

__all__ = ["SYMBOL_LANGUAGES", "Symbol", "SymbolKind", "python_symbols", "regex_symbols", "symbols_from_tree"]

# Module-level constants by convention; single letters are usually TypeVars.
_CONSTANT_NAME = re.compile(r"^_*[A-Z][A-Z0-9_]+$")
_TRY_NODES = (ast.Try, ast.TryStar)
SYMBOL_LANGUAGES: frozenset[str] = BRACE_LANGUAGES | {"python", "ruby"}

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _sort(symbols: list[Symbol]) -> list[Symbol]:
    return sorted(symbols, key=lambda s: (s.line, s.qualname))


def _docstring(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """First docstring line.

    Avoids ``ast.get_docstring``, whose legacy ``ast.Str`` isinstance check
    is slow on large trees.
    """
    first = node.body[0] if node.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first_doc_line(first.value.value)
    return ""


def _constant_names(node: ast.stmt) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    names: list[str] = []
    for target in targets:
        elements = target.elts if isinstance(target, ast.Tuple) else [target]
        names += [e.id for e in elements if isinstance(e, ast.Name) and _CONSTANT_NAME.match(e.id)]
    return names


def _nested_bodies(node: ast.stmt) -> list[list[ast.stmt]]:
    """Statement lists of module/class-level control flow (if/try/with).

    Definitions there (``if TYPE_CHECKING:``, ``try: import x except: def x``)
    are still part of the module's or class's public surface.
    """
    if isinstance(node, ast.If):
        return [node.body, node.orelse]
    if isinstance(node, _TRY_NODES):
        return [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [node.body]
    return []


def _visit(body: list[ast.stmt], prefix: str, in_class: bool, out: list[Symbol]) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            qualname = prefix + node.name
            out.append(
                Symbol(
                    name=node.name,
                    qualname=qualname,
                    kind="class",
                    line=node.lineno,
                    end_line=node.end_lineno or node.lineno,
                    doc=_docstring(node),
                )
            )
            _visit(node.body, qualname + ".", True, out)
        elif isinstance(node, _FunctionNode):
            # Nested (local) functions are not addressable, so they are skipped.
            out.append(
                Symbol(
                    name=node.name,
                    qualname=prefix + node.name,
                    kind="method" if in_class else "function",
                    line=node.lineno,
                    end_line=node.end_lineno or node.lineno,
                    doc=_docstring(node),
                )
            )
        elif not prefix:
            for name in _constant_names(node):
                out.append(
                    Symbol(
                        name=name,
                        qualname=name,
                        kind="constant",
                        line=node.lineno,
                        end_line=node.end_lineno or node.lineno,
                    )
                )
        for nested in _nested_bodies(node):
            _visit(nested, prefix, in_class, out)


def class_attributes(tree: ast.Module) -> list[str]:
    """Names a class body of the module assigns (``sort_keys = True``, ``timeout: float = 5``), each once, in
    order: a requirement that writes one out names the file defining it ("make sort_keys configurable" named
    none, and the plan changed five other files). Not symbols: a dataclass's fields would swamp a file's
    ranking tokens and the symbols a plan names."""
    found: dict[str, None] = {}

    def visit(body: list[ast.stmt], in_class: bool) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, True)
            elif in_class and isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found.update((t.id, None) for t in targets if isinstance(t, ast.Name))
            for nested in _nested_bodies(node):
                visit(nested, in_class)

    visit(tree.body, False)
    return list(found)


def symbols_from_tree(tree: ast.Module) -> list[Symbol]:
    """Symbols of an already parsed module (lets callers parse only once)."""
    out: list[Symbol] = []
    _visit(tree.body, "", False, out)
    return _sort(out)


def python_symbols(text: str) -> list[Symbol]:
    """Classes, functions, methods and module constants of Python source.

    Falls back to ``regex_symbols(text, "python")`` when the code does not
    parse, so half-edited files still show their structure.
    """
    tree = parse_python(text)
    return regex_symbols(text, "python") if tree is None else symbols_from_tree(tree)


def regex_symbols(text: str, language: str) -> list[Symbol]:
    """Best-effort symbols for languages without a parser here.

    Supports javascript, typescript, go, rust, java, c#, kotlin, php, ruby and python; other
    languages yield no symbols.
    """
    if language in BRACE_LANGUAGES:
        return _sort(braced_symbols(text, language))
    if language == "ruby":
        return _sort(ruby_symbols(text))
    if language == "python":
        return _sort(python_regex_symbols(text))
    return []
