"""Data of a lite plan: assessment, per-angle findings, their verification, the plan."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from wfqueue.unified_task import UnifiedTask

Complexity = Literal["Low", "Medium", "High"]
Relevance = Literal["high", "medium", "low"]
MAX_ANGLES = 4


class Assessment(BaseModel):
    """Complexity from four dimensions, the angle preset, and whether to explore."""

    complexity: Complexity
    scope: str
    depth: str
    risk: str
    dependencies: str
    preset: str
    # 1 to MAX_ANGLES distinct slugs once repaired; not enforced here, so that an answer breaking the
    # rule is repaired by code (wfqueue.lite.angle_repair) instead of failing.
    angles: list[str] = Field(default_factory=list, description=f"1 to {MAX_ANGLES} distinct kebab-case angles")
    needs_exploration: bool
    exploration_reasons: list[str] = Field(default_factory=list)


class RelevantFile(BaseModel):
    path: str
    relevance: Relevance
    rationale: str


class Pattern(BaseModel):
    """A claimed pattern and the regular expression that should find it in the code."""

    description: str
    search: str = Field(description="A Python regular expression to grep for")
    example: str = ""


class IntegrationPoint(BaseModel):
    file: str
    line: int = Field(ge=1)
    description: str
    snippet: str = Field(default="", description="Text expected on that line (verified when given)")


class Dependency(BaseModel):
    source: str = Field(description="The importing file")
    target: str = Field(description="The imported file or module")


class Clarification(BaseModel):
    question: str
    options: list[str] = Field(default_factory=list)
    context: str = ""


class AngleFindings(BaseModel):
    """What a provider reports for one exploration angle (before verification)."""

    angle: str
    structure: list[str] = Field(default_factory=list)
    relevant_files: list[RelevantFile] = Field(default_factory=list)
    patterns: list[Pattern] = Field(default_factory=list)
    integration_points: list[IntegrationPoint] = Field(default_factory=list)
    dependencies: list[Dependency] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    clarification_needs: list[Clarification] = Field(default_factory=list)


class Check(BaseModel):
    """The verification of one finding against the code."""

    kind: Literal["file", "pattern", "integration_point", "dependency"]
    subject: str
    verified: bool
    evidence: str = Field(description="What was found, or why it was not")

    @property
    def mark(self) -> str:
        return "✅" if self.verified else "⚠️"


class VerifiedExploration(BaseModel):
    findings: AngleFindings
    checks: list[Check]
    provider: str
    timestamp: str
    worker: str | None = None
    pid: int | None = None
    started_at: float | None = None
    finished_at: float | None = None

    def check_for(self, kind: str, subject: str) -> Check | None:
        return next((c for c in self.checks if c.kind == kind and c.subject == subject), None)


class ClarificationAnswer(BaseModel):
    question: str
    answer: str


class LitePlanDraft(BaseModel):
    """What a provider answers for the planning step: 2-7 unified tasks, or one where the requirement asks only
    for one test file's tests or one document (a second task would have nothing to change)."""

    understanding: str
    tasks: list[UnifiedTask] = Field(min_length=1, max_length=7)
