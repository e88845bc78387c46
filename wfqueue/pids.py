"""Whether a process id names a live process on this host. The standard library only (wfqueue.prestart)."""

from __future__ import annotations

import os


def process_exists(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one of another user's counts)."""
    if pid <= 0:
        return False  # 0 and negative numbers name process groups: kill(0, 0) would always succeed
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_namespace() -> str:
    """This process's pid namespace ("-" where the system has none to read): two containers sharing a host
    name (host networking) still have their own, so a pid is only comparable within one."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "-"


def died_here(host: str, pid: int, namespace: str | None = None) -> bool:
    """Whether a process that recorded itself as ``pid`` on ``host`` (in pid ``namespace``, when it recorded one)
    ran here and is gone. A process of another host, or of another pid namespace, is not ours to judge."""
    import socket  # here, not at the top: the entry point imports this module before anything else (prestart)

    here = host == socket.gethostname() and (namespace is None or namespace == pid_namespace())
    return here and not process_exists(pid)
