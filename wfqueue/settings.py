"""The one settings object.

Built once at the entry point (CLI command, worker boot) and passed down; nothing
reads the environment behind its back. Sources, strongest first: explicit
arguments, ``WFQUEUE_*`` environment variables, the TOML file named by
``WFQUEUE_CONFIG_FILE`` (else ``config/wfqueue.toml`` in the current directory,
when present), then the defaults below. Every duration says its unit.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from wfqueue.config_file import DEFAULT_CONFIG_FILE, config_file
from wfqueue.errors import ConfigError
from wfqueue.settings_checks import (
    ENV_PREFIX,
    allowed_range,
    mask_url,
    note_outward_settings,
    redis_url_problem,
    upper_bound,
    url_secret,
    warn_unknown_env,
)
from wfqueue.usage import DEFAULT_PRICE_TABLE, PriceTable

MAX_AGENTS_LIMIT = 100
# Most embedded worker processes one command starts (--workers): a collab plan's agents (up to
# MAX_AGENTS_LIMIT) with room for more processes than agents; a lite or workflow plan runs a handful of
# exploration angles at once. A prefork process holds about 120 MB.
MAX_COLLAB_WORKERS = 256
MAX_EXPLORE_WORKERS = 64
# Thread slots of a `wfqueue worker` with the threads pool and no concurrency given: as many as the largest
# plan has agents, since a slot waiting on HTTP costs a thread's stack, not a process.
THREAD_SLOTS_DEFAULT = MAX_AGENTS_LIMIT

ProviderName = Literal["auto", "offline", "anthropic"]
WorkerPool = Literal["prefork", "threads"]
# Redis URLs wfqueue takes; redis-py's unix:// is given to Celery and kombu as redis+socket:// (celery_app).
REDIS_SCHEMES = ("redis", "rediss", "redis+socket", "unix")
# Where the Anthropic API key may come from, first wins (workers.preload spells them out again: it loads before
# this module, on a standby's start).
API_KEY_VARIABLES = ("WFQUEUE_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
CELERY_POOLS = ("prefork", "threads", "solo")  # what `wfqueue worker --pool` accepts (solo: one slot, no pool)
WorkerPoolName = Literal["auto", "prefork", "threads"]


class Settings(BaseSettings):
    """Effective configuration of one wfqueue process."""

    # allow_inf_nan: no float setting means "forever" or "undefined"; inf and nan crash what reads them.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", populate_by_name=True,
                                      allow_inf_nan=False)

    # -- broker ------------------------------------------------------------------
    broker_url: SecretStr | None = Field(
        default=None,
        description="Redis URL (redis://, rediss://, redis+socket://). Unset: embedded Redis.",
    )
    result_backend_url: SecretStr | None = Field(
        default=None, description="Result backend URL; defaults to the broker URL."
    )
    broker_connect_timeout_s: float = Field(default=5.0, gt=0, description="Seconds to wait for the broker to answer.")
    visibility_timeout_s: int = Field(
        default=3600, gt=0, description="Seconds before an unacked message is redelivered."
    )
    broker_outage_grace_s: float = Field(
        default=30.0, ge=0,
        description="Seconds a running plan waits for a lost broker to come back before it stops (exit 3).",
    )
    result_expires_s: int = Field(
        default=86_400, gt=0, description="Lifetime of task results and chord counters."
    )
    state_ttl_s: int = Field(
        default=7 * 86_400, gt=0, description="Lifetime of session state kept in Redis."
    )

    # -- tasks ---------------------------------------------------------------------
    agent_soft_time_limit_s: int = Field(
        default=300, gt=0, description="Seconds an agent may plan before it is stopped and recorded as failed."
    )
    agent_time_limit_s: int = Field(
        default=360, gt=0, description="Hard kill after this many seconds; keep it above the soft limit."
    )
    task_max_retries: int = Field(default=3, ge=0, description="Retries of a task after transient errors.")
    retry_backoff_s: float = Field(default=2.0, ge=0, description="First retry delay in seconds; doubles each retry.")
    retry_backoff_max_s: float = Field(default=60.0, ge=0, description="Longest retry delay in seconds.")
    lock_timeout_s: float = Field(default=60.0, gt=0, description="Wait for the plan-note lock.")

    # -- coordinator and embedded mode ----------------------------------------------
    plan_timeout_s: float = Field(default=3600.0, gt=0, description="Longest wait in seconds for one plan.")
    poll_interval_s: float = Field(default=0.1, ge=0.001,
                                   description="Coordinator polling of agent states (progress).")
    idle_queue_warning_s: float = Field(
        default=15.0, gt=0, description="Seconds a command on a shared broker waits before it looks whether any "
        "worker consumes the queues its tasks wait on (and says so when none does).")
    embedded_start_timeout_s: float = Field(
        default=60.0, gt=0, description="Seconds to wait for embedded Redis and workers to start."
    )
    prestart_worker: bool = Field(
        default=True, description="The `wfqueue` command starts its embedded worker's interpreter as it starts, "
        "to load beside the command's own code (read from the environment or the TOML file before the rest).",
    )
    embedded_redis_port: int = Field(
        default=0, ge=0, le=65535, description="Also listen on this TCP port of 127.0.0.1 (0: unix socket only)."
    )
    worker_concurrency: int | None = Field(
        default=None, ge=1, description="Pool slots of `wfqueue worker` (default: one per CPU with the prefork "
        "pool, 100 with threads).",
    )
    worker_pool: WorkerPoolName = Field(
        default="auto", description="Celery pool of the workers. auto: threads when the provider is remote "
        "(anthropic: agents wait on HTTP, and a thread slot costs a few MB where a process costs about 120), "
        "prefork when planning is CPU-bound (offline). Threads enforce no Celery time limits.",
    )

    # -- workers on other machines: the repository and session files travel through Redis --------
    shared_disk: bool | None = Field(
        default=None,
        description="Workers read the repository and write session files at the coordinator's paths (a volume "
        "every worker host mounts). Unset: yes in embedded mode, no with a broker URL, where the repository "
        "travels as a git bundle through Redis (or from repo_url) and session files come back through Redis.",
    )
    repo_url: str | None = Field(
        default=None, description="Git URL workers fetch the pinned commit from, instead of a bundle in Redis "
        "(for repositories above bundle_max_bytes). The commit must be reachable there: push it first.",
    )
    bundle_max_bytes: int = Field(
        default=256 * 1024 * 1024, gt=0,
        description="Largest repository bundle stored in Redis, in bytes; above it set repo_url.",
    )
    bundle_ttl_s: int = Field(
        default=86_400, gt=0, description="Seconds a repository bundle stays in Redis after it was last published.",
    )
    worker_cache_dir: Path | None = Field(
        default=None, description="Where a worker keeps its checkouts of pinned commits and its copies of session "
        "folders (default: $XDG_CACHE_HOME/wfqueue, else ~/.cache/wfqueue).",
    )
    checkout_cache_max: int = Field(
        default=8, ge=1, description="Checkouts a worker keeps; the least recently used beyond this are removed.",
    )

    # -- planning ----------------------------------------------------------------------
    provider: ProviderName = Field(default="auto", description="auto: anthropic when an API key is set, else offline.")
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices(*API_KEY_VARIABLES),
    )
    model: str = Field(default="claude-sonnet-4-6", description="Model used by the anthropic provider.")
    anthropic_max_tokens: int = Field(
        default=16_000, ge=1, le=128_000,
        description="Output tokens per Anthropic request (requests stream, so larger values are accepted by the SDK).",
    )
    anthropic_max_turns: int = Field(
        default=12, ge=1, description="Requests one tool-using step may make before its answer is forced."
    )
    anthropic_max_step_tokens: int = Field(
        default=500_000, ge=1, description="Tokens one step may spend (input incl. cache, plus output) before its "
        "answer is forced.",
    )
    anthropic_max_retries: int = Field(
        default=0, ge=0, le=2, description="Retries inside the Anthropic SDK; 0 leaves retries to wfqueue, which paces "
        "them with the shared limiter (anthropic_step_retries)."
    )
    anthropic_step_retries: int = Field(
        default=8, ge=0, description="Re-sends of failed calls (429, 529, 5xx, timeouts, dropped connections) one "
        "step may make, waiting out retry-after and backoff, before its task retries and resumes at its last turn.",
    )
    anthropic_timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds per Anthropic request (unset: the SDK's default)."
    )
    repo_tool_max_read_bytes: int = Field(default=32_000, gt=0, description="Bytes one `read` tool call returns.")
    repo_tool_max_grep_matches: int = Field(default=100, gt=0, description="Matches one `grep` tool call returns.")
    repo_tool_max_list_entries: int = Field(default=300, gt=0, description="Entries one `list`/`glob` call returns.")
    repo_summary_max_files: int = Field(
        default=400, gt=0, description="Files listed in the repository summary all agents share (the cached prefix)."
    )
    max_agents: int = Field(default=5, ge=2, le=MAX_AGENTS_LIMIT, description="Default --max-agents.")
    requirement_max_bytes: int = Field(default=1024 * 1024, gt=0, description="Largest requirement accepted, in bytes.")
    index_max_file_bytes: int = Field(
        # analysis.files.DEFAULT_MAX_FILE_BYTES (not imported: the analysis package is large for every command)
        default=512 * 1024, gt=0, description="Files above this size (bytes) are left out of the repository index."
    )
    index_max_files: int = Field(
        # analysis.files.DEFAULT_MAX_INDEXED_FILES, likewise
        default=20_000, gt=0,
        description="Text files the offline planner's index reads, in path order: those after them are not planned. "
                    "Every planning process holds the index: about 450 MB at 20 000 files of 2 KB, 2.5-2.9 GB at "
                    "50 000.")

    # -- rate limit and cost (one limit shared by every worker, held in Redis, learned from the API) ------
    rate_limit_rpm: int = Field(
        default=0, ge=0, description="Cap on LLM requests per minute across all workers and machines; the limits "
        "the API announces in its rate-limit headers are learned and paced to (0: no cap, the API's limit alone).",
    )
    rate_limit_input_tpm: int = Field(
        default=0, ge=0, description="Cap on input tokens per minute across all workers, counted as Anthropic does "
        "(uncached input plus cache writes; 0: no cap, the API's limit alone).",
    )
    rate_limit_output_tpm: int = Field(
        default=0, ge=0, description="Cap on output tokens per minute across all workers; a call reserves its "
        "max_tokens until it ends (0: no cap, the API's limit alone).",
    )
    rate_limit_concurrency: int = Field(
        default=0, ge=0, description="Cap on LLM calls in flight at once across all workers (0: no cap)."
    )
    rate_limit_safety: float = Field(
        default=0.95, gt=0, le=1, description="Fraction of the limits the API announces that calls are paced to, "
        "so that network jitter never turns into a 429.",
    )
    rate_limit_start_concurrency: int = Field(
        default=2, ge=1, description="LLM calls in flight at once before the API has announced any limit; doubles "
        "with each successful response that announced none and halves on a 429.",
    )
    rate_limit_ramp_max_concurrency: int = Field(
        default=16, ge=1, description="Where that doubling stops (an endpoint that never announces limits).",
    )
    rate_limit_window_s: float = Field(
        default=60.0, gt=0, le=60, description="Seconds the per-minute limits are enforced over, scaled "
        "(50 rpm over 6 s: 5 per 6 s); a shorter window spreads calls out.",
    )
    rate_limit_max_wait_s: float = Field(
        default=60.0, ge=0, description="Longest a worker waits for the rate limiter; past that the task is "
        "retried later.",
    )
    price_table: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {model: dict(prices) for model, prices in DEFAULT_PRICE_TABLE.items()},
        description="Dollars per million tokens per model: input, output, cache_read, cache_write.",
    )

    # -- operations: Flower, beat, maintenance ------------------------------------------------
    flower_basic_auth: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("WFQUEUE_FLOWER_BASIC_AUTH", "FLOWER_BASIC_AUTH"),
        description="user:password for Flower (comma-separate several). Flower's own FLOWER_BASIC_AUTH works too.",
    )
    flower_unauthenticated_api: bool = Field(
        default=False, description="Serve Flower's API without credentials (only on a trusted network)."
    )
    flower_address: str = Field(default="127.0.0.1", description="Address Flower listens on.")
    flower_port: int = Field(default=5555, ge=1, le=65535, description="Port Flower listens on.")
    # At least 0.1 s: beat sends a task each time (a microsecond filled the control queue, 9,000 messages in 10 s).
    watchdog_interval_s: float = Field(default=60.0, ge=0.1,
                                       description="How often beat checks for stalled sessions.")
    watchdog_deadline_s: float = Field(
        default=900.0, gt=0, description="A session without progress this long gets its missing work re-enqueued once."
    )
    watchdog_grace_s: float = Field(
        default=600.0, gt=0, description="After the re-enqueue, seconds to wait before finalising as partial."
    )
    agent_heartbeat_s: float = Field(
        default=30.0, gt=0, description="Seconds between a running agent's signs of life in its record, up to its "
        "time limit (at most a third of watchdog_deadline_s): the watchdog takes them as progress, so a long agent "
        "is not re-enqueued beside itself.",
    )
    beat_schedule_file: str | None = Field(
        default=None, description="Where beat keeps its schedule state (default: a private temp folder per broker)."
    )
    stale_lock_age_s: float = Field(default=3600.0, gt=0, description="Lock files older than this are removed.")
    archive_after_days: int = Field(default=30, ge=1, description="Finished sessions older than this are archived.")
    embedded_data_max_age_days: int = Field(
        default=14, ge=1, description="Embedded broker logs and data of repositories unused this long are purged."
    )
    replan_tools: list[str] = Field(
        default_factory=lambda: ["codex", "gemini", "claude", "qwen", "agent"],
        description="Execution tools that replan requests may name (\"use codex\", \"改用 gemini\").",
    )

    # -- execution (`wfqueue execute`) ---------------------------------------------------------
    executor_command: str | None = Field(
        default=None, description="Agent CLI that executes one task (`--executor command`), e.g. `claude -p`; "
        "{prompt_file} is replaced by the prompt file's path, and the prompt is also on its stdin.",
    )
    executor_timeout_s: float = Field(default=1800.0, gt=0, description="Seconds one task's executor may run.")
    executor_max_turns: int = Field(default=40, ge=1, description="Model calls the claude executor may make for "
                                    "one task before it is stopped as failed.")
    executor_max_tool_calls: int = Field(default=150, ge=1, description="Tool calls the claude executor may make "
                                         "for one task before it is stopped as failed.")
    executor_command_timeout_s: float = Field(default=300.0, gt=0, description="Seconds one command the claude "
                                              "executor runs (tests, builds) may take before it is killed.")
    execute_parallel: int = Field(default=4, ge=1, description="Default --parallel: tasks of one execution in "
                                  "flight at once.")
    execute_check_timeout_s: float = Field(default=600.0, gt=0, description="Seconds one check may run before it "
                                           "is stopped: a task's verification command, or one gate command.")
    execute_test_command: str | None = Field(
        default=None, description="Gate command run on the integration branch after each wave (default: the "
        "plan's verification commands).",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        # `WFQUEUE_BROKER_URL=` (an env file's empty line) means unset for every setting that may be unset: no URL
        # is embedded Redis, not a URL ""; no WFQUEUE_WORKER_CACHE_DIR is the default cache, not Path("") (the
        # current directory, whose files the cache would then manage).
        blank = isinstance(value, str) and not value.strip()
        default = cls.model_fields[info.field_name].default if info.field_name else None
        if blank and isinstance(default, str):  # `WFQUEUE_MODEL=` planned with a model named ""
            raise ValueError(f"is empty; unset it to use the default ({default})")
        return None if blank and info.field_name and default is None else value

    @field_validator("*")
    @classmethod
    def _within_bounds(cls, value: Any, info: ValidationInfo) -> Any:
        # Every number, not a list of fields: a setting added later is bounded by its name's kind too.
        if isinstance(value, bool) or not isinstance(value, int | float) or not info.field_name:
            return value
        limit, unit = upper_bound(info.field_name)
        if value > limit:
            allowed = allowed_range(cls.model_fields[info.field_name].metadata, limit, not isinstance(value, float))
            raise PydanticCustomError("setting_too_large", "{value} is too large: allowed {allowed}{unit}",
                                      {"value": value, "allowed": allowed, "unit": unit})
        return value

    @field_validator("broker_url", "result_backend_url")
    @classmethod
    def _redis_url(cls, value: SecretStr | None) -> SecretStr | None:
        # Checked here, not when the first connection fails: a typo is then a traceback from deep in redis-py.
        problem = redis_url_problem(value.get_secret_value(), REDIS_SCHEMES) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("repo_url")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        # The URL travels in every task message (Redis, Flower, worker logs): a secret in it would be everywhere.
        if value is not None:
            problem = url_secret(value)
            if problem is not None:
                raise ValueError(f"holds {problem}, which would travel in every task message and show in Redis and "
                                 "Flower; give each worker access with a git credential helper or an SSH key, and "
                                 "set the URL without it")
        return value

    @field_validator("agent_time_limit_s")
    @classmethod
    def _hard_above_soft(cls, value: int, info: Any) -> int:
        soft = info.data.get("agent_soft_time_limit_s")
        if soft is not None and value <= soft:
            raise ValueError("agent_time_limit_s must be above agent_soft_time_limit_s")
        return value

    @field_validator("price_table")
    @classmethod
    def _prices_complete(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        PriceTable(value)  # every model needs all four prices, none negative
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_file = config_file()
        if toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)

    # -- derived values ------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        return self.broker_url is None

    def has_anthropic_credentials(self) -> bool:
        """An API key, or the SDK's other credential, ANTHROPIC_AUTH_TOKEN, which the SDK reads from the
        environment itself (so workers started with this environment have it too)."""
        key = self.anthropic_api_key
        return bool(key is not None and key.get_secret_value()) or bool(os.environ.get("ANTHROPIC_AUTH_TOKEN"))

    def effective_provider(self) -> Literal["offline", "anthropic"]:
        if self.provider == "auto":
            return "anthropic" if self.anthropic_api_key else "offline"
        return self.provider

    def heartbeat_every_s(self) -> float:
        """How often a running agent beats: agent_heartbeat_s, at most a third of the watchdog's deadline (a
        deadline set short, as in tests, must not see a live agent as stalled between two beats)."""
        return min(self.agent_heartbeat_s, self.watchdog_deadline_s / 3)

    def effective_worker_pool(self) -> WorkerPool:
        """The pool workers run tasks in: threads where tasks wait on a remote model, processes where the
        offline planner works on the CPU (threads would share one interpreter lock)."""
        if self.worker_pool == "auto":
            return "threads" if self.effective_provider() == "anthropic" else "prefork"
        return self.worker_pool

    def worker_slots(self, given: int | None = None, pool: str | None = None) -> int:
        """Pool slots of a standalone worker (`wfqueue worker`, `wfqueue up`) running ``pool`` (default: the
        effective one): one for solo, else ``given``, else worker_concurrency, else one process per CPU or
        THREAD_SLOTS_DEFAULT threads."""
        pool = pool or self.effective_worker_pool()
        if pool == "solo":
            return 1
        if given:
            return given
        if self.worker_concurrency:
            return self.worker_concurrency
        return THREAD_SLOTS_DEFAULT if pool == "threads" else os.cpu_count() or 2

    def masked(self) -> dict[str, Any]:
        """Every setting with secrets hidden, for `wfqueue config` and logs."""
        shown: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                secret = value.get_secret_value()
                value = mask_url(secret) if "://" in secret else "********"
            shown[name] = value
        shown["embedded"] = self.embedded
        shown["effective_provider"] = self.effective_provider()
        return shown


def _problem(error: Any) -> str:
    """One validation error as `setting: what is wrong`, with the allowed range where the value was not finite."""
    where = ".".join(str(part) for part in error["loc"]) or "settings"
    if error["type"] == "finite_number" and where in Settings.model_fields:
        limit, unit = upper_bound(where)
        allowed = allowed_range(Settings.model_fields[where].metadata, limit, whole=False)
        return f"{where}: {error['input']} is not a finite number: allowed {allowed}{unit}"
    return f"{where}: {str(error['msg']).removeprefix('Value error, ')}"  # pydantic's label of a validator's words


def load_settings(**overrides: Any) -> Settings:
    """Build the settings at an entry point; bad values, and a settings file that is missing or cannot be
    read, become a ConfigError naming the setting or the file."""
    warn_unknown_env(os.environ, Settings.model_fields)
    toml_file = config_file()
    shown_file = toml_file or DEFAULT_CONFIG_FILE
    if toml_file is not None and not toml_file.is_file():
        if toml_file == DEFAULT_CONFIG_FILE:
            raise ConfigError(f"{DEFAULT_CONFIG_FILE} in {Path.cwd()} is not a file",
                              hint="make it the settings file (TOML), or move it away to use the defaults")
        raise ConfigError(f"WFQUEUE_CONFIG_FILE names {toml_file}, which is not a file",
                          hint="point it at your settings file, or unset it to use config/wfqueue.toml")
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
        if toml_file == DEFAULT_CONFIG_FILE and not os.environ.get("WFQUEUE_CONFIG_FILE"):  # found, not named
            with toml_file.open("rb") as read:
                note_outward_settings(str(toml_file.resolve()), tomllib.load(read), os.environ)
        return settings
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors())
        raise ConfigError(
            f"invalid configuration: {problems}",
            hint=f"fix the WFQUEUE_* environment variable or {shown_file} entry named above",
        ) from None
    except SettingsError as exc:  # a value that is not JSON where JSON is expected (a list or a table)
        named = re.search(r'field "(\w+)"', str(exc))
        field = named.group(1) if named else "a list or table setting"
        raise ConfigError(f"invalid configuration: {exc}",
                          hint=f"{field} is JSON in the environment (WFQUEUE_{field.upper()}='[\"a\", \"b\"]' for "
                               "a list, '{...}' for a table), and a TOML value in the settings file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise ConfigError(f"the settings file {shown_file} cannot be read: {exc}",
                          hint="fix its TOML (UTF-8), or point WFQUEUE_CONFIG_FILE at another file") from None
