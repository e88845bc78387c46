"""Hostile input on the wire: a pickled message is refused, never executed."""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from kombu import Connection, Producer
from support import wfqueue_env

from wfqueue.child_process import stop_process_group
from wfqueue.embedded import EmbeddedCluster, EmbeddedRedis
from wfqueue.state import redis_client

pytestmark = pytest.mark.integration


class Boom:
    """Unpickling this would create a file: proof of execution."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.marker, "w"))


def test_a_pickled_message_is_refused_and_never_executed(tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "broker")
    redis.start()
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--queues", "plan", "--concurrency", "1",
         "--hostname", "attack@%h", "--without-gossip", "--without-mingle", "--loglevel", "INFO", "--logfile",
         str(log)],
        env=wfqueue_env(WFQUEUE_BROKER_URL=redis.url), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    marker = tmp_path / "executed"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (log.is_file() and "ready." in log.read_text()):
            time.sleep(0.2)
        body = pickle.dumps(((Boom(str(marker)),), {"session_id": "evil", "session_dir": str(tmp_path),
                                                     "focus_area": "x", "provider": "offline"}, {}))
        with Connection(redis.url) as conn:
            Producer(conn).publish(
                body, routing_key="plan", exchange="", serializer=None,
                content_type="application/x-python-serialize", content_encoding="binary",
                headers={"task": "wfqueue.collab.plan_area", "id": "pickled-1", "lang": "py"},
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "pickled-1" not in log.read_text() \
                and "ContentDisallowed" not in log.read_text():
            time.sleep(0.2)
        text = log.read_text()
        assert "ContentDisallowed" in text or "disallowed" in text.lower() or "Refusing" in text, text[-2000:]
        assert not marker.exists(), "the pickled payload was executed"
        assert redis_client(redis.url, 2).hgetall("wfq:evil:agent:x") == {}
    finally:
        stop_process_group(worker, grace_s=20)
        redis.stop()


def test_an_embedded_redis_on_a_tcp_port_takes_no_command_without_its_password(tmp_path: Path) -> None:
    """Its unix socket is private to its user; 127.0.0.1 is open to every local user, who could send tasks."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cluster = EmbeddedCluster(tmp_path / "queue", concurrency=1, redis_port=port)
    url = cluster.start_redis()
    try:
        stranger = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
        with pytest.raises(redis.AuthenticationError):
            stranger.ping()
        stranger.close()
        assert redis_client(url, 5.0).ping()  # the command's own URL carries the password
        assert redis_client(cluster.redis.tcp_url("127.0.0.1"), 5.0).ping()
        assert cluster.redis.password and cluster.redis.password not in (tmp_path / "queue" / "redis" / "redis.log"
                                                                          ).read_text(errors="replace")
    finally:
        cluster.stop()
