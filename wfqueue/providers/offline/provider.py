"""The offline provider: answers every planning step from an analysis of the repository."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from wfqueue.analysis import CODE_LANGUAGES, RepoIndex
from wfqueue.analysis.files import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_INDEXED_FILES, no_source_code
from wfqueue.analysis.index_cache import cached_index
from wfqueue.errors import InfrastructureError, ProviderError
from wfqueue.providers.base import (
    AssessStep,
    DetectConflictsStep,
    ExploreAngleStep,
    GenerateTasksStep,
    LitePlanStep,
    PlanAreaStep,
    Step,
    UnderstandStep,
)
from wfqueue.providers.offline.area import plan_area
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.explore import explore_angle
from wfqueue.providers.offline.generate import generate_tasks
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.providers.offline.understand import understand
from wfqueue.workflow_session.session_conflicts import ConflictList, detect_session_conflicts

__all__ = ["OfflineProvider"]


class OfflineProvider:
    """Answers planning steps without a model: file index, symbols, imports, BM25."""

    name = "offline"
    model: str | None = None

    def __init__(self, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 max_files: int = DEFAULT_MAX_INDEXED_FILES) -> None:
        self._max_file_bytes = max_file_bytes
        self._max_files = max_files
        self._index: tuple[str, RepoIndex] | None = None

    def index(self, repo: str) -> RepoIndex:
        # Held per provider instance for all of a task's steps; across tasks and processes the index
        # of an unchanged repository is read from the cache (``wfqueue.analysis.index_cache``).
        if self._index is None or self._index[0] != repo:
            if not Path(repo).is_dir():
                # Not the user's input at fault: this worker does not see the coordinator's disk.
                raise InfrastructureError(
                    f"the worker on {socket.gethostname()} cannot see the repository {repo}",
                    hint="run the workers where the repository is mounted at that path, or plan with "
                         "WFQUEUE_SHARED_DISK=false so that the repository travels to them through Redis")
            index = cached_index(Path(repo), max_bytes=self._max_file_bytes, max_files=self._max_files)
            if not any(f.language in CODE_LANGUAGES for f in index.files):
                raise no_source_code(Path(repo), self._max_file_bytes)
            self._index = (repo, index)
        return self._index[1]

    @staticmethod
    def _reader(repo: str) -> Callable[[str], str]:
        root = Path(repo)

        def read(path: str) -> str:
            return (root / path).read_text(encoding="utf-8", errors="replace")

        return read

    def run(self, step: Step) -> BaseModel:
        index = self.index(step.repo)
        if isinstance(step, UnderstandStep):
            return understand(index, step.requirement, step.max_agents)
        if isinstance(step, PlanAreaStep):
            return plan_area(index, step.analysis, step.focus_area)
        if isinstance(step, AssessStep):
            return assess(step.requirement, signals(index, step.requirement), step.force_explore)
        if isinstance(step, ExploreAngleStep):
            return explore_angle(index, step.requirement, step.angle, self._reader(step.repo))
        if isinstance(step, DetectConflictsStep):
            return ConflictList(conflicts=detect_session_conflicts(step.context))
        if isinstance(step, GenerateTasksStep):
            return generate_tasks(index, step.session_id, step.structured, step.assessment, step.explorations,
                                  step.constraints)
        if isinstance(step, LitePlanStep):
            return plan_tasks(index, step.requirement, step.session_id, step.assessment, step.explorations,
                              step.answers)
        raise ProviderError(f"the offline planner has no answer for step {step.name!r}")
