"""One runner at a time for each model step, across every worker of a broker.

A step's saved turns (wfqueue.turns) make a restarted step go on where it stopped. They do not stop two runs of
the same step from going on at the same time: the step a killed command sent still running on `wfqueue up`'s
worker while `wfqueue resume` sent it again, or a message delivered a second time while its first delivery still
runs. Each loaded the same saved turn and sent the same next request: the turn was paid twice. So a run claims its
step first (a Redis key that expires unless refreshed); a second run waits for the first to end, then loads what
it saved, which is usually the finished step, and pays for nothing. A claim whose runner died is taken over at once
when it died on this host (its pid is gone), else it expires within ``RUNNER_CLAIM_TTL_S`` (its refresher died
with it).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis

from wfqueue import agent_notes
from wfqueue.pids import died_here, pid_namespace

__all__ = ["RELEASE_IF_OWNER", "RUNNER_CLAIM_TTL_S", "held_step"]

RUNNER_CLAIM_TTL_S = 15.0  # how long a dead runner's claim holds a step back; refreshed every third of it
WAIT_POLL_S = 0.25  # how often a waiting run looks whether the step is free

# Delete a claim (a lock key) only while it still holds the caller's token: one whose lease ran out and that another
# process has taken since is left alone. EVAL it with the key and the token (wfqueue.state re-exports it).
RELEASE_IF_OWNER = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


@contextmanager
def held_step(client: redis.Redis, key: str, label: str, *, ttl_s: float = RUNNER_CLAIM_TTL_S,
              sleep: Callable[[float], None] = time.sleep) -> Iterator[None]:
    """Hold ``key`` (the step's claim) for the block, waiting while another run holds it; ``label`` names the step
    in the note a waiting run shows beside its agent."""
    # The pid namespace too: two containers sharing a host name see each other's pids as gone.
    owner = f"{socket.gethostname()}:{os.getpid()}:{pid_namespace()}:{uuid.uuid4().hex[:8]}"
    ttl_ms = int(ttl_s * 1000)
    waited = False
    while not client.set(key, owner, nx=True, px=ttl_ms):
        held = client.get(key)
        holder = (held.decode() if isinstance(held, bytes) else held) or ""
        host, pid, namespace = [*holder.split(":"), "", ""][:3]
        if pid.isdigit() and died_here(host, int(pid), namespace or None):  # killed on this host: no wait
            client.eval(RELEASE_IF_OWNER, 1, key, holder)
            continue
        if not waited:
            agent_notes.note(f"{label} is being run elsewhere (a run sent before this one); waiting for it to end")
            waited = True
        try:
            sleep(WAIT_POLL_S)
        except BaseException:  # a time limit, a stop: the wait said beside the agent is over either way
            agent_notes.note(None)
            raise
    if waited:
        agent_notes.note(None)
    stop = threading.Event()

    def refresh() -> None:
        while not stop.wait(ttl_s / 3):
            try:
                held = client.get(key)
                if (held.decode() if isinstance(held, bytes) else held) == owner:
                    client.pexpire(key, ttl_ms)
            except redis.RedisError:
                pass  # a broker hiccup: the next refresh tries again

    refresher = threading.Thread(target=refresh, name="wfq-step-claim", daemon=True)
    refresher.start()
    try:
        yield
    finally:
        stop.set()
        refresher.join(timeout=2)
        try:
            client.eval(RELEASE_IF_OWNER, 1, key, owner)
        except redis.RedisError:
            pass  # the claim expires on its own
