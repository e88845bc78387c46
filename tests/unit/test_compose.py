"""docker-compose.yml, Dockerfile and .env.example, checked without a Docker engine.

There is no Docker engine on the development and CI machines, so these tests read
the files: the services and their healthchecks, every `wfqueue ...` command against
the real CLI, every environment variable name against what Settings really reads.
`docker compose config` (which needs no engine) runs when the compose plugin exists.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from pydantic import AliasChoices
from typer.testing import CliRunner

import wfqueue.config_file as config_file_module
from wfqueue.cli.main import app
from wfqueue.settings import Settings
from wfqueue.task_names import ALL_QUEUES

PROJECT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = PROJECT / "docker-compose.yml"
DOCKERFILE = PROJECT / "Dockerfile"
ENV_EXAMPLE = PROJECT / ".env.example"

# Variables docker-compose.yml itself defines (documented in .env.example as such).
# WFQUEUE_WORKER_CONCURRENCY is also a setting (worker_concurrency).
COMPOSE_LEVEL = {"REDIS_PASSWORD", "REDIS_PORT", "WFQUEUE_WORKER_CONCURRENCY", "WFQUEUE_WORKER_QUEUES"}
# Set by Docker in every container; referenced only container-side, as $$HOSTNAME.
CONTAINER_PROVIDED = {"HOSTNAME"}
WFQUEUE_SERVICES = ("worker", "beat", "flower")

_ASSIGNMENT = re.compile(r"^(?P<commented>#\s*)?(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")
# $$NAME / $${NAME}: escaped, expanded inside the container; ${NAME...} / $NAME: compose interpolation.
_REFERENCE = re.compile(r"\$\$\{?(?P<container>[A-Za-z_]\w*)|\$\{(?P<braced>[A-Za-z_]\w*)|\$(?P<bare>[A-Za-z_]\w*)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


# -- helpers ----------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def setting_env_names() -> dict[str, set[str]]:
    """Field name -> the environment names Settings reads it from.

    A field with a validation alias is read under its aliases only (pydantic-settings
    does not add the prefix to an alias); any other field as WFQUEUE_<FIELD>."""
    names: dict[str, set[str]] = {}
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names[name] = {choice for choice in alias.choices if isinstance(choice, str)}
        elif isinstance(alias, str):
            names[name] = {alias}
        else:
            names[name] = {"WFQUEUE_" + name.upper()}
    return names


def settings_read_names() -> set[str]:
    names = set().union(*setting_env_names().values())
    # Read to find the settings' TOML file; not a field.
    assert "WFQUEUE_CONFIG_FILE" in inspect.getsource(config_file_module.config_file)
    return names | {"WFQUEUE_CONFIG_FILE"}


def allowed_names() -> set[str]:
    return settings_read_names() | COMPOSE_LEVEL


def strings(node: Any) -> Iterator[str]:
    """Every string in the parsed YAML, mapping keys included."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def references(text: str) -> tuple[set[str], set[str]]:
    """(compose-interpolated names, container-side names) referenced in one string."""
    interpolated: set[str] = set()
    container: set[str] = set()
    for match in _REFERENCE.finditer(text):
        if match.group("container"):
            container.add(match.group("container"))
        else:
            interpolated.add(match.group("braced") or match.group("bare"))
    return interpolated, container


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(key): str(value) for key, value in env.items()}


def command_argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def healthcheck_text(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    return test if isinstance(test, str) else " ".join(str(part) for part in test)


def option_value(argv: list[str], option: str) -> str:
    for index, arg in enumerate(argv):
        if arg == option:
            return argv[index + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"{option} missing from {argv}")


def env_example_assignments() -> list[tuple[int, str, bool, str]]:
    """(line index, name, commented out, value) for each VAR=value line of .env.example."""
    found = []
    for index, line in enumerate(ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()):
        match = _ASSIGNMENT.match(line)
        if match:
            found.append((index, match.group("name"), bool(match.group("commented")), match.group("value")))
    return found


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined, comments dropped."""
    joined: list[str] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        joined.append(pending + stripped)
        pending = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1] if " " in text else "") for text in joined]


def dockerfile_cmd() -> list[str]:
    commands = [(kind, args) for kind, args in dockerfile_instructions() if kind in ("CMD", "ENTRYPOINT")]
    assert commands, "the Dockerfile has no CMD or ENTRYPOINT"
    entrypoint = [json.loads(args) for kind, args in commands if kind == "ENTRYPOINT"]
    cmd = [json.loads(args) for kind, args in commands if kind == "CMD"]  # exec (JSON) form only
    return (entrypoint[-1] if entrypoint else []) + (cmd[-1] if cmd else [])


def wfqueue_invocations() -> list[tuple[str, list[str]]]:
    """(where, argv) for every `wfqueue ...` the compose file and the Dockerfile run."""
    found: list[tuple[str, list[str]]] = []
    for name, service in services().items():
        argv = command_argv(service)
        if argv[:1] == ["wfqueue"]:
            found.append((f"{name}.command", argv))
        test = service.get("healthcheck", {}).get("test")
        if test is not None:
            text = healthcheck_text(service)
            for segment in re.split(r"[;&|]+", text):
                words = shlex.split(segment) if "wfqueue" in segment else []
                if words[:1] == ["wfqueue"]:
                    found.append((f"{name}.healthcheck", words))
    found.append(("Dockerfile CMD", dockerfile_cmd()))
    return found


def registered_commands() -> set[str]:
    return set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


# -- the compose file ---------------------------------------------------------------------------


def test_services_present() -> None:
    assert {"redis", "worker", "beat", "flower"} <= set(services())


def test_redis_has_password_appendonly_persistent_data_and_healthcheck() -> None:
    redis = services()["redis"]
    assert str(redis["image"]).split(":")[1].startswith("7")
    argv = command_argv(redis)
    assert references(option_value(argv, "--requirepass"))[0] == {"REDIS_PASSWORD"}
    assert option_value(argv, "--appendonly") == "yes"
    volumes = redis["volumes"]
    data = [volume for volume in volumes if str(volume).endswith(":/data")]
    assert data, f"no volume at /data: {volumes}"
    assert data[0].split(":")[0] in (compose().get("volumes") or {}), "Redis data should be a named volume"
    # Published for the plan command on the host, on its loopback only.
    assert [str(p) for p in redis["ports"]] == ["127.0.0.1:${REDIS_PORT:-6379}:6379"]
    check = healthcheck_text(redis)
    assert "redis-cli" in check and "ping" in check and "$$REDIS_PASSWORD" in check
    assert "REDIS_PASSWORD" in environment(redis), "the healthcheck reads the password from the container"


def test_worker_is_scalable_and_configured_from_env() -> None:
    worker = services()["worker"]
    assert "container_name" not in worker, "a fixed name prevents `--scale worker=N`"
    assert not worker.get("ports"), "fixed host ports prevent `--scale worker=N`"
    assert (worker.get("deploy") or {}).get("replicas", 1) >= 1
    argv = command_argv(worker)
    assert argv[:2] == ["wfqueue", "worker"]
    assert re.fullmatch(r"\$\{WFQUEUE_WORKER_CONCURRENCY:-\d+\}", option_value(argv, "--concurrency"))
    queues = re.fullmatch(r"\$\{WFQUEUE_WORKER_QUEUES:-(?P<default>[a-z,]+)\}", option_value(argv, "--queues"))
    assert queues and queues.group("default").split(",") == list(ALL_QUEUES), "default: every queue"
    # The healthcheck pings this replica's own node: the name it gives the worker.
    node_prefix = option_value(argv, "--hostname").split("@")[0]
    assert f"--destination {node_prefix}@$$HOSTNAME" in healthcheck_text(worker)
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"


def test_wfqueue_services_share_the_broker_and_no_disk() -> None:
    for name in WFQUEUE_SERVICES:
        service = services()[name]
        broker = environment(service)["WFQUEUE_BROKER_URL"]
        assert broker.startswith("redis://:${REDIS_PASSWORD") and broker.endswith("@redis:6379/0"), name
        # The repository travels through Redis: no service mounts it (or anything else from the host).
        assert not service.get("volumes"), f"{name} mounts {service.get('volumes')}"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy", name
        env_file = service.get("env_file")
        assert env_file in (".env", [".env"]), name
        # Not the mounted repository: Celery imports `-A workers.app` from the working directory first.
        assert service.get("working_dir", "/workspace") != "/workspace", name


def test_exactly_one_beat() -> None:
    beat = services()["beat"]
    assert command_argv(beat)[:2] == ["wfqueue", "beat"]
    assert beat["deploy"]["replicas"] == 1, "two beats would enqueue every periodic task twice"
    assert "container_name" not in beat


def test_flower_has_auth_from_env_a_published_port_and_a_healthcheck() -> None:
    flower = services()["flower"]
    argv = command_argv(flower)
    assert argv[:2] == ["wfqueue", "flower"]
    port = option_value(argv, "--port")
    assert option_value(argv, "--address") == "0.0.0.0"
    assert any(str(mapping).endswith(f":{port}") for mapping in flower["ports"]), flower["ports"]
    auth = environment(flower)["WFQUEUE_FLOWER_BASIC_AUTH"]
    assert auth.startswith("${WFQUEUE_FLOWER_BASIC_AUTH:?"), "required, so Flower never runs without credentials"
    assert f"127.0.0.1:{port}/healthcheck" in healthcheck_text(flower)


def test_every_service_has_a_healthcheck() -> None:
    for name, service in services().items():
        check = service.get("healthcheck")
        assert check and not check.get("disable") and check.get("test"), f"{name} has no healthcheck"
        test = check["test"]
        if isinstance(test, list):
            assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, f"{name}: {test}"


def test_celery_apps_named_in_healthchecks_exist() -> None:
    for name, service in services().items():
        for module in re.findall(r"celery\s+(?:-A|--app)[ =](\S+)", healthcheck_text(service)):
            assert importlib.util.find_spec(module) is not None, f"{name}: no module {module}"


@pytest.mark.parametrize(
    "where,argv", wfqueue_invocations(), ids=[where for where, _ in wfqueue_invocations()]
)
def test_wfqueue_commands_and_options_exist(where: str, argv: list[str]) -> None:
    assert argv[:1] == ["wfqueue"] and len(argv) > 1, f"{where}: {argv}"
    command = argv[1]
    assert command in registered_commands(), f"{where}: `wfqueue {command}` is not a wfqueue command"
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0, result.output
    help_text = _ANSI.sub("", result.output)
    for option in (arg.split("=", 1)[0] for arg in argv[2:] if arg.startswith("-")):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text), (
            f"{where}: `wfqueue {command}` has no option {option}"
        )


# -- environment variable names -------------------------------------------------------------


def test_compose_uses_only_environment_names_that_exist() -> None:
    allowed = allowed_names()
    for name, service in services().items():
        for text in strings(service):
            interpolated, container = references(text)
            unknown = interpolated - allowed
            assert not unknown, f"{name}: {sorted(unknown)} read by neither Settings nor the compose file"
            # $$NAME is expanded by the container's shell: Docker sets it, or the service does.
            unset = container - CONTAINER_PROVIDED - set(environment(service))
            assert not unset, f"{name}: {sorted(unset)} not set in the container"
        if name in WFQUEUE_SERVICES:
            unknown = set(environment(service)) - settings_read_names()
            assert not unknown, f"{name}: environment {sorted(unknown)} is not read by Settings"
    for text in strings({key: value for key, value in compose().items() if key != "services"}):
        unknown = references(text)[0] - allowed
        assert not unknown, f"{sorted(unknown)} read by neither Settings nor the compose file"


def test_env_example_uses_only_known_names_each_documented_once() -> None:
    allowed = allowed_names()
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    assignments = env_example_assignments()
    names = [name for _, name, _, _ in assignments]
    assert len(names) == len(set(names)), f"assigned twice: {sorted({n for n in names if names.count(n) > 1})}"
    assert not set(names) - allowed, f"unknown to Settings and compose: {sorted(set(names) - allowed)}"
    assignment_lines = {index for index, _, _, _ in assignments}
    for index, name, _, _ in assignments:
        above = index - 1
        assert above >= 0 and lines[above].startswith("#") and above not in assignment_lines, (
            f"{name} has no comment saying what it does"
        )


def test_env_example_documents_every_setting_and_compose_variable() -> None:
    assignments = env_example_assignments()
    documented = {name for _, name, _, _ in assignments}
    for field, names in setting_env_names().items():
        assert names & documented, f"setting {field} ({' or '.join(sorted(names))}) missing from .env.example"
    assert documented >= COMPOSE_LEVEL, f"missing: {sorted(COMPOSE_LEVEL - documented)}"
    assert "WFQUEUE_CONFIG_FILE" in documented


def test_env_example_commented_defaults_match_settings() -> None:
    defaults = {}
    for field, names in setting_env_names().items():
        default = Settings.model_fields[field].get_default(call_default_factory=True)
        for env_name in names:
            defaults[env_name] = default
    for _, name, commented, value in env_example_assignments():
        if not commented or name not in defaults or defaults[name] is None:
            continue
        default = defaults[name]
        if isinstance(default, bool):
            expected = "true" if default else "false"
        elif isinstance(default, (list, dict)):
            assert json.loads(value) == default, name
            continue
        else:
            expected = str(default)
        assert value == expected, f"{name}: .env.example shows {value}, the default is {expected}"


def test_env_example_sets_every_variable_compose_requires() -> None:
    required = set(re.findall(r"\$\{([A-Za-z_]\w*):?\?", COMPOSE_FILE.read_text(encoding="utf-8")))
    assert required, "expected REDIS_PASSWORD and WFQUEUE_FLOWER_BASIC_AUTH to be required"
    active = {name: value for _, name, commented, value in env_example_assignments() if not commented}
    for name in required:
        assert active.get(name), f"{name} is required by docker-compose.yml: give it a placeholder in .env.example"


# -- the Dockerfile --------------------------------------------------------------------------


def test_dockerfile_builds_a_non_root_image_of_the_installed_project() -> None:
    instructions = dockerfile_instructions()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    runs = " ".join(args for kind, args in instructions if kind == "RUN")
    assert "pip install" in runs, "the image installs the project"
    assert not re.search(r"pip install[^&]*\s(-e|--editable)\s", runs), "a regular install, not an editable one"
    users = [args for kind, args in instructions if kind == "USER"]
    assert users and users[-1] not in ("root", "0"), "the image should run as a non-root user"
    workdirs = [args for kind, args in instructions if kind == "WORKDIR"]
    assert workdirs[-1] == "/workspace", "where `docker run -v` mounts a repository to plan from a container"
    # Every package pyproject installs is copied into the build.
    find = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    copied = " ".join(args for kind, args in instructions if kind == "COPY")
    for pattern in find["find"]["include"]:
        top = pattern.rstrip("*")
        if (PROJECT / top).is_dir():
            assert re.search(rf"(^|\s){re.escape(top)}(/|\s)", copied), f"the Dockerfile does not copy {top}/"


def test_dockerfile_runs_a_worker() -> None:
    assert dockerfile_cmd() == ["wfqueue", "worker"], dockerfile_cmd()


# -- docker compose config (no engine needed) -------------------------------------------------------


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client on this machine: `docker compose config` not run")
    probe = subprocess.run([docker, "compose", "version"], check=False, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        reason = ((probe.stderr or probe.stdout).strip().splitlines() or ["no output"])[0]
        pytest.skip(
            f"`docker compose` cannot run here ({reason}): the compose plugin is not installed, "
            "so `docker compose config` (which needs no engine) was not run"
        )
    for name in ("docker-compose.yml", "Dockerfile"):
        shutil.copy(PROJECT / name, tmp_path / name)
    shutil.copy(ENV_EXAMPLE, tmp_path / ".env")
    (tmp_path / "workspace").mkdir()
    result = subprocess.run(
        [docker, "compose", "--project-directory", str(tmp_path), "-f", str(tmp_path / "docker-compose.yml"),
         "config", "--quiet"],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr or result.stdout
