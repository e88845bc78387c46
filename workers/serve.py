"""Run one worker node: ``python -m workers.serve --pool threads --concurrency 100 ...``.

What ``celery -A workers.app worker`` does, without Celery's command line: that one loads every
installed Celery extension's commands (Flower's among them, and an interactive shell), about half a
second of a worker's start-up that a plan waits for. Embedded mode, `wfqueue up` and `wfqueue worker`
start workers this way; ``celery -A workers.app worker`` still works, for deployments that prefer it.

The options are Celery's, spelled the same, and a bad one exits with code 2 and says which.
"""

from __future__ import annotations

import argparse
import sys

from wfqueue.settings import CELERY_POOLS


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workers.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--queues", "-Q", required=True, help="comma-separated queues to consume")
    parser.add_argument("--concurrency", "-c", type=int, required=True, help="pool slots")
    parser.add_argument("--pool", "-P", choices=CELERY_POOLS, required=True)
    parser.add_argument("--hostname", "-n", default=None, help="node name (default: Celery's, celery@HOST)")
    parser.add_argument("--loglevel", "-l", default="INFO")
    parser.add_argument("--logfile", "-f", default=None, help="log here instead of stderr")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from celery.utils.nodenames import default_nodename, host_format

    from workers.app import app  # after the options are checked: a typo costs no import

    worker = app.Worker(
        hostname=host_format(default_nodename(args.hostname)),  # planner-1@%h as Celery's command line reads it
        pool_cls=args.pool, concurrency=args.concurrency, loglevel=args.loglevel,
        logfile=args.logfile, queues=args.queues.split(","), task_events=True,  # Flower and benchmarks read events
        without_gossip=True, without_mingle=True,  # no neighbour exchange: a node waits for no one at start
        quiet=True,  # no banner
    )
    worker.start()
    return int(worker.exitcode or 0)


if __name__ == "__main__":
    sys.exit(main())
