"""The command line loads the module of the command it runs, not every command's (wfqueue.cli.commands)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import typer
import typer.main

from tests.conftest import PROJECT
from wfqueue.cli.commands import COMMAND_MODULES
from wfqueue.cli.main import app


def test_each_command_is_defined_by_the_module_the_table_names() -> None:
    """A command moved to another module, or a new one its module registers but the table lacks, is caught here
    rather than by a user meeting 'No such command'."""
    registered: dict[str, str] = {}
    for module_name in sorted(set(COMMAND_MODULES.values())):
        holder = typer.Typer()
        importlib.import_module(module_name).register(holder)
        registered.update({name: module_name for name in typer.main.get_group(holder).commands})
    assert registered == COMMAND_MODULES
    group = typer.main.get_command(app)
    assert list(group.commands) == list(COMMAND_MODULES)  # type: ignore[attr-defined]  # --help's order


def _loaded_by(*argv: str) -> set[str]:
    """The wfqueue and Celery modules a `wfqueue` process had loaded when ``argv`` ended."""
    script = ("import sys, atexit\n"
              "atexit.register(lambda: print('\\n'.join(sorted(sys.modules)), file=sys.stderr))\n"
              "sys.argv = ['wfqueue', *sys.argv[1:]]\n"
              "from wfqueue.cli.entry import main\n"
              "main()\n")
    done = subprocess.run([sys.executable, "-c", script, *argv], cwd=PROJECT, capture_output=True, text=True,
                          timeout=60)
    return {name for name in done.stderr.splitlines() if name.startswith(("wfqueue", "celery", "workers"))}


def test_a_short_command_does_not_load_the_planners_and_celery() -> None:
    """`wfqueue worker --help` and `wfqueue validate` loaded every command's planners, executors and Celery's
    app: 0.3 s of a command that takes less than a second."""
    heavy = {"wfqueue.collab.coordinator", "wfqueue.execute.coordinator", "wfqueue.runtime", "celery.app"}
    for argv in (["worker", "--help"], ["validate", "--help"]):
        loaded = _loaded_by(*argv)
        assert {"wfqueue.cli.main", f"wfqueue.cli.{argv[0]}"} <= loaded, loaded  # the command line ran it
        assert not heavy & loaded, (argv, heavy & loaded)
    collab = _loaded_by("collab-plan", "--help")
    assert "wfqueue.collab.coordinator" in collab and "wfqueue.execute.coordinator" not in collab, collab
