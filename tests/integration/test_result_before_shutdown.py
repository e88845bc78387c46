"""A plan command prints its outcome while the embedded cluster is still up, then stops it before exiting;
an error, or Ctrl-C during the shutdown, still leaves no process behind."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from rich.console import Console
from support import QuietUI, processes_mentioning

from wfqueue.cli.main import main
from wfqueue.cli.plan_common import finish
from wfqueue.local_workers import LocalWorkers
from wfqueue.runtime import broker_runtime, stop_after_output, stop_deferred
from wfqueue.settings import load_settings
from wfqueue.workflow.contract import PlanOutcome

pytestmark = pytest.mark.integration


def outcome() -> PlanOutcome:
    return PlanOutcome(session_id="CPLAN-x", session_dir="/nowhere", status="completed", tasks=3, conflicts=0)


@pytest.fixture
def marker(sample_repo: Path) -> str:
    return str(sample_repo / ".workflow" / ".queue")


def test_the_outcome_is_printed_before_the_embedded_cluster_stops(sample_repo: Path, marker: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    stop_after_output()
    with broker_runtime(load_settings(), sample_repo, 1, QuietUI()) as runtime:
        assert runtime.client.ping()
    seen_while_printing: list[str] = []

    def describe(out: Console) -> None:
        seen_while_printing.extend(processes_mentioning(marker))
        out.print("completed: 3 tasks")

    with pytest.raises(typer.Exit) as exit_:
        finish(outcome(), False, describe)
    assert exit_.value.exit_code == 0
    assert "completed: 3 tasks" in capsys.readouterr().out
    assert any("workers.serve" in line for line in seen_while_printing), "workers should still run while printing"
    assert processes_mentioning(marker) == []  # stopped before finish returned


def test_an_error_in_the_plan_stops_the_cluster_at_once(sample_repo: Path, marker: str) -> None:
    stop_after_output()
    with pytest.raises(RuntimeError), broker_runtime(load_settings(), sample_repo, 1, QuietUI()):
        raise RuntimeError("the plan failed")
    assert processes_mentioning(marker) == []
    stop_deferred()  # nothing was left for it


def test_ctrl_c_during_the_shutdown_kills_what_is_left(sample_repo: Path, marker: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    stop_after_output()
    with broker_runtime(load_settings(), sample_repo, 1, QuietUI()):
        pass
    assert processes_mentioning(marker)

    def interrupted(self: LocalWorkers, grace_s: float = 0.0) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalWorkers, "stop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stop_deferred()
    assert processes_mentioning(marker) == []


def test_ctrl_c_during_the_shutdown_after_the_result_keeps_the_results_exit_code(
        sample_repo: Path, marker: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A completed plan printed its result, then a Ctrl-C while Redis and the workers stopped made it exit 130:
    a script saw a failure for a plan that had finished."""
    stop_after_output()
    with broker_runtime(load_settings(), sample_repo, 1, QuietUI()):
        pass

    def interrupted(self: LocalWorkers, grace_s: float = 0.0) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalWorkers, "stop", interrupted)
    with pytest.raises(typer.Exit) as ended:
        finish(outcome(), True, lambda out: None)
    assert ended.value.exit_code == 0 and '"status": "completed"' in capsys.readouterr().out
    assert processes_mentioning(marker) == []  # the interrupt still killed what was left


def test_without_the_request_the_runtime_stops_the_cluster_on_exit(sample_repo: Path, marker: str) -> None:
    with broker_runtime(load_settings(), sample_repo, 1, QuietUI()):
        pass
    assert processes_mentioning(marker) == []


def test_a_command_refused_after_asking_to_defer_leaves_the_next_runtime_stopping_on_exit(
        sample_repo: Path, marker: str) -> None:
    """The CLI run in this process (as the in-process bad-input tests do) asks for a deferred stop, then
    refuses --max-agents 1 before any cluster starts: the request ends with the command."""
    assert main(["collab-plan", "Add per-user rate limiting", "--repo", str(sample_repo), "--max-agents", "1",
                 "-y"]) == 2
    with broker_runtime(load_settings(), sample_repo, 1, QuietUI()):
        pass
    assert processes_mentioning(marker) == []
