"""wfqueue.per_process: threads asking for one key at once get one object, made once."""

from __future__ import annotations

import threading

from wfqueue.per_process import PerProcess


def test_threads_asking_at_once_get_the_one_object_made_for_the_key() -> None:
    registry: PerProcess[str, object] = PerProcess()
    made: list[object] = []
    start = threading.Barrier(8)

    def make() -> object:
        made.append(object())
        return made[-1]

    seen: list[object] = []

    def ask() -> None:
        start.wait(5)
        seen.append(registry.get("scope", make))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and seen == made * 8
    assert registry.get("other", object) is not made[0]


def test_a_registry_that_keeps_a_few_keys_forgets_the_oldest() -> None:
    made: list[str] = []
    recent: PerProcess[str, str] = PerProcess(keep=2)
    for key in ("a", "b", "a", "c", "a", "b"):
        recent.get(key, lambda key=key: made.append(key) or key.upper())
    # "c" pushes out "a", the first made (though asked for again since); "a" made again pushes out "b".
    assert made == ["a", "b", "c", "a", "b"]
