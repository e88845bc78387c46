"""The coordinator skeleton every workflow follows (its UI, requests and outcome: wfqueue.workflow.contract).

provider and budget check → broker runtime (embedded or configured) → session id
and folder → ``SessionState`` held under ``resumable`` and a ``CoordinatorLease``
→ the session meta → the session's files (with no shared disk: the repository
pinned and published, files mirrored through Redis) → fan-out → wait with
progress → an outcome with an exit code. A workflow subclasses
``WorkflowCoordinator`` and writes only its own steps, and builds its payloads
with ``self.transport``.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from celery.result import AsyncResult

from wfqueue import stop_request
from wfqueue.analysis.files import files_past_the_index, has_code_file, no_source_code
from wfqueue.analysis.index_cache import cache_file
from wfqueue.coordinator_lease import CoordinatorLease, taken_by_another
from wfqueue.errors import (
    BadInputError,
    BudgetExhaustedError,
    ConfigError,
    InfrastructureError,
    ProviderError,
    SessionIdTakenError,
    TransientProviderError,
    WfqueueError,
)
from wfqueue.fanout import late_result, waiting_for
from wfqueue.fsio import atomic_write_json, check_writable
from wfqueue.gitcmd import is_bare_repository
from wfqueue.keys import COORDINATOR, STEP_NOTE, SessionMeta, SessionStatus
from wfqueue.liveness import marked_silent
from wfqueue.metering import (
    budget_meta,
    check_budget_priced,
    read_usage_file,
    session_report,
    usage_line,
    write_usage_file,
)
from wfqueue.planted import refuse_planted
from wfqueue.providers import check_provider_spec
from wfqueue.runtime import (
    Runtime,
    broker_never_gone,
    broker_runtime,
    nothing_to_wait_for,
    resumable,
    resume_command,
    retries_spent_hint,
    wait_for,
)
from wfqueue.sessions import WORKFLOW_DIR, SessionIds
from wfqueue.settings import Settings
from wfqueue.state import SessionState, SessionStore
from wfqueue.transport.models import Transport
from wfqueue.transport.repo import refuse_shallow
from wfqueue.transport.workspace import PIN_FILE, CoordinatorFiles, read_pin, shares_disk
from wfqueue.up_cluster import serving_up
from wfqueue.usage import Budget, PriceTable
from wfqueue.workflow.contract import NewSessionRequest, WorkflowUI

LARGE_REPOSITORY_FILES = 5_000  # files listed: from here a plan command says the index is built first


def check_credentials(settings: Settings, provider: str, repo: Path) -> None:
    """Refuse the anthropic provider where the workers that would call it are known to have no credentials:
    this machine's own (embedded mode, which pass on this environment), or those of the `wfqueue up` serving
    ``repo``. Before anything starts or is written: a session made first would be left half-planned, its every
    resume failing the same way. Workers behind a broker URL read their own settings and are not second-guessed."""
    if provider != "anthropic":
        return
    up = serving_up(settings, repo)
    if up is not None:
        up.refuse_without_key()
        return
    if settings.embedded and not settings.has_anthropic_credentials():
        raise ConfigError("no Anthropic credentials: the anthropic provider needs an API key",
                          hint="set ANTHROPIC_API_KEY, or use --provider offline")


UI = TypeVar("UI", bound=WorkflowUI)


def stop_hint(exc: ProviderError, then: str) -> str | None:
    """What the user does about a step that stopped a plan: the error's own hint, then ``then`` (the resume that
    goes on); None for a spent budget, whose hint the plan's outcome gives itself (with --budget LARGER)."""
    if isinstance(exc, BudgetExhaustedError):
        return None
    if isinstance(exc, TransientProviderError):
        # Its hint ("the task is retried later") was the worker's, while retries were left: the plan has stopped,
        # so nothing retries it now.
        return retries_spent_hint(then)
    return f"{exc.hint}; {then}" if exc.hint else then


def new_session_folder(root: Path, ids: SessionIds, text: str, taken: set[str] | None = None) -> Path:
    """A fresh session folder under ``root``, named by ``ids`` from ``text`` (made now); ``taken``: ids in
    use elsewhere (on the broker) besides the folders under ``root``."""
    existing = {p.name for p in root.iterdir()} if root.is_dir() else set()
    folder = root / ids.new(text, datetime.now(UTC), existing | (taken or set()))
    folder.mkdir(parents=True)
    return folder


class WorkflowCoordinator(Generic[UI]):
    """The shared steps; subclasses drive their own phases between them."""

    # Whether Ctrl-C (or SIGTERM) while a session is held says on the terminal how to finish it (an execution says so
    # itself); a --json object carries interrupted_hint either way.
    RESUME_HINT_ON_STOP: ClassVar[bool] = True

    def __init__(self, settings: Settings, ui: UI, worker_env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.ui = ui
        self.worker_env = worker_env  # extra environment for embedded workers (tests, benchmarks)
        self.prices = PriceTable(settings.price_table)
        self.files: CoordinatorFiles | None = None  # the held session's files (``hold``)
        self._runtime: Runtime | None = None  # the one ``runtime`` holds: its workers are waited for and kept
        self._held: str | None = None  # the session ``hold`` has written to Redis (its meta, its claim)
        self._billed = 0  # the calls usage.json counted when this command last wrote it (_keep_the_bill)

    @property
    def transport(self) -> Transport | None:
        """What every payload of the held session carries (None: workers share this disk)."""
        return self.files.transport if self.files is not None else None

    def check(self, provider: str, budget: Budget | None, repo: Path, *, credentials: bool = True) -> None:
        """Refuse an unknown provider, a budget it cannot price, a missing repository, or (``credentials``: the
        caller knows ``provider`` is the one that will run) a model the workers cannot call or a repository with
        no code for the offline planner, before any work."""
        check_provider_spec(provider)
        check_budget_priced(budget, provider, self.settings)
        if not repo.is_dir():
            raise BadInputError(f"--repo {repo} is not a directory")
        if is_bare_repository(repo):  # it read as "no source code"
            raise BadInputError(f"{repo} is a bare git repository: it has no working tree to plan against",
                                hint=f"clone it (`git clone {repo} DIR`) and plan the clone with --repo DIR")
        if not shares_disk(self.settings) and self.settings.repo_url is None:
            refuse_shallow(repo)  # before a folder is made: the pin would refuse it after (wfqueue.transport.repo)
        if credentials:
            check_credentials(self.settings, provider, repo)
            largest = self.settings.index_max_file_bytes
            if provider == "offline" and not has_code_file(repo, largest):  # before a Redis, workers or a folder
                raise no_source_code(repo, largest)
            if provider == "offline":
                self._say_what_the_index_does(repo)

    def _say_what_the_index_does(self, repo: Path) -> None:
        """For a large repository, before its plan starts: that its first task builds the index (without a word,
        the plan seemed stuck), and which files the index may leave out past WFQUEUE_INDEX_MAX_FILES."""
        largest, most = self.settings.index_max_file_bytes, self.settings.index_max_files
        listed, past = files_past_the_index(repo, most)
        if listed >= LARGE_REPOSITORY_FILES and not cache_file(repo.resolve(), largest, None, most).is_file():
            self.ui.info(f"the offline planner indexes the repository's {listed} files first, in the plan's first "
                         "task (tens of seconds for tens of thousands of files); later plans read it")
        if past:
            self.ui.info(f"{repo} has {listed} files: the offline planner reads the first {most} text files in path "
                         f"order (WFQUEUE_INDEX_MAX_FILES), so up to {past} files after them may not be planned; "
                         "raise it (every planning process then holds more memory: about 2.5 GB at 50 000 files), "
                         "plan the folder the change is in (--repo FOLDER), or use the anthropic provider, whose "
                         "tools see every file")

    @contextmanager
    def runtime(self, repo: Path, workers: int | None = None) -> Iterator[Runtime]:
        """A broker for this plan; in embedded mode ``workers`` local worker processes (by default
        WFQUEUE_MAX_AGENTS: as many as agents may run at once), waited for by the first ``wait``."""
        refuse_planted(repo)
        check_writable(repo / WORKFLOW_DIR, hint="wfqueue keeps its sessions (and an embedded Redis) there: make "
                                                 "the repository writable, or plan a writable clone of it")
        with broker_runtime(self.settings, repo, workers or self.settings.max_agents, self.ui,
                            self.worker_env) as runtime:
            self._runtime = runtime
            try:
                yield runtime
            finally:
                self._runtime = None

    @contextmanager
    def hold(self, runtime: Runtime, session_id: str, *, fresh: bool,
             meta: SessionMeta | None = None) -> Iterator[SessionState]:
        """The session's state, held by this coordinator alone (``fresh``: a new session), with a lost
        broker turned into a resumable error; ``meta`` is written first (workers read the budget there)."""
        state = SessionState(runtime.client, session_id, runtime.settings.state_ttl_s)
        if runtime.up is not None:  # its workers would refuse every task, naming a key this shell may have
            provider = meta.provider if meta is not None and meta.provider else state.meta().get("provider")
            if provider == "anthropic":
                runtime.up.refuse_without_key()
        lease = CoordinatorLease(state, fresh=fresh, session_dir=meta.session_dir if meta is not None else None)
        with resumable(runtime.settings, session_id, runtime.repo, runtime.up, runtime.broker_gone), lease:
            if meta is not None:
                state.set_meta(**meta.fields())
            self._held = session_id  # from here on Redis knows the session: a stop leaves it to resume
            if not fresh:
                self._recall_the_bill(state)
            try:
                with self._session_files(runtime, state, fresh):
                    yield state
            except (KeyboardInterrupt, EOFError):  # Terminated (SIGTERM) is one too; EOF: Ctrl-D at a question
                # Its own workers first: the calls their running steps finish within the stop's grace are paid
                # for, and the bill must count them (it read 1 call of 5 the server had answered). A second
                # Ctrl-C during that stop still leaves the bill and the hint.
                try:
                    runtime.stop_workers()
                finally:
                    self._bill(state)
                    hint = self.interrupted_hint(session_id, runtime.repo)
                    stop_request.leave(session_id, hint)  # for a --json command's object
                    if self.RESUME_HINT_ON_STOP:
                        with contextlib.suppress(OSError):  # after a hangup the terminal is gone (EIO)
                            self.ui.info(f"stopped: what is done is kept; {hint}")
                raise
            except WfqueueError:
                self._bill(state)
                raise

    def interrupted_hint(self, session_id: str, repo: Path) -> str:
        """How to finish ``session_id`` after a stop, as the --json object and the terminal say it."""
        return f"finish the plan with {resume_command(session_id, repo)}"

    def _recall_the_bill(self, state: SessionState) -> None:
        """A session Redis has forgotten (older than WFQUEUE_STATE_TTL_S, or its data removed) gets back the calls
        its usage.json kept: its budget, usage line and status count what was paid before, not from zero."""
        folder = state.session_meta().session_dir
        if folder is None or state.usage():
            return
        kept = read_usage_file(Path(folder))
        if kept is not None and kept.calls:
            state.record_usage(kept.calls)

    def _keep_the_bill(self, state: SessionStore) -> None:
        """usage.json written again, while the command waits, once a call was recorded since it last was: a
        command killed outright (SIGKILL, a power cut) left no bill of what it had paid, and `wfqueue status`
        showed no spend. Only where workers share this disk: a worker with a disk of its own brings the session's
        files through Redis, where an edit of this copy would win over its last step's."""
        if self._runtime is None or not shares_disk(self._runtime.settings):
            return
        count = state.usage_count()
        if count != self._billed:
            self._billed = count
            self._bill(state)

    def _bill(self, state: SessionStore) -> None:
        """A session that ends early (its first step failing, Ctrl-C) still shows what its model calls cost: its
        usage.json is written where the last step would have written it. Nothing when no call was made (a
        refused session's empty folder is removed); best effort: the error that ended it matters more."""
        with contextlib.suppress(Exception):
            folder = state.session_meta().session_dir
            if folder is not None and state.usage() and Path(folder).is_dir():
                write_usage_file(state, self.prices, Path(folder))

    @contextmanager
    def _session_files(self, runtime: Runtime, state: SessionState, fresh: bool) -> Iterator[None]:
        """Without a shared disk: the repository pinned and published (the pin recorded in the meta, or
        the recorded one published again on resume), this process's writes mirrored to Redis, and the
        workers' files pulled into the session folder after each wait and at the end."""
        meta = state.session_meta()
        if meta.session_dir is None or meta.repo is None:
            yield  # a session too old to say where it lives: nothing to pin or pull
            return
        files = CoordinatorFiles(runtime.settings, runtime.client, state.session_id, Path(meta.session_dir))
        # A session Redis forgot (a restart without persistence, or its state's TTL) is published again from the
        # pin its folder records: pinned afresh, its workers would read the repository as it is now.
        pin = meta.pin if meta.transport is not None or fresh else read_pin(Path(meta.session_dir))
        transport = files.start(Path(meta.repo), meta.transport, pin)
        if transport is not None and meta.transport is None and files.pin is not None:
            state.set_meta(transport=transport.model_dump(mode="json"), pin=files.pin.model_dump(mode="json"))
            # The plan says what it was planned against: HEAD, and the snapshot of uncommitted changes, if any.
            atomic_write_json(Path(meta.session_dir) / PIN_FILE, files.pin.model_dump(mode="json"))
        self.files = files
        files.sync_in()  # a new session's first files go to Redis; a resumed one gets back what workers stored
        try:
            with files.mirrored():
                yield
        finally:
            self.files = None

    def _workers_up(self) -> Callable[[], None]:
        """Wait for the held runtime's embedded node (its first wait only); what looks after the node while a
        result is waited for (a no-op without one)."""
        if self._runtime is None:
            return nothing_to_wait_for
        self._runtime.workers_ready()
        return self._runtime.workers_alive

    def _gone(self) -> Callable[[], bool]:
        return self._runtime.broker_gone if self._runtime is not None else broker_never_gone

    def free_folder(self, make: Callable[[set[str]], Path], taken: set[str] | None = None) -> Path:
        """A new session folder, ``make(taken)``, whose id no other folder's session holds on the held runtime's
        broker (ids are unique per repository only: another repository's session of the same words may live
        there, its agents still writing); a taken id's folder, just made, is removed and the next id tried."""
        taken = set(taken or ())
        while True:
            folder = make(taken)
            runtime = self._runtime
            if runtime is None or taken_by_another(SessionState(runtime.client, folder.name,
                                                                runtime.settings.state_ttl_s), str(folder)) is None:
                return folder
            shutil.rmtree(folder)
            taken.add(folder.name)

    def wait(self, result: AsyncResult[Any], what: str, settings: Settings, state: SessionStore | None = None) -> Any:
        """Wait for one task; the files it wrote are in the session folder when this returns. With the session's
        ``state``, what the step says it waits for (a refused model call sent again later) is shown as it
        changes."""
        shown: list[str | None] = [None]
        if state is not None:  # one left by an earlier step its worker killed outright would show as this one's
            state.forget(STEP_NOTE)

        def tick() -> None:
            if state is None:
                return
            self._still_known(state, what)
            self._keep_the_bill(state)
            note = state.recall(STEP_NOTE)
            if note is not None and note != shown[0]:
                self.ui.note(what, note)
            shown[0] = note

        try:
            return wait_for(result, what, settings, tick=tick, watch=self._workers_up(), broker_gone=self._gone())
        finally:
            self.pull()

    def _still_known(self, state: SessionStore, what: str) -> None:
        """Raise when the broker no longer holds the session (a Redis restarted without its data, or emptied):
        the workers' results went with it, nothing would end the wait but WFQUEUE_PLAN_TIMEOUT_S (an hour), and
        nothing said why."""
        # This command's own claim (refreshed every few seconds: gone only with the broker's data), asked first: a
        # GET on every look at a wait, where the meta is a whole hash; the meta for a state no claim guards.
        if state.recall(COORDINATOR) is not None or state.meta():
            return
        repo = self._runtime.repo if self._runtime is not None else Path.cwd()
        raise InfrastructureError(f"the broker lost {state.session_id}'s state while {what} ran: its Redis was "
                                  "restarted without its data, or emptied",
                                  hint=f"what the session folder holds is kept: "
                                       f"{resume_command(state.session_id, repo)} plans what is missing")

    def pull(self) -> None:
        if self.files is not None:
            self.files.pull()

    @contextmanager
    def fresh_session(self, runtime: Runtime, request: NewSessionRequest, kind: str, root: Path,
                      ids: SessionIds) -> Iterator[tuple[SessionState, Path]]:
        """A new session folder under ``root`` and its state, held, with the meta written (kind, repo,
        folder, requirement, provider, budget; status planning). Input refused before anything was written in
        the folder (the first step found nothing to plan), or a stop (Ctrl-C, SIGTERM) before the session was
        held, leaves no empty session behind: one that Redis knows nothing of could never be resumed."""
        taken: set[str] = set()
        session_dir: Path | None = None
        try:
            with ExitStack() as stack:
                while True:
                    session_dir = new_session_folder(root, ids, request.requirement, taken)
                    meta = SessionMeta(kind=kind, repo=str(request.repo), session_dir=str(session_dir),
                                       requirement=request.requirement, provider=request.provider,
                                       status=SessionStatus.PLANNING, budget=budget_meta(request.budget))
                    try:
                        state = stack.enter_context(self.hold(runtime, session_dir.name, fresh=True, meta=meta))
                        break
                    except SessionIdTakenError:
                        # Another repository's live session on this broker has the id: the next one (-2, -3...).
                        session_dir.rmdir()  # made just now, still empty
                        taken.add(session_dir.name)
                self.ui.info(f"session {state.session_id}")
                yield state, session_dir
        except BadInputError:
            _remove_if_empty(session_dir)
            raise
        except (KeyboardInterrupt, EOFError):
            if session_dir is not None and self._held != session_dir.name:
                _remove_if_empty(session_dir)
            raise

    def wait_with_progress(self, result: AsyncResult[Any], what: str, settings: Settings, state: SessionStore,
                           watched: list[str], settled: Callable[[], Any] | None = None) -> Any:
        """Wait for a fan-out (wfqueue.fanout), drawing the agent records of ``watched`` while it runs. When its
        callback held back, the result is that of the run an agent sent again, once every agent finished."""

        def tick() -> None:
            self._still_known(state, what)
            self._keep_the_bill(state)
            self.ui.progress(marked_silent(state.agents(watched), time.time()))

        try:
            watch, deadline = self._workers_up(), time.monotonic() + settings.plan_timeout_s
            value = wait_for(result, what, settings, tick=tick, settled=settled, watch=watch, deadline=deadline,
                             broker_gone=self._gone())
            if waiting_for(value) is not None:
                value = wait_for(None, what, settings, tick=tick, settled=late_result(state, settled), watch=watch,
                                 deadline=deadline, broker_gone=self._gone())
            return value
        finally:
            self.ui.done()
            self.pull()

    def usage(self, state: SessionStore) -> str:
        return usage_line(session_report(state, self.prices))


def _remove_if_empty(folder: Path | None) -> None:
    """Remove a session folder this command made, if nothing was written in it: one holding work stays."""
    if folder is not None:
        with contextlib.suppress(OSError):
            folder.rmdir()
