"""When to retry a task. Pure: the caller supplies the random draw."""

from __future__ import annotations


def retry_delay(
    attempt: int, base_s: float, cap_s: float, jitter: float, retry_after_s: float | None = None
) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based).

    Exponential backoff ``base * 2**(attempt-1)`` capped at ``cap``, never shorter
    than what the provider asked for (``retry-after``), plus up to 25 % jitter
    (``jitter`` is a draw in [0, 1)) so retries from many workers spread out.
    """
    backoff = min(cap_s, base_s * (2.0 ** max(0, attempt - 1)))
    wait = max(backoff, retry_after_s or 0.0)
    return round(wait * (1 + 0.25 * jitter), 3)
