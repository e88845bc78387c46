"""Per-process resources for tasks: a Redis client made after the pool forks."""

from __future__ import annotations

import os

import redis

from wfqueue.settings import Settings
from wfqueue.state import SessionState, redis_client


class StateFactory:
    """Hands out SessionState objects on a connection owned by the current process.

    Prefork children must not share the parent's sockets, so the client is
    rebuilt whenever the pid changes."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: tuple[int, redis.Redis] | None = None

    def client(self) -> redis.Redis:
        if self._client is None or self._client[0] != os.getpid():
            assert self.settings.broker_url is not None, "workers always have a broker URL"
            url = self.settings.broker_url.get_secret_value()
            self._client = (os.getpid(), redis_client(url, self.settings.broker_connect_timeout_s))
        return self._client[1]

    def session(self, session_id: str) -> SessionState:
        return SessionState(self.client(), session_id, self.settings.state_ttl_s)
