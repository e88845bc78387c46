"""What an angle finds inside its files: the constructs it looks for, and where a change plugs in.

``probe_results`` applies the angle's probes (or, for an angle without its
own, the requirement's words) line by line to the relevant files; ``patterns``
reports the constructs seen.  ``integration_points`` picks lines where a
change would plug in: definitions of the best-matching symbols, import lines,
call sites in importing modules and lines the probes matched, in the kinds
and quotas the angle asks for.  Every line reported was read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from wfqueue.analysis import importers_of, tokenize
from wfqueue.analysis.symbols import Symbol
from wfqueue.lite.angles import CALLS, DEFINITIONS, HOOKS, IMPORTS, PROBES, Probe
from wfqueue.lite.finding_checks import import_line_of
from wfqueue.lite.models import IntegrationPoint, Pattern
from wfqueue.providers.offline.explore_files import AngleScope

MAX_PATTERNS = 6
MAX_POINTS = 8
MAX_LINE_TEXT = 200  # longest example / snippet quoted from a line
_TRIPLE_QUOTE = re.compile(r"\"\"\"|'''")


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str  # the line, stripped, at most MAX_LINE_TEXT characters around the match


ProbeResults = list[tuple[Probe, list[Hit]]]


def _hit(path: str, number: int, line: str, match: re.Match[str]) -> Hit:
    """A matched line; a very long one (minified code) is cut around the match."""
    text = line.strip()
    if len(text) > MAX_LINE_TEXT:
        start = max(0, match.start() - (len(line) - len(line.lstrip())) - MAX_LINE_TEXT // 4)
        text = text[start : start + MAX_LINE_TEXT].strip()
    return Hit(path, number, text)


def _search(scope: AngleScope, regex: re.Pattern[str]) -> list[Hit]:
    """Every line of the relevant files ``regex`` matches, in rank order."""
    return [
        _hit(path, number, line, match)
        for path in scope.files
        for number, line in enumerate(scope.reader.lines(path), 1)
        if (match := regex.search(line))
    ]


def _term_probes(scope: AngleScope) -> ProbeResults:
    """Generic angle: where the requirement's own words appear in the code."""
    found: ProbeResults = []
    seen: set[str] = set()
    for word in re.findall(r"[A-Za-z][A-Za-z0-9]*", scope.requirement):
        stems = tokenize(word)
        if not stems or stems[0] in seen:
            continue
        stem = stems[0]
        seen.add(stem)
        regex = rf"(?i)\b{re.escape(stem)}" if len(stem) <= 3 else rf"(?i){re.escape(stem)}"
        hits = _search(scope, re.compile(regex))
        if hits:
            found.append((Probe(f"existing code using '{word.lower()}'", regex), hits))
    return found


def probe_results(scope: AngleScope) -> ProbeResults:
    """The constructs seen, in the angle's order of interest, each with the lines it matched."""
    if not scope.spec.probes:
        return _term_probes(scope)
    found: ProbeResults = []
    for key in scope.spec.probes:
        hits = _search(scope, re.compile(PROBES[key].regex))
        if hits:
            found.append((PROBES[key], hits))
    return found


def patterns(scope: AngleScope, results: ProbeResults) -> list[Pattern]:
    found: list[Pattern] = []
    for probe, hits in results[:MAX_PATTERNS]:
        files = sorted({hit.path for hit in hits}, key=scope.files.index)
        first = hits[0]
        lines = f"{len(hits)} line{'s' if len(hits) != 1 else ''}"
        where = f"{lines} in {len(files)} relevant file{'s' if len(files) != 1 else ''}"
        found.append(
            Pattern(
                description=f"{probe.description} ({where}, e.g. {first.path}:{first.line})",
                search=probe.regex,
                example=first.text,
            )
        )
    return found


def _enclosing(scope: AngleScope, path: str, line: int) -> Symbol | None:
    inside = [s for s in scope.index.symbols.get(path, []) if s.line <= line <= s.end_line]
    return max(inside, key=lambda s: (s.line, -s.end_line)) if inside else None


def _line_text(scope: AngleScope, path: str, line: int) -> str:
    """The stripped line (a prefix when very long: snippets are matched by containment)."""
    lines = scope.reader.lines(path)
    return lines[line - 1].strip()[:MAX_LINE_TEXT].strip() if 0 < line <= len(lines) else ""


def _definition_points(scope: AngleScope) -> list[IntegrationPoint]:
    per_file = [(path, scope.symbols(path, limit=2)) for path in scope.files]
    points: list[IntegrationPoint] = []
    for rank in range(2):  # round robin: each file's best symbol first
        for path, symbols in per_file:
            if rank < len(symbols):
                symbol = symbols[rank]
                snippet = _line_text(scope, path, symbol.line)
                if not snippet:
                    continue
                about = f": {symbol.doc}" if symbol.doc else ""
                points.append(
                    IntegrationPoint(
                        file=path,
                        line=symbol.line,
                        description=f"{symbol.kind} {symbol.qualname} defined here{about}",
                        snippet=snippet,
                    )
                )
    return points


def _import_points(scope: AngleScope) -> list[IntegrationPoint]:
    """Import lines of relevant files: links between relevant files first,
    then (for the structural angles) links to the rest of the repository."""
    relevant = set(scope.files)
    inner: list[IntegrationPoint] = []
    outer: list[IntegrationPoint] = []
    for source in scope.files:
        for target in scope.index.imports.get(source, []):
            if target not in relevant and not scope.spec.around:
                continue
            line = import_line_of(scope.reader.text(source), source, target)
            if line is None:
                continue
            point = IntegrationPoint(
                file=source,
                line=line,
                description=f"{source} imports {target}",
                snippet=_line_text(scope, source, line),
            )
            (inner if target in relevant else outer).append(point)
    return inner + outer


def _code_line_numbers(lines: list[str]) -> list[int]:
    """1-based numbers of the lines that are code: not comments, not inside
    triple-quoted strings (docstrings), not import statements."""
    numbers: list[int] = []
    in_string: str | None = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        was_inside = in_string is not None
        for quote in _TRIPLE_QUOTE.findall(line):
            if in_string is None:
                in_string = quote
            elif quote == in_string:
                in_string = None
        if was_inside or in_string is not None or stripped.startswith(('"""', "'''")):
            continue
        if stripped.startswith(("#", "//", "from ", "import ")) or not stripped:
            continue
        numbers.append(number)
    return numbers


def _call_points(scope: AngleScope) -> list[IntegrationPoint]:
    """Where importing modules use the most relevant symbols: a real call
    ``name(`` when there is one, else any use of the name in code."""
    points: list[IntegrationPoint] = []
    code_lines: dict[str, list[int]] = {}
    for path in scope.files:
        for symbol in scope.symbols(path, limit=2):
            if symbol.kind == "method":
                continue  # `.get(` style names would match unrelated calls
            name = re.escape(symbol.name)
            call = re.compile(rf"(?<![\w.]){name}\s*\(")
            word = re.compile(rf"(?<![\w.]){name}\b")
            for user in importers_of(scope.index, path):
                if scope.by_path[user].is_test and not scope.spec.tests:
                    continue  # tests exercise the code; they are not where it plugs in
                lines = scope.reader.lines(user)
                if user not in code_lines:
                    code_lines[user] = _code_line_numbers(lines)
                code = code_lines[user]
                number = next((n for n in code if call.search(lines[n - 1])), None)
                number = number or next((n for n in code if word.search(lines[n - 1])), None)
                if number is None:
                    continue
                caller = _enclosing(scope, user, number)
                where = f" in {caller.qualname}" if caller else ""
                points.append(
                    IntegrationPoint(
                        file=user,
                        line=number,
                        description=f"uses {symbol.qualname} from {path}{where}",
                        snippet=_line_text(scope, user, number),
                    )
                )
    return points


def _hook_points(scope: AngleScope, results: ProbeResults) -> list[IntegrationPoint]:
    points: list[IntegrationPoint] = []
    depth = max((len(hits) for _, hits in results), default=0)
    for rank in range(min(depth, 4)):  # round robin over the constructs seen
        for probe, hits in results:
            if rank < len(hits):
                hit = hits[rank]
                owner = _enclosing(scope, hit.path, hit.line)
                where = f" in {owner.qualname}" if owner else ""
                points.append(
                    IntegrationPoint(
                        file=hit.path,
                        line=hit.line,
                        description=f"{probe.description}{where}",
                        snippet=hit.text,
                    )
                )
    return points


def integration_points(scope: AngleScope, results: ProbeResults) -> list[IntegrationPoint]:
    """Up to MAX_POINTS distinct lines, each kind first up to its quota, then filled from the rest."""
    makers: dict[str, Callable[[], list[IntegrationPoint]]] = {
        DEFINITIONS: lambda: _definition_points(scope),
        IMPORTS: lambda: _import_points(scope),
        CALLS: lambda: _call_points(scope),
        HOOKS: lambda: _hook_points(scope, results),
    }
    pools = {kind: makers[kind]() for kind, _ in scope.spec.points}
    chosen: list[IntegrationPoint] = []
    seen: set[tuple[str, int]] = set()

    def take(kind: str, quota: int) -> None:
        taken = 0
        for point in pools[kind]:
            if len(chosen) >= MAX_POINTS or taken >= quota:
                return
            if (point.file, point.line) not in seen and point.snippet:
                seen.add((point.file, point.line))
                chosen.append(point)
                taken += 1

    for kind, quota in scope.spec.points:
        take(kind, quota)
    for kind, _ in scope.spec.points:  # fill up from whatever is left
        take(kind, MAX_POINTS)
    return chosen
