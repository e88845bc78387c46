"""Planning providers and the one place that picks one from a spec string."""

from __future__ import annotations

from wfqueue.errors import ConfigError
from wfqueue.providers.base import (
    AssessStep,
    DetectConflictsStep,
    ExploreAngleStep,
    GenerateTasksStep,
    LitePlanStep,
    PlanAreaStep,
    Provider,
    Step,
    UnderstandStep,
)
from wfqueue.settings import Settings

__all__ = [
    "AssessStep",
    "DetectConflictsStep",
    "ExploreAngleStep",
    "GenerateTasksStep",
    "LitePlanStep",
    "PlanAreaStep", "Provider", "Step", "UnderstandStep", "check_provider_spec", "make_provider"]


def check_provider_spec(spec: str) -> str:
    """``offline``, ``anthropic`` or ``scripted:PATH``; anything else is a ConfigError."""
    if spec in ("offline", "anthropic") or (spec.startswith("scripted:") and len(spec) > len("scripted:")):
        return spec
    raise ConfigError(f"unknown provider {spec!r}", hint="use --provider offline or --provider anthropic")


def make_provider(spec: str, settings: Settings) -> Provider:
    check_provider_spec(spec)
    # Imported here, not at the top: the planners import this package's step models.
    # Workers preload both (workers/app.py) so pool processes do not pay for it per task.
    if spec == "offline":
        from wfqueue.providers.offline.provider import OfflineProvider

        return OfflineProvider(max_file_bytes=settings.index_max_file_bytes)
    if spec.startswith("scripted:"):
        from wfqueue.providers.scripted import ScriptedProvider

        return ScriptedProvider(spec.split(":", 1)[1], max_file_bytes=settings.index_max_file_bytes)
    raise ConfigError(
        "the anthropic provider is not available in this version",
        hint="use --provider offline (the default when ANTHROPIC_API_KEY is unset)",
    )
