"""One runner at a time per model step (wfqueue.step_runner), on a real Redis."""

from __future__ import annotations

import socket
import subprocess
import sys

from wfqueue.pids import pid_namespace
from wfqueue.state import redis_client
from wfqueue.step_runner import held_step


def test_a_claim_left_by_a_runner_killed_on_this_host_is_taken_at_once(redis_url: str) -> None:
    """A SIGKILLed pool process left its claim: the redelivered step waited out its expiry (about 15 s)."""
    client = redis_client(redis_url, 2.0)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    client.set("claim:dead", f"{socket.gethostname()}:{gone}:{pid_namespace()}:abc", px=60_000)
    waits: list[float] = []
    with held_step(client, "claim:dead", "explore:security", sleep=waits.append):
        assert client.get("claim:dead") not in (None, f"{socket.gethostname()}:{gone}:{pid_namespace()}:abc".encode())
    assert waits == [] and client.get("claim:dead") is None  # released at the end


def test_a_live_runner_elsewhere_is_waited_for(redis_url: str) -> None:
    client = redis_client(redis_url, 2.0)
    client.set("claim:live", "another-host:1234:abc", px=60_000)
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            client.delete("claim:live")  # the other runner ends

    with held_step(client, "claim:live", "explore:security", sleep=wait):
        pass
    assert len(waits) == 3


def test_a_claim_of_a_runner_in_another_pid_namespace_is_not_taken_over(redis_url: str) -> None:
    """Two containers sharing a host name see each other's pids as gone: the live runner's claim was taken."""
    client = redis_client(redis_url, 2.0)
    client.set("claim:ns", f"{socket.gethostname()}:999999:another-namespace:abc", px=60_000)
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        client.delete("claim:ns")  # the other container's run ends

    with held_step(client, "claim:ns", "explore:security", sleep=wait):
        pass
    assert waits == [0.25]
