"""The checks every setting gets from its kind, beside its own field's limits (wfqueue.settings): an upper bound
read from its name, and a warning for a ``WFQUEUE_*`` environment variable that names no setting."""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from annotated_types import Ge, Gt

# Upper bounds every setting of a kind obeys (the kind read from its name), beside its own limits: a value past
# them is a typo or a way to say "never", and it would crash or hang far from its cause (Redis refuses an expiry
# beyond 64-bit milliseconds, a socket timeout of 1e23 s overflows, a pool of 1e23 slots never starts).
MAX_DURATION_S = 10 * 365 * 86_400  # seconds: every *_s setting, 10 years
MAX_DURATION_DAYS = 10 * 365  # days: every *_days setting, 10 years
MAX_SLOTS = 10_000  # pool slots, tasks or calls in flight at once: every *concurrency and *_parallel setting
MAX_BYTES = 1 << 40  # bytes: every *_bytes setting, 1 TiB
MAX_COUNT = 1_000_000_000  # any other count (retries, turns, tokens, requests or tokens per minute)
ENV_PREFIX = "WFQUEUE_"
# WFQUEUE_* variables that are wfqueue's but not settings (the TOML file's path; docker-compose.yml's own; the
# reliability report of the tests): no "unknown setting" warning for them.
# The names a command warned about, for the program it execs into (to the user, the same process: one warning).
WARNED_ENV = "WFQUEUE_WARNED_ENV"
ENV_NOT_SETTINGS = frozenset({"WFQUEUE_CONFIG_FILE", "WFQUEUE_WORKER_QUEUES", "WFQUEUE_RELIABILITY_REPORT",
                              WARNED_ENV})
ENV_TEST_PREFIX = "WFQUEUE_TEST_"  # the test suite's own variables


def upper_bound(name: str) -> tuple[int, str]:
    """The largest value of setting ``name`` and its unit, by the kind its name says."""
    if name.endswith("_s"):
        return MAX_DURATION_S, " seconds (10 years)"
    if name.endswith("_days"):
        return MAX_DURATION_DAYS, " days (10 years)"
    if name.endswith(("concurrency", "_parallel")):
        return MAX_SLOTS, " at once"
    if name.endswith("_bytes"):
        return MAX_BYTES, " bytes (1 TiB)"
    return MAX_COUNT, ""


def allowed_range(metadata: list[Any], limit: int, whole: bool) -> str:
    """``1 to 315360000``: the field's own lower bound and ``limit``, to say in full what a setting accepts."""
    for bound in metadata:
        if isinstance(bound, Ge):
            return f"{bound.ge} to {limit}"
        if isinstance(bound, Gt):
            low: Any = bound.gt  # a number here: Field(gt=...) of a number field
            return f"{low + 1} to {limit}" if whole else f"above {low} up to {limit}"
    return f"at most {limit}"


_warned_env: set[str] = set()  # names already warned about: once per process, however many entry points load


def warn_unknown_env(environ: Mapping[str, str], settings: Iterable[str]) -> list[str]:
    """Warn on stderr (never stdout: `--json` stays clean) about each ``WFQUEUE_*`` variable that names no
    setting, with the closest one: a misspelt name would be ignored without a word, where the TOML file refuses
    an unknown key. Not an error: other tools may set WFQUEUE_* variables of their own. ``settings``: the
    settings' names. Returns the lines."""
    known = {ENV_PREFIX + name.upper() for name in settings} | ENV_NOT_SETTINGS
    _warned_env.update(name for name in environ.get(WARNED_ENV, "").split(",") if name)
    lines = []
    for name in sorted(environ):
        upper = name.upper()  # settings are read whatever the case
        if not upper.startswith(ENV_PREFIX) or upper.startswith(ENV_TEST_PREFIX) or upper in known | _warned_env:
            continue
        _warned_env.add(upper)
        # Matched without the prefix every name shares, which would make any name look close to every setting.
        close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), [k.removeprefix(ENV_PREFIX) for k in
                                                                            sorted(known)], n=1)
        lines.append(f"warning: {name} is not a wfqueue setting and is ignored"
                     + (f" (did you mean {ENV_PREFIX}{close[0]}?)" if close else ""))
    for line in lines:
        print(line, file=sys.stderr)
    return lines


def redelivery_overlap(visibility_timeout_s: int, agent_time_limit_s: int) -> str | None:
    """A warning when a planning agent may outlive its message's visibility timeout: the broker then hands the
    message to a second worker while the first still plans (both pay for model turns), or None. Pure.

    Not refused: tests and short-lived clusters lower the timeout on purpose to see a dead host's work taken
    over. The execute queue needs no warning: its tasks' limits are kept under the timeout (workers.execute)."""
    if visibility_timeout_s > agent_time_limit_s:
        return None
    return (f"warning: WFQUEUE_VISIBILITY_TIMEOUT_S ({visibility_timeout_s} s) is not above "
            f"WFQUEUE_AGENT_TIME_LIMIT_S ({agent_time_limit_s} s): an agent still planning after "
            f"{visibility_timeout_s} s is given to a second worker as well; raise the timeout above the limit")


# A prefork pool's parent holds 6 descriptors per child (its pipes; measured with Celery 5.6 against Redis), beside
# about 40 of its own.
FDS_PER_PREFORK_SLOT = 6
FDS_OF_A_NODE = 64


def descriptors_for(pool: str, slots: int) -> str | None:
    """Make room for a prefork pool of ``slots`` children within this process's open-file limit (raising its soft
    limit up to the hard one: the node, exec'd or started from here, inherits it), or say why there is none:
    `wfqueue worker --pool prefork --concurrency 10000` started, then died of "Too many open files" 25 s later."""
    if pool != "prefork":
        return None
    try:
        import resource  # not on every platform
    except ImportError:
        return None
    needed = FDS_OF_A_NODE + FDS_PER_PREFORK_SLOT * slots
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    if hard == resource.RLIM_INFINITY or hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        return None
    most = (hard - FDS_OF_A_NODE) // FDS_PER_PREFORK_SLOT
    return (f"a prefork pool of {slots} processes needs about {needed} open files, above this machine's limit "
            f"({hard}, `ulimit -n`): at most {most} processes, or the threads pool (--pool threads), which opens none")


def before_exec() -> None:
    """Before this process execs another program (a worker, beat): that program does not warn again about the
    variables this one warned about."""
    if _warned_env:
        os.environ[WARNED_ENV] = ",".join(sorted(_warned_env))


# What a token put in a git URL as its user name starts with (GitHub, GitLab, Bitbucket's token users).
_TOKEN_USERS = ("ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "glpat-", "gldt-", "x-token-auth", "x-access-token",
                "oauth2", "oauth")
_SECRET_QUERY = ("token", "private_token", "access_token", "password", "secret", "key", "sig", "signature")


def url_secret(url: str) -> str | None:
    """What secret ``url`` holds ("credentials (https://***@host/path)"), never repeating it; None when it holds
    none. A user name alone is no secret (``ssh://git@host``, Azure's ``https://org@dev.azure.com``) unless it is a
    token: GitHub takes one as the user name."""
    scheme, found, rest = url.partition("://")
    if not found:
        return None  # a path, or scp-like user@host:path: no password fits there
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    shown_path = path.partition("?")[0]
    shown = f"{scheme}://***@{host}{slash}{shown_path}" if at else f"{scheme}://{authority}{slash}{shown_path}"
    user, colon, _ = userinfo.partition(":")
    if at and (colon or user.lower().startswith(_TOKEN_USERS) or len(user) >= 30):
        return f"credentials ({shown})"
    query = url.partition("?")[2]
    names = {part.partition("=")[0].lower() for part in query.split("&") if part}
    if names & set(_SECRET_QUERY):
        return f"a secret in its query ({shown}?...)"
    return None


# Query parameters redis-py reads from a Redis URL and Celery and kombu do not: kombu passes each one on as a
# keyword, beside the password and database it took from the URL itself (a TypeError at the first connection).
_REDIS_PY_ONLY_QUERY = ("password", "db")


def url_query_misplaced(url: str) -> list[str]:
    """The parameters of a Redis URL's query that only redis-py reads (``?password=``, ``?db=``), as named there."""
    query = url.partition("?")[2].partition("#")[0]
    names = [part.partition("=")[0] for part in query.split("&") if part]
    return [name for name in names if name.lower() in _REDIS_PY_ONLY_QUERY]


def redis_url_problem(url: str, schemes: Iterable[str]) -> str | None:
    """What is wrong with a broker or result backend URL, said when the settings are built: a typo found at the
    first connection is a traceback from deep in redis-py."""
    scheme, found, _ = url.partition("://")
    if not found or scheme.lower() not in schemes:
        shown = f"this one starts {scheme}://" if found else "this one has no scheme"
        return f"must be a Redis URL starting {', '.join(s + '://' for s in schemes)}; {shown}"
    if scheme.lower() in ("redis", "rediss"):  # read as redis-py reads it (urllib): a bad port failed at connect time
        try:
            _ = urlsplit(url).port  # raises for a port that is no number, and urlsplit for a broken IPv6 host
        except ValueError:  # not quoted: in redis://:s3cret/0 (no host) the "port" is the password
            return ("has a host or port that cannot be read (a port is a number up to 65535, an IPv6 host is written "
                    "in [brackets]); write it as redis://:PASSWORD@HOST:PORT/DB")
    misplaced = url_query_misplaced(url)
    if misplaced:  # redis-py reads them there, so the first check passed; Celery and kombu fail on them
        return (f"gives {' and '.join(misplaced)} in its query, where Celery cannot read it; write the password "
                "before the host and the database number as the path: redis://:PASSWORD@HOST:PORT/DB (a socket: "
                "redis+socket://:PASSWORD@/PATH?virtual_host=DB)")
    return None


_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.I)
_URL_SCHEME = re.compile(r"^(?P<scheme>[a-z0-9+.-]+://)", re.I)


def mask_url(url: str) -> str:
    """Hide the password of a URL: ``redis://:s3cret@host`` -> ``redis://:***@host``, and one given in its query
    (``?password=s3cret``, which redis-py reads). The credentials end at the last ``@``, as redis-py and kombu read
    them: a password may hold an ``@``, a ``?`` or a ``#`` itself (masking too much is the safe side)."""
    url = _QUERY_PASSWORD.sub(r"\1***", url)
    match = _URL_SCHEME.match(url)
    rest = url[match.end():] if match else ""
    if not match or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user, has_password, _ = credentials.partition(":")
    if not has_password:
        return url
    return f"{match.group('scheme')}{user}:***@{host}"


# Settings that send the plans elsewhere or run a program: taken from a file found in the current folder (the
# repository's own config/wfqueue.toml, when a command is run there), they are the repository's choice, not the
# user's, and the user is told so before anything runs.
OUTWARD_SETTINGS = ("broker_url", "result_backend_url", "repo_url", "executor_command", "execute_test_command",
                    "worker_cache_dir", "beat_schedule_file", "flower_address", "flower_unauthenticated_api")
_noted_files: set[str] = set()


def note_outward_settings(path: str, keys: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """Say on stderr (once per file and process) which OUTWARD_SETTINGS the settings file ``path``, found in the
    current folder rather than named by WFQUEUE_CONFIG_FILE, sets among ``keys`` and ``environ`` does not
    override. Returns the lines."""
    overridden = {name.upper() for name in environ}
    outward = [key for key in OUTWARD_SETTINGS if key in set(keys) and ENV_PREFIX + key.upper() not in overridden]
    if not outward or path in _noted_files:
        return []
    _noted_files.add(path)
    line = (f"note: {path}, the settings file of the current folder, sets {', '.join(outward)}: wfqueue sends its "
            "work or runs programs as it says (set WFQUEUE_CONFIG_FILE to choose the settings file yourself)")
    print(line, file=sys.stderr)
    return [line]

