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
from wfqueue.turns import TurnJournal

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


def make_provider(spec: str, settings: Settings, journal: TurnJournal | None = None) -> Provider:
    """The provider ``spec`` names. ``journal``: where an LLM provider saves its turns (default: in memory)."""
    check_provider_spec(spec)
    # Imported here, not at the top: the planners import this package's step models.
    # Workers preload both (workers/app.py) so pool processes do not pay for it per task.
    if spec == "offline":
        from wfqueue.providers.offline.provider import OfflineProvider

        return OfflineProvider(max_file_bytes=settings.index_max_file_bytes, max_files=settings.index_max_files)
    if spec.startswith("scripted:"):
        from wfqueue.providers.scripted import ScriptedProvider

        return ScriptedProvider(spec.split(":", 1)[1], max_file_bytes=settings.index_max_file_bytes,
                                max_files=settings.index_max_files)
    from wfqueue.providers.anthropic import AnthropicProvider
    from wfqueue.providers.anthropic.calls import RetryPolicy
    from wfqueue.ratelimit import limiter_from_settings, model_family

    key = settings.anthropic_api_key
    # No base_url here: the SDK reads ANTHROPIC_BASE_URL itself.
    return AnthropicProvider(
        model=settings.model,
        api_key=key.get_secret_value() if key is not None else None,
        max_tokens=settings.anthropic_max_tokens,
        max_turns=settings.anthropic_max_turns,
        max_step_tokens=settings.anthropic_max_step_tokens,
        max_retries=settings.anthropic_max_retries,
        timeout_s=settings.anthropic_timeout_s,
        max_read_bytes=settings.repo_tool_max_read_bytes,
        max_grep_matches=settings.repo_tool_max_grep_matches,
        max_list_entries=settings.repo_tool_max_list_entries,
        max_file_bytes=settings.index_max_file_bytes,
        summary_max_files=settings.repo_summary_max_files,
        # One limit per Anthropic model class, learned from its responses, shared by every worker through the
        # broker's Redis; the provider reports each response with limiter.observe(headers, status).
        limiter=limiter_from_settings(settings, scope=f"anthropic:{model_family(settings.model)}"),
        journal=journal,
        retry_policy=RetryPolicy(step_retries=settings.anthropic_step_retries, backoff_s=settings.retry_backoff_s,
                                 backoff_max_s=settings.retry_backoff_max_s),
        # Calls are not re-sent past the task's soft time limit; the task retries and resumes instead.
        step_time_s=float(settings.agent_soft_time_limit_s),
    )
