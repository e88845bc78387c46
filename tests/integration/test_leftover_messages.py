"""A command that starts its embedded Redis first drops what an earlier command left there: waiting tasks
and deliveries its killed workers never acknowledged (wfqueue.celery_app.drop_leftover_messages)."""

from __future__ import annotations

import pytest

from wfqueue.celery_app import create_app, drop_leftover_messages, release_result_subscriptions
from wfqueue.settings import load_settings
from wfqueue.state import redis_client
from wfqueue.task_names import ALL_QUEUES, COLLAB_UNDERSTAND, ROUTES

pytestmark = pytest.mark.integration


def test_waiting_and_unacknowledged_tasks_are_dropped(redis_url: str) -> None:
    app = create_app(load_settings(broker_url=redis_url))
    client = redis_client(redis_url, 5.0)
    try:
        for _ in range(3):
            app.send_task(COLLAB_UNDERSTAND, kwargs={"payload": {}})
        queue = ROUTES[COLLAB_UNDERSTAND]
        assert client.llen(queue) == 3
        # What a worker killed mid-task leaves: kombu's record of a delivery it never acknowledged.
        client.hset("unacked", "tag-1", "[]")
        client.zadd("unacked_index", {"tag-1": 1.0})
        assert drop_leftover_messages(app) == 3
        assert all(client.llen(name) == 0 for name in ALL_QUEUES)
        assert not client.exists("unacked", "unacked_index")
        client.set("wfqueue:session:kept", "1")  # state is not the queues': kept for `wfqueue resume`
        drop_leftover_messages(app)
        assert client.get("wfqueue:session:kept") == "1"
    finally:
        release_result_subscriptions(app)
