"""When to retry a task. Pure: the caller supplies the random draw."""

from __future__ import annotations

# What a wait the server asked for (retry-after) is spread by, at most: a tenth of it, and never more than
# this, so that workers told the same time do not all come back in the same instant, and a long wait the
# server asked for (600 s) is not stretched by minutes.
RETRY_AFTER_SPREAD_MAX_S = 5.0


def retry_delay(
    attempt: int, base_s: float, cap_s: float, jitter: float, retry_after_s: float | None = None
) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based).

    Exponential backoff ``base * 2**(attempt-1)`` capped at ``cap``, shortened by up to 25 % (``jitter`` is a
    draw in [0, 1)) so retries from many workers spread out, and never above ``cap``. When the provider asked
    for a wait (``retry-after``) that is longer, that wait plus a spread of up to a tenth of it (at most
    RETRY_AFTER_SPREAD_MAX_S): never sooner than asked.
    """
    backoff = min(cap_s, base_s * (2.0 ** max(0, attempt - 1))) * (1 - 0.25 * jitter)
    if retry_after_s is not None and retry_after_s >= backoff:
        return round(retry_after_s + min(0.1 * retry_after_s, RETRY_AFTER_SPREAD_MAX_S) * jitter, 3)
    return round(backoff, 3)


def longest_countdown(visibility_timeout_s: float) -> float:
    """The longest retry countdown a task may be given on a Redis broker: a message waiting out its countdown is
    held by a worker, unacknowledged, and past the visibility timeout the broker hands it to a second worker,
    which holds it too (three copies, then nine, were seen for a retry-after of 75 s with a timeout of 30 s). A
    longer wait is served in turns, each one of the task's retries: it runs again at this bound and, told to wait
    still (by the shared limiter, or by the API), is retried."""
    return max(1.0, visibility_timeout_s - max(5.0, 0.1 * visibility_timeout_s))
