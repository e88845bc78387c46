"""`wfqueue up`'s look at its Flower and its other children: its own Flower answering, what a child's end says."""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from wfqueue.cli.up_cmd import listens_on, wait_for_flower, watch
from wfqueue.errors import WorkerStartError


class _Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *_args: Any) -> None:
        pass


def test_another_ups_flower_answering_on_the_port_is_not_taken_for_its_own(tmp_path: Path) -> None:
    """Two `up`s started in the same moment with one Flower port: the other's Flower answered the health check
    while this one's failed to bind, and up announced "flower: http://...:PORT/" (the other's), then died with
    "workers.app flower exited (code 1)". It waits for its own, and its exit says the port may be taken."""
    other = http.server.HTTPServer(("127.0.0.1", 0), _Healthy)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    # Ours: a Flower that could not bind, and exits a moment later.
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0); raise SystemExit(1)"])
    try:
        with pytest.raises(WorkerStartError, match="Flower exited at start") as refused:
            wait_for_flower(ours, "127.0.0.1", port, tmp_path / "beat-flower.log", threading.Event())
        assert f"another program may listen on port {port}" in (refused.value.hint or "")
    finally:
        ours.kill()
        ours.wait()
        other.shutdown()
    assert listens_on(0x7FFFFFFF, port)  # a process the system cannot describe: the health check decides


def test_a_child_killed_under_up_is_said_with_its_name_and_signal(tmp_path: Path) -> None:
    """It said "beat.app beat exited (code -9)": argv words and a negative code."""
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    cluster = SimpleNamespace(redis=SimpleNamespace(proc=None))
    with pytest.raises(WorkerStartError, match=r"^beat exited \(killed by SIGKILL\)"):
        watch(cluster, [], {"beat": killed}, tmp_path)  # type: ignore[arg-type]
