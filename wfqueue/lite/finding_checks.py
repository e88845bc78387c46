"""Search verification: every finding of an exploration is checked against the code.

``verify_findings`` returns one :class:`Check` per finding, in the order of the
findings (files, then patterns, integration points, dependencies).  A finding
that cannot be confirmed is reported with the reason; nothing is dropped.

Check subjects (what ``VerifiedExploration.check_for(kind, subject)`` looks up):

- ``file``: the path as written in the finding;
- ``pattern``: the pattern's regular expression (``Pattern.search``);
- ``integration_point``: ``"{file}:{line}"``;
- ``dependency``: ``"{source} -> {target}"``.

Paths are never followed out of the repository: absolute paths, ``..`` that
climbs above the root and symlinks resolving elsewhere are reported as
"outside the repository" without being touched.  Reading repository files is
the only I/O.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from wfqueue.analysis import (
    js_imports,
    list_source_files,
    module_index_for,
    python_imports,
)
from wfqueue.analysis.files import DEFAULT_MAX_INDEXED_FILES, SourceFile, language_for
from wfqueue.lite.models import (
    AngleFindings,
    Check,
    Dependency,
    IntegrationPoint,
    Pattern,
    RelevantFile,
)

OUTSIDE = "outside the repository"
# Bounds of the pattern grep: files scanned, bytes scanned, matches counted.
MAX_SCAN_FILES = DEFAULT_MAX_INDEXED_FILES  # as many as the planner reads by default (it stopped at 5 000)
MAX_SCAN_BYTES = 64 * 1024 * 1024
MAX_COUNTED_MATCHES = 10000
SNIPPET_WINDOW = 2  # an integration point's snippet may sit this many lines off
_EVIDENCE_TEXT = 120  # longest line quoted in evidence
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SPACES = re.compile(r"\s+")
_JS_LANGUAGES = frozenset({"javascript", "typescript"})
_PY_IMPORT_LINE = re.compile(r"^\s*(?:from\s+\S+\s+import\b|import\s+\S)")
_JS_IMPORT_LINE = re.compile(r"\bimport\b|\brequire\s*\(|\bexport\b[^;]*\bfrom\b")


# ---------------------------------------------------------------- shared helpers


def split_lines(text: str) -> list[str]:
    """Lines as editors and ``ast`` number them (``\\n``, ``\\r\\n`` or ``\\r``)."""
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()  # the text ended with a newline
    return lines


def normalise_space(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _quote(line: str) -> str:
    text = line.strip()
    return text if len(text) <= _EVIDENCE_TEXT else text[: _EVIDENCE_TEXT - 1] + "…"


def _module_names(target: str) -> list[str]:
    """Dotted names a Python file is imported by ("src/" layout included)."""
    stem, _ = posixpath.splitext(target)
    parts = [p for p in stem.split("/") if p]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    names = [".".join(parts)] if parts else []
    if len(parts) > 1 and parts[0] == "src":
        names.append(".".join(parts[1:]))
    return names


def _short_name(target: str) -> str:
    """Last name of a path or dotted module (a package's init names its dir)."""
    if "/" not in target and not posixpath.splitext(target)[1] and "." in target:
        return target.rsplit(".", 1)[-1]  # dotted module name
    stem = posixpath.splitext(posixpath.basename(target))[0]
    if stem in ("__init__", "index", "mod") and posixpath.dirname(target):
        return posixpath.basename(posixpath.dirname(target))
    return stem


def import_line_of(text: str, source: str, target: str) -> int | None:
    """1-based line of ``source`` (whose text is ``text``) importing ``target``.

    ``target`` is a repository path or a dotted module name.  Best effort: the
    statement naming the module (or, for ``from pkg import (`` blocks, the line
    opening the statement); None when no import line mentions it.
    """
    lines = split_lines(text)
    language = language_for(source)
    last = _short_name(target)
    if not last:
        return None
    word = re.compile(rf"(?<![\w.]){re.escape(last)}\b")
    if language == "python":
        dotted = _module_names(target) if "/" in target or target.endswith((".py", ".pyi")) else [target]
        for name in dotted:
            exact = re.compile(rf"^\s*(?:from\s+{re.escape(name)}\s+import\b|import\s+(?:.*,\s*)?{re.escape(name)}\b)")
            for number, line in enumerate(lines, 1):
                if exact.search(line):
                    return number
            parent, _, child = name.rpartition(".")
            if parent:
                opener = re.compile(rf"^\s*from\s+{re.escape(parent)}\s+import\b")
                for number, line in enumerate(lines, 1):
                    if opener.search(line) and _names_in_statement(lines, number - 1, child):
                        return number
        relative = re.compile(r"^\s*from\s+\.")
        for number, line in enumerate(lines, 1):
            if relative.search(line) and (word.search(line) or _names_in_statement(lines, number - 1, last)):
                return number
        for number, line in enumerate(lines, 1):
            if _PY_IMPORT_LINE.search(line) and word.search(line):
                return number
        return None
    if language in _JS_LANGUAGES:
        specifier = re.compile(rf"""['"][^'"\n]*(?<![\w-]){re.escape(last)}(?:\.\w+)?(?:/index(?:\.\w+)?)?['"]""")
        for number, line in enumerate(lines, 1):
            if _JS_IMPORT_LINE.search(line) and specifier.search(line):
                return number
        return None
    for number, line in enumerate(lines, 1):
        if word.search(line):
            return number
    return None


def _names_in_statement(lines: list[str], start: int, name: str) -> bool:
    """Whether a ``from x import ...`` statement starting at ``start`` imports ``name``."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
    first = lines[start].split("import", 1)[-1]
    if pattern.search(first):
        return True
    if "(" not in first:
        return False
    for line in lines[start + 1 : start + 200]:
        if pattern.search(line.split("#", 1)[0]):
            return True
        if ")" in line:
            return False
    return False


def resolve_inside(repo: Path, path: str) -> Path | None:
    """``repo/path`` when it stays inside the repository, else None.

    Absolute paths, ``..`` above the root and symlinks (at any level) that
    resolve outside the repository are refused without being followed.
    """
    if not path or "\x00" in path:
        return None
    pure = path.replace("\\", "/")
    if pure.startswith("/") or re.match(r"^[A-Za-z]:/", pure) or Path(path).is_absolute():
        return None
    normal = posixpath.normpath(pure)
    if normal == ".." or normal.startswith("../"):
        return None
    real_root = os.path.realpath(repo)
    full = Path(repo) / normal
    real = os.path.realpath(full)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        return None
    return full


# ---------------------------------------------------------------- the checks


class _Repo:
    """Lazily read views of the repository, shared by the checks of one call."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._texts: dict[str, str | None] = {}
        self._sources: list[tuple[SourceFile, str]] | None = None
        self._module_index: dict[str, str] | None = None

    def text(self, full: Path) -> str | None:
        key = str(full)
        if key not in self._texts:
            try:
                self._texts[key] = full.read_bytes().decode("utf-8-sig", errors="replace")
            except OSError:
                self._texts[key] = None
        return self._texts[key]

    def sources(self) -> list[tuple[SourceFile, str]]:
        if self._sources is None:
            self._sources = list_source_files(self.root, max_files=MAX_SCAN_FILES)
        return self._sources

    def paths(self) -> set[str]:
        return {source.path for source, _ in self.sources()}

    def module_index(self) -> dict[str, str]:
        if self._module_index is None:
            self._module_index = module_index_for(sorted(self.paths()))
        return self._module_index


def _check_file(repo: _Repo, finding: RelevantFile) -> Check:
    def check(ok: bool, evidence: str) -> Check:
        return Check(kind="file", subject=finding.path, verified=ok, evidence=evidence)

    full = resolve_inside(repo.root, finding.path)
    if full is None:
        return check(False, OUTSIDE)
    if full.is_dir():
        return check(True, "exists (a directory)")
    if not full.is_file():
        return check(False, "not found")
    text = repo.text(full)
    if text is None:
        return check(False, "exists but cannot be read")
    return check(True, f"exists ({len(split_lines(text)) if text else 0} lines)")


def _check_pattern(repo: _Repo, finding: Pattern) -> Check:
    def check(ok: bool, evidence: str) -> Check:
        return Check(kind="pattern", subject=finding.search, verified=ok, evidence=evidence)

    if not finding.search:
        return check(False, "empty pattern")
    try:
        regex = re.compile(finding.search)
    except (re.error, RecursionError, OverflowError) as exc:
        return check(False, f"invalid pattern: {exc}")
    count, first, scanned, budget = 0, "", 0, MAX_SCAN_BYTES
    for source, text in repo.sources():
        if budget <= 0 or count >= MAX_COUNTED_MATCHES:
            break
        budget -= source.size
        scanned += 1
        for number, line in enumerate(split_lines(text), 1):
            if regex.search(line):
                count += 1
                first = first or f"{source.path}:{number}"
                if count >= MAX_COUNTED_MATCHES:
                    break
    if not count:
        return check(False, f"no match in {scanned} files scanned")
    more = "+" if count >= MAX_COUNTED_MATCHES else ""
    return check(True, f"{count}{more} matches, first at {first}")


def _check_point(repo: _Repo, finding: IntegrationPoint) -> Check:
    def check(ok: bool, evidence: str) -> Check:
        return Check(kind="integration_point", subject=f"{finding.file}:{finding.line}", verified=ok, evidence=evidence)

    full = resolve_inside(repo.root, finding.file)
    if full is None:
        return check(False, OUTSIDE)
    if not full.is_file():
        return check(False, "file not found")
    text = repo.text(full)
    if text is None:
        return check(False, "file cannot be read")
    lines = split_lines(text) if text else []
    if finding.line > len(lines):
        return check(False, f"line {finding.line} is beyond the end of the file ({len(lines)} lines)")
    actual = lines[finding.line - 1]
    wanted = normalise_space(finding.snippet)
    if not wanted:
        return check(True, f"line {finding.line} exists: `{_quote(actual)}`")
    if wanted in normalise_space(actual):
        return check(True, f"snippet found at line {finding.line}: `{_quote(actual)}`")
    for offset in (1, -1, 2, -2)[: 2 * SNIPPET_WINDOW]:
        number = finding.line + offset
        if 1 <= number <= len(lines) and wanted in normalise_space(lines[number - 1]):
            return check(
                True, f"snippet found at line {number} (claimed {finding.line}): `{_quote(lines[number - 1])}`"
            )
    return check(
        False,
        f"snippet not within ±{SNIPPET_WINDOW} lines of line {finding.line}; "
        f"line {finding.line} is `{_quote(actual)}`",
    )


def _target_path(repo: _Repo, target: str) -> str | None:
    """The repository file a dependency target names, when it names one."""
    full = resolve_inside(repo.root, target)
    if full is not None and full.is_file():
        return posixpath.normpath(target.replace("\\", "/"))
    if full is not None and full.is_dir():
        base = posixpath.normpath(target.replace("\\", "/"))
        for init in ("__init__.py", "__init__.pyi", "index.ts", "index.js"):
            if f"{base}/{init}" in repo.paths():
                return f"{base}/{init}"
    return repo.module_index().get(target)


def _looks_like_path(root: Path, target: str) -> bool:
    """A repository path ("pkg/b.py", "b.ts", "src/x") rather than a module or
    package name ("pkg.b", "json", "lodash/fp", "@scope/pkg")."""
    pure = target.replace("\\", "/")
    if pure.startswith(("./", "../")) or language_for(pure) != "text":
        return True
    head = pure.split("/", 1)[0]
    return "/" in pure and head not in ("", ".", "..") and (Path(root) / head).is_dir()


def _check_dependency(repo: _Repo, finding: Dependency) -> Check:
    def check(ok: bool, evidence: str) -> Check:
        subject = f"{finding.source} -> {finding.target}"
        return Check(kind="dependency", subject=subject, verified=ok, evidence=evidence)

    full = resolve_inside(repo.root, finding.source)
    if full is None:
        return check(False, f"source is {OUTSIDE}")
    if not full.is_file():
        return check(False, "source not found")
    if ("/" in finding.target or finding.target.startswith(".")) and resolve_inside(repo.root, finding.target) is None:
        return check(False, f"target is {OUTSIDE}")
    text = repo.text(full) or ""
    source = posixpath.normpath(finding.source.replace("\\", "/"))
    language = language_for(source)
    target = _target_path(repo, finding.target)
    if target is None and _looks_like_path(repo.root, finding.target):
        return check(False, f"target {finding.target} not found")

    def found(what: str, located: str | None = None) -> Check:
        line = import_line_of(text, source, located or target or finding.target)
        where = f" at line {line}: `{_quote(split_lines(text)[line - 1])}`" if line else ""
        return check(True, f"{what}{where}")

    if language in ("python", *_JS_LANGUAGES):
        if language == "python":
            imported = python_imports(source, text, repo.module_index())
        else:
            imported = js_imports(source, text, repo.paths())
        if target is not None:
            if target in imported:
                return found(f"imports {target}")
            package = posixpath.dirname(target) + "/" if posixpath.basename(target).startswith("__init__.") else ""
            inside = sorted(p for p in imported if package and p.startswith(package))
            if inside:
                return found(f"imports {inside[0]} from package {finding.target}", inside[0])
            listed = ", ".join(imported[:6]) + (" …" if len(imported) > 6 else "") if imported else "none"
            return check(False, f"{source} does not import {target} (its in-repo imports: {listed})")
        # Not a repository file: an external module, grepped in import statements.
        if language == "python":
            name = re.escape(finding.target)
            statement = re.compile(rf"^\s*(?:import\s+(?:.*,\s*)?{name}\b|from\s+{name}(?:\.|\s+import\b))")
        else:
            target = re.escape(finding.target)
            statement = re.compile(rf"""(?:from|require\s*\(|import)\s*['"]{target}(?:/[^'"]*)?['"]""")
        for number, line in enumerate(split_lines(text), 1):
            if statement.search(line):
                return check(True, f"imports external module {finding.target} at line {number}: `{_quote(line)}`")
        return check(False, f"{source} does not import {finding.target} "
                            "(not a repository module, no import statement names it)")
    # Other languages: the target's module name must appear in the source.
    name = _short_name(finding.target)
    word = re.compile(rf"(?<![\w.]){re.escape(name)}\b") if name else None
    for number, line in enumerate(split_lines(text), 1):
        if word is not None and word.search(line):
            return check(True,
                         f"mentions {name} at line {number}: `{_quote(line)}` (no import resolution for {language})")
    return check(False, f"{source} never mentions {name or finding.target}")


def verify_findings(repo: Path, findings: AngleFindings) -> list[Check]:
    """One check per finding, in order: files, patterns, integration points, dependencies."""
    view = _Repo(Path(repo))
    return [
        *(_check_file(view, f) for f in findings.relevant_files),
        *(_check_pattern(view, p) for p in findings.patterns),
        *(_check_point(view, p) for p in findings.integration_points),
        *(_check_dependency(view, d) for d in findings.dependencies),
    ]
