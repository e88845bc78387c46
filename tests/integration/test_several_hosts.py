"""Workers on several hosts: Redis on one, a worker on each of two others, one collab-plan.

The hosts are network namespaces this test creates (veth pairs with addresses
in 10.213.N.0/30, which exist only inside them). Where namespaces cannot be
created the test is skipped and says why: two workers on loopback would not
show that a worker on another host can reach the broker.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli, session_dir, wfqueue_env, write_script

from wfqueue.embedded import EmbeddedRedis

pytestmark = pytest.mark.integration


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


class Hosts:
    """Two namespaces, each linked to the root namespace by its own veth pair."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(2)
        self.names = [f"wfq{self.tag}{n}" for n in range(2)]
        self.gateways: list[str] = []

    def create(self) -> None:
        for n, name in enumerate(self.names):
            outer, inner = f"wq{self.tag}o{n}", f"wq{self.tag}i{n}"
            subnet = 10 + n + int(self.tag, 16) % 200
            gateway, address = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
            ip("netns", "add", name)
            ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            ip("link", "set", inner, "netns", name)
            ip("addr", "add", f"{gateway}/30", "dev", outer)
            ip("link", "set", outer, "up")
            ip("netns", "exec", name, "ip", "addr", "add", f"{address}/30", "dev", inner)
            ip("netns", "exec", name, "ip", "link", "set", inner, "up")
            ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
            self.gateways.append(gateway)

    def remove(self) -> None:
        for n, name in enumerate(self.names):
            subprocess.run(["ip", "link", "del", f"wq{self.tag}o{n}"], capture_output=True, timeout=10)
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def namespaces_unavailable() -> str | None:
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"wfqprobe{secrets.token_hex(2)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None if made.returncode == 0 else f"`ip netns add` failed: {made.stderr.strip()}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def network_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def test_two_worker_hosts_share_one_plan(sample_repo: Path, tmp_path: Path) -> None:
    reason = namespaces_unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be created here ({reason}), so there are no other hosts")
    hosts = Hosts()
    procs: list[subprocess.Popen] = []
    redis: EmbeddedRedis | None = None
    try:
        hosts.create()
        redis = EmbeddedRedis(tmp_path / "redis-host", port=free_port(), password=secrets.token_hex(8),
                              bind=("127.0.0.1", *hosts.gateways))
        redis.start()
        for n, name in enumerate(["host-a", "host-b"]):
            workdir = tmp_path / name
            workdir.mkdir()
            procs.append(subprocess.Popen(  # `ip netns exec` execs the worker: the pid is the worker's
                ["ip", "netns", "exec", hosts.names[n], sys.executable, "-m", "wfqueue.cli.main", "worker",
                 "--hostname", f"{name}@%h", "--concurrency", "2", "--loglevel", "WARNING"],
                cwd=workdir, env=wfqueue_env(WFQUEUE_BROKER_URL=redis.tcp_url(hosts.gateways[n])),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            ))
        provider = write_script(tmp_path / "script.json", latency_s=0.5)
        run = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(sample_repo),
                      "--max-agents", "4", "-y", "--provider", provider, "--json",
                      env=wfqueue_env(WFQUEUE_BROKER_URL=redis.tcp_url("127.0.0.1")), timeout=240)
        assert run.code == 0, run.stderr
        folder = session_dir(run)
        assert run.json()["status"] == "completed"
        hosts_seen = {json.loads(p.read_text())["_metadata"]["worker"].split("@")[0]
                      for p in folder.glob("agents/*/plan.json")}
        assert hosts_seen == {"host-a", "host-b"}, hosts_seen
        # Each worker that planned ran on its own host: a network namespace apart from this one's.
        spaces = [network_namespace(proc.pid) for proc in procs]
        assert all(proc.poll() is None for proc in procs), "a worker host exited"
        assert len({network_namespace(os.getpid()), *spaces}) == 3, spaces
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
        if redis is not None:
            redis.stop()
        hosts.remove()
