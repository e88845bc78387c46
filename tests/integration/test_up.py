"""`wfqueue up`: Redis, workers, beat and Flower in the foreground; plans use it; Ctrl-C stops it all."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from support import processes_mentioning, run_cli, wfqueue_env

pytestmark = pytest.mark.integration


def with_environment(value: str) -> list[int]:
    """Processes whose environment carries ``value`` (beat and Flower inherit this test's settings)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if value.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_up_serves_plans_and_flower_until_interrupted(sample_repo: Path, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = wfqueue_env(WFQUEUE_FLOWER_BASIC_AUTH="ops:up-secret", WFQUEUE_BEAT_SCHEDULE_FILE=str(tmp_path / "beat"))
    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "up", "--repo", str(sample_repo), "--workers",
                             "2", "--flower-port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    marker = str(sample_repo / ".workflow" / ".queue")
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        text = "".join(lines)
        url = re.search(r"export WFQUEUE_BROKER_URL=(\S+)", text)
        assert url and f"flower:  http://127.0.0.1:{port}/" in text, text
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/healthcheck", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.3)
        run = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(sample_repo),
                      "--max-agents", "2", "-y", "--json", env=wfqueue_env(WFQUEUE_BROKER_URL=url.group(1)))
        assert run.code == 0, run.stderr
        assert processes_mentioning(marker), "up's processes should be running"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert proc.returncode == 0
        assert processes_mentioning(marker) == []
        assert with_environment(str(tmp_path / "beat")) == [], "beat or Flower outlived `wfqueue up`"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
