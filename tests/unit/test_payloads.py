"""Task contracts: what the coordinator sends is exactly what the worker's task reads, for every task name."""

from __future__ import annotations

import json
from typing import Any

import pytest
from celery import Celery

from wfqueue.errors import InfrastructureError
from wfqueue.execute.model import ExecTask, PlanContext
from wfqueue.lite.models import ClarificationAnswer
from wfqueue.payloads import (
    PAYLOADS,
    CollabFinalize,
    CollabPlanArea,
    CollabUnderstand,
    ExecuteTask,
    ExploreAngle,
    LiteAssess,
    LitePlan,
    LiteSynthesize,
    SessionConflicts,
    SessionContext,
    SessionGenerate,
    TaskPayload,
)
from wfqueue.task_names import BEAT_ARCHIVE, BEAT_LOCKS, BEAT_PURGE, BEAT_WATCHDOG, ROUTES
from wfqueue.transport.models import Transport

# The maintenance tasks beat schedules take no payload (at most an optional list of repositories).
MAINTENANCE = {BEAT_WATCHDOG, BEAT_PURGE, BEAT_LOCKS, BEAT_ARCHIVE}
CALLBACKS = {CollabFinalize.task_name, LiteSynthesize.task_name, SessionContext.task_name}

SAMPLES: list[TaskPayload] = [
    CollabUnderstand(session_id="S-1", session_dir="/s", repo="/r", requirement="Add rate limits", max_agents=4,
                     provider="offline"),
    CollabPlanArea(session_id="S-1", session_dir="/s", repo="/r", focus_area="api", provider="offline",
                   transport=Transport(commit="a" * 40, session_id="S-1", session_root="/s")),
    CollabFinalize(session_id="S-1", session_dir="/s"),
    ExploreAngle(session_id="S-1", session_dir="/s", output_dir="/s", repo="/r", requirement="Add rate limits",
                 angle="security", provider="offline"),
    LiteAssess(session_id="S-1", session_dir="/s", repo="/r", requirement="Add rate limits", force_explore=True,
               provider="offline"),
    LiteSynthesize(session_id="S-1", session_dir="/s", requirement="Add rate limits"),
    LitePlan(session_id="S-1", session_dir="/s", repo="/r", requirement="Add rate limits",
             answers=[ClarificationAnswer(question="Which store?", answer="Redis")], provider="offline"),
    SessionContext(session_id="WFS-1", session_dir="/s", repo="/r"),
    SessionConflicts(session_id="WFS-1", session_dir="/s", repo="/r", provider="offline"),
    SessionGenerate(session_id="WFS-1", session_dir="/s", repo="/r", provider="offline"),
    ExecuteTask(exec_id="EXEC-1", exec_dir="/e", repo="/r",
                task=ExecTask(id="T1", title="Add rate limits", description="d", verification="pytest -q",
                              definition_of_done="tests pass", location="tasks.jsonl:1"),
                context=PlanContext(requirement="Add rate limits"), base="0" * 40, branch="wfqueue/tasks/EXEC-1/T1",
                executor="command"),
]


@pytest.fixture(scope="module")
def worker_app() -> Celery:
    """The app a worker runs (``celery -A workers.app``), with every task registered; nothing connects."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WFQUEUE_BROKER_URL", "redis://localhost:1/0")  # never dialled: no message is sent
        from workers.app import app
    return app


@pytest.fixture(scope="module")
def app() -> Celery:
    return Celery("payload-tests", set_as_current=False)


def wire(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords as a worker receives them: through the JSON serializer the app uses."""
    decoded: dict[str, Any] = json.loads(json.dumps(kwargs))
    return decoded


def test_every_task_a_worker_runs_has_a_payload_and_every_payload_a_task(worker_app: Celery) -> None:
    registered = {name for name in worker_app.tasks if not name.startswith("celery.")}
    assert registered - MAINTENANCE == set(PAYLOADS)
    assert registered >= MAINTENANCE
    assert {type(sample) for sample in SAMPLES} == set(PAYLOADS.values()), "a payload model without a sample"


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.task_name)
def test_a_payload_round_trips_from_signature_to_decode(app: Celery, sample: TaskPayload) -> None:
    signature = sample.signature(app)
    assert signature.task == sample.task_name
    assert signature.options["queue"] == ROUTES[sample.task_name]
    assert not signature.args, "payloads travel as keywords, so a chord can put its results first"
    assert type(sample).decode(wire(signature.kwargs)) == sample


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.task_name)
def test_a_renamed_missing_or_extra_field_fails_naming_the_task(app: Celery, sample: TaskPayload) -> None:
    kwargs = wire(sample.signature(app).kwargs)
    first = next(k for k in kwargs if type(sample).model_fields[k].is_required())
    renamed = {(f"{k}_renamed" if k == first else k): v for k, v in kwargs.items()}
    missing = {k: v for k, v in kwargs.items() if k != first}
    extra = {**kwargs, "unexpected": 1}
    for broken in (renamed, missing, extra):
        with pytest.raises(InfrastructureError, match=sample.task_name.replace(".", r"\.")) as caught:
            type(sample).decode(broken)
        assert "same wfqueue version" in caught.value.hint


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.task_name)
def test_the_registered_task_refuses_a_message_it_cannot_read(worker_app: Celery, app: Celery,
                                                              sample: TaskPayload) -> None:
    """Checked before the task touches Redis or a provider: the error names the task and says what to do."""
    task = worker_app.tasks[sample.task_name]
    kwargs = wire(sample.signature(app).kwargs)
    results: tuple[Any, ...] = ([],) if sample.task_name in CALLBACKS else ()
    with pytest.raises(InfrastructureError, match=sample.task_name.replace(".", r"\.")):
        task(*results, **{**kwargs, "unexpected": 1})
    # The wire shape before payloads: everything positional.
    with pytest.raises(InfrastructureError, match="positional"):
        task(*results, *kwargs.values())


def test_a_payload_is_read_as_its_types_not_as_loose_json(app: Celery) -> None:
    sample = LitePlan(session_id="S-1", session_dir="/s", repo="/r", requirement="r",
                      answers=[ClarificationAnswer(question="q", answer="a")], provider="offline")
    decoded = LitePlan.decode(wire(sample.signature(app).kwargs))
    assert decoded.answers == [ClarificationAnswer(question="q", answer="a")]
    with pytest.raises(InfrastructureError, match="max_agents"):
        CollabUnderstand.decode({**wire(SAMPLES[0].signature(app).kwargs), "max_agents": 0})


@pytest.mark.parametrize("prefix", ["../", "proj/../../", "./", "/etc/", "proj", "a//", "a\x00/"])
def test_an_execute_task_refuses_a_project_folder_outside_its_worktree(app: Celery, prefix: str) -> None:
    """The worker runs the coding agent in ``worktree/prefix``: a prefix that climbs out would put it elsewhere."""
    sample = next(s for s in SAMPLES if isinstance(s, ExecuteTask))
    kwargs = wire(sample.signature(app).kwargs)
    assert ExecuteTask.decode({**kwargs, "prefix": "services/calc/"}).prefix == "services/calc/"
    with pytest.raises(InfrastructureError, match="prefix"):
        ExecuteTask.decode({**kwargs, "prefix": prefix})
