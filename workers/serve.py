"""Run one worker node: ``python -m workers.serve --pool threads --concurrency 100 ...``.

What ``celery -A workers.app worker`` does, without Celery's command line: that one loads every
installed Celery extension's commands (Flower's among them, and an interactive shell), about half a
second of a worker's start-up that a plan waits for. Embedded mode, `wfqueue up` and `wfqueue worker`
start workers this way; ``celery -A workers.app worker`` still works, for deployments that prefer it.

The options are Celery's, spelled the same, and a bad one exits with code 2 and says which.

``python -m workers.serve --standby`` loads the worker's modules first and then waits for its options on
stdin (wfqueue.prestart): a plan command starts it before its own imports, so the two load side by side.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys

from wfqueue import lifeline
from wfqueue.prestart import STANDBY_FLAG, WORKER_MODULE, StandbyOrders, early_setting


def parse_args(argv: list[str]) -> argparse.Namespace:
    from wfqueue.settings import CELERY_POOLS  # not at the top: a standby loads it with the collector off

    parser = argparse.ArgumentParser(prog="python -m workers.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--queues", "-Q", required=True, help="comma-separated queues to consume")
    parser.add_argument("--concurrency", "-c", type=int, required=True, help="pool slots")
    parser.add_argument("--pool", "-P", choices=CELERY_POOLS, required=True)
    parser.add_argument("--hostname", "-n", default=None, help="node name (default: Celery's, celery@HOST)")
    parser.add_argument("--loglevel", "-l", default="INFO")
    parser.add_argument("--logfile", "-f", default=None, help="log here instead of stderr")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    # Celery restarts a node on SIGHUP by running ``python *sys.argv`` again: the way every node starts, -P
    # included, not ``python .../workers/serve.py`` (the script's folder first on sys.path, the cwd rule lost).
    sys.argv[:] = [*WORKER_MODULE, *argv]
    from celery.utils.nodenames import default_nodename, host_format

    from workers.app import app  # after the options are checked: a typo costs no import

    worker = app.Worker(
        hostname=host_format(default_nodename(args.hostname)),  # planner-1@%h as Celery's command line reads it
        pool_cls=args.pool, concurrency=args.concurrency, loglevel=args.loglevel,
        logfile=args.logfile, queues=args.queues.split(","), task_events=True,  # Flower and benchmarks read events
        without_gossip=True, without_mingle=True,  # no neighbour exchange: a node waits for no one at start
        quiet=True,  # no banner
    )
    _collect_from_now_on()
    worker.start()
    return int(worker.exitcode or 0)


def standby() -> int:
    """Load what the worker will need, wait for its orders on stdin, then run as ``main`` would.

    Nothing that depends on the settings happens before the orders arrive: the environment they carry is
    the one the settings are read from. A closed stdin without orders means the command did not need a
    worker."""
    from workers import preload

    sdk = preload.key_in(os.environ) or bool(early_setting("anthropic_api_key", os.environ))
    failed = preload.load(sdk=sdk)
    line = sys.stdin.buffer.readline()
    if not line.strip():
        return 0
    orders = StandbyOrders.decode(line)
    os.environ.clear()
    os.environ.update(orders.env)
    stderr = os.open(orders.stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(stderr, 2)
    os.close(stderr)
    with open(os.devnull, "rb") as null:  # as a worker started directly: no stdin
        os.dup2(null.fileno(), 0)
    for problem in failed:  # into worker.stderr, beside the error that import raises again if the node needs it
        print(f"standby: could not preload {problem}", file=sys.stderr)
    return main(orders.argv)


def _collect_from_now_on() -> None:
    """Turn the garbage collector back on, ``__main__`` having turned it off for the start.

    Starting a node creates about a million objects that live as long as it does (the SDK's types, Celery's,
    ours) and little garbage: collections during the start scan them again and again and free nothing,
    about 15 % of the start (1.35 s against 1.6 s with the SDK on a 2-core machine). Frozen, they are not
    scanned by the collections a running worker makes either, and a prefork pool's children share them."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


if __name__ == "__main__":
    # A plan command's (or `wfqueue up`'s) node ends with it, however it ends, and at once: SIGTERM would be a
    # warm shutdown, its tasks running on beside the next command's Redis. Unacknowledged, they are delivered
    # again; prefork children die with the node (Celery gives them SIGKILL as their parent-death signal).
    lifeline.hold(signal.SIGKILL)
    gc.disable()
    sys.exit(standby() if sys.argv[1:] == [STANDBY_FLAG] else main())
