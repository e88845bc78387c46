"""A repository that commits a symbolic link under .workflow/, or wfqueue's runtime files, is refused before
anything is written: a cloned link had every plan written, and a log appended, where it pointed (outside the
repository), and a cloned up.json sent the user's plans to the broker it named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import commit_in, git_in
from wfqueue.cli.main import main
from wfqueue.planted import planted_paths


@pytest.fixture
def cloned(tmp_path: Path, sample_repo: Path) -> Path:
    git_in(sample_repo, "init", "-q")
    commit_in(sample_repo, "the sample", {})
    return sample_repo


def _commit_link(repo: Path, rel: str, target: Path) -> None:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, repo / rel)
    git_in(repo, "add", "-f", "--", rel)
    git_in(repo, "commit", "-qm", f"link {rel}")


def test_a_committed_link_under_workflow_stops_every_plan_before_a_write(
        cloned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "bashrc").write_text("mine\n", encoding="utf-8")
    _commit_link(cloned, ".workflow/.lite-plan", elsewhere)
    _commit_link(cloned, ".workflow/.queue/worker.log", tmp_path / "bashrc")
    for command in (["lite-plan", "Add per-user rate limiting to the API"],
                    ["collab-plan", "Add per-user rate limiting to the API"],
                    ["plan", "Add per-user rate limiting to the API"]):
        assert main([*command, "--repo", str(cloned), "-y", "--json"]) == 2, command
        printed = json.loads(capsys.readouterr().out)
        said = "commits a symbolic link or a submodule under .workflow/ ('.workflow/.lite-plan', " \
               "'.workflow/.queue/worker.log')"
        assert said in printed["error"], printed
        assert "git rm -r" in printed["hint"]
    assert list(elsewhere.iterdir()) == []
    assert (tmp_path / "bashrc").read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in (cloned / ".workflow").iterdir()) == [".lite-plan", ".queue"]  # nothing new


def test_a_committed_up_record_is_never_trusted(cloned: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", "ops:secret")  # `up` starts Flower: checked before the record
    commit_in(cloned, "up", {".workflow/.queue/up.json": json.dumps(
        {"pid": 1, "broker_url": "redis://127.0.0.1:1/0", "workers": 4})})
    for command in (["status"], ["lite-plan", "Add per-user rate limiting to the API", "-y"]):
        assert main([*command, "--repo", str(cloned), "--json"]) == 2, command
        error = json.loads(capsys.readouterr().out)["error"]
        assert "commits files of .workflow/.queue/ ('.workflow/.queue/up.json')" in error, error
    assert main(["up", "--repo", str(cloned)]) == 2  # `up` has no --json: its words on stderr, nothing started
    assert "commits files of .workflow/.queue/" in " ".join(capsys.readouterr().err.split())
    assert sorted(p.name for p in (cloned / ".workflow" / ".queue").iterdir()) == ["up.json"]


def test_committed_plans_and_untracked_runtime_files_are_the_users_own(cloned: Path) -> None:
    commit_in(cloned, "a shared plan", {".workflow/.planning/CPLAN-x/plan.md": "# Plan\n"})
    (cloned / ".workflow/.queue").mkdir(parents=True)
    (cloned / ".workflow/.queue/up.json").write_text("{}", encoding="utf-8")  # this machine's own
    os.symlink(cloned / "notes_api", cloned / ".workflow/mine")  # a link the user made, not the repository
    assert planted_paths(cloned) == ([], [])
    _commit_link(cloned, ".workflow/.planning/CPLAN-x/notes.md", cloned / "README.md")  # git answered: one is seen
    assert planted_paths(cloned) == ([".workflow/.planning/CPLAN-x/notes.md"], [])


def test_a_submodule_or_another_case_under_workflow_is_planted_too(cloned: Path, tmp_path: Path) -> None:
    """A committed submodule at .workflow/.queue brought its up.json unseen, and on a case-insensitive disk (a
    macOS clone) `.Workflow/.Queue/up.json` is the file wfqueue reads."""
    other = tmp_path / "other"
    other.mkdir()
    git_in(other, "init", "-q")
    commit_in(other, "an up record", {"up.json": "{}"})
    git_in(cloned, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(other), ".workflow/.queue")
    git_in(cloned, "commit", "-qm", "a submodule")
    commit_in(cloned, "odd case", {".Workflow/.Queue/up.json": "{}", ".workflowx/kept.md": "# not ours\n"})
    links, runtime_files = planted_paths(cloned)
    assert (links, runtime_files) == ([".workflow/.queue"], [".Workflow/.Queue/up.json"])


def test_reading_up_json_refuses_a_committed_one_before_any_connection(cloned: Path) -> None:
    """A plan with the Claude provider looked for `wfqueue up` (pinging the broker up.json named) before the
    guard ran; the reader of up.json is guarded itself."""
    from wfqueue.errors import UnsafeRepositoryError
    from wfqueue.up_cluster import running_up

    commit_in(cloned, "up", {".workflow/.queue/up.json": json.dumps(
        {"pid": os.getpid(), "broker_url": "redis://127.0.0.1:1/0", "workers": 4})})
    with pytest.raises(UnsafeRepositoryError, match=r"commits files of \.workflow/\.queue/"):
        running_up(cloned)


def test_a_process_that_found_a_repository_clean_sees_what_a_pull_brings(cloned: Path) -> None:
    from wfqueue.errors import UnsafeRepositoryError
    from wfqueue.planted import refuse_planted

    refuse_planted(cloned)  # clean
    commit_in(cloned, "pulled", {".workflow/.queue/up.json": "{}"})
    with pytest.raises(UnsafeRepositoryError):
        refuse_planted(cloned)
