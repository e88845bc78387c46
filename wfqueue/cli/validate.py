"""`wfqueue validate`: check a plan's unified tasks before anything runs them."""

from __future__ import annotations

import typer

from wfqueue.cli import json_output


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def summary(tasks: int, problems: int, unread: int = 0) -> str:
    """'12 tasks, 0 problems' when clean, else '3 problems in 12 tasks'; ``unread``: entries that could not be
    read as tasks, counted among them (five lines failing the schema were '5 problems in 0 tasks')."""
    if problems == 0:
        return f"{_plural(tasks, 'task')}, 0 problems"
    return f"{_plural(problems, 'problem')} in {_plural(tasks + unread, 'task')}" + (
        f" ({unread} could not be read)" if unread else "")


# Problems that leave an entry unread: it is no task the other checks can see.
UNREAD = frozenset({"invalid_json", "schema", "not_an_object"})


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(
        path: str = typer.Argument(..., help="A plan as `wfqueue execute` takes it: a session id or folder, a "
                                             "tasks.jsonl, a .task/ folder, or an agent's plan.json."),
        repo: str | None = typer.Option(None, "--repo",
                                        help="Repository files[] paths are relative to (default: from PATH)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout and nothing else there."),
    ) -> None:
        """Check tasks: schema, ids, dependencies, cycles, and that files to modify exist. Exit 2 on problems."""
        # Imported on use: the execute package is larger than this command needs to start.
        from wfqueue.execute.load import read_plan, readiness_problems, resolve_source, unfinished_problem
        from wfqueue.tasks_file import LoadedTask

        source, root = resolve_source(path, repo)
        unfinished = unfinished_problem(source, root)
        if unfinished is not None:  # its tasks are no plan yet
            tasks: list[LoadedTask] = []
            problems = [unfinished]
        else:
            tasks, problems = read_plan(source, root)
            problems = readiness_problems(source, root) + problems
        unread = len({p.location for p in problems if p.code in UNREAD})
        if as_json:  # "tasks": those read; "unread": entries that could not be read as tasks
            payload = {"path": path, "tasks": len(tasks), "unread": unread,
                       "problems": [p.model_dump() for p in problems]}
            json_output.emit(payload)
        else:
            for problem in problems:
                typer.echo(f"{problem.location}  {problem.task_id or '-'}  {problem.message}")
            typer.echo(summary(len(tasks), len(problems), unread))
        if problems:
            raise typer.Exit(2)
