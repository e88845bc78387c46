"""The coordinator's wait: it rides out a short broker outage and turns a long one into exit 3 with a resume hint."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import redis

from wfqueue import runtime
from wfqueue.errors import BrokerUnreachableError, InfrastructureError, ProviderError, TransientProviderError
from wfqueue.runtime import resumable, wait_for
from wfqueue.sessions import resolve_repo
from wfqueue.settings import load_settings
from wfqueue.workflow.base import stop_hint

URL = "redis://:s3cret@broker.internal:6379/0"


class FlakyResult:
    """An AsyncResult stand-in whose first ``outages`` polls find the broker gone."""

    def __init__(self, outages: int, value: Any = "done", error: BaseException | None = None) -> None:
        self.outages = outages
        self.polls = 0
        self.value = value
        self.error = error

    def ready(self) -> bool:
        self.polls += 1
        if self.polls <= self.outages:
            raise redis.ConnectionError("Error 111 connecting to broker.internal:6379. Connection refused.")
        return True

    def failed(self) -> bool:
        return self.error is not None

    @property
    def result(self) -> Any:
        return self.error if self.error is not None else self.value


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "OUTAGE_RETRY_INTERVAL_S", 0.01)


def test_a_short_outage_is_waited_out() -> None:
    settings = load_settings(broker_url=URL, broker_outage_grace_s=5)
    result = FlakyResult(outages=3)
    assert wait_for(result, "the plan", settings) == "done"  # type: ignore[arg-type]
    assert result.polls == 4


def test_an_outage_longer_than_the_grace_names_the_broker_masked_and_the_resume_command(tmp_path: Path) -> None:
    settings = load_settings(broker_url=URL, broker_outage_grace_s=0.05)
    repo = tmp_path / "elsewhere"  # not the current folder's repository: the command needs --repo
    with pytest.raises(BrokerUnreachableError) as caught, resumable(settings, "CPLAN-x-2026-11-22", repo):
        wait_for(FlakyResult(outages=10_000), "the plan", settings)  # type: ignore[arg-type]
    error = caught.value
    assert error.exit_code == 3
    assert "lost the broker at redis://:***@broker.internal:6379/0 while CPLAN-x-2026-11-22 ran" in error.message
    assert "s3cret" not in str(error)
    assert f"`wfqueue resume CPLAN-x-2026-11-22 --repo {repo}`" in error.hint
    assert error.session_id == "CPLAN-x-2026-11-22"  # for the --json error object
    # An execution is finished the way its report says (it printed `execute --continue` there, `resume` here).
    with pytest.raises(BrokerUnreachableError) as caught, resumable(settings, "EXEC-x-2026-11-22", repo):
        wait_for(FlakyResult(outages=10_000), "TASK-001", settings)  # type: ignore[arg-type]
    assert f"`wfqueue execute --continue EXEC-x-2026-11-22 --repo {repo}`" in caught.value.hint
    assert "planning" not in caught.value.message and "resume" not in caught.value.hint


def test_a_broker_nobody_brings_back_is_not_waited_for(tmp_path: Path) -> None:
    """`wfqueue up` stopped (Ctrl-C) while a plan waited on its Redis: the plan waited out the whole grace
    (40 s by default) for a Redis that would not return before saying so. A broker known gone ends the wait at
    the first failed poll; one that is not is still waited for."""
    import subprocess
    import sys

    from wfqueue.up_cluster import UpCluster

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    up = UpCluster(pid=gone.pid, broker_url=URL, workers=2)
    settings = load_settings(broker_url=URL, broker_outage_grace_s=3600)
    result = FlakyResult(outages=10_000)
    with pytest.raises(BrokerUnreachableError) as caught, resumable(settings, "CPLAN-u", tmp_path, up, up.stopped):
        wait_for(result, "the plan", settings, broker_gone=up.stopped)  # type: ignore[arg-type]
    assert result.polls == 1
    assert f"(pid {gone.pid}) has stopped: start it again" in caught.value.hint
    assert wait_for(FlakyResult(outages=3), "the plan", settings,  # type: ignore[arg-type]
                    broker_gone=UpCluster(pid=os.getpid(), broker_url=URL, workers=2).stopped) == "done"


def test_a_task_that_lost_the_broker_is_resumable_and_other_failures_are_not() -> None:
    settings = load_settings(broker_url=URL)
    here = resolve_repo(None)  # the repository the current folder belongs to: the command needs no --repo
    lost = FlakyResult(0, error=RuntimeError("Dependency 75a1 raised network:ConnectionError"))
    with pytest.raises(BrokerUnreachableError, match="a task lost the broker connection") as caught, \
            resumable(settings, "CPLAN-y", here):
        wait_for(lost, "the plan", settings)  # type: ignore[arg-type]
    assert "`wfqueue resume CPLAN-y`" in caught.value.hint
    with pytest.raises(ProviderError, match="the plan failed: ValueError: bad answer"), \
            resumable(settings, "CPLAN-y", here):
        wait_for(FlakyResult(0, error=ValueError("bad answer")), "the plan", settings)  # type: ignore[arg-type]


def test_an_api_failing_through_every_retry_says_how_to_finish_the_plan_later(tmp_path: Path) -> None:
    """The worker's hint ("the task is retried later") is untrue once the command has stopped waiting."""
    settings = load_settings()
    with pytest.raises(ProviderError) as caught, resumable(settings, "CPLAN-z", tmp_path):
        raise TransientProviderError("the Anthropic API answered 500", retry_after=30.0,
                                     hint="the task is retried later and resumes at its last completed turn")
    assert not isinstance(caught.value, TransientProviderError)
    assert "retried later" not in caught.value.hint and "wfqueue resume CPLAN-z" in caught.value.hint


def test_a_task_killed_at_its_hard_time_limit_names_the_limit_and_the_setting_to_raise() -> None:
    from celery.exceptions import TimeLimitExceeded

    settings = load_settings(broker_url=URL)
    with pytest.raises(ProviderError) as caught:
        wait_for(FlakyResult(0, error=TimeLimitExceeded(3)), "task TASK-001", settings)  # type: ignore[arg-type]
    assert caught.value.message == "task TASK-001 failed: its worker killed it at its hard time limit (3s)"
    assert "WFQUEUE_VISIBILITY_TIMEOUT_S" in caught.value.hint and "WFQUEUE_AGENT_TIME_LIMIT_S" in caught.value.hint


def test_a_step_stopped_at_its_soft_time_limit_names_the_settings() -> None:
    """A worker with a lower limit than the coordinator's stopped a step: "SoftTimeLimitExceeded:
    SoftTimeLimitExceeded()", with a hint about the worker log."""
    from celery.exceptions import SoftTimeLimitExceeded

    settings = load_settings(broker_url=URL)
    with pytest.raises(ProviderError) as caught:
        wait_for(FlakyResult(0, error=SoftTimeLimitExceeded()), "the understanding step", settings)  # type: ignore[arg-type]
    assert caught.value.message == "the understanding step failed: its worker stopped it at its soft time limit"
    assert "WFQUEUE_AGENT_SOFT_TIME_LIMIT_S" in caught.value.hint and "on the workers" in caught.value.hint


def test_workers_of_another_version_are_named_as_such() -> None:
    """A `wfqueue up` started before an upgrade discarded a task it did not know: "NotRegistered:
    'wfqueue.lite.assess'", exit 1, with a hint about the worker log."""
    from celery.exceptions import NotRegistered

    settings = load_settings(broker_url=URL)
    with pytest.raises(InfrastructureError) as caught:
        wait_for(FlakyResult(0, error=NotRegistered("'wfqueue.lite.assess'")), "the assessment",  # type: ignore[arg-type]
                 settings)
    assert "they run another version of wfqueue" in caught.value.message and caught.value.exit_code == 3
    assert "restart them with this version" in caught.value.hint


def test_a_broker_lost_with_the_wfqueue_up_that_ran_it_names_that_up(tmp_path: Path) -> None:
    """`wfqueue up` stopped (Ctrl-C) while plans waited on its Redis: they said only "lost the broker", and "when
    Redis is back", which it would not be until someone started up again."""
    import subprocess
    import sys

    from wfqueue.up_cluster import UpCluster

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    settings = load_settings(broker_url=URL)
    for up, said in ((UpCluster(pid=gone.pid, broker_url=URL, workers=2), f"(pid {gone.pid}) has stopped: start it "
                                                                          "again (`wfqueue up"),
                     (UpCluster(pid=os.getpid(), broker_url=URL, workers=2), "when Redis is back")):
        with pytest.raises(BrokerUnreachableError) as caught, resumable(settings, "CPLAN-u", tmp_path, up):
            raise redis.ConnectionError("Error 2 connecting to unix socket: No such file or directory")
        assert said in caught.value.hint and "wfqueue resume CPLAN-u" in caught.value.hint, caught.value.hint


def test_a_plan_stopped_by_an_api_that_failed_through_every_retry_does_not_say_it_is_retried_later() -> None:
    """The step's hint was the worker's ("the task is retried later"), printed after the plan had stopped, its
    workers gone: nothing retried it. The hint says what is left to do: resume later."""
    spent = TransientProviderError("assess: the Anthropic API answered 529; the step's 8 re-sends are spent",
                                   hint="the task is retried later and resumes at its last completed turn")
    hint = stop_hint(spent, "`wfqueue resume WFS-x` goes on at the context phase")
    assert hint == ("the API kept failing through every retry; later, `wfqueue resume WFS-x` goes on at the context "
                    "phase")
    refused = ProviderError("assess: the model refused to answer", hint="set WFQUEUE_MODEL to another model")
    assert stop_hint(refused, "resume") == "set WFQUEUE_MODEL to another model; resume"
