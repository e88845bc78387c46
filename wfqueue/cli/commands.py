"""Which module defines each command, and the command line's table of them, loaded on use.

A command's module imports what it runs: coordinators, Celery, Redis, the planners' models. Loading every
command's module to run one of them was most of a short command's time (``wfqueue validate`` and ``wfqueue worker``
spent 0.2-0.4 s of CPU loading planners, executors and Celery they never use). The command line imports only the
module of the command it runs; ``wfqueue --help`` loads them all, to list them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

# In the order `wfqueue --help` lists them. A module may define several commands (replan: replan and sessions).
COMMAND_MODULES: dict[str, str] = {
    "collab-plan": "wfqueue.cli.collab",
    "lite-plan": "wfqueue.cli.lite",
    "plan": "wfqueue.cli.plan_cmd",
    "verify": "wfqueue.cli.verify_cmd",
    "replan": "wfqueue.cli.replan_cmd",
    "sessions": "wfqueue.cli.replan_cmd",
    "resume": "wfqueue.cli.resume_cmd",
    "validate": "wfqueue.cli.validate",
    "worker": "wfqueue.cli.worker",
    "beat": "wfqueue.cli.beat_cmd",
    "flower": "wfqueue.cli.flower_cmd",
    "up": "wfqueue.cli.up_cmd",
    "status": "wfqueue.cli.status",
    "config": "wfqueue.cli.config_cmd",
    "execute": "wfqueue.cli.execute_cmd",
}


def module_for(argv: Sequence[str]) -> str | None:
    """The module of the command ``argv`` runs (the command line takes no option before the command's name);
    None for help, no command or a name that is not one."""
    return COMMAND_MODULES.get(argv[0]) if argv else None


def load_for(argv: Sequence[str]) -> None:
    """Import the module of the command ``argv`` runs, now rather than when the command line parses ``argv``:
    an entry point loads it while the garbage collector is off (wfqueue.cli.entry)."""
    module = module_for(argv)
    if module is not None:
        importlib.import_module(module)


def _commands_of(module_name: str) -> dict[str, Any]:
    """The click commands ``module_name`` registers, built as Typer builds them for an app of its own."""
    module = importlib.import_module(module_name)
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    module.register(holder)
    return dict(typer.main.get_group(holder).commands)


class CommandsOnUse(MutableMapping[str, Any]):
    """The group's name -> command table: every name is known from the start, a command is built (its module
    imported) the first time it is looked up. Commands added directly (``app.command`` on the root app) are
    kept as given."""

    def __init__(self, given: Mapping[str, Any]) -> None:
        self._built: dict[str, Any] = dict(given)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            module = COMMAND_MODULES[name]  # KeyError: not a command, as for a dict
            self._built.update(_commands_of(module))
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMAND_MODULES
        yield from (name for name in self._built if name not in COMMAND_MODULES)

    def __len__(self) -> int:
        return len(COMMAND_MODULES) + sum(name not in COMMAND_MODULES for name in self._built)

    def __contains__(self, name: object) -> bool:
        return name in COMMAND_MODULES or name in self._built


class LazyGroup(TyperGroup):
    """The root command group, its commands loaded on use (:class:`CommandsOnUse`)."""

    def __init__(self, *, commands: Mapping[str, Any] | None = None, **attrs: Any) -> None:
        super().__init__(commands=None, **attrs)
        self.commands = CommandsOnUse(commands or {})
