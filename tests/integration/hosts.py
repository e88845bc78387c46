"""Other hosts on this machine: network namespaces linked to this one, and, for hosts that must not see this
host's disk, their own mount namespace with an empty tmpfs over the paths they must not see.

The hosts are network namespaces (veth pairs with addresses in 10.213.N.0/30, which exist only inside them).
Where namespaces cannot be created, tests using them are skipped and say why: workers on loopback sharing
this disk would not show that a worker on another host works.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from support import wfqueue_env


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def namespaces_unavailable() -> str | None:
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if shutil.which("unshare") is None:
        return "the `unshare` command (util-linux) is not installed"
    if os.geteuid() != 0:
        return "creating network and mount namespaces needs root"
    probe = f"wfqprobe{secrets.token_hex(2)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None if made.returncode == 0 else f"`ip netns add` failed: {made.stderr.strip()}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def network_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


class Hosts:
    """``count`` namespaces, each linked to the root namespace by its own veth pair."""

    def __init__(self, count: int = 2) -> None:
        self.tag = secrets.token_hex(2)
        self.names = [f"wfq{self.tag}{n}" for n in range(count)]
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

    def start_worker(self, n: int, name: str, broker_url: str, workdir: Path, hidden: list[Path],
                     **env: str) -> subprocess.Popen[bytes]:
        """`wfqueue worker` on host ``n``: its own network namespace and, when ``hidden`` is given, its own mount
        namespace where each of those paths is an empty tmpfs. Every step execs the next, so the returned
        process is the worker itself (its own process group)."""
        workdir.mkdir(parents=True, exist_ok=True)
        worker = [sys.executable, "-m", "wfqueue.cli.main", "worker", "--hostname", f"{name}@%h", "--concurrency",
                  "2", "--loglevel", "INFO"]
        mounts = "".join(f"mount -t tmpfs wfq-hidden {shlex.quote(str(p))} && " for p in hidden)
        command = ["ip", "netns", "exec", self.names[n], "unshare", "--mount", "--propagation", "private", "sh",
                   "-c", f"{mounts}exec {shlex.join(worker)}"]
        with (workdir / f"{name}.log").open("ab") as log:
            return subprocess.Popen(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=wfqueue_env(WFQUEUE_BROKER_URL=broker_url, **env))
