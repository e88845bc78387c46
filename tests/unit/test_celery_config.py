"""The Celery app the coordinator and workers share: safe delivery settings, routing by name."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest
from celery.app import backends

from wfqueue.celery_app import create_app, unacked_scan_options
from wfqueue.collab.assemble import allocate
from wfqueue.collab.models import ProposedArea, Understanding, UnderstandingDraft, task_id
from wfqueue.embedded import EmbeddedRedis
from wfqueue.errors import ConfigError
from wfqueue.settings import load_settings
from wfqueue.settings_checks import mask_url
from wfqueue.state import redis_client
from wfqueue.task_names import COLLAB_FINALIZE, COLLAB_PLAN_AREA, COLLAB_UNDERSTAND, ROUTES


def test_app_is_json_only_late_ack_and_routes_by_task_name() -> None:
    settings = load_settings(broker_url="redis://localhost:6379/0", visibility_timeout_s=1234)
    conf = create_app(settings).conf
    assert conf.task_serializer == conf.result_serializer == "json"
    assert list(conf.accept_content) == ["json"] and list(conf.result_accept_content) == ["json"]
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.broker_transport_options["visibility_timeout"] == 1234
    assert conf.result_backend_transport_options["visibility_timeout"] == 1234
    # A dead worker's messages are looked for every 30 s at most, not kombu's ~100 s.
    assert conf.broker_transport_options["unacked_restore_interval"] == 30
    assert conf.broker_transport_options["unacked_restore_throttle"] == 1
    assert conf.task_soft_time_limit < conf.task_time_limit < 1234
    assert conf.worker_send_task_events and conf.task_send_sent_event
    # A worker started before its Redis, or left while Redis restarts, keeps trying (OPERATIONS): Celery's default
    # of 100 tries ended the worker after about 46 minutes.
    assert conf.broker_connection_max_retries is None and conf.broker_connection_retry_on_startup
    routes = conf.task_routes
    assert routes[COLLAB_PLAN_AREA]["queue"] == "plan"
    assert routes[COLLAB_UNDERSTAND]["queue"] == "plan"
    assert routes[COLLAB_FINALIZE]["queue"] == "control"
    assert {q.name for q in conf.task_queues} == {"explore", "plan", "control", "execute"}
    # Named by workflow, as Flower and the worker logs show them: the lite assessment read
    # "wfqueue.providers.offline.assess" (a module move had renamed it), whichever provider ran it.
    assert {name.split(".")[1] for name in ROUTES} == {"collab", "explore", "lite", "session", "execute", "beat"}


@pytest.mark.parametrize(("visibility_s", "interval_s", "lock_s"), [(1, 1, 5), (4, 1, 5), (20, 5, 15), (3600, 30, 90)])
def test_the_unacked_scan_keeps_pace_with_a_short_visibility_timeout(visibility_s: int, interval_s: int,
                                                                     lock_s: int) -> None:
    """The scan's lock, too: a worker killed while it scanned no longer holds every restore back 300 s."""
    options = unacked_scan_options(visibility_s)
    assert options == {"unacked_restore_interval": interval_s, "unacked_restore_throttle": 1,
                       "unacked_mutex_expire": lock_s}


def test_the_broker_channel_takes_the_scan_lock_expiry(tmp_path: Path) -> None:
    """kombu reads the option from the transport options (a name it did not know would be ignored silently)."""
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    try:
        app = create_app(load_settings(broker_url=redis.url, visibility_timeout_s=4))
        with app.connection_for_write() as connection:
            assert connection.default_channel.unacked_mutex_expire == 5
    finally:
        redis.stop()


@pytest.mark.parametrize(("url", "said"), [("amqp://guest:s3cret@localhost//", "this one starts amqp://"),
                                           ("http://localhost:6379/0", "this one starts http://"),
                                           ("not-a-url", "this one has no scheme")])
def test_a_broker_url_that_is_not_redis_is_a_config_error_naming_the_setting(url: str, said: str) -> None:
    """Refused when the settings are built, not as a traceback from the first connection; no password shown."""
    for name in ("broker_url", "result_backend_url"):
        with pytest.raises(ConfigError, match=f"{name}: .*must be a Redis URL") as caught:
            load_settings(**{name: url})
        assert said in caught.value.message and "s3cret" not in str(caught.value)


@pytest.mark.parametrize("url", ["redis://:s3cret@host:notaport/0", "rediss://:s3cret@host:99999/0",
                                 "redis://[::1/0", "redis://:s3cret/0"])
def test_a_broker_url_whose_host_or_port_cannot_be_read_is_a_config_error(url: str) -> None:
    """Accepted by the settings (and `wfqueue config`), it failed the plan with "wfqueue failed unexpectedly:
    ValueError: Port could not be cast to integer value" (exit 1), once the session folder was made. The port
    is not quoted: without a host, it is the password."""
    for name in ("broker_url", "result_backend_url"):
        with pytest.raises(ConfigError, match=f"{name}: has a host or port that cannot be read") as caught:
            load_settings(**{name: url})
        assert "s3cret" not in str(caught.value) and "redis://:PASSWORD@HOST:PORT/DB" in caught.value.message
    assert load_settings(broker_url="redis://:s3cret@[::1]:6379/0").broker_url is not None


@pytest.mark.parametrize(("url", "named"), [("redis://127.0.0.1:6391/0?password=s3cret", "password"),
                                            ("redis://:s3cret@127.0.0.1:6391?db=2", "db"),
                                            ("unix:///tmp/r.sock?db=0&password=s3cret", "db and password")])
def test_a_password_or_database_in_a_broker_urls_query_is_refused_and_never_shown(url: str, named: str) -> None:
    """redis-py reads `?password=` and `?db=`, so the broker check passed and a session folder was made; Celery's
    first connection then failed with a TypeError traceback, and every message quoted the URL, password and all."""
    for name in ("broker_url", "result_backend_url"):
        with pytest.raises(ConfigError, match=f"{name}: gives {named} in its query") as caught:
            load_settings(**{name: url})
        assert "s3cret" not in str(caught.value) and "redis://:PASSWORD@HOST:PORT/DB" in caught.value.message
    assert mask_url("redis://h:1/0?db=0&password=s3cret&x=1") == "redis://h:1/0?db=0&password=***&x=1"


def test_a_unix_socket_url_as_redis_py_writes_it_carries_tasks_and_results(tmp_path: Path) -> None:
    """`unix:///path/redis.sock` passed the settings and the broker check (redis-py reads it), and was documented;
    Celery has no `unix` transport or result backend: the first task sent ended in a traceback."""
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    try:
        url = redis.url.replace("redis+socket://", "unix://")
        app = create_app(load_settings(broker_url=url))
        with app.connection_for_write() as connection:
            connection.default_channel.client.set("wfq-probe", "1")
        assert app.backend.client.get("wfq-probe") == b"1"
        # A socket's database, as kombu takes it: wfqueue's own reads (session state, queue lengths) go there too.
        other = create_app(load_settings(broker_url=f"{redis.url}?virtual_host=3"))
        with other.connection_for_write() as connection:
            connection.default_channel.client.set("wfq-probe-3", "3")
        assert redis_client(f"{redis.url}?virtual_host=3", 5).get("wfq-probe-3") == "3"
        assert redis_client(redis.url, 5).get("wfq-probe-3") is None
    finally:
        redis.stop()


def draft(areas: list[str]) -> UnderstandingDraft:
    return UnderstandingDraft(
        complexity="High",
        understanding=Understanding(objectives=["x"], split_strategy="s"),
        sub_domains=[ProposedArea(focus_area=a, description=a, dependencies=["a0", a]) for a in areas],
    )


def test_hundred_agents_get_disjoint_ranges_and_ids_grow_a_digit() -> None:
    analysis = allocate(draft([f"a{n}" for n in range(120)]), "s", "x", 100)
    assert analysis.total_agents == 100
    ranges = [s.task_id_range for s in analysis.sub_domains]
    assert ranges[0] == (1, 100) and ranges[10] == (1001, 1100) and ranges[-1] == (9901, 10000)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    assert task_id(7) == "TASK-007" and task_id(1001) == "TASK-1001"
    assert analysis.sub_domains[1].dependencies == ["a0"]  # no self-dependency, only known areas


def test_allocation_merges_alike_areas_instead_of_refusing_them() -> None:
    analysis = allocate(draft(["same", "same"]), "s", "x", 5)
    assert [s.focus_area for s in analysis.sub_domains] == ["same"]
    assert [r.kind for r in analysis.repairs] == ["merged_sub_domain"]


def test_threads_get_backends_of_their_own_from_one_class_look_up(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[str] = []
    real = backends.load_extension_class_names

    def counted(namespace: str):  # type: ignore[no-untyped-def]
        looked_up.append(namespace)
        return real(namespace)

    monkeypatch.setattr(backends, "load_extension_class_names", counted)
    app = create_app(load_settings(broker_url="redis://localhost:6379/0"))
    made: list[object] = []
    threads = [threading.Thread(target=lambda: made.append(app.backend)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(backend) for backend in made}) == 4  # the Redis backend is per thread: not shared
    assert {type(backend).__name__ for backend in made} == {"RedisBackend"}
    assert len(looked_up) == 1
