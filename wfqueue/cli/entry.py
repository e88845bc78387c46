"""The ``wfqueue`` command (and ``python -m wfqueue``): a standby worker first, then the command line.

Kept to the standard library until the standby has been started (wfqueue.prestart): every import before
it would be waited for twice.
"""

from __future__ import annotations

import gc
import sys


def main() -> None:
    from wfqueue import prestart

    prestart.begin(sys.argv[1:])
    # Loading the command line creates long-lived objects and no garbage worth a collection (see
    # workers.serve._collect_from_now_on); frozen afterwards, they are not scanned again.
    gc.disable()
    try:
        from wfqueue.cli.main import main as run
    except KeyboardInterrupt:  # Ctrl-C while the command line loads (a second or so): nothing has started yet
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    gc.freeze()
    gc.enable()
    sys.exit(run())
