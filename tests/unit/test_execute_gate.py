"""The gate's commands: each test run once, whatever the plan's tasks repeat."""

from __future__ import annotations

import pytest

from tests.execute_support import task
from wfqueue.execute.gate import combined, gate_commands


def test_the_whole_suite_stands_for_the_parts_of_it_the_tasks_run() -> None:
    """The sample plan's gate ran six commands after each wave, five of them parts of the sixth."""
    verifications = ["python -m pytest -q tests/test_handlers.py tests/test_middleware.py",
                     "python -m pytest -q tests/test_handlers.py", "manual: look at it", "python -m pytest -q",
                     "python -m pytest -q tests/test_db.py::test_put", "make lint"]
    tasks = [task(f"T{n}", verification=v) for n, v in enumerate(verifications, 1)]
    assert gate_commands(tasks, None) == ["python -m pytest -q", "make lint"]
    assert gate_commands(tasks, "make test") == ["make test"]


@pytest.mark.parametrize(("commands", "gate"), [
    # one pytest run for the files of several tasks; a file stands for its tests, a folder for its files
    (["python -m pytest -q tests/test_a.py", "python -m pytest -q tests/test_b.py::test_x tests/test_c.py",
      "python -m pytest -q tests/test_b.py"],
     ["python -m pytest -q tests/test_a.py tests/test_b.py tests/test_c.py"]),
    (["pytest tests/unit/test_a.py", "pytest ./tests/unit/", "pytest tests/integration/test_b.py", "pytest tests/unit"],
     ["pytest ./tests/unit/ tests/integration/test_b.py"]),
    # other options, another run: -x, or a -k whose value must not be read as a path
    (["python -m pytest -q tests/test_a.py", "python -m pytest -x tests/test_b.py",
      "python -m pytest -q -k expiry tests/test_c.py", "python -m pytest -q"],
     ["python -m pytest -q", "python -m pytest -x tests/test_b.py", "python -m pytest -q -k expiry tests/test_c.py"]),
    (["go test ./internal/cache", "go test ./...", "go test -race ./internal/cache"],
     ["go test ./...", "go test -race ./internal/cache"]),
    (["go test ./internal/cache", "go test ./internal/..."], ["go test ./internal/..."]),
    (["bundle exec rspec spec/a_spec.rb", "bundle exec rspec spec/b_spec.rb"],
     ["bundle exec rspec spec/a_spec.rb spec/b_spec.rb"]),
    # filters, not paths: joined only into the whole suite
    (["cargo test parse", "cargo test render"], ["cargo test parse", "cargo test render"]),
    (["cargo test parse", "cargo test"], ["cargo test"]),
    (["dotnet test --filter FullyQualifiedName~CartTests", "dotnet test"],
     ["dotnet test --filter FullyQualifiedName~CartTests", "dotnet test"]),
    (["vendor/bin/phpunit tests/Unit/UserTest.php", "vendor/bin/phpunit tests/Unit/CartTest.php"],
     ["vendor/bin/phpunit tests/Unit/UserTest.php", "vendor/bin/phpunit tests/Unit/CartTest.php"]),
    (["npm test", "npx jest src/a.test.js", "make test"], ["npm test", "npx jest src/a.test.js", "make test"]),
])
def test_each_test_run_is_made_once(commands: list[str], gate: list[str]) -> None:
    assert combined(commands) == gate
