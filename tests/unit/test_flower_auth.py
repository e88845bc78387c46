"""Flower's credentials, checked before `wfqueue flower` or `wfqueue up` starts anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from wfqueue.cli.flower_cmd import flower_auth
from wfqueue.cli.main import main
from wfqueue.errors import ConfigError
from wfqueue.settings import load_settings


@pytest.mark.parametrize(("credentials", "why"), [
    ("admin", "'admin' is not user:password"),
    ("admin:", "'admin:' is not user:password"),
    (":secret", "':secret' is not user:password"),
    # Flower splits on commas: "admin:pa" would be accepted and the chosen password refused.
    ("admin:pa,ss", "'ss' is not user:password"),
])
def test_credentials_flower_would_misread_are_refused(credentials: str, why: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", credentials)
    with pytest.raises(ConfigError, match=why):
        flower_auth(load_settings())


@pytest.mark.parametrize("credentials", ["admin:pa:ss", "alice:one,bob:two"])
def test_good_credentials_go_to_flower_as_they_are(credentials: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", credentials)  # several users: comma-separated pairs
    assert flower_auth(load_settings()) == {"FLOWER_BASIC_AUTH": credentials}


def test_up_without_usable_credentials_starts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("print('hi')\n")
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", "admin:")
    assert main(["up", "--repo", str(repo)]) == 2
    assert "'admin:' is not user:password" in capsys.readouterr().err
    assert not (repo / ".workflow").exists(), "a Redis was started for a refused up"
