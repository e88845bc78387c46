"""The exploration angles: the constructs each angle looks for and how it ranks files.

A ``Probe`` is a construct worth reporting (a description and the regular
expression that finds it, applied line by line as grep does).  An ``Angle`` is
a point of view on a requirement: words added to it when ranking files, the
probes it cares about and the kinds of integration points it reports.  An
angle without an entry here is explored with ``GENERIC``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """A construct an angle looks for: what it is and the regex that finds it."""

    description: str
    regex: str


# The probes: regexes are applied line by line (as grep does) to relevant files.
PROBES: dict[str, Probe] = {
    # structure and composition
    "factory": Probe(
        "factory functions assembling components (build_*/create_*/make_*)", r"^\s*def\s+(?:build|create|make)_\w+\("
    ),
    "entry_point": Probe(
        "module entry point guarded by __name__ == '__main__'", r"""^if\s+__name__\s*==\s*['"]__main__['"]"""
    ),
    "argparse": Probe("command-line interface built with argparse", r"argparse\.ArgumentParser\("),
    "callable_alias": Probe("callable type aliases naming pluggable signatures", r"^\w+\s*=\s*Callable\["),
    "dunder_call": Probe("callable objects (__call__) used as pluggable components", r"^\s*def\s+__call__\("),
    "registration": Probe(
        "registration calls wiring components together (.add/.register/.use/.append)",
        r"\b\w+\.(?:add|register|add_route|route|use|include_router|append)\(\s*(?:['\"]|[A-Z]\w*\()",
    ),
    "partial": Probe("functools.partial binding dependencies into callbacks", r"\bpartial\("),
    "protocol_abc": Probe(
        "abstract interfaces (Protocol / ABC / @abstractmethod)", r"\b(?:Protocol|ABC)\b|@abstractmethod"
    ),
    "ctor_injection": Probe(
        "collaborators injected through the constructor (self._x = x)", r"^\s+self\._(\w+)\s*=\s*\1\s*$"
    ),
    "repository_class": Probe(
        "repository/store classes wrapping persistence", r"^\s*class\s+\w*(?:Repository|Store|Dao|DAO|Database)\b"
    ),
    "dunder_all": Probe("explicit public API via __all__", r"^__all__\s*="),
    "abs_import": Probe(
        "absolute imports between the project's modules", r"^from\s+[A-Za-z_]\w*(?:\.\w+)+\s+import\b"
    ),
    "rel_import": Probe("relative imports inside packages", r"^\s*from\s+\.+[\w.]*\s+import\b"),
    "future_annotations": Probe(
        "postponed annotations (from __future__ import annotations)", r"^from\s+__future__\s+import\s+annotations"
    ),
    "typing_import": Probe("type hints from typing", r"^from\s+typing\s+import\b"),
    "es_import": Probe("ES module imports", r"""^\s*import\s+.+\s+from\s+['"]"""),
    "require": Probe("CommonJS require calls", r"""\brequire\(\s*['"]"""),
    "generic": Probe("generic types (TypeVar / Generic)", r"\bGeneric\[|\bTypeVar\("),
    "dataclass": Probe("dataclasses for data models", r"^\s*@dataclass\b"),
    "frozen_dataclass": Probe("immutable (frozen) dataclasses for value objects", r"@dataclass\(\s*frozen=True"),
    "classmethod": Probe("alternate constructors via @classmethod", r"^\s*@classmethod\b"),
    "property": Probe("computed attributes via @property", r"^\s*@property\b"),
    "logger": Probe("module loggers from logging.getLogger", r"logging\.getLogger\("),
    # security and authentication
    "hmac_compare": Probe("constant-time comparison with hmac.compare_digest", r"hmac\.compare_digest\("),
    "hmac_sign": Probe("HMAC signatures (hmac.new)", r"\bhmac\.new\("),
    "hashlib": Probe("hashing with hashlib", r"\bhashlib\.\w+\("),
    "random_bytes": Probe("cryptographic randomness (os.urandom / secrets)", r"\bos\.urandom\(|\bsecrets\.\w+\("),
    "secret_param": Probe("secrets passed explicitly (secret / secret_key values)", r"\bsecret(?:_key)?\b"),
    "bearer": Probe("Authorization header / bearer-token handling", r"(?i)\bauthorization\b|\bbearer\b"),
    "unauthorised": Probe("401/403 responses for unauthenticated or forbidden access", r"\b(?:401|403)\b"),
    "auth_class": Probe("authentication components (classes named *Auth*)", r"^\s*class\s+\w*Auth\w*"),
    "ownership": Probe(
        "ownership / permission checks on resources", r"\b(?:owner_id|permission\w*|is_admin|roles?)\b"
    ),
    "active_flag": Probe("account state flags checked before access (is_active)", r"\bis_active\b"),
    "env_config": Probe("configuration read from environment variables", r"\bos\.environ\b|\bgetenv\("),
    "expiry": Probe("time-to-live / expiry values", r"(?i)ttl|expir"),
    # data flow and validation
    "json_io": Probe("JSON (de)serialisation with json.loads/dumps", r"\bjson\.(?:loads|dumps)\("),
    "conversion": Probe(
        "explicit conversion methods (to_dict / to_bytes / from_*)", r"^\s*def\s+(?:to_\w+|from_\w+)\("
    ),
    "url_parsing": Probe("URL and query-string parsing", r"\b(?:parse_qsl?|urlsplit|urlparse)\("),
    "request_attrs": Probe(
        "handlers reading request attributes",
        r"\brequest\.(?:query|body|headers|path_params|json|user_id|path|method)\b",
    ),
    "return_object": Probe("results returned as constructed objects", r"^\s*return\s+[A-Z]\w*\("),
    "isinstance": Probe("runtime type checks with isinstance", r"\bisinstance\("),
    "validate_method": Probe("explicit validate() methods", r"^\s*def\s+validate\w*\("),
    "client_error": Probe("client errors (4xx) raised for bad input", r"\b\w*Error\(\s*4\d\d\b"),
    "value_error": Probe("ValueError raised for invalid arguments", r"\braise\s+ValueError\("),
    "limits": Probe("limit settings and constants (MAX_* / max_*)", r"\bMAX_[A-Z_]+\b|\bmax_\w+"),
    "strip": Probe("input normalised with .strip()", r"\.strip\(\)"),
    # performance and data access
    "time_source": Probe(
        "time measured with time.monotonic / perf_counter / time", r"\btime\.(?:monotonic|perf_counter|time)\b"
    ),
    "lock": Probe("thread locks guarding shared state", r"\bthreading\.(?:R?Lock|Semaphore|Condition)\("),
    "with_lock": Probe("critical sections in `with ..._lock:` blocks", r"^\s*with\s+self\.\w*lock\w*\s*:"),
    "pagination": Probe("pagination (LIMIT/OFFSET, page_size)", r"(?i)\bLIMIT\s+\?\s+OFFSET\b|\bpage_size\b"),
    "create_index": Probe("database indexes declared in the schema", r"(?i)\bCREATE\s+(?:UNIQUE\s+)?INDEX\b"),
    "fetchall": Probe("whole result sets loaded at once (fetchall)", r"\.fetchall\(\)"),
    "count_star": Probe("COUNT(*) queries", r"(?i)COUNT\(\*\)"),
    "concurrency": Probe(
        "concurrency model (threads / pools / asyncio)",
        r"\b(?:ThreadingHTTPServer|ThreadPoolExecutor|ProcessPoolExecutor|asyncio|threading\.Thread)\b",
    ),
    "sleep": Probe("blocking sleeps", r"\btime\.sleep\("),
    "slow_hash": Probe("CPU-heavy password hashing (PBKDF2 / bcrypt / scrypt)", r"(?i)pbkdf2|bcrypt|scrypt"),
    "lru_functools": Probe(
        "memoisation with functools caches", r"@(?:functools\.)?(?:lru_cache|cache|cached_property)\b"
    ),
    "ordered_dict": Probe(
        "LRU ordering with OrderedDict (move_to_end / popitem)",
        r"\bOrderedDict\b|\.move_to_end\(|\.popitem\(\s*last=False",
    ),
    "invalidation": Probe("explicit invalidation / eviction calls", r"\.(?:invalidate|evict|purge\w*|clear)\("),
    "hit_miss": Probe("cache hit / miss counters", r"\b(?:hits|misses)\s*\+="),
    "clock_injection": Probe("injectable clock for time-dependent logic", r"\bclock\s*:\s*Callable\b"),
    "sql_params": Probe(
        "parameterised SQL statements (? placeholders)", r"""(?i)['"]\s*(?:SELECT|INSERT|UPDATE|DELETE)\b[^'"]*\?"""
    ),
    "create_table": Probe("schema DDL kept in code", r"(?i)\bCREATE\s+TABLE\b"),
    "db_driver": Probe("database driver modules", r"\b(?:sqlite3|psycopg2?|sqlalchemy|pymysql|asyncpg)\b"),
    "db_calls": Probe(
        "database calls through execute/query helpers", r"\.(?:execute|executescript|query|query_one|fetchone)\("
    ),
    "commit": Probe("explicit commits after writes", r"\.commit\(\)"),
    # errors, state, edge cases
    "custom_exception": Probe(
        "custom exception classes", r"^\s*class\s+\w+(?:Error|Exception)\(\s*[\w.]*(?:Error|Exception)\s*\)"
    ),
    "raise_from": Probe(
        "exceptions re-raised with explicit chaining (raise ... from ...)", r"\braise\s+\w[\w.]*\(.*\)\s+from\s+\w+"
    ),
    "typed_except": Probe("except clauses catching specific exceptions", r"^\s*except\s+\(?[A-Z]\w*"),
    "broad_except": Probe(
        "catch-all exception handlers", r"^\s*except\s+(?:Exception|BaseException)\b|^\s*except\s*:"
    ),
    "log_exception": Probe("errors logged with their traceback (log.exception)", r"\.exception\("),
    "go_errors": Probe("Go error returns checked inline", r"\bif\s+err\s*!=\s*nil\b"),
    "js_catch": Probe("try/catch blocks", r"\bcatch\s*\(\s*\w*\s*\)\s*\{"),
    "counter_mutation": Probe("mutable counters on instances (self.x += ...)", r"^\s*self\.\w+\s*\+="),
    "replace": Probe("immutable updates with dataclasses.replace", r"\breplace\(\s*\w+\s*,"),
    "object_mutation": Probe(
        "state written onto objects passed in (obj.attr = ...)", r"^\s*(?!self\b)[a-z_]\w*\.\w+\s*=[^=]"
    ),
    "module_state": Probe(
        "module-level mutable state",
        r"^_?[a-z]\w*\s*(?::[^=]+)?=\s*(?:\{\}|\[\]|set\(\)|dict\(\)|OrderedDict\(\))\s*$",
    ),
    "is_none": Probe("explicit None handling (is None / is not None)", r"\bis\s+(?:not\s+)?None\b"),
    "if_not": Probe("guards on empty or falsy values (if not x)", r"^\s*if\s+not\s+[\w.]+"),
    "boundary": Probe("boundary checks against zero / one", r"(?:<=|>=|<|>)\s*[01]\b"),
    "dict_get": Probe("lookups tolerating missing keys (.get)", r"\.get\(\s*[\w\"']+\s*(?:,\s*[^)]+)?\)"),
    "or_default": Probe("fallback defaults (x or default)", r"""\bor\s+(?:b?""|b?''|\[\]|\{\}|0|\(\))(?!\w)"""),
    "from_none": Probe("errors raised without the internal cause (from None)", r"\bfrom\s+None\b"),
    # tests
    "pytest_fixture": Probe("pytest fixtures", r"^\s*@pytest\.fixture\b"),
    "parametrize": Probe("parametrised tests", r"^\s*@pytest\.mark\.parametrize\("),
    "pytest_raises": Probe("error assertions with pytest.raises", r"\bpytest\.raises\("),
    "test_function": Probe("pytest test functions", r"^\s*(?:async\s+)?def\s+test_\w+\("),
    "mocking": Probe("mocking / monkeypatching", r"\b(?:monkeypatch|MagicMock|Mock|mock|patch)\b"),
    "caplog": Probe("log assertions with caplog", r"\bcaplog\b"),
    "fake_clock": Probe(
        "fake clocks and fixed values injected into code under test",
        r"\bclock\s*=\s*\w|\bclock\.advance\(|\bfixed_\w+|\bfake_\w+",
    ),
    "js_tests": Probe("describe/it/test blocks", r"""\b(?:describe|it|test)\(\s*['"`]"""),
    "js_expect": Probe("expect() assertions", r"\bexpect\("),
    "go_tests": Probe("Go test functions", r"^func\s+Test\w+\(\s*\w+\s+\*testing\.T\)"),
}


@dataclass(frozen=True)
class Angle:
    vocabulary: str  # words added to the requirement when ranking files
    probes: tuple[str, ...]  # in order of interest; the first MAX_PATTERNS that match are kept
    points: tuple[tuple[str, int], ...]  # integration point kinds and quotas, in order
    around: bool = False  # dependencies: edges leaving relevant files too, and their importers
    tests: bool = False  # rank test files with the sources


# Integration point kinds: symbol definitions, import lines, call sites in importing
# modules, and lines matched by the angle's probes.
DEFINITIONS, IMPORTS, CALLS, HOOKS = "definitions", "imports", "calls", "hooks"
ANGLES: dict[str, Angle] = {
    "architecture": Angle(
        "module layer service component app server router handler interface entry build wire",
        (
            "factory", "entry_point", "callable_alias", "dunder_call", "repository_class", "dataclass", "protocol_abc",
            "logger",
        ),
        ((IMPORTS, 3), (DEFINITIONS, 3), (HOOKS, 2)),
        around=True,
    ),
    "dependencies": Angle(
        "import depend require package module library vendor version client",
        (
            "abs_import", "rel_import", "future_annotations", "typing_import", "es_import", "require", "db_driver",
            "hashlib",
        ),
        ((IMPORTS, 6), (DEFINITIONS, 2)),
        around=True,
    ),
    "modularity": Angle(
        "module package interface boundary public component service plugin split",
        (
            "dunder_all", "rel_import", "protocol_abc", "ctor_injection", "callable_alias", "generic", "dataclass",
            "repository_class",
        ),
        ((IMPORTS, 4), (DEFINITIONS, 4)),
        around=True,
    ),
    "integration-points": Angle(
        "register route handler middleware hook plugin entry dispatch endpoint wire chain app",
        ("registration", "partial", "dunder_call", "callable_alias", "factory", "entry_point", "argparse"),
        ((CALLS, 3), (IMPORTS, 3), (DEFINITIONS, 2)),
        around=True,
    ),
    "security": Angle(
        "auth token password secret permission hash verify signature hmac crypt salt credential",
        (
            "hmac_compare", "hmac_sign", "hashlib", "random_bytes", "secret_param", "unauthorised", "sql_params",
            "expiry",
        ),
        ((HOOKS, 4), (DEFINITIONS, 2), (CALLS, 2)),
    ),
    "auth-patterns": Angle(
        "auth authenticate login session token bearer authorization user permission role credential",
        ("auth_class", "bearer", "unauthorised", "ownership", "active_flag", "hmac_compare", "expiry"),
        ((DEFINITIONS, 3), (CALLS, 3), (HOOKS, 2)),
    ),
    "dataflow": Angle(
        "request response parse serialize json payload body convert dict transform input output",
        ("request_attrs", "json_io", "conversion", "url_parsing", "return_object", "dataclass", "partial"),
        ((CALLS, 4), (DEFINITIONS, 2), (HOOKS, 2)),
    ),
    "validation": Angle(
        "validate valid invalid check required must range length format schema sanitize",
        ("client_error", "isinstance", "validate_method", "value_error", "limits", "strip", "custom_exception"),
        ((HOOKS, 5), (DEFINITIONS, 3)),
    ),
    "performance": Angle(
        "performance cache latency timeout batch pool index query page limit thread concurrent",
        (
            "pagination", "create_index", "concurrency", "time_source", "lru_functools", "ordered_dict", "lock",
            "fetchall",
        ),
        ((HOOKS, 4), (DEFINITIONS, 2), (CALLS, 2)),
    ),
    "bottlenecks": Angle(
        "lock thread blocking sleep query fetchall loop count scan serial wait",
        ("with_lock", "lock", "slow_hash", "count_star", "fetchall", "sleep", "concurrency"),
        ((HOOKS, 5), (DEFINITIONS, 3)),
    ),
    "caching": Angle(
        "cache ttl lru memo expire evict invalidate hit miss",
        ("ordered_dict", "expiry", "invalidation", "hit_miss", "lru_functools", "clock_injection", "with_lock"),
        ((DEFINITIONS, 3), (CALLS, 3), (HOOKS, 2)),
    ),
    "data-access": Angle(
        "database db sql query repository store row schema table transaction execute commit",
        (
            "sql_params", "create_table", "repository_class", "db_driver", "db_calls", "commit", "create_index",
            "pagination",
        ),
        ((DEFINITIONS, 3), (HOOKS, 3), (CALLS, 2)),
    ),
    "error-handling": Angle(
        "error exception retry fail handle invalid status log traceback",
        (
            "custom_exception", "raise_from", "typed_except", "broad_except", "log_exception", "client_error",
            "go_errors", "js_catch",
        ),
        ((HOOKS, 5), (DEFINITIONS, 3)),
    ),
    "state-management": Angle(
        "state lock thread session store mutable global counter context active",
        ("lock", "with_lock", "counter_mutation", "replace", "frozen_dataclass", "object_mutation", "module_state"),
        ((HOOKS, 4), (CALLS, 2), (DEFINITIONS, 2)),
    ),
    "edge-cases": Angle(
        "empty missing default zero negative limit max min overflow boundary expired",
        ("is_none", "if_not", "boundary", "dict_get", "or_default", "from_none", "limits"),
        ((HOOKS, 5), (DEFINITIONS, 3)),
    ),
    "patterns": Angle(
        "dataclass factory builder protocol decorator callable generic registry base",
        (
            "dataclass", "frozen_dataclass", "classmethod", "property", "dunder_call", "generic", "protocol_abc",
            "callable_alias",
        ),
        ((DEFINITIONS, 4), (HOOKS, 4)),
    ),
    "testing": Angle(
        "test assert fixture mock monkeypatch parametrize conftest fake stub",
        (
            "pytest_fixture", "parametrize", "pytest_raises", "test_function", "mocking", "caplog", "fake_clock",
            "js_tests", "js_expect", "go_tests",
        ),
        ((DEFINITIONS, 4), (CALLS, 2), (HOOKS, 2)),
        tests=True,
    ),
}
GENERIC = Angle("", (), ((DEFINITIONS, 4), (CALLS, 2), (IMPORTS, 2)))


def angle_names() -> list[str]:
    """The angles with their own vocabulary (others get a generic exploration)."""
    return list(ANGLES)


def angle_key(angle: str) -> str:
    """Normalise a name: "Integration_Points" and "integration points" mean "integration-points"."""
    return re.sub(r"[\s_]+", "-", angle.strip().lower())
