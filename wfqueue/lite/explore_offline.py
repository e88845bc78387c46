"""Offline exploration of one angle: findings taken from the index and the code.

``explore_angle`` ranks the repository's files for the requirement plus the
angle's own vocabulary (BM25 via ``rank_files``), then reads only those files
to report what is really there: the constructs the angle cares about (each a
regular expression that matched, with the line it matched), lines where a
change would plug in (definitions, imports, call sites, angle-specific lines),
import edges, constraints and the open questions the analysis cannot settle.

Everything is derived from the ``RepoIndex`` and the text returned by
``read(path)``, the only I/O; the result is deterministic.  Every file, regex,
``file:line`` and import edge it reports was seen, so ``verify_findings``
confirms all of them on an unchanged repository.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from wfqueue.analysis import CODE_LANGUAGES, RepoIndex, importers_of, novel_terms, rank_files, rank_symbols, tokenize
from wfqueue.analysis.symbols import Symbol
from wfqueue.lite.models import (
    AngleFindings,
    Clarification,
    Dependency,
    IntegrationPoint,
    Pattern,
    RelevantFile,
)
from wfqueue.lite.verify import import_line_of, split_lines

# The same set as the collaborative planner's (wfqueue.providers.offline.understand),
# kept here because that package imports this module.

MAX_FILES = 8
MAX_PATTERNS = 6
MAX_POINTS = 8
MAX_DEPENDENCIES = 10
OUTER_DEPENDENCIES = 3  # slots structural angles keep for edges leaving the relevant files
MAX_CONSTRAINTS = 6
MAX_CLARIFICATIONS = 3
MAX_STRUCTURE = 6
MAX_LINE_TEXT = 200  # longest example / snippet quoted from a line
TESTING_TEST_FILES = 5  # the testing angle keeps the rest of its files for the code under test
HIGH, MEDIUM = 0.6, 0.3  # score ratios to the best file
CLOSE_SCORES = 0.85  # a runner-up within 15 % of the best file is a real choice
_TRIPLE_QUOTE = re.compile(r"\"\"\"|'''")
MAX_MANIFESTS = 2  # the dependencies angle lists the files declaring external packages
_MANIFESTS = ("pyproject.toml", "setup.cfg", "setup.py", "requirements.txt", "package.json", "go.mod", "Cargo.toml")


@dataclass(frozen=True)
class _Probe:
    """A construct an angle looks for: what it is and the regex that finds it."""

    description: str
    regex: str


# The probes: regexes are applied line by line (as grep does) to relevant files.
_PROBES: dict[str, _Probe] = {
    # structure and composition
    "factory": _Probe("factory functions assembling components (build_*/create_*/make_*)", r"^\s*def\s+(?:build|create|make)_\w+\("),
    "entry_point": _Probe("module entry point guarded by __name__ == '__main__'", r"""^if\s+__name__\s*==\s*['"]__main__['"]"""),
    "argparse": _Probe("command-line interface built with argparse", r"argparse\.ArgumentParser\("),
    "callable_alias": _Probe("callable type aliases naming pluggable signatures", r"^\w+\s*=\s*Callable\["),
    "dunder_call": _Probe("callable objects (__call__) used as pluggable components", r"^\s*def\s+__call__\("),
    "registration": _Probe("registration calls wiring components together (.add/.register/.use/.append)", r"\b\w+\.(?:add|register|add_route|route|use|include_router|append)\(\s*(?:['\"]|[A-Z]\w*\()"),
    "partial": _Probe("functools.partial binding dependencies into callbacks", r"\bpartial\("),
    "protocol_abc": _Probe("abstract interfaces (Protocol / ABC / @abstractmethod)", r"\b(?:Protocol|ABC)\b|@abstractmethod"),
    "ctor_injection": _Probe("collaborators injected through the constructor (self._x = x)", r"^\s+self\._(\w+)\s*=\s*\1\s*$"),
    "repository_class": _Probe("repository/store classes wrapping persistence", r"^\s*class\s+\w*(?:Repository|Store|Dao|DAO|Database)\b"),
    "dunder_all": _Probe("explicit public API via __all__", r"^__all__\s*="),
    "abs_import": _Probe("absolute imports between the project's modules", r"^from\s+[A-Za-z_]\w*(?:\.\w+)+\s+import\b"),
    "rel_import": _Probe("relative imports inside packages", r"^\s*from\s+\.+[\w.]*\s+import\b"),
    "future_annotations": _Probe("postponed annotations (from __future__ import annotations)", r"^from\s+__future__\s+import\s+annotations"),
    "typing_import": _Probe("type hints from typing", r"^from\s+typing\s+import\b"),
    "es_import": _Probe("ES module imports", r"""^\s*import\s+.+\s+from\s+['"]"""),
    "require": _Probe("CommonJS require calls", r"""\brequire\(\s*['"]"""),
    "generic": _Probe("generic types (TypeVar / Generic)", r"\bGeneric\[|\bTypeVar\("),
    "dataclass": _Probe("dataclasses for data models", r"^\s*@dataclass\b"),
    "frozen_dataclass": _Probe("immutable (frozen) dataclasses for value objects", r"@dataclass\(\s*frozen=True"),
    "classmethod": _Probe("alternate constructors via @classmethod", r"^\s*@classmethod\b"),
    "property": _Probe("computed attributes via @property", r"^\s*@property\b"),
    "logger": _Probe("module loggers from logging.getLogger", r"logging\.getLogger\("),
    # security and authentication
    "hmac_compare": _Probe("constant-time comparison with hmac.compare_digest", r"hmac\.compare_digest\("),
    "hmac_sign": _Probe("HMAC signatures (hmac.new)", r"\bhmac\.new\("),
    "hashlib": _Probe("hashing with hashlib", r"\bhashlib\.\w+\("),
    "random_bytes": _Probe("cryptographic randomness (os.urandom / secrets)", r"\bos\.urandom\(|\bsecrets\.\w+\("),
    "secret_param": _Probe("secrets passed explicitly (secret / secret_key values)", r"\bsecret(?:_key)?\b"),
    "bearer": _Probe("Authorization header / bearer-token handling", r"(?i)\bauthorization\b|\bbearer\b"),
    "unauthorised": _Probe("401/403 responses for unauthenticated or forbidden access", r"\b(?:401|403)\b"),
    "auth_class": _Probe("authentication components (classes named *Auth*)", r"^\s*class\s+\w*Auth\w*"),
    "ownership": _Probe("ownership / permission checks on resources", r"\b(?:owner_id|permission\w*|is_admin|roles?)\b"),
    "active_flag": _Probe("account state flags checked before access (is_active)", r"\bis_active\b"),
    "env_config": _Probe("configuration read from environment variables", r"\bos\.environ\b|\bgetenv\("),
    "expiry": _Probe("time-to-live / expiry values", r"(?i)ttl|expir"),
    # data flow and validation
    "json_io": _Probe("JSON (de)serialisation with json.loads/dumps", r"\bjson\.(?:loads|dumps)\("),
    "conversion": _Probe("explicit conversion methods (to_dict / to_bytes / from_*)", r"^\s*def\s+(?:to_\w+|from_\w+)\("),
    "url_parsing": _Probe("URL and query-string parsing", r"\b(?:parse_qsl?|urlsplit|urlparse)\("),
    "request_attrs": _Probe("handlers reading request attributes", r"\brequest\.(?:query|body|headers|path_params|json|user_id|path|method)\b"),
    "return_object": _Probe("results returned as constructed objects", r"^\s*return\s+[A-Z]\w*\("),
    "isinstance": _Probe("runtime type checks with isinstance", r"\bisinstance\("),
    "validate_method": _Probe("explicit validate() methods", r"^\s*def\s+validate\w*\("),
    "client_error": _Probe("client errors (4xx) raised for bad input", r"\b\w*Error\(\s*4\d\d\b"),
    "value_error": _Probe("ValueError raised for invalid arguments", r"\braise\s+ValueError\("),
    "limits": _Probe("limit settings and constants (MAX_* / max_*)", r"\bMAX_[A-Z_]+\b|\bmax_\w+"),
    "strip": _Probe("input normalised with .strip()", r"\.strip\(\)"),
    # performance and data access
    "time_source": _Probe("time measured with time.monotonic / perf_counter / time", r"\btime\.(?:monotonic|perf_counter|time)\b"),
    "lock": _Probe("thread locks guarding shared state", r"\bthreading\.(?:R?Lock|Semaphore|Condition)\("),
    "with_lock": _Probe("critical sections in `with ..._lock:` blocks", r"^\s*with\s+self\.\w*lock\w*\s*:"),
    "pagination": _Probe("pagination (LIMIT/OFFSET, page_size)", r"(?i)\bLIMIT\s+\?\s+OFFSET\b|\bpage_size\b"),
    "create_index": _Probe("database indexes declared in the schema", r"(?i)\bCREATE\s+(?:UNIQUE\s+)?INDEX\b"),
    "fetchall": _Probe("whole result sets loaded at once (fetchall)", r"\.fetchall\(\)"),
    "count_star": _Probe("COUNT(*) queries", r"(?i)COUNT\(\*\)"),
    "concurrency": _Probe("concurrency model (threads / pools / asyncio)", r"\b(?:ThreadingHTTPServer|ThreadPoolExecutor|ProcessPoolExecutor|asyncio|threading\.Thread)\b"),
    "sleep": _Probe("blocking sleeps", r"\btime\.sleep\("),
    "slow_hash": _Probe("CPU-heavy password hashing (PBKDF2 / bcrypt / scrypt)", r"(?i)pbkdf2|bcrypt|scrypt"),
    "lru_functools": _Probe("memoisation with functools caches", r"@(?:functools\.)?(?:lru_cache|cache|cached_property)\b"),
    "ordered_dict": _Probe("LRU ordering with OrderedDict (move_to_end / popitem)", r"\bOrderedDict\b|\.move_to_end\(|\.popitem\(\s*last=False"),
    "invalidation": _Probe("explicit invalidation / eviction calls", r"\.(?:invalidate|evict|purge\w*|clear)\("),
    "hit_miss": _Probe("cache hit / miss counters", r"\b(?:hits|misses)\s*\+="),
    "clock_injection": _Probe("injectable clock for time-dependent logic", r"\bclock\s*:\s*Callable\b"),
    "sql_params": _Probe("parameterised SQL statements (? placeholders)", r"""(?i)['"]\s*(?:SELECT|INSERT|UPDATE|DELETE)\b[^'"]*\?"""),
    "create_table": _Probe("schema DDL kept in code", r"(?i)\bCREATE\s+TABLE\b"),
    "db_driver": _Probe("database driver modules", r"\b(?:sqlite3|psycopg2?|sqlalchemy|pymysql|asyncpg)\b"),
    "db_calls": _Probe("database calls through execute/query helpers", r"\.(?:execute|executescript|query|query_one|fetchone)\("),
    "commit": _Probe("explicit commits after writes", r"\.commit\(\)"),
    # errors, state, edge cases
    "custom_exception": _Probe("custom exception classes", r"^\s*class\s+\w+(?:Error|Exception)\(\s*[\w.]*(?:Error|Exception)\s*\)"),
    "raise_from": _Probe("exceptions re-raised with explicit chaining (raise ... from ...)", r"\braise\s+\w[\w.]*\(.*\)\s+from\s+\w+"),
    "typed_except": _Probe("except clauses catching specific exceptions", r"^\s*except\s+\(?[A-Z]\w*"),
    "broad_except": _Probe("catch-all exception handlers", r"^\s*except\s+(?:Exception|BaseException)\b|^\s*except\s*:"),
    "log_exception": _Probe("errors logged with their traceback (log.exception)", r"\.exception\("),
    "go_errors": _Probe("Go error returns checked inline", r"\bif\s+err\s*!=\s*nil\b"),
    "js_catch": _Probe("try/catch blocks", r"\bcatch\s*\(\s*\w*\s*\)\s*\{"),
    "counter_mutation": _Probe("mutable counters on instances (self.x += ...)", r"^\s*self\.\w+\s*\+="),
    "replace": _Probe("immutable updates with dataclasses.replace", r"\breplace\(\s*\w+\s*,"),
    "object_mutation": _Probe("state written onto objects passed in (obj.attr = ...)", r"^\s*(?!self\b)[a-z_]\w*\.\w+\s*=[^=]"),
    "module_state": _Probe("module-level mutable state", r"^_?[a-z]\w*\s*(?::[^=]+)?=\s*(?:\{\}|\[\]|set\(\)|dict\(\)|OrderedDict\(\))\s*$"),
    "is_none": _Probe("explicit None handling (is None / is not None)", r"\bis\s+(?:not\s+)?None\b"),
    "if_not": _Probe("guards on empty or falsy values (if not x)", r"^\s*if\s+not\s+[\w.]+"),
    "boundary": _Probe("boundary checks against zero / one", r"(?:<=|>=|<|>)\s*[01]\b"),
    "dict_get": _Probe("lookups tolerating missing keys (.get)", r"\.get\(\s*[\w\"']+\s*(?:,\s*[^)]+)?\)"),
    "or_default": _Probe("fallback defaults (x or default)", r"""\bor\s+(?:b?""|b?''|\[\]|\{\}|0|\(\))(?!\w)"""),
    "from_none": _Probe("errors raised without the internal cause (from None)", r"\bfrom\s+None\b"),
    # tests
    "pytest_fixture": _Probe("pytest fixtures", r"^\s*@pytest\.fixture\b"),
    "parametrize": _Probe("parametrised tests", r"^\s*@pytest\.mark\.parametrize\("),
    "pytest_raises": _Probe("error assertions with pytest.raises", r"\bpytest\.raises\("),
    "test_function": _Probe("pytest test functions", r"^\s*(?:async\s+)?def\s+test_\w+\("),
    "mocking": _Probe("mocking / monkeypatching", r"\b(?:monkeypatch|MagicMock|Mock|mock|patch)\b"),
    "caplog": _Probe("log assertions with caplog", r"\bcaplog\b"),
    "fake_clock": _Probe("fake clocks and fixed values injected into code under test", r"\bclock\s*=\s*\w|\bclock\.advance\(|\bfixed_\w+|\bfake_\w+"),
    "js_tests": _Probe("describe/it/test blocks", r"""\b(?:describe|it|test)\(\s*['"`]"""),
    "js_expect": _Probe("expect() assertions", r"\bexpect\("),
    "go_tests": _Probe("Go test functions", r"^func\s+Test\w+\(\s*\w+\s+\*testing\.T\)"),
}


@dataclass(frozen=True)
class _Angle:
    vocabulary: str  # words added to the requirement when ranking files
    probes: tuple[str, ...]  # in order of interest; the first MAX_PATTERNS that match are kept
    points: tuple[tuple[str, int], ...]  # integration point kinds and quotas, in order
    around: bool = False  # dependencies: edges leaving relevant files too, and their importers
    tests: bool = False  # rank test files with the sources


_DEFS, _IMPORTS, _CALLS, _HOOKS = "definitions", "imports", "calls", "hooks"
_ANGLES: dict[str, _Angle] = {
    "architecture": _Angle(
        "module layer service component app server router handler interface entry build wire",
        ("factory", "entry_point", "callable_alias", "dunder_call", "repository_class", "dataclass", "protocol_abc", "logger"),
        ((_IMPORTS, 3), (_DEFS, 3), (_HOOKS, 2)),
        around=True,
    ),
    "dependencies": _Angle(
        "import depend require package module library vendor version client",
        ("abs_import", "rel_import", "future_annotations", "typing_import", "es_import", "require", "db_driver", "hashlib"),
        ((_IMPORTS, 6), (_DEFS, 2)),
        around=True,
    ),
    "modularity": _Angle(
        "module package interface boundary public component service plugin split",
        ("dunder_all", "rel_import", "protocol_abc", "ctor_injection", "callable_alias", "generic", "dataclass", "repository_class"),
        ((_IMPORTS, 4), (_DEFS, 4)),
        around=True,
    ),
    "integration-points": _Angle(
        "register route handler middleware hook plugin entry dispatch endpoint wire chain app",
        ("registration", "partial", "dunder_call", "callable_alias", "factory", "entry_point", "argparse"),
        ((_CALLS, 3), (_IMPORTS, 3), (_DEFS, 2)),
        around=True,
    ),
    "security": _Angle(
        "auth token password secret permission hash verify signature hmac crypt salt credential",
        ("hmac_compare", "hmac_sign", "hashlib", "random_bytes", "secret_param", "unauthorised", "sql_params", "expiry"),
        ((_HOOKS, 4), (_DEFS, 2), (_CALLS, 2)),
    ),
    "auth-patterns": _Angle(
        "auth authenticate login session token bearer authorization user permission role credential",
        ("auth_class", "bearer", "unauthorised", "ownership", "active_flag", "hmac_compare", "expiry"),
        ((_DEFS, 3), (_CALLS, 3), (_HOOKS, 2)),
    ),
    "dataflow": _Angle(
        "request response parse serialize json payload body convert dict transform input output",
        ("request_attrs", "json_io", "conversion", "url_parsing", "return_object", "dataclass", "partial"),
        ((_CALLS, 4), (_DEFS, 2), (_HOOKS, 2)),
    ),
    "validation": _Angle(
        "validate valid invalid check required must range length format schema sanitize",
        ("client_error", "isinstance", "validate_method", "value_error", "limits", "strip", "custom_exception"),
        ((_HOOKS, 5), (_DEFS, 3)),
    ),
    "performance": _Angle(
        "performance cache latency timeout batch pool index query page limit thread concurrent",
        ("pagination", "create_index", "concurrency", "time_source", "lru_functools", "ordered_dict", "lock", "fetchall"),
        ((_HOOKS, 4), (_DEFS, 2), (_CALLS, 2)),
    ),
    "bottlenecks": _Angle(
        "lock thread blocking sleep query fetchall loop count scan serial wait",
        ("with_lock", "lock", "slow_hash", "count_star", "fetchall", "sleep", "concurrency"),
        ((_HOOKS, 5), (_DEFS, 3)),
    ),
    "caching": _Angle(
        "cache ttl lru memo expire evict invalidate hit miss",
        ("ordered_dict", "expiry", "invalidation", "hit_miss", "lru_functools", "clock_injection", "with_lock"),
        ((_DEFS, 3), (_CALLS, 3), (_HOOKS, 2)),
    ),
    "data-access": _Angle(
        "database db sql query repository store row schema table transaction execute commit",
        ("sql_params", "create_table", "repository_class", "db_driver", "db_calls", "commit", "create_index", "pagination"),
        ((_DEFS, 3), (_HOOKS, 3), (_CALLS, 2)),
    ),
    "error-handling": _Angle(
        "error exception retry fail handle invalid status log traceback",
        ("custom_exception", "raise_from", "typed_except", "broad_except", "log_exception", "client_error", "go_errors", "js_catch"),
        ((_HOOKS, 5), (_DEFS, 3)),
    ),
    "state-management": _Angle(
        "state lock thread session store mutable global counter context active",
        ("lock", "with_lock", "counter_mutation", "replace", "frozen_dataclass", "object_mutation", "module_state"),
        ((_HOOKS, 4), (_CALLS, 2), (_DEFS, 2)),
    ),
    "edge-cases": _Angle(
        "empty missing default zero negative limit max min overflow boundary expired",
        ("is_none", "if_not", "boundary", "dict_get", "or_default", "from_none", "limits"),
        ((_HOOKS, 5), (_DEFS, 3)),
    ),
    "patterns": _Angle(
        "dataclass factory builder protocol decorator callable generic registry base",
        ("dataclass", "frozen_dataclass", "classmethod", "property", "dunder_call", "generic", "protocol_abc", "callable_alias"),
        ((_DEFS, 4), (_HOOKS, 4)),
    ),
    "testing": _Angle(
        "test assert fixture mock monkeypatch parametrize conftest fake stub",
        ("pytest_fixture", "parametrize", "pytest_raises", "test_function", "mocking", "caplog", "fake_clock", "js_tests", "js_expect", "go_tests"),
        ((_DEFS, 4), (_CALLS, 2), (_HOOKS, 2)),
        tests=True,
    ),
}
_GENERIC = _Angle("", (), ((_DEFS, 4), (_CALLS, 2), (_IMPORTS, 2)))


def angle_names() -> list[str]:
    """The angles with their own vocabulary (others get a generic exploration)."""
    return list(_ANGLES)


def _angle_key(angle: str) -> str:
    """"Integration_Points" and "integration points" mean "integration-points"."""
    return re.sub(r"[\s_]+", "-", angle.strip().lower())


class _Reader:
    """``read`` with a memo; a file that cannot be read has no lines."""

    def __init__(self, read: Callable[[str], str]) -> None:
        self._read = read
        self._lines: dict[str, list[str]] = {}
        self._texts: dict[str, str] = {}

    def text(self, path: str) -> str:
        if path not in self._texts:
            try:
                # A BOM is not part of line 1 (verification decodes with utf-8-sig).
                self._texts[path] = (self._read(path) or "").removeprefix("\ufeff")
            except (OSError, UnicodeDecodeError, ValueError):
                self._texts[path] = ""
        return self._texts[path]

    def lines(self, path: str) -> list[str]:
        if path not in self._lines:
            text = self.text(path)
            self._lines[path] = split_lines(text) if text else []
        return self._lines[path]


@dataclass(frozen=True)
class _Hit:
    path: str
    line: int
    text: str  # the line, stripped, at most MAX_LINE_TEXT characters around the match


def _hit(path: str, number: int, line: str, match: re.Match[str]) -> _Hit:
    """A matched line; a very long one (minified code) is cut around the match."""
    text = line.strip()
    if len(text) > MAX_LINE_TEXT:
        start = max(0, match.start() - (len(line) - len(line.lstrip())) - MAX_LINE_TEXT // 4)
        text = text[start : start + MAX_LINE_TEXT].strip()
    return _Hit(path, number, text)


class _Explorer:
    def __init__(self, index: RepoIndex, requirement: str, angle: str, read: Callable[[str], str]) -> None:
        self.index = index
        self.requirement = requirement
        self.angle = angle
        self.key = _angle_key(angle)
        self.spec = _ANGLES.get(self.key, _GENERIC)
        self.query = f"{requirement} {self.spec.vocabulary}".strip()
        self.reader = _Reader(read)
        self.by_path = {f.path: f for f in index.files}
        # Fan-in of every imported file, counted once (fan_in() per file is O(files)).
        self.fan_in = Counter(t for targets in index.imports.values() for t in set(targets))
        self._code_lines: dict[str, list[int]] = {}
        self.ranked = self._rank()
        self.files = [path for path, _ in self.ranked]
        self.probe_hits = self._probe_hits()
        self._results: list[tuple[_Probe, list[_Hit]]] | None = None

    # ------------------------------------------------------------ ranking

    def _is_code(self, path: str) -> bool:
        """A source file defining something (empty package inits do not count)."""
        source = self.by_path.get(path)
        return source is not None and source.language in CODE_LANGUAGES and bool(self.index.symbols.get(path))

    def _manifests(self) -> list[str]:
        if self.key != "dependencies":
            return []
        return [m for m in _MANIFESTS if m in self.by_path][:MAX_MANIFESTS]

    def _rank(self) -> list[tuple[str, float]]:
        limit = MAX_FILES - len(self._manifests())
        ranked = [
            (path, score)
            for path, score in rank_files(self.index, self.query, include_tests=self.spec.tests)
            if self._is_code(path)
        ]
        if ranked:
            best = ranked[0][1]
            ranked = [(path, score) for path, score in ranked if score >= best * 0.1]
            if self.spec.tests:
                # Tests first, but keep room for the modules they exercise.
                tests = [item for item in ranked if self.by_path[item[0]].is_test][:TESTING_TEST_FILES]
                sources = [item for item in ranked if not self.by_path[item[0]].is_test]
                ranked = sorted(tests + sources[: limit - len(tests)], key=lambda i: (-i[1], i[0]))
            return ranked[:limit]
        # Nothing shares a word with the query: the most depended-on modules.
        central = sorted(
            (f.path for f in self.index.files if self._is_code(f.path) and not f.is_test),
            key=lambda p: (-self.fan_in[p], p),
        )
        return [(path, 0.0) for path in central[: min(limit, 4)]]

    def _matched_words(self, path: str) -> list[str]:
        """Query words (as written) whose tokens the file contains."""
        tokens = set(self.index.doc_tokens.get(path, []))
        words: list[str] = []
        for word in re.findall(r"[A-Za-z][A-Za-z0-9]*", self.query):
            stems = tokenize(word)
            if stems and any(s in tokens for s in stems) and word.lower() not in words:
                words.append(word.lower())
        return words

    def symbols(self, path: str, limit: int = 3) -> list[Symbol]:
        return rank_symbols(self.index, path, self.query, limit=limit)

    # ------------------------------------------------------------ findings

    def relevant_files(self) -> list[RelevantFile]:
        best = self.ranked[0][1] if self.ranked else 0.0
        found: list[RelevantFile] = []
        for path, score in self.ranked:
            ratio = score / best if best > 0 else 0.0
            relevance = "high" if ratio >= HIGH else ("medium" if ratio >= MEDIUM else "low")
            reasons: list[str] = []
            words = self._matched_words(path)
            if words:
                reasons.append(f"matches {', '.join(words[:6])}")
            symbols = [s.qualname for s in self.symbols(path, limit=3)]
            if symbols:
                reasons.append(f"symbols {', '.join(symbols)}")
            importers = self.fan_in[path]
            if importers:
                reasons.append(f"imported by {importers} module{'s' if importers != 1 else ''}")
            source = self.by_path[path]
            if source.is_test:
                subjects = sorted(p for p, tests in self.index.tests_for.items() if path in tests)
                reasons.append(f"tests {', '.join(subjects[:3])}" if subjects else "test file")
            if best <= 0:
                reasons.insert(0, "no word of the query occurs in the code; central module")
            found.append(
                RelevantFile(path=path, relevance=relevance, rationale="; ".join(reasons) or "ranked by BM25")  # type: ignore[arg-type]
            )
        if self.key == "dependencies":
            found += [
                RelevantFile(path=m, relevance="low", rationale="declares the external dependencies")
                for m in self._manifests()
            ]
        return found

    def _probe_hits(self) -> dict[str, list[_Hit]]:
        """Every line of the relevant files each of the angle's probes matches."""
        probes = self.spec.probes or ()
        hits: dict[str, list[_Hit]] = {}
        for key in probes:
            regex = re.compile(_PROBES[key].regex)
            found = [
                _hit(path, number, line, match)
                for path in self.files
                for number, line in enumerate(self.reader.lines(path), 1)
                if (match := regex.search(line))
            ]
            if found:
                hits[key] = found
        return hits

    def _term_probes(self) -> list[tuple[_Probe, list[_Hit]]]:
        """Generic angle: where the requirement's own words appear in the code."""
        found: list[tuple[_Probe, list[_Hit]]] = []
        seen: set[str] = set()
        for word in re.findall(r"[A-Za-z][A-Za-z0-9]*", self.requirement):
            stems = tokenize(word)
            if not stems or stems[0] in seen:
                continue
            stem = stems[0]
            seen.add(stem)
            regex = rf"(?i)\b{re.escape(stem)}" if len(stem) <= 3 else rf"(?i){re.escape(stem)}"
            compiled = re.compile(regex)
            hits = [
                _hit(path, number, line, match)
                for path in self.files
                for number, line in enumerate(self.reader.lines(path), 1)
                if (match := compiled.search(line))
            ]
            if hits:
                found.append((_Probe(f"existing code using '{word.lower()}'", regex), hits))
        return found

    def _probe_results(self) -> list[tuple[_Probe, list[_Hit]]]:
        """The constructs seen, in the angle's order of interest (computed once)."""
        if self._results is None:
            if self.spec.probes:
                self._results = [
                    (_PROBES[key], self.probe_hits[key]) for key in self.spec.probes if key in self.probe_hits
                ]
            else:
                self._results = self._term_probes()
        return self._results

    def patterns(self) -> list[Pattern]:
        found: list[Pattern] = []
        for probe, hits in self._probe_results()[:MAX_PATTERNS]:
            files = sorted({hit.path for hit in hits}, key=self.files.index)
            first = hits[0]
            where = f"{len(hits)} line{'s' if len(hits) != 1 else ''} in {len(files)} relevant file{'s' if len(files) != 1 else ''}"
            found.append(
                Pattern(
                    description=f"{probe.description} ({where}, e.g. {first.path}:{first.line})",
                    search=probe.regex,
                    example=first.text,
                )
            )
        return found

    def _enclosing(self, path: str, line: int) -> Symbol | None:
        inside = [s for s in self.index.symbols.get(path, []) if s.line <= line <= s.end_line]
        return max(inside, key=lambda s: (s.line, -s.end_line)) if inside else None

    def _line_text(self, path: str, line: int) -> str:
        """The stripped line (a prefix when very long: snippets are matched by containment)."""
        lines = self.reader.lines(path)
        return lines[line - 1].strip()[:MAX_LINE_TEXT].strip() if 0 < line <= len(lines) else ""

    def _definition_points(self) -> list[IntegrationPoint]:
        per_file = [(path, self.symbols(path, limit=2)) for path in self.files]
        points: list[IntegrationPoint] = []
        for rank in range(2):  # round robin: each file's best symbol first
            for path, symbols in per_file:
                if rank < len(symbols):
                    symbol = symbols[rank]
                    snippet = self._line_text(path, symbol.line)
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

    def _import_points(self) -> list[IntegrationPoint]:
        """Import lines of relevant files: links between relevant files first,
        then (for the structural angles) links to the rest of the repository."""
        relevant = set(self.files)
        inner: list[IntegrationPoint] = []
        outer: list[IntegrationPoint] = []
        for source in self.files:
            for target in self.index.imports.get(source, []):
                if target not in relevant and not self.spec.around:
                    continue
                line = import_line_of(self.reader.text(source), source, target)
                if line is None:
                    continue
                point = IntegrationPoint(
                    file=source,
                    line=line,
                    description=f"{source} imports {target}",
                    snippet=self._line_text(source, line),
                )
                (inner if target in relevant else outer).append(point)
        return inner + outer

    def _code_line_numbers(self, path: str) -> list[int]:
        """1-based lines of ``path`` that are code: not comments, not inside
        triple-quoted strings (docstrings), not import statements."""
        if path in self._code_lines:
            return self._code_lines[path]
        numbers: list[int] = []
        in_string: str | None = None
        for number, line in enumerate(self.reader.lines(path), 1):
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
        self._code_lines[path] = numbers
        return numbers

    def _call_points(self) -> list[IntegrationPoint]:
        """Where importing modules use the most relevant symbols: a real call
        ``name(`` when there is one, else any use of the name in code."""
        points: list[IntegrationPoint] = []
        for path in self.files:
            for symbol in self.symbols(path, limit=2):
                if symbol.kind == "method":
                    continue  # `.get(` style names would match unrelated calls
                name = re.escape(symbol.name)
                call = re.compile(rf"(?<![\w.]){name}\s*\(")
                word = re.compile(rf"(?<![\w.]){name}\b")
                for user in importers_of(self.index, path):
                    if self.by_path[user].is_test and not self.spec.tests:
                        continue  # tests exercise the code; they are not where it plugs in
                    lines = self.reader.lines(user)
                    code = self._code_line_numbers(user)
                    number = next((n for n in code if call.search(lines[n - 1])), None)
                    number = number or next((n for n in code if word.search(lines[n - 1])), None)
                    if number is None:
                        continue
                    caller = self._enclosing(user, number)
                    where = f" in {caller.qualname}" if caller else ""
                    points.append(
                        IntegrationPoint(
                            file=user,
                            line=number,
                            description=f"uses {symbol.qualname} from {path}{where}",
                            snippet=self._line_text(user, number),
                        )
                    )
        return points

    def _hook_points(self) -> list[IntegrationPoint]:
        points: list[IntegrationPoint] = []
        results = self._probe_results()
        depth = max((len(hits) for _, hits in results), default=0)
        for rank in range(min(depth, 4)):  # round robin over the constructs seen
            for probe, hits in results:
                if rank < len(hits):
                    hit = hits[rank]
                    owner = self._enclosing(hit.path, hit.line)
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

    def integration_points(self) -> list[IntegrationPoint]:
        makers = {
            _DEFS: self._definition_points,
            _IMPORTS: self._import_points,
            _CALLS: self._call_points,
            _HOOKS: self._hook_points,
        }
        pools = {kind: makers[kind]() for kind, _ in self.spec.points}
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

        for kind, quota in self.spec.points:
            take(kind, quota)
        for kind, _ in self.spec.points:  # fill up from whatever is left
            take(kind, MAX_POINTS)
        return chosen

    def dependencies(self) -> list[Dependency]:
        relevant = set(self.files)
        edges: list[tuple[str, str]] = []
        for source in self.files:
            for target in self.index.imports.get(source, []):
                if target in relevant or self.spec.around:
                    edges.append((source, target))
        if self.spec.around:
            for target in self.files[:3]:
                edges += [(user, target) for user in importers_of(self.index, target)]
        unique = list(dict.fromkeys(edges))
        inner = [e for e in unique if e[0] in relevant and e[1] in relevant]
        outer = [e for e in unique if e not in inner]
        # Edges among relevant files first; structural angles keep room for
        # the edges reaching out of them (what else a change ripples into).
        keep = MAX_DEPENDENCIES - min(len(outer), OUTER_DEPENDENCIES)
        chosen = inner[:keep] + outer
        return [Dependency(source=s, target=t) for s, t in chosen[:MAX_DEPENDENCIES]]

    def _code_files(self) -> list[str]:
        return [p for p in self.files if not self.by_path[p].is_test]

    def _cycle(self) -> list[str] | None:
        """An import cycle through relevant files, if there is one."""
        graph = self.index.imports
        for start in self._code_files():
            stack: list[tuple[str, list[str]]] = [(start, [start])]
            seen: set[str] = set()
            while stack:
                node, path = stack.pop()
                for nxt in sorted(graph.get(node, []), reverse=True):
                    if nxt == start:
                        return path + [start]
                    if nxt not in seen and len(path) < 8:
                        seen.add(nxt)
                        stack.append((nxt, path + [nxt]))
        return None

    def constraints(self) -> list[str]:
        """Facts that bound the change: shared modules, missing tests, the
        angle's own observations, the convention to follow, tests to keep green."""
        found: list[str] = []
        code = self._code_files()
        shared = sorted((p for p in code if self.fan_in[p] >= 2), key=lambda p: (-self.fan_in[p], code.index(p)))
        for path in shared[:2]:
            users = importers_of(self.index, path)
            names = ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
            found.append(f"{path} is imported by {len(users)} modules ({names}): keep its interface compatible")
        untested = [p for p in code if not self.index.tests_for.get(p)]
        if untested:
            found.append(f"No test covers {', '.join(untested[:4])}")
        key = self.key
        if self.spec.tests and code:
            covered = [p for p in code if self.index.tests_for.get(p)]
            found.append(f"{len(covered)} of {len(code)} relevant modules have tests")
        if self.spec.around:
            cycle = self._cycle()
            if cycle:
                found.append(f"Import cycle: {' -> '.join(cycle)}")
            elif code:
                widest = max(code, key=lambda p: (len(self.index.imports.get(p, [])), -code.index(p)))
                count = len(self.index.imports.get(widest, []))
                if count:
                    found.append(f"{widest} imports {count} in-repo modules: the widest point of the dependency graph")
        if key in ("performance", "bottlenecks", "data-access") and code:
            largest = max(code, key=lambda p: (self.by_path[p].line_count, -code.index(p)))
            found.append(f"Largest relevant module: {largest} ({self.by_path[largest].line_count} lines)")
        results = self._probe_results()
        if results:
            probe, hits = results[0]
            files = sorted({h.path for h in hits}, key=self.files.index)
            found.append(f"Follow the existing convention: {probe.description} ({', '.join(files[:3])})")
        tests = sorted({t for p in code for t in self.index.tests_for.get(p, [])})
        if tests:
            run = f"; run with `{self.index.test_command}`" if self.index.test_command else ""
            found.append(f"Existing tests that must keep passing: {', '.join(tests[:6])}{run}")
        return found[:MAX_CONSTRAINTS]

    def clarifications(self) -> list[Clarification]:
        found: list[Clarification] = []
        code = [(p, s) for p, s in self.ranked if not self.by_path[p].is_test]
        label = self.angle.strip() or "this"
        if len(code) >= 2 and code[0][1] > 0 and code[1][1] >= code[0][1] * CLOSE_SCORES:
            first, second = code[0][0], code[1][0]
            found.append(
                Clarification(
                    question=f"Which module should own the {label} side of the change: {first} or {second}?",
                    options=[first, second, "both, split between them"],
                    context=f"their scores are within {round((1 - CLOSE_SCORES) * 100)}% "
                    f"({code[0][1]:.2f} vs {code[1][1]:.2f})",
                )
            )
        novel = novel_terms(self.index, self.requirement)
        if novel:
            words = ", ".join(f"'{w}'" for w in novel[:3])
            anchor = code[0][0] if code else "the existing modules"
            found.append(
                Clarification(
                    question=f"The code never uses {words}: is this a new concept to build, or does it exist under another name?",
                    options=[f"new code, next to {anchor}", "it exists under another name (please name it)"],
                    context="requirement words absent from every indexed file",
                )
            )
        untested = [p for p, s in code if s > 0 and not self.index.tests_for.get(p)]
        if untested:
            found.append(
                Clarification(
                    question=f"{untested[0]} has no tests: should this change add them?",
                    options=[f"yes, add tests for {untested[0]}", "no, rely on existing higher-level tests"],
                    context="no test imports it or is named after it",
                )
            )
        if not any(s > 0 for _, s in self.ranked):
            candidates = [p for p, _ in self.ranked[:2]]
            viewpoint = f"the {label} angle" if self.angle.strip() else "any angle"
            found.append(
                Clarification(
                    question=f"No file matches the requirement from {viewpoint}: which modules does it concern?",
                    options=candidates + ["another module (please name it)"]
                    if candidates
                    else ["please name the modules", "start a new module"],
                    context="the candidates are the most imported modules"
                    if candidates
                    else "the repository has no source file to anchor the change",
                )
            )
        return found[:MAX_CLARIFICATIONS]

    def structure(self) -> list[str]:
        index = self.index
        languages = ", ".join(f"{lang} {n}" for lang, n in sorted(index.languages.items(), key=lambda i: (-i[1], i[0])))
        tests = sum(1 for f in index.files if f.is_test)
        lines = [f"{len(index.files)} files indexed ({languages}); {tests} test files"]
        groups: dict[str, list[str]] = {}
        for path in self.files:
            groups.setdefault(posixpath.dirname(path) or ".", []).append(posixpath.basename(path))
        label = self.angle.strip() or "the requirement"
        for directory, names in groups.items():
            lines.append(f"{directory}/: {', '.join(names)} ({len(names)} relevant to {label})")
        if self.spec.around:
            hubs = sorted(self.fan_in, key=lambda p: (-self.fan_in[p], p))[:3]
            if hubs:
                lines.append("Most imported modules: " + ", ".join(f"{p} ({self.fan_in[p]})" for p in hubs))
        if self.spec.tests:
            run = index.test_command or "unknown"
            lines.append(f"{len(index.tests_for)} source modules have tests; suite command: {run}")
        return lines[:MAX_STRUCTURE]


def explore_angle(index: RepoIndex, requirement: str, angle: str, read: Callable[[str], str]) -> AngleFindings:
    """Findings for one angle, all taken from ``index`` and the files ``read`` returns.

    ``read(path)`` returns the text of a repository file (the only I/O).  An
    angle without its own vocabulary is explored with the requirement's words
    alone.  Deterministic for equal inputs.
    """
    explorer = _Explorer(index, requirement, angle, read)
    return AngleFindings(
        angle=angle,
        structure=explorer.structure(),
        relevant_files=explorer.relevant_files(),
        patterns=explorer.patterns(),
        integration_points=explorer.integration_points(),
        dependencies=explorer.dependencies(),
        constraints=explorer.constraints(),
        clarification_needs=explorer.clarifications(),
    )
