"""What every coordinator needs: a broker (embedded or configured), a Celery app to
send tasks by name, and a way to wait for them.

``broker_runtime`` is a context manager: in embedded mode it starts Redis and a
local worker node (``Runtime.workers_ready`` waits for the node to consume) and
stops both on the way out, whatever happened, unless a
`wfqueue up` serves the repository (wfqueue.up_cluster), whose broker it then
uses; with a broker URL it only connects (BrokerUnreachableError, exit 3, if it
cannot).
A plan command that calls ``stop_after_output`` first keeps them up past a clean
exit until it has printed the result and calls ``stop_deferred``: stopping takes
seconds the user need not wait for to read the outcome.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import redis
from celery import Celery
from celery.exceptions import NotRegistered, SoftTimeLimitExceeded, TimeLimitExceeded
from celery.result import AsyncResult
from pydantic import SecretStr

from wfqueue import prestart, stop_request
from wfqueue.celery_app import create_app, drop_leftover_messages, release_result_subscriptions
from wfqueue.embedded import EmbeddedCluster
from wfqueue.errors import (
    BrokerUnreachableError,
    InfrastructureError,
    ProviderError,
    TransientProviderError,
    WfqueueError,
    WorkerStartError,
)
from wfqueue.node_keeper import NodeKeeper
from wfqueue.queue_watch import QueueWatch
from wfqueue.sessions import continue_command, queue_dir, repo_option
from wfqueue.settings import Settings
from wfqueue.settings_checks import mask_url
from wfqueue.state import BROKER_AWAY, connect, refused_write
from wfqueue.up_cluster import UpCluster, serving_up

# Pause between attempts to reach a broker that went away mid-plan.
OUTAGE_RETRY_INTERVAL_S = 0.5
# How often an awaited result is looked at: one Redis GET (0.09 ms of CPU: 1 % of a core at this rate), so the next
# step starts, and the command answers, within 10 ms of the task's end. Progress is drawn and the watchdog's
# verdict read every poll_interval_s.
RESULT_CHECK_S = 0.01


class Reporter(Protocol):
    def info(self, message: str) -> None: ...


def nothing_to_wait_for() -> None:
    return None


def broker_never_gone() -> bool:
    """``Runtime.broker_gone`` of a shared broker: someone may restart it, so a wait gives it its grace."""
    return False


@dataclass
class Runtime:
    settings: Settings  # with the broker URL filled in
    app: Celery
    client: redis.Redis
    repo: Path  # the repository the command works on: hints that name a command to run again say it
    # Blocks until the embedded worker node consumes, or raises WorkerStartError if it exited. A no-op once it
    # has answered, and where there is no embedded node. Sending needs no worker: the task waits in Redis.
    workers_ready: Callable[[], None] = nothing_to_wait_for
    # Called while a command waits (every poll interval): replaces an embedded worker node that died
    # (wfqueue.node_keeper). A no-op where there is no embedded node.
    workers_alive: Callable[[], None] = nothing_to_wait_for
    # Stops the embedded worker nodes (warm) and leaves Redis running: a stopped command bills what they finished
    # before its Redis goes. A no-op where the workers are not this command's.
    stop_workers: Callable[[], None] = nothing_to_wait_for
    up: UpCluster | None = None  # the `wfqueue up` whose cluster this command uses
    # Whether the broker is gone for good: the `wfqueue up` that ran it has stopped, or this command's embedded
    # Redis died. Nobody brings such a broker back, so a wait stops at once instead of waiting out
    # broker_outage_grace_s. A shared broker is never known gone (someone may restart it).
    broker_gone: Callable[[], bool] = broker_never_gone


class _ReadyOnce:
    """``Runtime.workers_ready`` for an embedded node: the first call waits and reports, later ones return."""

    def __init__(self, cluster: EmbeddedCluster, app: Celery, ui: Reporter, started: float) -> None:
        self.cluster, self.app, self.ui, self.started = cluster, app, ui, started
        self.ready = False

    def __call__(self) -> None:
        if self.ready or self.cluster.workers is None:
            return
        waiting = time.monotonic()
        self.cluster.workers.wait_ready(self.app)
        self.ready = True
        now = time.monotonic()
        self.ui.info(f"embedded Redis and workers ready in {now - self.started:.1f}s "
                     f"(the plan waited {now - waiting:.1f}s for them)")


class _Deferral:
    """Embedded clusters left running past a clean exit until the command's output is out."""

    def __init__(self) -> None:
        self.requested = False  # the next embedded runtime defers its stop
        self.pending: list[EmbeddedCluster] = []
        self.registered = False


_deferral = _Deferral()


def stop_after_output() -> None:
    """Let the next ``broker_runtime`` (this process, embedded mode) leave its Redis and workers running
    when its block ends cleanly, until ``stop_deferred``. An error or Ctrl-C still stops them then (a warm stop:
    a running task gets the grace period);
    whatever is left is stopped at interpreter exit, so nothing outlives the command."""
    _deferral.requested = True
    if not _deferral.registered:
        atexit.register(stop_deferred)
        _deferral.registered = True


def stop_deferred() -> None:
    """Stop the clusters whose stop was deferred (Ctrl-C during it kills what is left, then propagates)."""
    _deferral.requested = False
    while _deferral.pending:
        _deferral.pending.pop().stop()


_ExitFunc = Callable[[type[BaseException] | None, BaseException | None, TracebackType | None], bool]


def _stop_or_defer(cluster: EmbeddedCluster, defer: bool) -> _ExitFunc:
    """The exit callback of ``cluster``: stop it, or (a clean exit that asked to defer) queue its stop."""
    def on_exit(exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if defer and exc_type is None:
            _deferral.pending.append(cluster)
        else:
            cluster.stop()
        return False
    return on_exit


@contextmanager
def broker_runtime(settings: Settings, repo: Path, concurrency: int, ui: Reporter,
                   worker_env: dict[str, str] | None = None) -> Iterator[Runtime]:
    defer, _deferral.requested = _deferral.requested, False  # for this runtime only
    with ExitStack() as stack:
        cluster: EmbeddedCluster | None = None
        started = time.monotonic()
        up = serving_up(settings, repo)
        if up is not None:
            ui.info(f"using {up.named()} ({up.workers} worker process(es))")
            settings = up.broker_settings(settings)
        elif settings.embedded:
            cluster = EmbeddedCluster(queue_dir(repo), concurrency=concurrency, redis_port=settings.embedded_redis_port,
                                      start_timeout_s=settings.embedded_start_timeout_s, worker_env=worker_env,
                                      pool=settings.effective_worker_pool(), use_standby=settings.prestart_worker)
            stack.push(_stop_or_defer(cluster, defer))
            settings = settings.model_copy(update={"broker_url": SecretStr(cluster.start_redis())})
        if cluster is None or not settings.prestart_worker:
            prestart.discard()  # started on the entry point's guess, which the settings overrule: not kept idle
        if (up is not None or cluster is not None) and settings.shared_disk is None:
            # The workers run on this machine (embedded, or `wfqueue up`'s): they read the repository and write the
            # session in place.
            settings = settings.model_copy(update={"shared_disk": True})
        client = connect(settings, writing=True)
        app = create_app(settings)
        stack.callback(release_result_subscriptions, app)  # runs before the cluster stops
        ready: Callable[[], None] = nothing_to_wait_for
        alive: Callable[[], None] = nothing_to_wait_for
        stop_workers: Callable[[], None] = nothing_to_wait_for
        if cluster is not None:
            stop_workers = cluster.stop_workers
            drop_leftover_messages(app)  # this command's own Redis: an earlier one's unsent work is resume's to send
            ui.info(f"starting a local worker with {cluster.concurrency} {cluster.pool} slot(s)")
            cluster.launch_workers()
            # The command prepares its session and sends its first task while the node starts; its first wait
            # waits for the node (WorkflowCoordinator.wait).
            ready = _ReadyOnce(cluster, app, ui, started)
            alive = NodeKeeper(cluster, app, ui).check
        elif up is None:  # a shared broker: its workers are nobody's here, maybe none at all
            assert settings.broker_url is not None  # not embedded
            alive = QueueWatch(app, client, ui.info, mask_url(settings.broker_url.get_secret_value()),
                               first_look_s=settings.idle_queue_warning_s).check
        gone: Callable[[], bool] = broker_never_gone
        if up is not None:
            gone = up.stopped
        elif cluster is not None:
            gone = cluster.redis_died
        yield Runtime(settings=settings, app=app, client=client, repo=repo, workers_ready=ready, workers_alive=alive,
                      stop_workers=stop_workers, up=up, broker_gone=gone)


def resume_command(session_id: str, repo: Path, option: str | None = None) -> str:
    """`wfqueue resume SESSION`, with ``--repo`` where the current folder would not find the session (``option``:
    ``repo_option(repo)`` already known, which asks git where the current folder is: a listing asks once)."""
    return f"`wfqueue resume {session_id}{repo_option(repo) if option is None else option}`"


@contextmanager
def resumable(settings: Settings, session_id: str, repo: Path, up: UpCluster | None = None,
              broker_gone: Callable[[], bool] = broker_never_gone) -> Iterator[None]:
    """:func:`_resumable_errors`, each error then naming ``session_id`` (``WfqueueError.session_id``): a script
    reading a `--json` command's error finds the session to resume there, not only in the hint's words."""
    try:
        with _resumable_errors(settings, session_id, repo, up, broker_gone):
            yield
    except WfqueueError as exc:
        exc.session_id = exc.session_id or session_id
        raise


@contextmanager
def _resumable_errors(settings: Settings, session_id: str, repo: Path, up: UpCluster | None,
                      broker_gone: Callable[[], bool]) -> Iterator[None]:
    """Turn a broker lost while driving ``session_id`` into BrokerUnreachableError (exit 3)
    that names the broker (password masked) and says how to finish the plan; an embedded
    worker that never started (WorkerStartError) says the same after its own hint. A broker that was the
    `wfqueue up` (``up``) now gone is said to be that, and so is this command's own Redis that died
    (``broker_gone``, ``Runtime.broker_gone``).

    What workers finished is safe in Redis (and on disk), so `wfqueue resume`
    re-runs only the missing work once the broker is back."""
    url = mask_url(settings.broker_url.get_secret_value()) if settings.broker_url else "the embedded broker"
    # An execution is finished as its own report says (`resume` would do the same, but one instruction, not two).
    finish = "it" if session_id.startswith("EXEC-") else "the plan"
    resume = f"finish {finish} with `{continue_command(session_id, repo_option(repo))}`"
    hint = f"when Redis is back, {resume}"
    try:
        yield
    except WorkerStartError as exc:  # the session and its first task were already sent (Runtime.workers_ready)
        raise WorkerStartError(exc.message, hint=f"{exc.hint}; once a worker starts, {resume}") from None
    except TransientProviderError as exc:  # its retries are spent: nothing is "retried later" once we stop
        raise ProviderError(exc.message, hint=retries_spent_hint(resume)) from None
    except BrokerUnreachableError as exc:
        raise BrokerUnreachableError(exc.message, hint=hint) from None
    except redis.ResponseError as exc:  # a write of this command's own, refused
        refused = refused_write(url, exc, then=resume)
        if refused is None:
            raise
        raise refused from None
    except BROKER_AWAY as exc:
        refused = refused_write(url, exc, then=resume)
        if refused is not None:  # it answered, and refused to store what the plan wrote: not "when Redis is back"
            raise refused from None
        if up is not None and not up.running():  # its Redis went with it: say so, not only that Redis went
            hint = f"{up.named()} has stopped: start it again (`wfqueue up{repo_option(repo)}`), then {resume}"
        elif up is None and broker_gone():  # no one restarts it, and the resume starts one of its own
            log = queue_dir(repo) / "redis" / "redis.log"
            raise BrokerUnreachableError(
                f"this command's embedded Redis exited while {session_id} ran (killed, or out of memory?): "
                f"see {log}", hint=f"{resume}: it starts Redis again, and what the workers finished is kept") from None
        raise BrokerUnreachableError(f"lost the broker at {url} while {session_id} ran: "
                                     f"{type(exc).__name__}: {exc}", hint=hint) from None


def retries_spent_hint(then: str) -> str:
    """What to do about a step whose API kept failing through every retry, once the command has stopped: the
    worker's own hint ("the task is retried later") is untrue by then. ``then``: the command that goes on."""
    return f"the API kept failing through every retry; later, {then}"


TIME_LIMIT_HINT = ("an execution's task is limited to just under WFQUEUE_VISIBILITY_TIMEOUT_S, a plan's agent to "
                   "WFQUEUE_AGENT_SOFT_TIME_LIMIT_S and WFQUEUE_AGENT_TIME_LIMIT_S: raise the one that applies on the "
                   "workers (they read their own settings), then run it again")


def wait_for(result: AsyncResult[Any] | None, what: str, settings: Settings, tick: Callable[[], None] | None = None,
             settled: Callable[[], Any] | None = None, watch: Callable[[], None] = nothing_to_wait_for,
             deadline: float | None = None, broker_gone: Callable[[], bool] = broker_never_gone) -> Any:
    """Poll ``result`` until it is ready (every RESULT_CHECK_S); raise with the worker's error if it failed.

    ``watch`` looks after the workers (``Runtime.workers_alive``) every poll_interval_s.
    ``settled`` may end the wait early with a value of its own: the watchdog can
    finalise a plan whose chord will never fire, and the coordinator must notice.
    With no ``result``, only ``settled`` ends the wait (or the deadline: ``deadline``, a ``time.monotonic()``
    value shared by waits that make one, else plan_timeout_s from now).
    A broker that goes away is waited for up to ``broker_outage_grace_s`` (a Redis
    restart keeps the plan's state), then its error propagates (see ``resumable``); at once when
    ``broker_gone`` says nobody will bring it back (``Runtime.broker_gone``)."""
    deadline = deadline if deadline is not None else time.monotonic() + settings.plan_timeout_s
    lost_since: float | None = None
    next_look = 0.0  # when ``settled`` and ``tick`` run next: every poll_interval_s
    while True:
        stop_request.raise_if_asked()
        try:
            if result is not None and result.ready():
                break
            if time.monotonic() >= next_look:
                watch()
                if settled is not None and (value := settled()) is not None:
                    return value
                if tick is not None:
                    tick()
                next_look = time.monotonic() + settings.poll_interval_s
            lost_since = None
        except BROKER_AWAY:
            lost_since = lost_since if lost_since is not None else time.monotonic()
            if time.monotonic() - lost_since >= settings.broker_outage_grace_s or broker_gone():
                raise
            time.sleep(OUTAGE_RETRY_INTERVAL_S)
            continue
        if time.monotonic() > deadline:
            raise InfrastructureError(
                f"{what} did not finish within {settings.plan_timeout_s:g}s (WFQUEUE_PLAN_TIMEOUT_S)",
                hint="if the plan is only long, raise WFQUEUE_PLAN_TIMEOUT_S; else check that workers consume the "
                     "explore, plan and control queues (`wfqueue worker`; in embedded mode see "
                     ".workflow/.queue/worker.log); what is done is kept for `wfqueue resume`",
            )
        time.sleep(min(RESULT_CHECK_S, settings.poll_interval_s))
    assert result is not None  # only a ready result ends the loop
    if tick is not None:
        tick()
    if result.failed():
        error = result.result
        if isinstance(error, WfqueueError):  # a worker's own error keeps its message, hint and exit code
            raise error
        if isinstance(error, TimeLimitExceeded):
            # The worker killed the task's process: nothing of the task ran to its end, so say which limit did it.
            limit = f" ({error.args[0]}s)" if error.args else ""
            raise ProviderError(f"{what} failed: its worker killed it at its hard time limit{limit}",
                                hint=TIME_LIMIT_HINT)
        if isinstance(error, SoftTimeLimitExceeded):  # it read "SoftTimeLimitExceeded: SoftTimeLimitExceeded()"
            raise ProviderError(f"{what} failed: its worker stopped it at its soft time limit", hint=TIME_LIMIT_HINT)
        if isinstance(error, NotRegistered):
            # A worker of another wfqueue version (a `wfqueue up` started before an upgrade) knows no such task.
            raise InfrastructureError(
                f"{what} failed: the workers do not know the task {error}: they run another version of wfqueue than "
                "this command", hint="restart them with this version (`wfqueue up` again, or each `wfqueue worker`), "
                                     "then `wfqueue resume` the session")
        described = f"{type(error).__name__}: {error}"
        if any(name in described for name in ("ConnectionError", "OperationalError")):
            # A task that could not reach the broker (a retry it could not publish): resumable.
            raise BrokerUnreachableError(f"{what} failed: a task lost the broker connection: {described}")
        raise ProviderError(f"{what} failed: {described}",
                            hint="see the worker log (embedded mode: .workflow/.queue/worker.log)")
    return result.result
