"""One runner at a time per model step (wfqueue.step_runner), on a real Redis."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from wfqueue.pids import pid_namespace
from wfqueue.state import redis_client, wait_until
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


def test_a_wait_ended_by_a_time_limit_takes_its_note_back(redis_url: str) -> None:
    """The agent kept reading "being run elsewhere ... waiting" after its time limit had ended the wait."""
    from wfqueue import agent_notes

    client = redis_client(redis_url, 2.0)
    client.set("claim:slow", "another-host:1234:ns:abc", px=60_000)
    notes: list[str | None] = []

    class TimeLimit(Exception):
        pass

    def limit(seconds: float) -> None:
        raise TimeLimit

    with agent_notes.noting(notes.append), pytest.raises(TimeLimit), \
            held_step(client, "claim:slow", "explore:security", sleep=limit):
        pass
    assert notes[0] is not None and "explore:security is being run elsewhere" in notes[0] and notes[-1] is None


def test_the_coordinators_claim_keeps_the_sessions_meta_alive(redis_url: str) -> None:
    """The meta's TTL ran from its last write: a long execution outlived it and was taken for lost."""
    from wfqueue.coordinator_lease import CoordinatorLease
    from wfqueue.state import SessionState

    state = SessionState(redis_client(redis_url, 2.0), "S-kept-alive", ttl_s=600)
    state.reset()
    state.set_meta(status="running")
    state.client.expire(state.prefix + "meta", 5)  # as if its last write were long ago
    with CoordinatorLease(state, ttl_s=0.3):
        assert wait_until(lambda: state.client.ttl(state.prefix + "meta") > 5, 10), "the meta's TTL was not renewed"


def test_a_field_added_after_redis_lost_the_session_does_not_make_it_known_again(redis_url: str) -> None:
    """A collab plan wrote its chord's id into the meta right after sending its agents: with Redis emptied in
    between, that one field made the session look known, and the plan waited for results gone with the data."""
    from wfqueue.state import SessionState

    state = SessionState(redis_client(redis_url, 2.0), "S-emptied", ttl_s=600)
    state.reset()
    state.set_meta(kind="collab", status="planning")
    assert state.add_to_meta(chord_id="c1") and state.meta() == {"kind": "collab", "status": "planning",
                                                                  "chord_id": "c1"}
    assert 0 < state.client.ttl(state.prefix + "meta") <= 600
    state.client.flushall()
    assert not state.add_to_meta(chord_id="c2") and state.meta() == {}
