"""Where a task's repository and session folder are, on either side of Redis.

With a shared disk a payload's paths are used as they are. Without one, the
coordinator pins the repository at a commit, publishes it and records both in
the session meta; every payload then carries a ``Transport``. A worker maps
the payload's paths before the task body sees them: ``repo`` becomes its
checkout of the pinned commit, and paths under the coordinator's session
folder become the same paths under its own copy of that folder, filled from
Redis first and mirrored back to Redis while the task runs. The coordinator
writes what the workers stored into the real session folder after each wait.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path, PurePosixPath
from typing import TypeVar

import redis

from wfqueue import keys
from wfqueue.errors import InfrastructureError, WfqueueError
from wfqueue.keys import session_prefix
from wfqueue.metering import TRANSCRIPT_DIR
from wfqueue.payloads import ExecuteTask, TaskPayload
from wfqueue.sessions import check_session_id
from wfqueue.settings import Settings
from wfqueue.state import SessionState, as_text, connect
from wfqueue.transport.checkouts import cache_dir, checked_out, repository_for
from wfqueue.transport.models import RepoPin, Transport
from wfqueue.transport.repo import keep_pin, pin_repository, publish
from wfqueue.transport.session_files import SessionFiles, hydrate, mirrored

__all__ = ["CoordinatorFiles", "local_session_root", "rebuild_from_redis", "shares_disk", "shown_session_dir",
           "task_commits_name", "task_workspace"]

P = TypeVar("P", bound=TaskPayload)

# Payload fields that name a path inside the session folder (the coordinator's, in the message).
SESSION_PATH_FIELDS = ("session_dir", "output_dir", "exec_dir")
SESSIONS_DIR = "sessions"
PIN_FILE = "repo-pin.json"  # in the session folder: the commit the workers read (RepoPin)


def read_pin(session_dir: Path) -> RepoPin | None:
    """The pin a session's folder records (``repo-pin.json``), or None: none there, or one that does not read."""
    try:
        return RepoPin.model_validate_json((session_dir / PIN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def shares_disk(settings: Settings) -> bool:
    """Whether workers use the coordinator's paths: explicitly set, else only in embedded mode."""
    return settings.shared_disk if settings.shared_disk is not None else settings.embedded


def local_session_root(settings: Settings, session_id: str) -> Path:
    """A worker's own copy of a session folder (the id checked: it names a folder)."""
    return cache_dir(settings) / SESSIONS_DIR / check_session_id(session_id)


def task_commits_name(exec_id: str, task_id: str, attempt: int) -> str:
    """Under which name an executed task's commits come back through Redis (wfqueue.keys.commits_prefix)."""
    return f"{exec_id}/{task_id}#{attempt}"


# In each session copy a worker makes: only folders holding it are removed as unused copies. A cache dir set to a
# folder in use ($HOME) by mistake must not lose the user's own `sessions/` folders.
COPY_MARKER = ".wfqueue-session-copy"


def prune_session_copies(folder: Path, older_than: float) -> list[str]:
    """Remove a worker's copies of sessions not used since ``older_than`` (epoch seconds): their state in
    Redis has expired by then, so nothing can need them. Returns the removed session ids."""
    removed = []
    for copy in folder.iterdir():
        try:
            if (copy.is_dir() and not copy.is_symlink() and (copy / COPY_MARKER).is_file()
                    and copy.stat().st_mtime < older_than):
                shutil.rmtree(copy)
                removed.append(copy.name)
        except OSError:
            continue  # another pool process removed it, or it is busy: the next task tries again
    return removed


def shown_session_dir(transport: Transport | None, session_dir: str) -> Path:
    """The session folder where its user finds it, for paths a task writes into files people read: the
    coordinator's (``transport.session_root``) when this worker works in a copy, else ``session_dir``."""
    return Path(transport.session_root if transport is not None else session_dir)


def _mapped(value: str, transport: Transport, local_root: Path) -> str:
    try:
        rel = PurePosixPath(value).relative_to(PurePosixPath(transport.session_root))
    except ValueError:
        raise InfrastructureError(
            f"task path {value} is outside its session folder {transport.session_root}",
            hint="run the same wfqueue version on the coordinator and every worker",
        ) from None
    return str(local_root.joinpath(*rel.parts))


@contextmanager
def task_workspace(payload: P, settings: Settings, connect: Callable[[], redis.Redis]) -> Iterator[P]:
    """The payload as this worker runs it: itself with a shared disk; else with ``repo`` a checkout of the
    pinned commit and session paths in this worker's copy of the session folder, mirrored to Redis."""
    transport = payload.transport
    if transport is None:
        yield payload
        return
    client = connect()
    files = SessionFiles(client, transport.session_id, settings.state_ttl_s)
    with ExitStack() as stack:
        with cache_failures(settings):
            root = local_session_root(settings, transport.session_id)
            root.mkdir(parents=True, exist_ok=True)
            (root / COPY_MARKER).touch()
            os.utime(root)  # in use now: pruning goes by this time
            prune_session_copies(root.parent, time.time() - settings.state_ttl_s)
            # Every file but the transcripts: no step reads another step's, and with many agents they are most
            # of it.
            hydrate(files, root, only=lambda rel: not rel.startswith(f"{TRANSCRIPT_DIR}/"))
            fields = type(payload).model_fields
            update = {name: _mapped(getattr(payload, name), transport, root) for name in SESSION_PATH_FIELDS
                      if name in fields}
            if "repo" in fields:
                if isinstance(payload, ExecuteTask):
                    # It makes its own worktree at its base: the cache's repository, which holds the base's objects.
                    update["repo"] = str(repository_for(client, payload.base, settings, repo_url=transport.repo_url))
                else:  # a checkout of the pinned commit, kept from eviction while the task reads it
                    local = stack.enter_context(checked_out(client, transport.commit, settings,
                                                            repo_url=transport.repo_url))
                    update["repo"] = str(local.joinpath(*PurePosixPath(transport.prefix).parts))
        stack.enter_context(mirrored(root, files))
        yield payload.model_copy(update=update)


@contextmanager
def cache_failures(settings: Settings) -> Iterator[None]:
    """The worker's cache refusing a write (read-only, full, no permission) as what it is: an infrastructure
    error naming the worker, the folder and the setting (exit 3), not an OSError of the step it stopped."""
    try:
        yield
    except OSError as exc:
        raise InfrastructureError(
            f"worker {socket.gethostname()}: its cache {cache_dir(settings)} cannot be used: "
            f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else ""),
            hint="free space there, or set WFQUEUE_WORKER_CACHE_DIR on that worker to a writable folder, then "
                 "resume the session") from None


class CoordinatorFiles:
    """The coordinator's side of one session: its transport (None with a shared disk), the mirroring of
    its own writes into Redis, and pulling the workers' files into the session folder."""

    def __init__(self, settings: Settings, client: redis.Redis, session_id: str, session_dir: Path) -> None:
        self.settings = settings
        self.client = client
        self.session_id = session_id
        self.session_dir = session_dir
        self.transport: Transport | None = None
        self.pin: RepoPin | None = None
        self._files = SessionFiles(client, session_id, settings.state_ttl_s)
        self._synced_key = session_prefix(session_id) + keys.FILES_SYNCED

    def start(self, repo: Path, recorded: Transport | None, recorded_pin: RepoPin | None = None) -> Transport | None:
        """Pin the repository and publish it (on resume: publish the recorded pin again, its bundle may have
        expired; ``recorded_pin`` alone: the session's folder's pin, Redis having forgotten the session); None with
        a shared disk. Not a git repository: UnsafeRepositoryError, saying what to do."""
        if shares_disk(self.settings):
            return None
        fresh_pin = recorded is None and recorded_pin is None
        if recorded is not None:
            self.pin = recorded_pin
            commit, repo_url = recorded.commit, recorded.repo_url
        else:  # a new session pins the repository; one Redis forgot has its folder's pin
            self.pin = recorded_pin or pin_repository(repo, history_from_url=self.settings.repo_url is not None,
                                                      keep=False)
            commit, repo_url = self.pin.commit, self.settings.repo_url
        if repo_url is None:
            publish(self.client, repo, commit, self.settings)
        elif self.pin is not None and self.pin.snapshot:  # HEAD comes from the URL, the uncommitted changes from Redis
            publish(self.client, repo, commit, self.settings, have=self.pin.head, have_at_url=True)
        if fresh_pin:  # published: a session now names it
            keep_pin(repo, commit)
        self.transport = recorded or Transport(commit=commit, prefix=self.pin.prefix if self.pin else "",
                                               repo_url=repo_url, session_id=self.session_id,
                                               session_root=str(self.session_dir))
        return self.transport

    def sync_in(self) -> None:
        """On taking a session up: the files on this disk win (a person may have edited them between runs,
        or a replan moved some into a backup) and go to Redis; a file this folder held once and no longer
        has was deleted here, so Redis forgets it; a file only Redis has (stored by workers while no
        coordinator pulled) comes here."""
        if self.transport is None:
            return
        stored = self._files.get_all()
        local: set[str] = set()
        for path in sorted(self.session_dir.rglob("*")):
            if not path.is_file() or path.name.endswith((".lock", ".tmp")):
                continue
            rel = path.relative_to(self.session_dir).as_posix()
            local.add(rel)
            data = path.read_bytes()
            if stored.get(rel) != data:
                self._files.put(rel, data)
        synced = {as_text(rel) for rel in self.client.smembers(self._synced_key)}
        for rel in sorted((set(stored) & synced) - local):
            self._files.remove(rel)
        self.pull()

    @contextmanager
    def mirrored(self) -> Iterator[None]:
        """While the coordinator drives the session: its writes go to Redis too, and what workers
        stored is in the session folder when the block ends, whatever happened."""
        if self.transport is None:
            yield
            return
        with ExitStack() as stack:
            stack.callback(self.pull)
            stack.enter_context(mirrored(self.session_dir, self._files))
            yield

    def publish_commit(self, repo: Path, commit: str) -> None:
        """Make ``commit`` (a descendant of the pinned one: an execution's integration head) readable by
        workers: a bundle in Redis of what it adds to the pin (also with repo_url, which has only the pin)."""
        if self.transport is not None:
            publish(self.client, repo, commit, self.settings, have=self.transport.commit,
                    have_at_url=self.transport.repo_url is not None)

    def rebuild(self) -> int:
        """Bring in what workers stored that this folder has not taken since it last synced: files it never held
        (a coordinator stopped before it pulled them) and files rewritten after (every write to the session's
        files in Redis takes the file out of the synced set): the callback's note of a plan whose coordinator was
        killed, which still said "planning" here, and `status` then "interrupted". A file synced and then lost
        here was deleted on purpose (a replan's move into a backup); one synced and edited here keeps the edit."""
        if self.transport is None:
            return 0
        synced = {as_text(rel) for rel in self.client.smembers(self._synced_key)}
        changed = hydrate(self._files, self.session_dir, only=lambda rel: rel not in synced)
        self._record_synced()
        return changed

    def pull(self) -> int:
        """Write the files workers stored in Redis into the session folder; how many changed."""
        if self.transport is None:
            return 0
        changed = hydrate(self._files, self.session_dir)
        self._record_synced()
        return changed

    def _record_synced(self) -> None:
        held = [as_text(rel) for rel in self.client.hkeys(self._files.key)]
        if held:  # every file Redis has is in the folder now: one missing later was deleted here
            self.client.sadd(self._synced_key, *held)
            self.client.expire(self._synced_key, self.settings.state_ttl_s)


def rebuild_from_redis(settings: Settings, session_id: str, folder: Path) -> int:
    """For `wfqueue status`: bring into ``folder`` what workers that share no disk stored for the session and
    it lacks (how many files). Nothing with a shared disk or no broker URL; a broker that cannot be reached
    leaves the folder as it is, which status then shows."""
    if settings.broker_url is None:
        return 0
    try:
        client = connect(settings)
        meta = SessionState(client, session_id, settings.state_ttl_s).session_meta()
    except WfqueueError:
        return 0
    if meta.transport is None:
        return 0
    files = CoordinatorFiles(settings, client, session_id, folder)
    files.transport = meta.transport
    return files.rebuild()
