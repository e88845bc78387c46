"""Resolution of import statements to files inside the repository.

Only in-repo edges matter to the planner (what else might a change touch?),
so anything that does not resolve to a known file is dropped silently.
"""

from __future__ import annotations

import ast
import posixpath
import re
from typing import NamedTuple

from wfqueue.analysis.pyast import iter_statements, parse_python

_PY_SUFFIXES: tuple[str, ...] = (".py", ".pyi")


class _PyImport(NamedTuple):
    """One import statement, normalised from ast or regex."""

    module: str  # dotted, may be "" for `from . import x`
    names: tuple[str, ...]  # imported names for `from` imports, () for `import`
    level: int  # leading dots of a relative import


def _dotted(path: str) -> list[str] | None:
    """Module name parts for a .py/.pyi path (packages end at their dir)."""
    stem, ext = posixpath.splitext(path)
    if ext not in _PY_SUFFIXES:
        return None
    parts = stem.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return parts or None


def module_index_for(paths: list[str]) -> dict[str, str]:
    """Map dotted module names to repo paths for every Python file.

    Registers the name from the repo root (root layout, namespace packages)
    and, with lower priority, the name without a leading ``src/`` (src
    layout).  A package's ``__init__.py`` beats a same-named module, and
    ``.py`` beats ``.pyi``, as the import system does.  Scripts and test
    helpers importing siblings (``import helpers``) are resolved per importer
    by ``python_imports`` rather than by global bare names, which would
    shadow stdlib and third-party modules for every other file.
    """
    ordered = sorted(
        (p for p in paths if _dotted(p)),
        key=lambda p: (p.endswith(".pyi"), posixpath.basename(p) not in ("__init__.py", "__init__.pyi"), p),
    )
    index: dict[str, str] = {}
    for path in ordered:
        index.setdefault(".".join(_dotted(path) or []), path)
    for path in ordered:
        parts = _dotted(path) or []
        if len(parts) > 1 and parts[0] == "src":
            index.setdefault(".".join(parts[1:]), path)
    return index


def _tree_imports(tree: ast.Module) -> list[_PyImport]:
    found: list[_PyImport] = []
    for node in iter_statements(tree.body):
        if isinstance(node, ast.Import):
            found += [_PyImport(alias.name, (), 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = tuple(alias.name for alias in node.names)
            found.append(_PyImport(node.module or "", names, node.level))
    return found


_RE_IMPORT = re.compile(r"^\s*import\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)", re.M)
_RE_FROM = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+import\s+\(?([^)#\n]*)", re.M)


def _regex_imports(text: str) -> list[_PyImport]:
    """Fallback for files that do not parse; continuation lines are missed."""
    found: list[_PyImport] = []
    for match in _RE_IMPORT.finditer(text):
        found += [_PyImport(item.split()[0], (), 0) for item in match.group(1).split(",")]
    for match in _RE_FROM.finditer(text):
        names = tuple(n.split()[0] for n in match.group(3).split(",") if n.strip())
        found.append(_PyImport(match.group(2), names, len(match.group(1))))
    return found


def _source_root(path: str, known: set[str]) -> str:
    """Nearest ancestor directory of ``path`` that is not a package.

    Python puts a script's directory first on sys.path, and pytest inserts the
    first non-package ancestor of a test file, so absolute imports are tried
    there before the repository-wide names.
    """
    directory = posixpath.dirname(path)
    while directory and (f"{directory}/__init__.py" in known or f"{directory}/__init__.pyi" in known):
        directory = posixpath.dirname(directory)
    return directory


def _lookup(dotted: str, root: str, index: dict[str, str], known: set[str]) -> str | None:
    if root:
        local = _file_for(posixpath.join(root, *dotted.split(".")), known)
        if local:
            return local
    return index.get(dotted)


def _deepest(dotted: str, root: str, index: dict[str, str], known: set[str]) -> str | None:
    """Longest prefix of ``dotted`` that names an in-repo module."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        target = _lookup(".".join(parts[:end]), root, index, known)
        if target:
            return target
    return None


def _file_for(base: str, known: set[str]) -> str | None:
    """Module file for a directory-style base path ("pkg/sub"); "" = root."""
    if not base:
        return None  # the repository root is not a package
    # A package directory wins over a same-named module, as in the import system.
    for candidate in (f"{base}/__init__.py", f"{base}.py", f"{base}/__init__.pyi", f"{base}.pyi"):
        if candidate in known:
            return candidate
    return None


def _relative_base(path: str, level: int) -> str | None:
    """Directory a relative import of ``level`` dots starts from, "" = root."""
    directory = posixpath.dirname(path)
    for _ in range(level - 1):
        if not directory:
            return None  # beyond the top of the repository
        directory = posixpath.dirname(directory)
    return directory


def _resolve(path: str, record: _PyImport, index: dict[str, str], known: set[str]) -> list[str]:
    """In-repo files one import statement of ``path`` loads."""
    if record.level == 0:
        root = _source_root(path, known)
        if not record.names:
            target = _deepest(record.module, root, index, known)
            return [target] if target else []
        names = [name for name in record.names if name != "*"]
        found = [_lookup(f"{record.module}.{name}", root, index, known) for name in names]
        hits = [f for f in found if f]
        # Names that are not submodules are attributes of the module itself.
        if len(hits) < len(record.names):
            module = _deepest(record.module, root, index, known)
            hits += [module] if module else []
        return hits
    base = _relative_base(path, record.level)
    if base is None:
        return []
    if record.module:
        base = posixpath.join(base, *record.module.split("."))
    relative_hits: list[str] = []
    needs_module = "*" in record.names
    for name in record.names:
        submodule = _file_for(posixpath.join(base, name), known) if name != "*" else None
        if submodule:
            relative_hits.append(submodule)
        else:
            needs_module = True
    if needs_module:
        module = _file_for(base, known)
        relative_hits += [module] if module else []
    return relative_hits


def python_imports(path: str, text: str, module_index: dict[str, str]) -> list[str]:
    """In-repo files imported by the Python file ``path`` (sorted, unique).

    ``from a.b import c`` resolves to ``a/b/c.py`` when ``c`` is a submodule
    and to ``a/b.py`` (or ``a/b/__init__.py``) otherwise.  Relative imports are
    resolved against ``path``'s directory.  Imports anywhere in the file count,
    including those inside functions and ``if TYPE_CHECKING:`` blocks.  Files
    that do not parse are scanned with regexes instead.
    """
    tree = parse_python(text)
    if tree is None:
        return _resolve_all(path, _regex_imports(text), module_index)
    return imports_from_tree(path, tree, module_index)


def imports_from_tree(
    path: str, tree: ast.Module, module_index: dict[str, str], known: set[str] | None = None
) -> list[str]:
    """``python_imports`` for an already parsed module.

    ``known`` (the index's values) may be passed in to avoid rebuilding it for
    every file of a large repository.
    """
    return _resolve_all(path, _tree_imports(tree), module_index, known)


def _resolve_all(
    path: str, records: list[_PyImport], module_index: dict[str, str], known: set[str] | None = None
) -> list[str]:
    known = set(module_index.values()) if known is None else known
    targets: set[str] = set()
    for record in records:
        targets.update(_resolve(path, record, module_index, known))
    targets.discard(path)
    return sorted(targets)


_JS_SPECIFIER = re.compile(
    r"""(?:\bimport\s+(?:[^'";]*?\s+from\s+)?|\bexport\s+[^'";]*?\s+from\s+|\brequire\s*\(\s*|\bimport\s*\(\s*)"""
    r"""(['"])(\.{1,2}/[^'"\n]*|\.{1,2})\1"""
)
_JS_EXTENSIONS: tuple[str, ...] = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
# TypeScript ESM code imports "./x.js" while the file on disk is x.ts.
_JS_TO_TS: dict[str, tuple[str, ...]] = {
    ".js": (".ts", ".tsx"),
    ".jsx": (".tsx",),
    ".mjs": (".mts",),
    ".cjs": (".cts",),
}


def _resolve_js(base: str, known: set[str]) -> str | None:
    """File for a normalised specifier path; "" means the repository root."""
    candidates: list[str] = []
    if base:
        stem, ext = posixpath.splitext(base)
        candidates += [base, *(stem + alt for alt in _JS_TO_TS.get(ext, ()))]
        candidates += [base + suffix for suffix in _JS_EXTENSIONS]
    index_base = f"{base}/index" if base else "index"
    candidates += [index_base + suffix for suffix in _JS_EXTENSIONS]
    return next((c for c in candidates if c in known), None)


def js_imports(path: str, text: str, known_paths: set[str]) -> list[str]:
    """In-repo files imported by a JS/TS file via relative specifiers.

    Handles ``import ... from './x'``, side-effect ``import './x'``,
    ``export ... from``, ``require('../y')`` and dynamic ``import('./z')``;
    extensionless specifiers try the usual extensions, then ``/index.*``.
    """
    directory = posixpath.dirname(path)
    targets: set[str] = set()
    for match in _JS_SPECIFIER.finditer(text):
        joined = posixpath.normpath(posixpath.join(directory, match.group(2)))
        if joined.startswith("..") or joined.startswith("/"):
            continue  # outside the repository
        target = _resolve_js("" if joined == "." else joined, known_paths)
        if target and target != path:
            targets.add(target)
    return sorted(targets)
