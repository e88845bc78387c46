"""Session ids, requirement input and settings: bad input is refused before anything is written."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from wfqueue.cli.main import main
from wfqueue.collab.coordinator import COLLAB_IDS
from wfqueue.errors import ConfigError, InvalidRequirementError, InvalidSessionIdError, RepositoryNotFoundError
from wfqueue.retry import retry_delay
from wfqueue.sessions import check_session_id, project_of, read_requirement, repo_option, resolve_repo, slugify
from wfqueue.settings import load_settings
from wfqueue.settings_checks import mask_url
from wfqueue.workflow.registry import locate


def test_session_id_uses_slug_and_utc_plus_8_date_with_collision_suffix() -> None:
    late_utc = datetime(2026, 11, 22, 20, 30, tzinfo=UTC)  # already the 23rd in UTC+8
    first = COLLAB_IDS.new("Add per-user Rate Limiting to the API!!", late_utc, set())
    assert first == "CPLAN-add-per-user-rate-limiting-to-2026-11-23"
    assert COLLAB_IDS.new("Add per-user Rate Limiting to the API", late_utc, {first}) == first + "-2"
    assert COLLAB_IDS.new("x", late_utc, {"CPLAN-x-2026-11-23", "CPLAN-x-2026-11-23-2"}).endswith("-3")
    assert slugify("为用户添加限流", 30) == "plan"
    assert len(slugify("a" * 100, 30)) == 30
    # Accents are dropped, not words cut in two ("a-adir-validaci-n-de-l-gica").
    assert slugify("Añadir validación de lógica", 40) == "anadir-validacion-de-logica"
    assert slugify("Füge Caching für die Straße hinzu", 40) == "fuge-caching-fur-die-strasse-hinzu"


@pytest.mark.parametrize("bad", ["../etc", "/abs/path", "a\x00b", "x" * 300, "", "-leading-dash", "a/b"])
def test_bad_session_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        check_session_id(bad)


def test_missing_session_lists_what_exists(tmp_path: Path) -> None:
    (tmp_path / ".workflow" / ".planning" / "CPLAN-a-2026-11-22").mkdir(parents=True)
    with pytest.raises(Exception) as info:
        locate(tmp_path, "CPLAN-b-2026-11-22")
    assert "CPLAN-a-2026-11-22" in info.value.hint


def test_repo_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(RepositoryNotFoundError, match="no such directory"):
        resolve_repo(tmp_path / "missing")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(RepositoryNotFoundError, match="is a file"):
        resolve_repo(tmp_path / "file.txt")
    assert resolve_repo(tmp_path) == tmp_path.resolve()


def test_without_repo_a_command_works_on_the_nearest_planned_folder_inside_its_git_repository(tmp_path: Path) -> None:
    """A project planned with --repo in a subfolder of a larger repository is found from anywhere inside it; a
    folder nothing was planned in belongs to its git repository; outside git, the current folder."""
    top = tmp_path / "mono"
    project = top / "services" / "calc"
    deep = project / "calc" / "ops"
    deep.mkdir(parents=True)
    (project / ".workflow").mkdir()
    assert project_of(deep, top) == project
    assert project_of(project / ".workflow", top) == project
    assert project_of(top / "services", top) == top
    (tmp_path / ".workflow").mkdir()  # above the git repository: not its business
    assert project_of(top / "services", top) == top
    assert project_of(deep, None) == deep


def test_a_command_named_in_a_hint_carries_repo_only_where_needed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "not a git repository"
    here.mkdir()
    monkeypatch.chdir(here)
    assert repo_option(here) == ""
    other = tmp_path / "my project"
    assert repo_option(other) == f" --repo '{other}'"


def test_a_requirement_file_with_a_byte_order_mark_is_read_without_it(tmp_path: Path) -> None:
    """A UTF-8 file saved with a BOM put U+FEFF at the start of the goal, TODO_LIST.md's heading and task titles;
    a UTF-16 file (with its BOM, as Windows editors save it) was refused as binary."""
    for name, raw in (("bom.md", "\ufeffAdd request logging to the API\n".encode()),
                      ("utf16.md", "Add request logging to the API\n".encode("utf-16")),
                      ("utf16be.md", b"\xfe\xff" + "Add request logging to the API\n".encode("utf-16-be"))):
        (tmp_path / name).write_bytes(raw)
        assert read_requirement(str(tmp_path / name), 1000) == "Add request logging to the API", name
    (tmp_path / "cut.md").write_bytes(b"\xff\xfeA\x00d")  # an odd number of bytes: not UTF-16 to the end
    with pytest.raises(InvalidRequirementError, match="is not utf-16"):
        read_requirement(str(tmp_path / "cut.md"), 1000)


def test_requirement_text_file_and_refusals(tmp_path: Path) -> None:
    assert read_requirement("  Add OAuth login \n", 1000) == "Add OAuth login"
    assert read_requirement("为 API 添加按用户限流", 1000) == "为 API 添加按用户限流"
    md = tmp_path / "req.md"
    md.write_text("# Rate limits\n\nPer user.\n", encoding="utf-8")
    assert read_requirement(str(md), 1000).startswith("# Rate limits")
    with pytest.raises(InvalidRequirementError, match="empty"):
        read_requirement("   ", 1000)
    with pytest.raises(InvalidRequirementError, match="does not exist"):
        read_requirement(str(tmp_path / "nope.md"), 1000)
    (tmp_path / "specs.md").mkdir()  # it said "does not exist"
    with pytest.raises(InvalidRequirementError, match="is a folder"):
        read_requirement(str(tmp_path / "specs.md"), 1000)
    assert read_requirement("Document the limits in README.md", 1000) == "Document the limits in README.md"
    big = tmp_path / "big.md"
    big.write_bytes(b"a" * 5_000_000)
    with pytest.raises(InvalidRequirementError, match="above the 1000-byte limit"):
        read_requirement(str(big), 1000)
    binary = tmp_path / "bin.md"
    binary.write_bytes(b"\x89PNG\x00\x00\x01")
    with pytest.raises(InvalidRequirementError, match="binary"):
        read_requirement(str(binary), 1000)
    latin = tmp_path / "latin.md"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(InvalidRequirementError, match="not UTF-8"):
        read_requirement(str(latin), 1000)
    rst = tmp_path / "spec.rst"  # its path was planned as the requirement, the session named after it
    rst.write_text("Rate limits\n===========\n", encoding="utf-8")
    with pytest.raises(InvalidRequirementError, match=r"spec.rst is a file, and only .md and .txt files are read"):
        read_requirement(str(rst), 1000)
    assert read_requirement("spec.rst", 1000) == "spec.rst"  # no such file here: a (poor) requirement, as text
    # A sentence with no space past a file name's 255 bytes (Chinese is written so) is text: it was a traceback
    # (pathlib raises "File name too long" for it).
    sentence = "为用户登录添加基于令牌桶的限流功能并在超过限制时返回错误码同时记录审计日志以便运维人员排查问题" * 2
    assert read_requirement(sentence, 10_000) == sentence
    with pytest.raises(InvalidRequirementError, match="does not exist"):
        read_requirement("x" * 300 + ".md", 1000)
    os.mkfifo(tmp_path / "piped.md")  # said "does not exist"
    with pytest.raises(InvalidRequirementError, match=r"piped\.md is not a regular file"):
        read_requirement(str(tmp_path / "piped.md"), 1000)


@pytest.mark.parametrize(("content", "said"), [
    (None, "which is not a file"),  # WFQUEUE_CONFIG_FILE names a file that is not there
    (b"max_agents = [\n", "cannot be read: Invalid value"),  # a TOML syntax error
    (b'model = "caf\xe9"\n', "cannot be read: 'utf-8' codec"),  # not UTF-8
    (b"max_agents = 0\n", "max_agents: Input should be greater than or equal to 2"),
])
def test_a_bad_settings_file_is_a_config_error_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                content: bytes | None, said: str) -> None:
    config = tmp_path / "team.toml"
    if content is not None:
        config.write_bytes(content)
    monkeypatch.setenv("WFQUEUE_CONFIG_FILE", str(config))
    with pytest.raises(ConfigError, match=re.escape(said)) as caught:
        load_settings()
    assert str(config) in f"{caught.value.message} {caught.value.hint}"


def test_a_folder_where_the_default_settings_file_goes_is_refused(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """config/wfqueue.toml as a folder was passed over: the defaults applied, with no word of it."""
    (tmp_path / "config" / "wfqueue.toml").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(f"config/wfqueue.toml in {tmp_path} is not a file")):
        load_settings()


def test_a_settings_file_found_in_the_current_folder_that_sends_work_elsewhere_is_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Run inside a repository, wfqueue took that repository's config/wfqueue.toml without a word: a cloned one
    named a broker of its own (the plans went there) or the executor command to run."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "wfqueue.toml").write_text(
        'executor_command = "sh -c evil"\nbroker_url = "redis://elsewhere:6379/0"\nmax_agents = 3\n')
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.executor_command == "sh -c evil" and settings.max_agents == 3
    err = " ".join(capsys.readouterr().err.split())
    assert (f"note: {tmp_path / 'config' / 'wfqueue.toml'}, the settings file of the current folder, sets broker_url, "
            "executor_command: wfqueue sends its work or runs programs as it says") in err, err
    load_settings()
    assert capsys.readouterr().err == ""  # once per process
    # The environment's value is the one used: not said. Named by the user (also by the default's own name), or
    # setting nothing of the kind: nothing to say. A fresh folder each: a file is said once per process.
    for folder, content, environ in [
            ("env", 'executor_command = "x"\nbroker_url = "redis://a/0"\n', {"WFQUEUE_BROKER_URL": "redis://b/0"}),
            ("named", 'executor_command = "x"\n', {"WFQUEUE_CONFIG_FILE": "config/wfqueue.toml"}),
            ("quiet", "max_agents = 4\n", {})]:
        (tmp_path / folder / "config").mkdir(parents=True)
        (tmp_path / folder / "config" / "wfqueue.toml").write_text(content)
        monkeypatch.chdir(tmp_path / folder)
        with monkeypatch.context() as scoped:
            for name, value in environ.items():
                scoped.setenv(name, value)
            load_settings()
        err = " ".join(capsys.readouterr().err.split())
        assert err == ("" if folder != "env" else f"note: {tmp_path / 'env' / 'config' / 'wfqueue.toml'}, the "
                       "settings file of the current folder, sets executor_command: wfqueue sends its work or runs "
                       "programs as it says (set WFQUEUE_CONFIG_FILE to choose the settings file yourself)"), err


def test_a_price_table_that_is_not_json_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_PRICE_TABLE", "notjson")
    with pytest.raises(ConfigError, match="price_table"):
        load_settings()


def test_settings_from_env_and_toml_with_secrets_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "wfqueue.toml"
    config.write_text('max_agents = 7\nmodel = "from-file"\n', encoding="utf-8")
    monkeypatch.setenv("WFQUEUE_CONFIG_FILE", str(config))
    monkeypatch.setenv("WFQUEUE_MODEL", "from-env")
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://:hunter2@redis.internal:6379/0")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    settings = load_settings()
    assert settings.max_agents == 7 and settings.model == "from-env"
    shown = settings.masked()
    assert shown["broker_url"] == "redis://:***@redis.internal:6379/0"
    assert shown["anthropic_api_key"] == "********"
    assert "hunter2" not in repr(shown) and "sk-secret" not in repr(shown)
    assert settings.effective_provider() == "anthropic"


def test_invalid_settings_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_AGENT_TIME_LIMIT_S", "10")
    monkeypatch.setenv("WFQUEUE_AGENT_SOFT_TIME_LIMIT_S", "20")
    with pytest.raises(ConfigError, match="agent_time_limit_s"):
        load_settings()


def test_an_agent_beats_well_within_the_watchdogs_deadline() -> None:
    assert load_settings().heartbeat_every_s() == 30.0
    # A deadline set short (tests do): beats three times as often, or a live agent would look stalled.
    assert load_settings(watchdog_deadline_s=6.0).heartbeat_every_s() == 2.0


def test_a_password_holding_an_at_sign_is_masked_whole(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """redis-py and kombu take the credentials up to the host part's last `@`; the mask stopped at the first, and
    `wfqueue config` and every broker error printed the rest of the password."""
    assert mask_url("redis://:hunter@2secret@127.0.0.1:16379/0") == "redis://:***@127.0.0.1:16379/0"
    assert mask_url("redis://user:pa@ss:word@h:1/0") == "redis://user:***@h:1/0"
    assert mask_url("redis://user@h:1/0") == "redis://user@h:1/0"  # a user and no password: nothing to hide
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://:hunter@2secret@127.0.0.1:16379/0")
    assert main(["config", "--json"]) in (0, None)
    out = capsys.readouterr().out
    assert "2secret" not in out and "redis://:***@127.0.0.1:16379/0" in out


def test_mask_url_keeps_urls_without_password() -> None:
    assert mask_url("redis+socket:///tmp/r.sock") == "redis+socket:///tmp/r.sock"
    assert mask_url("rediss://user:p%40ss@h:1/2") == "rediss://user:***@h:1/2"


def test_retry_delay_backs_off_caps_and_honours_retry_after() -> None:
    assert [retry_delay(n, 2, 60, 0.0) for n in (1, 2, 3, 10)] == [2, 4, 8, 60]
    assert retry_delay(1, 2, 60, 0.0, retry_after_s=30) == 30
    assert 2 * 0.75 <= retry_delay(1, 2, 60, 0.999) < 2
    # Jitter spreads waits without passing the cap (it made a 60 s cap wait 73 s).
    assert all(retry_delay(10, 2, 60, draw) <= 60 for draw in (0.0, 0.5, 0.999))
    # A wait the server asked for is honoured, spread by a tenth at most and 5 s at most (600 s became 715 s).
    assert retry_delay(1, 2, 60, 0.999, retry_after_s=600) <= 605
    assert all(retry_delay(1, 2, 60, draw, retry_after_s=600) >= 600 for draw in (0.0, 0.5, 0.999))
    assert 1.0 <= retry_delay(1, 0.5, 60, 0.999, retry_after_s=1) <= 1.1


def test_default_config_file_documents_every_setting() -> None:
    import tomllib

    from wfqueue.settings import Settings

    text = (Path(__file__).resolve().parents[2] / "config" / "wfqueue.toml").read_text(encoding="utf-8")
    assignments = [line[2:] for line in text.splitlines() if line.startswith("# ") and " = " in line]
    documented = {line.split(" = ", 1)[0] for line in assignments}
    assert documented | {"anthropic_api_key"} == set(Settings.model_fields)
    values = tomllib.loads("\n".join(a for a in assignments if not a.endswith("...")))
    assert Settings(**values).model_dump() == Settings().model_dump()


def test_operations_guide_lists_every_setting() -> None:
    from wfqueue.settings import Settings

    guide = (Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
    missing = [name for name in Settings.model_fields if f"`WFQUEUE_{name.upper()}`" not in guide]
    assert missing == []


@pytest.mark.parametrize(("url", "holds"), [
    ("https://tok:gitsecret@github.com/a/b", "credentials (https://***@github.com/a/b)"),
    ("https://ghp_gitsecret@github.com/a/b", "credentials (https://***@github.com/a/b)"),  # a token as the user
    ("ssh://git:gitsecret@example.com/a/b", "credentials (ssh://***@example.com/a/b)"),
    ("https://user:git@secret@example.com/r.git", "credentials (https://***@example.com/r.git)"),  # '@' in it
    ("https://example.com/r.git?private_token=gitsecret", "a secret in its query (https://example.com/r.git?...)"),
])
def test_a_repo_url_holding_credentials_is_refused_without_repeating_them(url: str, holds: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL travels in every task message (Redis, Flower): a token in it would show everywhere."""
    monkeypatch.setenv("WFQUEUE_REPO_URL", url)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert f"repo_url: holds {holds}" in refused.value.message and "credential helper" in refused.value.message
    assert "secret" not in str(refused.value).replace("a secret in", "") and "Value error" not in refused.value.message


@pytest.mark.parametrize("url", ["ssh://git@example.com/a/b.git", "git@example.com:a/b.git", "https://example.com/a/b",
                                 "/srv/git/b.git", "file:///srv/git/b.git",
                                 "https://org@dev.azure.com/org/p/_git/r"])  # a user name alone, as Azure gives it
def test_a_repo_url_without_credentials_is_taken(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_REPO_URL", url)
    assert load_settings().repo_url == url


def test_a_list_setting_that_is_not_json_gets_a_hint_for_that_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_REPLAN_TOOLS", "codex")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert refused.value.hint.startswith("replan_tools is JSON in the environment")


def test_an_empty_setting_with_a_default_is_refused_naming_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """`WFQUEUE_MODEL=` planned with a model named "", which the API refused after the session had started."""
    monkeypatch.setenv("WFQUEUE_MODEL", " ")
    with pytest.raises(ConfigError, match=r"model: is empty; unset it to use the default \(claude-"):
        load_settings()


def test_a_requirement_of_bytes_in_another_encoding_is_refused_naming_it() -> None:
    """Latin-1 text on the command line reaches Python as surrogate escapes: it ended in a traceback."""
    latin1 = b"Add caf\xe9 menu support".decode("utf-8", "surrogateescape")  # what argv holds for those bytes
    with pytest.raises(InvalidRequirementError, match=r"not UTF-8 text \(character 8 ") as refused:
        read_requirement(latin1, 1000)
    assert "iconv" in refused.value.hint


def test_a_repository_whose_path_is_not_utf8_is_refused_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its path goes into every task's payload and the session's files: it failed once Redis and the workers had
    started, as "PydanticSerializationError"."""
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    folder.mkdir()
    with pytest.raises(RepositoryNotFoundError, match="is not UTF-8 text"):
        resolve_repo(folder)
    with pytest.raises(RepositoryNotFoundError, match="is not UTF-8 text"):
        resolve_repo(str(folder / ".." / "caf\udce9"))
    # Without --repo, from inside a git repository there (its top level, as git printed it, was read as UTF-8:
    # a traceback from every command run there).
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "app").mkdir()
    monkeypatch.chdir(folder / "app")
    with pytest.raises(RepositoryNotFoundError, match="is not UTF-8 text"):
        resolve_repo(None)
    # A top level whose name ends in a space is that folder, not one without the space.
    spaced = tmp_path / "repo "
    subprocess.run(["git", "init", "-q", str(spaced)], check=True)
    monkeypatch.chdir(spaced)
    assert resolve_repo(None) == spaced.resolve()


def test_a_retry_countdown_ends_before_the_broker_would_hand_the_message_to_a_second_worker() -> None:
    """A message waiting out its countdown is held unacknowledged: past the visibility timeout it was delivered
    again, and again (3, then 9 copies of one task, for a retry-after of 75 s with a 30 s timeout)."""
    from types import SimpleNamespace

    from wfqueue.errors import TransientProviderError
    from wfqueue.retry import longest_countdown
    from workers.context import retry_delay_of

    assert longest_countdown(30) == 25 and longest_countdown(3600) == 3240 and longest_countdown(2) == 1
    task: Any = SimpleNamespace(request=SimpleNamespace(retries=0))
    told = TransientProviderError("429 rate limited", retry_after=75.0)
    assert retry_delay_of(task, told, load_settings(visibility_timeout_s=30)) == 25
    assert 75 <= retry_delay_of(task, told, load_settings(visibility_timeout_s=3600)) <= 80  # as asked, if it fits


def test_the_index_size_limits_default_is_the_analysis_own() -> None:
    """settings.py keeps its own copy (importing the analysis package would slow every command's start)."""
    from wfqueue.analysis.files import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_INDEXED_FILES
    from wfqueue.settings import Settings

    assert Settings.model_fields["index_max_file_bytes"].default == DEFAULT_MAX_FILE_BYTES
    assert Settings.model_fields["index_max_files"].default == DEFAULT_MAX_INDEXED_FILES


def test_workers_a_command_starts_read_its_settings_file_by_name_and_say_nothing_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every local worker said the settings-file notice again in its stderr, which a failed start quotes."""
    from wfqueue.config_file import settings_file_for_workers

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "wfqueue.toml").write_text('executor_command = "agent {prompt_file}"\n')
    monkeypatch.chdir(tmp_path)
    given = settings_file_for_workers()
    assert given == {"WFQUEUE_CONFIG_FILE": str(tmp_path / "config" / "wfqueue.toml")}
    for name, value in given.items():  # as a worker's environment holds it
        monkeypatch.setenv(name, value)
    assert load_settings().executor_command == "agent {prompt_file}"
    assert capsys.readouterr().err == ""
    assert settings_file_for_workers() == {}  # named already: nothing to add
