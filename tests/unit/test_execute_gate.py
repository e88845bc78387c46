"""The gate's commands: each test run once, whatever the plan's tasks repeat, and none dropped."""

from __future__ import annotations

import pytest

from tests.execute_support import task
from wfqueue.execute.gate import combined, gate_commands, runnable_on


def test_the_runs_of_one_test_runner_become_one_and_a_command_without_paths_stays() -> None:
    """The sample plan's gate ran six commands after its last wave, five of them pytest on a file or two."""
    verifications = ["python -m pytest -q tests/test_handlers.py tests/test_middleware.py",
                     "python -m pytest -q tests/test_handlers.py", "manual: look at it", "python -m pytest -q",
                     "python -m pytest -q tests/test_db.py::test_put", "make lint"]
    tasks = [task(f"T{n}", verification=v) for n, v in enumerate(verifications, 1)]
    assert gate_commands(tasks, None) == [
        "python -m pytest -q tests/test_handlers.py tests/test_middleware.py tests/test_db.py::test_put",
        "python -m pytest -q", "make lint"]
    assert gate_commands(tasks, "make test") == ["make test"]


@pytest.mark.parametrize(("commands", "gate"), [
    # one pytest run for the files of several tasks; a file stands for its tests, a folder for its files
    (["python -m pytest -q tests/test_a.py", "python -m pytest -q tests/test_b.py::test_x tests/test_c.py",
      "python -m pytest -q tests/test_b.py"],
     ["python -m pytest -q tests/test_a.py tests/test_b.py tests/test_c.py"]),
    (["pytest tests/unit/test_a.py", "pytest ./tests/unit/", "pytest tests/integration/test_b.py", "pytest tests/unit"],
     ["pytest ./tests/unit/ tests/integration/test_b.py"]),
    # without paths, what runs is the configuration's (pytest's testpaths may leave tests/integration out)
    (["pytest tests/integration/test_b.py", "pytest"], ["pytest tests/integration/test_b.py", "pytest"]),
    # two test files of one name stop pytest at collection unless their folders are packages: run apart
    (["pytest tests/unit/test_api.py", "pytest tests/integration/test_api.py"],
     ["pytest tests/unit/test_api.py", "pytest tests/integration/test_api.py"]),
    # other options, another run: -x, or a -k whose value must not be read as a path
    (["python -m pytest -q tests/test_a.py", "python -m pytest -x tests/test_b.py",
      "python -m pytest -q -k expiry tests/test_c.py"],
     ["python -m pytest -q tests/test_a.py", "python -m pytest -x tests/test_b.py",
      "python -m pytest -q -k expiry tests/test_c.py"]),
    # Go: ./pkg/... reaches the packages below, ./pkg only itself; a bare `go test` is the current folder's
    (["go test ./internal/cache", "go test ./...", "go test -race ./internal/cache"],
     ["go test ./...", "go test -race ./internal/cache"]),
    (["go test ./internal/cache", "go test ./internal/cache/lru"], ["go test ./internal/cache ./internal/cache/lru"]),
    (["go test ./internal/cache", "go test"], ["go test ./internal/cache", "go test"]),
    # RSpec: a file stands for its lines
    (["bundle exec rspec spec/a_spec.rb", "bundle exec rspec spec/a_spec.rb:42", "bundle exec rspec spec/b_spec.rb"],
     ["bundle exec rspec spec/a_spec.rb spec/b_spec.rb"]),
    # other runners: as they are
    (["cargo test parse", "cargo test render", "cargo test"], ["cargo test parse", "cargo test render", "cargo test"]),
    (["vendor/bin/phpunit tests/Unit/UserTest.php", "vendor/bin/phpunit tests/Unit/CartTest.php"],
     ["vendor/bin/phpunit tests/Unit/UserTest.php", "vendor/bin/phpunit tests/Unit/CartTest.php"]),
])
def test_each_test_run_is_made_once_and_none_is_dropped(commands: list[str], gate: list[str]) -> None:
    assert combined(commands) == gate


def test_the_plans_checks_run_on_what_is_there_of_their_test_files() -> None:
    there = {"tests/test_a.py", "tests", "spec/a_spec.rb"}.__contains__
    assert runnable_on(["python -m pytest -q tests/test_a.py tests/test_new.py::test_x",  # one file not there yet
                        "python -m pytest -q tests/test_new.py",  # none there: a later task makes it
                        "bundle exec rspec spec/a_spec.rb:12 spec/b_spec.rb",
                        "go test ./pkg/...",  # packages, not files: kept
                        "npm test"], there) == [
        "python -m pytest -q tests/test_a.py", "bundle exec rspec spec/a_spec.rb:12", "go test ./pkg/...", "npm test"]


def test_an_npm_test_scripts_files_not_there_yet_leave_the_gate() -> None:
    """`npm test -- src/new.test.ts`, a file a later wave creates: Vitest and Jest fail on "No test files found",
    and the gate of every wave before it was red."""
    there = {"src/a.test.ts"}.__contains__
    assert runnable_on(["npm test -- src/a.test.ts src/new.test.ts", "npm test -- src/new.test.ts",
                        "npm run test -- src/a.test.ts",
                        "npm test -- -t adds src/new.test.ts"],  # an option's value could be read as a file: kept
                       there) == [
        "npm test -- src/a.test.ts", "npm run test -- src/a.test.ts", "npm test -- -t adds src/new.test.ts"]
