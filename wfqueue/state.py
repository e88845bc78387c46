"""Session state in Redis: the source of truth workers on any machine share.

Files on a worker's disk may differ between hosts; what each agent produced,
each owned section's text, and each agent's progress live here, keyed by
session. Values are JSON or plain text; every key of a session expires with
``state_ttl_s``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from kombu.exceptions import OperationalError
from pydantic import ValidationError
from redis.backoff import NoBackoff
from redis.client import NEVER_DECODE
from redis.retry import Retry

from wfqueue import keys
from wfqueue.errors import (
    BrokerCredentialsError,
    BrokerNotRedisError,
    BrokerUnreachableError,
    DamagedStateError,
    InfrastructureError,
)
from wfqueue.keys import SessionMeta
from wfqueue.settings import Settings
from wfqueue.settings_checks import mask_url
from wfqueue.step_runner import RELEASE_IF_OWNER as RELEASE_IF_OWNER  # the claims' script, for the others
from wfqueue.step_runner import held_step

# HSET on a hash that exists, in one step (Redis has no HSET XX).
_HSET_IF_EXISTS = ("if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], unpack(ARGV)) "
                   "return 1 end return 0")

# A broker that is away (restarting, a network blip), as opposed to one that answered with an error:
# redis-py raises the first two on reads and writes, kombu the last when publishing a message.
BROKER_AWAY: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError, OperationalError)


def as_text(value: bytes | str) -> str:
    """A Redis reply as text. redis-py types replies as bytes or str; wfqueue's clients decode
    responses, so this only narrows the type (and decodes, should raw bytes ever arrive)."""
    return value.decode() if isinstance(value, bytes) else value


def maybe_text(value: bytes | str | None) -> str | None:
    return None if value is None else as_text(value)


def text_map(raw: Mapping[bytes | str, bytes | str]) -> dict[str, str]:
    """A Redis hash (HGETALL) as text."""
    return {as_text(k): as_text(v) for k, v in raw.items()}


def raw_reply(client: redis.Redis, *command: str) -> Any:
    """The reply to ``command`` as Redis sent it (bytes), whatever the client's ``decode_responses``: for
    values that are not text (a bundle's chunks, a session file). Writes need no such care: redis-py sends
    bytes unchanged."""
    # redis-py leaves execute_command unannotated.
    return client.execute_command(*command, **{NEVER_DECODE: []})  # type: ignore[no-untyped-call]


def redis_client(url: str, connect_timeout_s: float, read_timeout_s: float | None = None) -> redis.Redis:
    """A redis-py client for a broker URL, including kombu's ``redis+socket://`` form.

    Reads wait at least 10 s by default: a large session scan on a busy Redis may
    take seconds, and a spurious timeout there would fail a healthy plan."""
    parts = urlsplit(url)
    socket_timeout = read_timeout_s if read_timeout_s is not None else max(connect_timeout_s, 10.0)
    if parts.scheme in ("redis+socket", "unix", "socket"):
        # The database kombu takes for a socket (?virtual_host=N): Celery's queues are there, and the session
        # state, files and queue lengths read here must be too (they read database 0).
        database = parse_qs(parts.query).get("virtual_host", ["0"])[0]
        return redis.Redis(
            unix_socket_path=unquote(parts.path),
            db=int(database) if database.isdigit() else 0,
            username=unquote(parts.username) if parts.username else None,  # a Redis ACL user
            password=unquote(parts.password) if parts.password else None,
            socket_connect_timeout=connect_timeout_s,
            socket_timeout=socket_timeout,
            decode_responses=True,
        )
    return redis.Redis.from_url(
        url, socket_connect_timeout=connect_timeout_s, socket_timeout=socket_timeout, decode_responses=True
    )


def refused_write(url: str, exc: Exception, then: str = "run the command again") -> InfrastructureError | None:
    """A Redis that answers and refuses writes (an ACL user without write commands, a read-only replica, a Redis
    over its maxmemory with the noeviction policy), said with what to do (``url`` masked); None for another error.
    Read from the reply's text too: kombu wraps redis-py's errors in its OperationalError."""
    text = str(exc)
    if isinstance(exc, redis.exceptions.NoPermissionError) or "NOPERM" in text or "no permissions" in text:
        return BrokerCredentialsError(
            f"the broker at {url} does not let this user run what wfqueue needs: {text}",
            hint="give the user of WFQUEUE_BROKER_URL read and write access (a Redis ACL such as "
                 f"`ACL SETUSER NAME on >PASSWORD ~* &* +@all`), or name another user; then {then}")
    if isinstance(exc, redis.exceptions.ReadOnlyError) or "READONLY" in text or "read only replica" in text:
        return BrokerCredentialsError(f"the broker at {url} is a read-only replica: {text}",
                                      hint=f"point WFQUEUE_BROKER_URL at its primary; then {then}")
    if isinstance(exc, redis.exceptions.OutOfMemoryError) or "maxmemory" in text:
        return InfrastructureError(
            f"the broker at {url} is full: it refuses writes above its maxmemory ({text})",
            hint="free memory there (`redis-cli info memory`; plans' repository bundles are the largest keys, "
                 f"WFQUEUE_BUNDLE_TTL_S) or raise its maxmemory; then {then}")
    return None


def connect(settings: Settings, *, writing: bool = False) -> redis.Redis:
    """Connect to the configured broker, or fail with a BrokerUnreachableError naming it (masked); ``writing``:
    also check it takes writes (a plan, a worker), which a read-only replica, an ACL user without write commands
    or a full Redis refuse: a traceback at the first write otherwise, after a session folder was made.

    The check uses its own client whose reads also give up after the connect
    timeout: a service that accepts the connection and never answers must not
    hold the user longer than ``broker_connect_timeout_s``."""
    assert settings.broker_url is not None, "embedded mode sets the broker URL before connecting"
    url = settings.broker_url.get_secret_value()
    timeout_s = settings.broker_connect_timeout_s
    probe = redis_client(url, timeout_s, read_timeout_s=timeout_s)
    probe.set_retry(Retry(NoBackoff(), 0))  # one answer is enough: refused credentials are not retried for seconds
    try:
        probe.ping()
        if writing:
            written = f"{keys.KEY_ROOT}write-check:{os.getpid()}"
            probe.set(written, "1", px=10_000)
            probe.delete(written)
    except redis.AuthenticationError as exc:  # a subclass of ConnectionError: test it first
        raise BrokerCredentialsError(
            f"the broker at {mask_url(url)} refused the credentials: {exc}",
            hint="put the right password in WFQUEUE_BROKER_URL (redis://:PASSWORD@host:6379/0)",
        ) from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        if isinstance(exc, redis.TimeoutError) and str(exc).startswith("Timeout reading"):
            # Connected, and no answer to a PING: no Redis there.
            raise BrokerNotRedisError(
                f"the broker at {mask_url(url)} accepts connections but does not answer as Redis (no answer in "
                f"{timeout_s:g}s)", hint="point WFQUEUE_BROKER_URL at a Redis server (redis://host:6379/0), or "
                                        "unset it for the embedded one") from None
        raise BrokerUnreachableError(
            f"cannot reach the broker at {mask_url(url)}: {exc}",
            hint="start Redis there, fix WFQUEUE_BROKER_URL, or unset it to use the embedded broker",
        ) from None
    except redis.ResponseError as exc:
        refused = refused_write(mask_url(url), exc)
        if refused is not None:
            raise refused from None
        if "DB index" not in str(exc):
            raise _not_redis(url, exc) from None
        database = probe.connection_pool.connection_kwargs.get("db", 0)  # as redis_client read it from the URL
        raise BrokerCredentialsError(
            f"the broker at {mask_url(url)} has no database {database}: {exc}",
            hint="give WFQUEUE_BROKER_URL a database number the server has (below its `databases` setting, 16 by "
                 "default): redis://host:6379/0",
        ) from None
    except redis.RedisError as exc:  # something answered, but not as Redis does (a web server, a proxy)
        raise _not_redis(url, exc) from None
    finally:
        probe.close()
    return redis_client(url, timeout_s)


def _not_redis(url: str, exc: Exception) -> BrokerNotRedisError:
    return BrokerNotRedisError(
        f"the broker at {mask_url(url)} does not answer as Redis: {type(exc).__name__}: {exc}",
        hint="point WFQUEUE_BROKER_URL at a Redis server (redis://host:6379/0), or unset it for the embedded one")


def refuse_wrong_credentials(settings: Settings, *, writing: bool = True) -> None:
    """For a long-running process about to start (a worker, Flower): a broker that refuses the credentials, or a
    service there that is not Redis, is an error now, since Celery would try again for ever (or wait for ever in
    its first read) and waiting changes neither; one not reachable yet is left to the process's own retries (it
    may start before its Redis). ``writing``: one that refuses writes too, a full Redis included (a worker's
    consumer takes a message off its queue and then cannot record it as unacknowledged: the message is lost;
    Flower only watches)."""
    try:
        connect(settings, writing=writing).close()
    except (BrokerCredentialsError, BrokerNotRedisError):
        raise  # a worker took it for "not reachable yet" and hung for ever in its first read
    except BrokerUnreachableError:
        pass


def wait_until_reachable(client: redis.Redis, timeout_s: float, interval_s: float = 0.5) -> bool:
    """Ping until Redis answers (True) or ``timeout_s`` has passed (False): a restart takes seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval_s)


class SessionStore(Protocol):
    """What a step needs of a session's shared state. SessionState keeps it in Redis;
    wfqueue.memory_state.MemorySessionState in dicts, for in-process tests of steps."""

    @property
    def session_id(self) -> str: ...

    def reset(self) -> None: ...
    def set_meta(self, **fields: Any) -> None: ...
    def meta(self) -> dict[str, Any]: ...
    def session_meta(self) -> SessionMeta: ...
    def remember_once(self, name: str, value: str) -> str: ...
    def store(self, name: str, value: str) -> None: ...
    def recall(self, name: str) -> str | None: ...
    def forget(self, name: str) -> None: ...
    def take(self, name: str) -> str | None: ...
    def set_agent(self, area: str, **fields: Any) -> None: ...
    def agent(self, area: str) -> dict[str, Any]: ...
    def agents(self, areas: list[str]) -> dict[str, dict[str, Any]]: ...
    def count_attempt(self, area: str) -> int: ...
    def put_section(self, heading: str, body: str) -> None: ...
    def sections(self) -> dict[str, str]: ...
    def record_usage(self, entries: list[dict[str, Any]]) -> None: ...
    def usage(self) -> list[dict[str, Any]]: ...
    def usage_count(self) -> int: ...
    def save_turn(self, step: str, transcript: str, call: dict[str, Any] | None) -> None: ...
    def turn(self, step: str) -> str | None: ...
    def running_step(self, step: str, label: str) -> AbstractContextManager[object]: ...


class SessionState:
    """Everything Redis knows about one session."""

    def __init__(self, client: redis.Redis, session_id: str, ttl_s: int) -> None:
        self.client = client
        self.session_id = session_id
        self.ttl_s = ttl_s
        self.prefix = keys.session_prefix(session_id)

    def _key(self, name: str) -> str:
        return self.prefix + name

    def _touch(self, *names: str) -> None:
        for name in names:
            self.client.expire(self._key(name), self.ttl_s)

    def coordinator_key(self) -> str:
        """Where the coordinator lease (wfqueue.coordinator_lease) claims the session."""
        return self._key(keys.COORDINATOR)

    def keep_meta(self) -> None:
        """Start the session metadata's time to live again (a session being driven never loses it)."""
        self._touch(keys.META)

    def reset(self) -> None:
        """Forget everything about this session id (a new session reusing an old id)."""
        found = list(self.client.scan_iter(match=self.prefix + "*", count=500))
        if found:
            self.client.delete(*found)

    # -- session metadata -----------------------------------------------------------------

    def set_meta(self, **fields: Any) -> None:
        self.client.hset(self._key(keys.META), mapping={k: json.dumps(v) for k, v in fields.items()})
        self._touch(keys.META)

    def add_to_meta(self, **fields: Any) -> bool:
        """``set_meta`` for a session Redis still knows; False, writing nothing, where its meta is gone (a Redis
        restarted without its data, or emptied): a field written then would make the session look known again, and
        the coordinator waiting on it would wait for results that went with the data (WorkflowCoordinator's
        check in its waits)."""
        args = [item for key, value in fields.items() for item in (key, json.dumps(value))]
        added = self.client.eval(_HSET_IF_EXISTS, 1, self._key(keys.META), *args)
        if added:
            self._touch(keys.META)
        return bool(added)

    def meta(self) -> dict[str, Any]:
        """The meta hash, each field read from its JSON; DamagedStateError naming a field that does not read."""
        try:  # a value that is not UTF-8 fails the client's decoding already
            fields = text_map(self.client.hgetall(self._key(keys.META)))
            return {k: json.loads(v) for k, v in fields.items()}
        except ValueError as exc:
            raise self._damaged(f"{exc}") from None

    def session_meta(self) -> SessionMeta:
        """The meta hash as a model (every field None when the session has none)."""
        try:
            return SessionMeta.model_validate(self.meta())
        except ValidationError as exc:
            raise self._damaged(f"{exc.error_count()} field(s) of the wrong kind: {exc.errors()[0]['loc']}") from None

    def _damaged(self, what: str) -> DamagedStateError:
        # Not a traceback (a value edited by hand, or written by another program with our key names): the session
        # folder keeps what was planned, and Redis's part is rebuilt from it on resume.
        key = self._key(keys.META)
        return DamagedStateError(
            f"the state of {self.session_id} in Redis does not read ({key}: {what})",
            hint=f"delete that key (`DEL {key}` in redis-cli, connected to WFQUEUE_BROKER_URL's Redis): the session's "
                 "folder keeps what was planned, and `wfqueue resume` writes it again")

    def remember_once(self, name: str, value: str) -> str:
        """Store ``value`` under ``name`` unless something is there; return what is stored.

        Timestamps and model answers go through here so a redelivered task reuses
        the first run's value and writes the same files."""
        key = self._key(name)
        self.client.set(key, value, nx=True, ex=self.ttl_s)
        stored = maybe_text(self.client.get(key))
        return stored if stored is not None else value

    def store(self, name: str, value: str) -> None:
        """Overwrite ``name`` (for values that may legitimately change, unlike remember_once)."""
        self.client.set(self._key(name), value, ex=self.ttl_s)

    def recall(self, name: str) -> str | None:
        return maybe_text(self.client.get(self._key(name)))

    def forget(self, name: str) -> None:
        self.client.delete(self._key(name))

    def take(self, name: str) -> str | None:
        """``name``'s value, removed in the same step: of several processes taking it, one gets it."""
        pipe = self.client.pipeline()  # MULTI: the read and the removal are one step
        pipe.get(self._key(name))
        pipe.delete(self._key(name))
        value, _ = pipe.execute()
        return maybe_text(value)

    # -- agents ----------------------------------------------------------------------------

    def set_agent(self, area: str, **fields: Any) -> None:
        self.client.hset(self._key(keys.agent_key(area)), mapping={k: json.dumps(v) for k, v in fields.items()})
        self._touch(keys.agent_key(area))

    def agent(self, area: str) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in text_map(self.client.hgetall(self._key(keys.agent_key(area)))).items()}

    def agents(self, areas: list[str]) -> dict[str, dict[str, Any]]:
        pipe = self.client.pipeline()
        for area in areas:
            pipe.hgetall(self._key(keys.agent_key(area)))
        return {
            area: {k: json.loads(v) for k, v in raw.items()} for area, raw in zip(areas, pipe.execute(), strict=True)
        }

    def count_attempt(self, area: str) -> int:
        key = self._key(keys.attempts_key(area))
        count = int(self.client.incr(key))
        self.client.expire(key, self.ttl_s)
        return count

    # -- sections of plan-note.md ------------------------------------------------------------

    def put_section(self, heading: str, body: str) -> None:
        self.client.hset(self._key(keys.SECTIONS), heading, body)
        self._touch(keys.SECTIONS)

    def sections(self) -> dict[str, str]:
        return text_map(self.client.hgetall(self._key(keys.SECTIONS)))

    # -- LLM usage (wfqueue.metering) ----------------------------------------------------------

    def record_usage(self, entries: list[dict[str, Any]]) -> None:
        """Append the calls one step made (provider usage entries) to the session's usage list.

        Only calls actually made are passed in: a redelivered task that reuses a remembered
        answer never reaches the provider, so it appends nothing and nothing is counted twice."""
        if not entries:
            return
        key = self._key(keys.USAGE)
        pipe = self.client.pipeline()  # MULTI: the calls of one step land together, with the TTL
        pipe.rpush(key, *(json.dumps(entry, sort_keys=True) for entry in entries))
        pipe.expire(key, self.ttl_s)
        pipe.execute()

    def usage(self) -> list[dict[str, Any]]:
        """Every recorded call of the session, in the order the steps recorded them."""
        return [json.loads(raw) for raw in self.client.lrange(self._key(keys.USAGE), 0, -1)]

    def usage_count(self) -> int:
        """How many calls are recorded (one LLEN: cheap enough to ask while a plan waits)."""
        return int(self.client.llen(self._key(keys.USAGE)))

    # -- durable turns (wfqueue.turns) -----------------------------------------------------------

    def save_turn(self, step: str, transcript: str, call: dict[str, Any] | None) -> None:
        """Save a step's transcript and, in the same MULTI, append the usage of the call it just made.

        Together or not at all: a turn saved without its usage would be free, and usage recorded
        without its turn would be paid again by the restarted step."""
        pipe = self.client.pipeline()
        pipe.set(self._key(keys.turn_key(step)), transcript, ex=self.ttl_s)
        if call is not None:
            pipe.rpush(self._key(keys.USAGE), json.dumps(call, sort_keys=True))
            pipe.expire(self._key(keys.USAGE), self.ttl_s)
        pipe.execute()

    def turn(self, step: str) -> str | None:
        """The saved transcript of ``step`` (JSON), if it completed a call."""
        return maybe_text(self.client.get(self._key(keys.turn_key(step))))

    def running_step(self, step: str, label: str) -> AbstractContextManager[object]:
        """``step`` run by this runner alone, across every worker (wfqueue.step_runner)."""
        return held_step(self.client, self._key(keys.turn_key(step)) + ":runner", label)


class StateFactory:
    """Hands out SessionState objects on a connection owned by the current process.

    Prefork children must not share the parent's sockets, so the client is
    rebuilt whenever the pid changes."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: tuple[int, redis.Redis] | None = None

    def client(self) -> redis.Redis:
        if self._client is None or self._client[0] != os.getpid():
            assert self.settings.broker_url is not None, "workers always have a broker URL"
            url = self.settings.broker_url.get_secret_value()
            self._client = (os.getpid(), redis_client(url, self.settings.broker_connect_timeout_s))
        return self._client[1]

    def session(self, session_id: str) -> SessionState:
        return SessionState(self.client(), session_id, self.settings.state_ttl_s)


def wait_until(predicate: Any, timeout_s: float, interval_s: float = 0.1) -> bool:
    """Poll ``predicate`` until it is truthy or the timeout passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())
