"""The unified task: one line of tasks.jsonl or one `.task/*.json` file.

Field names are a contract with other tools (docs/ARTIFACTS.md section 2). Unknown
fields are kept on read and written back unchanged, hence ``extra="allow"``
on every model here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TaskType = Literal[
    "infrastructure", "feature", "enhancement", "fix", "bugfix", "refactor",
    "testing", "test-gen", "test-fix", "docs", "chore",
]
Risk = Literal["low", "medium", "high"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Convergence(_Open):
    criteria: list[str] = Field(min_length=1, max_length=5)
    verification: str = Field(min_length=1)
    definition_of_done: str = Field(min_length=1)


class TaskFile(_Open):
    path: str = Field(min_length=1)
    action: Literal["modify", "create", "delete"] = "modify"
    target: str | None = None
    changes: list[str] = Field(default_factory=list)
    conflict_risk: Risk | None = None


class TaskTest(_Open):
    commands: list[str] = Field(default_factory=list)
    unit: list[str] = Field(default_factory=list)
    integration: list[str] = Field(default_factory=list)
    manual_checks: list[str] = Field(default_factory=list)


class TaskMeta(_Open):
    agent: str | None = None
    module: str | None = None


class TaskSource(_Open):
    tool: str
    session_id: str
    original_id: str | None = None


class UnifiedTask(_Open):
    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    description: str = Field(min_length=1)
    depends_on: list[str] = Field(default_factory=list)
    convergence: Convergence
    type: TaskType | None = None
    priority: Literal["critical", "high", "medium", "low"] | None = None
    effort: Literal["small", "medium", "large"] | None = None
    scope: str | None = None
    focus_paths: list[str] = Field(default_factory=list)
    parallel_group: int | None = None
    files: list[TaskFile] = Field(default_factory=list)
    implementation: list[str | dict[str, object]] = Field(default_factory=list)
    test: TaskTest | None = None
    meta: TaskMeta | None = None
    source: TaskSource | None = None
    rationale: str | None = None
    risks: list[str] = Field(default_factory=list)

    def dump(self) -> dict[str, object]:
        """JSON-ready dict: unset optional fields left out, extra fields kept."""
        return self.model_dump(mode="json", exclude_none=True)
