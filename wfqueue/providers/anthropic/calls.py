"""One Messages API call, streamed, retried on its own, paced by the shared limiter.

A step's calls are retried here, around the single call, not by re-running the
step: 429, 529, 5xx, timeouts, dropped connections and streams that die before
any text arrived are sent again after a wait. The wait is the longest of the
exponential backoff with jitter (wfqueue.retry), the server's ``retry-after``,
and the reset time of a rate limit the headers say is exhausted. The re-sends
of one step share a budget (``step_retries``) and must fit before the step's
deadline (its task's soft time limit), which also shortens each call's timeout;
past either, the call raises TransientProviderError and the Celery task retries
later, resuming at the turn the step had saved (wfqueue.turns). A call refused
with an error status frees its rate-limit reservation as having used nothing.

Requests stream (``messages.stream``): the SDK refuses long non-streaming
requests, and a stream shows where an answer was cut. A stream cut off after
some text is returned as it stands (``stop_reason`` None): the provider treats
it like an answer cut at max_tokens and asks for it again in its repair round (a
repair cut too is left to the task's retry).

Every response's headers, errors included, go to the limiter
(``RateLimiter.observe``) so all workers pace to the limits the API announces.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2

from wfqueue import agent_notes
from wfqueue.errors import ProviderError, TransientProviderError
from wfqueue.providers.anthropic import warmup
from wfqueue.ratelimit import RateLimiter, estimate_tokens, parse_rate_headers
from wfqueue.retry import retry_delay
from wfqueue.settings import API_KEY_VARIABLES
from wfqueue.usage import Usage

__all__ = ["CallFailure", "Caller", "RetryPolicy", "retry_after_seconds"]

log = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 409, 429, 529})
# Where the key comes from (Settings.anthropic_api_key's aliases): the hint named one, to users of the other too.
KEY_SETTINGS = f"the API key ({' or '.join(API_KEY_VARIABLES)})"
CUT_STREAM_ERRORS = (httpx2.TransportError, anthropic.APIConnectionError)


def estimated_counts(request: Mapping[str, Any], response: Any) -> tuple[int, int]:
    """(input, output) tokens of a call whose answer reported no counts, from the request's and the answer's size."""
    answer = [block.model_dump(mode="json") for block in getattr(response, "content", None) or []]
    return (estimate_tokens(request["system"], request["messages"], request.get("tools")), estimate_tokens(answer))


def broken_counts(request: Mapping[str, Any], partial: Any) -> dict[str, Any]:
    """The token counts of a send whose answer began streaming and then broke off (a dropped connection, a stall,
    a tool call's input the SDK could not read): the API counted the prompt and what the model wrote, and bills
    them, though no answer came of it. The prompt's counts are those ``message_start`` reported (estimated from
    the request's size when it reported none); the output, from what arrived (``message_delta`` carries the real
    count only at the end). Marked estimated, and broken: a usage entry, not an answer."""
    usage = getattr(partial, "usage", None)

    def reported(name: str) -> int | None:
        value = getattr(usage, name, None)
        return value if isinstance(value, int) and value >= 0 else None

    sent = reported("input_tokens")
    if sent is None:
        sent = estimate_tokens(request["system"], request["messages"], request.get("tools"))
    _, written = estimated_counts(request, partial)
    return {"input_tokens": sent, "output_tokens": max(reported("output_tokens") or 0, written),
            "cache_creation_input_tokens": reported("cache_creation_input_tokens") or 0,
            "cache_read_input_tokens": reported("cache_read_input_tokens") or 0, "estimated": True, "broken": True}


def counts_reported(usage: Any) -> bool:
    """Whether an answer's usage holds its input and output counts (whole numbers, not below zero)."""
    return all(isinstance(value, int) and value >= 0
               for value in (getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)))


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date); None when absent."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed)) - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    """How one step re-sends failed calls; seconds throughout."""

    step_retries: int = 8  # re-sends one step may make, over all its calls
    backoff_s: float = 2.0  # first wait; doubles per re-send of the same call
    backoff_max_s: float = 60.0
    deadline_margin_s: float = 5.0  # leave this much of the soft time limit for saving and reporting


@dataclass(frozen=True)
class CallFailure:
    """Why one send failed, and what the server asked for."""

    message: str
    status: int | None = None
    retry_after_s: float | None = None  # retry-after, or the reset of an exhausted rate limit


class Caller:
    """Sends the calls of one step; ``retries_left`` is the step's remaining re-send budget."""

    def __init__(self, client: anthropic.Anthropic, policy: RetryPolicy, limiter: RateLimiter | None, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 draw: Callable[[], float] = random.random) -> None:
        self.client = client
        self.policy = policy
        self.limiter = limiter
        self.retries_left = policy.step_retries
        self.resent = 0  # re-sends made, for the usage record and tests
        # The counts (broken_counts) of sends whose answer began and broke off, not yet recorded: the caller
        # records them (take_broken) whether its call then returned or raised.
        self.broken: list[dict[str, Any]] = []
        self._sleep = sleep
        self._clock = clock
        self._draw = draw

    def call(self, label: str, request: dict[str, Any], deadline: float | None) -> Any:
        """The response message of ``request``, re-sent until it comes back or the budget or deadline ends."""
        attempt = 0
        while True:
            attempt += 1
            outcome = self._send_once(label, request, self._cut_off(label, deadline))
            if not isinstance(outcome, CallFailure):
                if attempt > 1:
                    agent_notes.note(None)  # the wait shown beside the agent is over
                return outcome
            wait = retry_delay(attempt, self.policy.backoff_s, self.policy.backoff_max_s, self._draw(),
                               outcome.retry_after_s)
            if self.retries_left <= 0:
                raise TransientProviderError(
                    f"{label}: {outcome.message}; the step's {self.policy.step_retries} re-sends are spent",
                    retry_after=wait, hint="the task is retried later and resumes at its last completed turn")
            if deadline is not None and self._clock() + wait > deadline - self.policy.deadline_margin_s:
                raise TransientProviderError(
                    f"{label}: {outcome.message}; waiting {wait:.1f}s more would pass the step's time limit",
                    retry_after=wait, hint="the task is retried later and resumes at its last completed turn")
            self.retries_left -= 1
            self.resent += 1
            # Left in this try of the step: its task's next try (workers.context.when_retried) has its own.
            log.info("%s: %s; sending again in %.1fs (%d re-sends left in this try)", label, outcome.message, wait,
                     self.retries_left)
            agent_notes.note(f"{_shortened(outcome.message, NOTE_REASON_CHARS)}; sending again in {wait:.0f}s "
                             f"({self.retries_left} re-sends left in this try)")
            self._sleep(wait)

    def take_broken(self) -> list[dict[str, Any]]:
        """The counts of the sends that broke off after their answer began, since the last take."""
        taken, self.broken = self.broken, []
        return taken

    def _cut_off(self, label: str, deadline: float | None) -> float | None:
        """When the next send must have its answer (the step's deadline less its margin), or None; raises when
        that time has come already."""
        if deadline is None:
            return None
        cut_off = deadline - self.policy.deadline_margin_s
        if self._clock() >= cut_off:
            raise TransientProviderError(f"{label}: the step's time limit has come before its next model call",
                                         hint="the task is retried later and resumes at its last completed turn")
        return cut_off

    # -- one send ----------------------------------------------------------------------------

    def _send_once(self, label: str, request: dict[str, Any], cut_off: float | None = None) -> Any:
        permit = None
        if self.limiter is not None:
            # Output is reserved at max_tokens, as Anthropic estimates it; the release corrects both.
            estimate = estimate_tokens(request["system"], request["messages"], request.get("tools"))
            try:
                permit = self.limiter.acquire(estimate, int(request["max_tokens"]))
            except TransientProviderError as exc:
                raise TransientProviderError(f"{label}: {exc.message}", retry_after=exc.retry_after,
                                             hint=exc.hint) from None
        actual: Usage | None = None
        try:
            outcome = self._stream(label, request, cut_off)
            if not isinstance(outcome, CallFailure):
                # An answer that reports no counts (a proxy that drops them) is counted at its size, as the bill
                # counts it (wfqueue.providers.anthropic.client.reported_usage): zeros let the workers overrun the
                # limits, and none kept the call's max_tokens reserved against the output limit.
                if counts_reported(outcome.usage):
                    actual = Usage.from_api(outcome.usage)
                else:
                    sent, answered = estimated_counts(request, outcome)
                    actual = Usage(input_tokens=sent, output_tokens=answered)
            elif outcome.status is not None:
                # Refused with an error status (429, 529, 5xx): no model ran, no token counts against the
                # limits. Kept, the max_tokens reserved for each refused call made the workers wait on an output
                # limit nothing had used (every call 529 for a while: "waiting for ... output tokens").
                actual = Usage()
            return outcome
        finally:
            if permit is not None:
                permit.release(actual)

    def _stream(self, label: str, request: dict[str, Any], cut_off: float | None) -> Any:
        started = False  # the HTTP status was 200 and the stream began
        began = False  # message_start arrived: the model ran on the prompt
        opened: Any = None
        warmup.start_once()  # the SDK's first read, rehearsed while this request waits on the model
        try:
            options: dict[str, Any] = {**request, **self._timeout_within(cut_off)}
            with self.client.messages.stream(**options) as stream:
                started, opened = True, stream
                self._observe(stream.response.headers, stream.response.status_code)
                try:
                    for event in stream:
                        began = began or event.type == "message_start"
                        if (cut_off is not None and event.type != "message_stop"  # a whole answer is kept
                                and self._clock() >= cut_off):  # a trickle of events, never done
                            return self._broken(request, stream, began, CallFailure(
                                "the answer was still streaming at the step's time limit"))
                except CUT_STREAM_ERRORS as exc:
                    return self._broken(request, stream, began,
                                        self._cut(label, stream.current_message_snapshot if began else None, exc))
                except ValueError as exc:
                    # The SDK could not read a tool call's input ("Unable to parse tool parameter JSON", a lone
                    # surrogate): no answer to go on from, as for a cut stream. Sent again; it failed the task on a
                    # raw ValueError before, and `--continue` paid the same turn again.
                    return self._broken(request, stream, began, CallFailure(
                        f"the answer could not be read (a tool call's input that is not valid JSON, or a garbled "
                        f"stream): {str(exc)[:200]}"))
                message = stream.current_message_snapshot if began else None
                if message is None or message.stop_reason is None:
                    return self._broken(request, stream, began, self._cut(label, message, None))
                return message
        except anthropic.APIStatusError as exc:
            if started:
                # An ``error`` event inside a 200 stream (the API sends overloaded_error this way): the
                # status code is the stream's 200, the kind is in the body. Always worth sending again; what the
                # model wrote before it is billed.
                return self._broken(request, opened, began, CallFailure(
                    f"the Anthropic API broke off the stream with an error: {str(exc)[:300]}"))
            self._observe(exc.response.headers, exc.status_code)
            return self._status_failure(label, exc)
        except anthropic.APIConnectionError as exc:
            cause = exc.__cause__
            if cause is not None and not isinstance(cause, (httpx2.TransportError, OSError)):
                # The SDK wraps whatever interrupts a send, a worker's soft time limit included: that is
                # no network failure to send again, so it goes on to the task as it was raised.
                raise cause from None
            what = "timed out" if isinstance(exc, anthropic.APITimeoutError) else "could not be reached"
            # The address is said: a mistyped ANTHROPIC_BASE_URL fails this way on every call.
            return CallFailure(f"the Anthropic API at {self.client.base_url} {what} ({exc})")
        except httpx2.TransportError as exc:
            return CallFailure(f"the connection to the Anthropic API failed ({type(exc).__name__}: {exc})")
        except anthropic.AnthropicError as exc:
            raise ProviderError(f"{label}: Anthropic client error: {exc}",
                                hint=f"check {KEY_SETTINGS} and the anthropic settings") from exc

    def _timeout_within(self, cut_off: float | None) -> dict[str, float]:
        """The request's timeout option: the client's, shortened to the time left until ``cut_off``. The SDK waits
        up to 10 minutes for a stream's next bytes; a stalled stream must not hold the step past its time limit
        (the threads pool, where remote agents run, enforces no Celery time limit). A read timeout counts from
        each read: a stream that stalls at once ends at ``cut_off``, one that flows a while and then stalls at
        most that long after it (closing the response from another thread does not wake a blocked read)."""
        if cut_off is None:
            return {}
        remaining = max(0.001, cut_off - self._clock())
        configured = self.client.timeout
        read = configured.read if isinstance(configured, httpx2.Timeout) else configured
        return {} if isinstance(read, (int, float)) and read <= remaining else {"timeout": remaining}

    def _broken(self, request: dict[str, Any], stream: Any, began: bool, outcome: Any) -> Any:
        """``outcome`` of a stream that ended early; a failed send whose answer had begun is kept in ``broken``
        (its prompt and what the model wrote were billed). A cut answer returned as it stands is recorded as
        the call itself."""
        if began and isinstance(outcome, CallFailure):
            self.broken.append(broken_counts(request, stream.current_message_snapshot))
        return outcome

    @staticmethod
    def _cut(label: str, partial: Any, exc: BaseException | None) -> Any:
        """A stream that ended early: its text if any arrived (repaired later), else a failed send."""
        how = f"{type(exc).__name__}: {exc}" if exc is not None else "no message_stop"
        if partial is not None and any(b.type == "text" and b.text for b in partial.content):
            log.info("%s: the stream was cut off after some text (%s)", label, how)
            return partial
        return CallFailure(f"the stream was cut off before an answer ({how})")

    @staticmethod
    def _status_failure(label: str, exc: anthropic.APIStatusError) -> CallFailure:
        status, headers = exc.status_code, exc.response.headers
        detail = _api_detail(exc)
        if status in TRANSIENT_STATUS or status >= 500:
            waits = [w for w in (retry_after_seconds(headers), parse_rate_headers(headers).wait_s(time.time()))
                     if w is not None]
            return CallFailure(f"the Anthropic API answered {status}: {detail}", status=status,
                               retry_after_s=max(waits) if waits else None)
        if status in (401, 403):
            hint = f"check {KEY_SETTINGS}"
        elif "prompt is too long" in detail or status == 413:
            # The conversation outgrew the model's context window: a long requirement, or a long tool loop.
            hint = ("the conversation does not fit the model's context window: shorten the requirement (or split "
                    "the plan or the task); a long tool loop ends sooner with a lower "
                    "WFQUEUE_ANTHROPIC_MAX_STEP_TOKENS")
        else:
            hint = "check WFQUEUE_MODEL and the anthropic settings"
        raise ProviderError(f"{label}: the Anthropic API refused the request ({status}): {detail}", hint=hint)

    def _observe(self, headers: Mapping[str, str], status: int) -> None:
        if self.limiter is not None:
            self.limiter.observe(headers, status)


# How much of a failure's reason the note beside an agent shows (a status table's cell, a progress line).
NOTE_REASON_CHARS = 160


def _api_detail(exc: anthropic.APIStatusError) -> str:
    """What the API said, as a person reads it: its error type and message ("rate_limit_error: Number of requests
    has exceeded your rate limit"), not the SDK's "Error code: 429 - {'type': 'error', ...}"."""
    body: dict[str, Any] = exc.body if isinstance(exc.body, dict) else {}
    nested = body.get("error")
    error: dict[str, Any] = nested if isinstance(nested, dict) else body
    kind, message = error.get("type"), error.get("message")
    if isinstance(message, str) and message.strip():
        return _shortened(f"{kind}: {message}" if isinstance(kind, str) and kind else message, 300)
    return _shortened(str(exc), 300)


def _shortened(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters: cut after its last whole word that fits, with "…"
    (a cut mid-word reads as garbled)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit - 1]
    if flat[limit - 1] != " ":  # the cut falls inside a word: drop its part
        cut = cut.rsplit(" ", 1)[0]
    return f"{cut.rstrip(' ,;:([{')}…"
