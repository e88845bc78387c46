"""The SDK's first read rehearsed while a fresh worker's first request waits on the model
(wfqueue.providers.anthropic.warmup). Each case runs in a fresh interpreter: the builds it checks happen once
per process."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import PROJECT

READ_TYPES = ("Message", "TextBlock", "ToolUseBlock")  # what reading an answer builds on first use


def in_fresh_python(script: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stderr == "", done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_warm_up_builds_the_types_the_first_answer_is_read_into() -> None:
    result = in_fresh_python(
        "import json, threading, anthropic.types as t\n"
        "from wfqueue.providers.anthropic import warmup\n"
        f"names = {READ_TYPES!r}\n"
        "before = [getattr(t, n).__pydantic_complete__ for n in names]\n"
        "started = []\n"
        "start = threading.Thread.start\n"
        "def counted(thread):\n"
        "    started.append(thread.name)\n"
        "    start(thread)\n"
        "threading.Thread.start = counted\n"
        "warmup.start_once(0)\n"
        "warmup.start_once(0)\n"
        "threads = started.count('wfqueue-sdk-warm-up')\n"
        "assert warmup._once.done.wait(60)\n"
        "after = [getattr(t, n).__pydantic_complete__ for n in names]\n"
        "print(json.dumps({'before': before, 'after': after, 'threads': threads}))\n")
    assert result["before"] == [False, False, False], "already built: the warm-up would have nothing to do"
    assert result["after"] == [True, True, True]
    assert result["threads"] == 1, "one warm-up per process"


def test_a_failed_warm_up_is_no_error() -> None:
    """An optimisation only: whatever goes wrong, the first real answer does the builds instead."""
    result = in_fresh_python(
        "import json\n"
        "from wfqueue.providers.anthropic import warmup\n"
        "def broken():\n"
        "    raise RuntimeError('no warm-up today')\n"
        "warmup.warm = broken\n"
        "warmup.start_once(0)\n"
        "print(json.dumps({'ended': warmup._once.done.wait(60)}))\n")
    assert result == {"ended": True}


def test_the_warm_up_leaves_no_request_in_the_log_and_real_ones_stay() -> None:
    """A worker's log at INFO showed `POST http://warm-up.invalid/v1/messages "HTTP/1.1 200 OK"`: a request to a
    host that does not exist. The HTTP library's lines for real requests are still logged."""
    result = in_fresh_python(
        "import io, json, logging, httpx2\n"
        "from wfqueue.providers.anthropic import warmup\n"
        "out = io.StringIO()\n"
        "logging.basicConfig(stream=out, level=logging.INFO, format='%(name)s %(message)s')\n"
        "warmup.warm()\n"
        "answer = lambda request: httpx2.Response(200, text='ok')\n"
        "with httpx2.Client(transport=httpx2.MockTransport(answer)) as client:\n"
        "    client.get('http://api.example.test/v1/models')\n"
        "print(json.dumps({'log': out.getvalue()}))\n")
    log = str(result["log"])
    assert "warm-up" not in log, log
    assert "api.example.test/v1/models" in log, log
