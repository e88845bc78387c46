"""Whether a running agent's worker is still there, from its record's heartbeats. Pure.

A running agent beats every ``beat_every_s`` (workers/header.heartbeat): three missed beats mean its worker is
gone or stuck, as beat's watchdog reads them. `wfqueue status` and a command's progress say so, for planning
agents and execution tasks alike.
"""

from __future__ import annotations

from typing import Any

from wfqueue.keys import AgentState

MISSED_BEATS = 3


def silent_for(record: dict[str, Any], now: float | None) -> float | None:
    """Seconds since a running agent's last sign of life, once it has missed ``MISSED_BEATS`` beats; else None."""
    # The later of its start and its last beat: a retried agent's record still holds the earlier attempt's beat.
    signs = [float(t) for t in (record.get("alive_at"), record.get("started_at")) if t]
    every = record.get("beat_every_s")
    if now is None or record.get("state") != AgentState.RUNNING or not signs or not every:
        return None
    silent = now - max(signs)
    return round(silent, 1) if silent > MISSED_BEATS * float(every) else None


SILENT_NOTE = (f"its worker missed {MISSED_BEATS} heartbeats: stopped or stuck (another worker takes the task once "
               "WFQUEUE_VISIBILITY_TIMEOUT_S has passed)")


def marked_silent(agents: dict[str, dict[str, Any]], now: float) -> dict[str, dict[str, Any]]:
    """``agents`` with a running agent whose worker went silent noted so, as a command's progress shows it (one
    note, the same at every tick: a progress line is printed when a note changes)."""
    return {area: ({**record, "note": SILENT_NOTE} if silent_for(record, now) is not None else record)
            for area, record in agents.items()}
