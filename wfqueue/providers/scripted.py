"""A scripted provider for tests and benchmarks: canned replies, injected faults, latency.

Workers are separate processes, so the script is a JSON file named in the
provider spec (``scripted:/path/script.json``)::

    {"latency_s": 0.5,                              # sleep before every step
     "replies": {"understand": {...}},              # canned answers, validated
     "fail": {"plan_area:auth": "boom"},            # always fails
     "hang": {"plan_area:storage": 30},             # sleeps that long (time limits)
     "hold": {"plan_area:api": "/tmp/release"},     # waits until that file exists; "plan_area:*": every area
     "busy": {"assess": {"times": 1, "retry_after": 2}}}  # a transient failure the first times (rate limited)

Step keys are step labels: ``understand``, ``plan_area:{focus_area}``, ``assess``,
``explore:{angle}``, ``lite_plan``, ``detect_conflicts``, ``generate_tasks``, and for a
step asked again with feedback (the repair round) the label with ``#2``
(``understand#2``). Steps without a
canned reply are answered by the offline planner, so a script only states what
differs from a normal run. A held step gives up waiting after
``HOLD_LIMIT_S``, so a test that fails before releasing it cannot leave a
worker busy for ever; a held step touches ``{release}.{step}.held`` when it
starts waiting. A busy step counts its failures in a file beside the script
(its task is retried in another process, maybe).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from wfqueue.analysis.files import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_INDEXED_FILES
from wfqueue.errors import ProviderError, TransientProviderError
from wfqueue.providers.base import Step
from wfqueue.providers.offline.provider import OfflineProvider

HOLD_LIMIT_S = 120.0
HOLD_POLL_S = 0.05


class ScriptedProvider:
    name = "scripted"
    model: str | None = None

    def __init__(self, script_path: str, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 max_files: int = DEFAULT_MAX_INDEXED_FILES) -> None:
        try:
            self.script: dict[str, Any] = json.loads(Path(script_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ProviderError(f"cannot read provider script {script_path}: {exc}") from None
        self.script_path = script_path
        self.fallback = OfflineProvider(max_file_bytes=max_file_bytes, max_files=max_files)

    def _entry(self, table: str, key: str) -> Any:
        """The ``table`` entry of step ``key``: its own, else its kind's (``plan_area:*``), else None."""
        entries: dict[str, Any] = self.script.get(table, {})
        return entries.get(key, entries.get(key.split(":", 1)[0] + ":*"))

    def run(self, step: Step) -> BaseModel:
        key = step.label
        time.sleep(float(self.script.get("latency_s", 0)))
        if (hang := self._entry("hang", key)) is not None:
            time.sleep(float(hang))
        if (hold := self._entry("hold", key)) is not None:
            release = Path(hold)
            Path(f"{hold}.{key}.held").touch()  # a test waits for it: the step is under way, on a worker
            deadline = time.monotonic() + HOLD_LIMIT_S
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(HOLD_POLL_S)
        if (busy := self._entry("busy", key)) is not None:
            counter = Path(f"{self.script_path}.{key}.busy")
            seen = int(counter.read_text(encoding="utf-8")) if counter.is_file() else 0
            if seen < int(busy.get("times", 1)):
                counter.write_text(str(seen + 1), encoding="utf-8")
                raise TransientProviderError(f"{key}: the model is busy (scripted)",
                                             retry_after=float(busy.get("retry_after", 1)))
        if (fail := self._entry("fail", key)) is not None:
            raise ProviderError(str(fail))
        reply = self._entry("replies", key)  # its own, or its kind's ("plan_area:*": every area)
        if reply is None:
            return self.fallback.run(step)
        try:
            return step.output_model.model_validate(reply)
        except ValidationError as exc:
            raise ProviderError(f"scripted reply for {key} does not validate: {exc}") from None
