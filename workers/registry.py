"""How a task is declared: by its payload model (wfqueue/payloads.py), which gives its name and its arguments.

A task body receives the Celery task and its decoded payload, never loose
arguments: the message's keywords are decoded once, here, so a field renamed on
one side fails with an error naming the task instead of a ``TypeError`` deep in
a worker. Here too a payload that carries a ``Transport`` (a worker that shares
no disk with the coordinator) gets its repository and session paths mapped to
this worker's own copies (wfqueue.transport.workspace) before the body runs.

Chord callbacks also receive the header's results as their first positional
argument (Celery puts them there); every callback reads which agents finished
from Redis instead, so those results are dropped here, and a callback sent
alone (``TaskPayload.send_alone``, with no results) does the same work. A
callback fired before every agent of its header finished holds back here
(wfqueue.fanout), whichever workflow it belongs to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

from celery import Celery, Task
from celery.exceptions import Retry

from wfqueue import agent_notes, keys
from wfqueue.errors import InfrastructureError, StepCrashedError, WfqueueError
from wfqueue.fanout import WAITING_FOR, fail, hold_back, settle
from wfqueue.payloads import FanInCallback, TaskPayload
from wfqueue.settings import Settings
from wfqueue.state import StateFactory
from wfqueue.transport.workspace import task_workspace
from workers.context import may_retry, retry_delay_of, retry_later, when_retried

__all__ = ["payload_task"]

P = TypeVar("P", bound=TaskPayload)
R = TypeVar("R")
if TYPE_CHECKING:  # celery's Task takes type parameters only in its stubs
    Body: TypeAlias = Callable[[Task[Any, Any], P], R]  # body(task, payload)


@contextmanager
def step_notes(states: StateFactory, payload: TaskPayload) -> Iterator[None]:
    """Within the block, what a session's step waits for goes to the session's step note, which the command
    waiting for the step shows; a note left when the step ends is taken away, and so is one a retry left
    ("tried again at ..."), when the step starts again. A chord header's agents write their own records
    instead (workers.header)."""
    if getattr(payload, "session_id", None) is None:  # an execution's task: its agent record (wfqueue.execute)
        yield
        return
    note_step(states, payload, None)
    written = False

    def write(text: str | None) -> None:
        nonlocal written
        note_step(states, payload, text)
        written = written or text is not None

    with agent_notes.noting(write):
        try:
            yield
        finally:
            if written:
                agent_notes.note(None)


def note_step(states: StateFactory, payload: TaskPayload, text: str | None) -> None:
    """Set (or, None, take away) the step note of ``payload``'s session, if it has one."""
    session_id = getattr(payload, "session_id", None)
    if session_id is None:
        return
    state = states.session(session_id)
    if text is None:
        state.forget(keys.STEP_NOTE)
    else:
        state.store(keys.STEP_NOTE, text)


def carried_back(exc: Exception, task_name: str, worker: str) -> Exception:
    """``exc`` as the coordinator will read it: itself when Celery can make it again from its type and arguments
    (the result backend stores those), else a StepCrashedError saying what it was."""
    if isinstance(exc, WfqueueError):
        return exc
    try:
        again = type(exc)(*exc.args)
    except Exception:  # noqa: BLE001 - any failure to rebuild it is the answer
        again = None
    if again is not None and str(again) == str(exc):
        return exc
    return StepCrashedError(f"{task_name} failed on {worker}: {type(exc).__name__}: {exc}",
                            hint="see that worker's log (embedded mode: .workflow/.queue/worker.log)")


def payload_task(app: Celery, settings: Settings, model: type[P], *, callback: bool = False,
                 retry_on: tuple[type[Exception], ...] = (), soft_time_limit: int | None = None,
                 time_limit: int | None = None) -> Callable[[Body[P, R]], Task[Any, R]]:
    """Register the decorated ``body(task, payload)`` as the task ``model.task_name``.

    ``callback``: the task is a chord's body, so one positional argument (the
    header's results) comes before the keywords. ``retry_on``: errors worth
    another try later (a rate limit, a file system blip); the retry backs off
    (workers.context.retry_later), and once the retries are spent the error is
    the task's result. Time limits (both or neither): None keeps the app's.
    """
    positional = 1 if callback else 0
    states = StateFactory(settings)  # its Redis client is made in the process that runs the task
    # shared=False: the task belongs to ``app`` alone. A shared task is added to every app made later in the
    # process, with the settings (time limits, retries) of the first one.

    def register(body: Body[P, R]) -> Task[Any, R]:
        def run(self: Task[Any, Any], *args: Any, **kwargs: Any) -> R:
            if len(args) != positional:
                raise InfrastructureError(
                    f"task {model.task_name} received {len(args)} positional arguments, expected {positional}: "
                    "its payload comes as keywords",
                    hint="run the same wfqueue version on the coordinator and every worker",
                )
            payload = model.decode(kwargs)
            fan_in = payload if isinstance(payload, FanInCallback) else None
            if fan_in is not None and (waiting := hold_back(states.session(fan_in.session_id), fan_in)) is not None:
                return cast(R, {WAITING_FOR: waiting})  # the chord fired early: an agent finishing sends it again
            try:
                try:
                    with task_workspace(payload, settings, states.client) as local, \
                            step_notes(states, payload):
                        result = body(self, local)
                except retry_on as exc:
                    delay = retry_delay_of(self, exc, settings)
                    if may_retry(self):  # spent, Celery raises the error instead: no "tried again" to announce
                        note_step(states, payload, f"{getattr(exc, 'message', exc)}; {when_retried(self, delay)}")
                    raise retry_later(self, exc, settings, delay) from None
            except Retry:
                raise
            except Exception as exc:
                if fan_in is not None:  # a coordinator may wait for this run's result rather than the chord's
                    fail(states.session(fan_in.session_id), f"{type(exc).__name__}: {exc}")
                portable = carried_back(exc, model.task_name, self.request.hostname or "its worker")
                if portable is exc:
                    raise
                raise portable from exc
            if fan_in is not None:
                settle(states.session(fan_in.session_id), result)
            return result

        run.__name__ = run.__qualname__ = body.__name__
        run.__doc__, run.__module__ = body.__doc__, body.__module__
        if soft_time_limit is not None and time_limit is not None:
            task: Task[Any, R] = app.task(name=model.task_name, bind=True, max_retries=settings.task_max_retries,
                                          soft_time_limit=soft_time_limit, time_limit=time_limit, shared=False)(run)
        else:
            task = app.task(name=model.task_name, bind=True, max_retries=settings.task_max_retries, shared=False)(run)
        return task

    return register

