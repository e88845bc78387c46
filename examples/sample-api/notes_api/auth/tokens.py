"""Compact HMAC-SHA256 signed access tokens with an expiry time.

A token is ``<payload>.<signature>`` where ``payload`` is URL-safe base64
JSON (``{"sub": user_id, "iat": issued_at, "exp": expires_at}``) and
``signature`` is the URL-safe base64 HMAC of the encoded payload.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass


class TokenError(Exception):
    """Raised when a token is malformed, forged or expired."""


@dataclass(frozen=True)
class TokenClaims:
    """The verified contents of a token."""

    user_id: int
    issued_at: int
    expires_at: int


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    padding = "=" * (-len(text) % 4)
    return base64.urlsafe_b64decode(text + padding)


def _sign(payload: str, secret: str) -> str:
    digest = hmac.new(secret.encode("utf-8"), payload.encode("ascii"), hashlib.sha256)
    return _b64encode(digest.digest())


def issue_token(user_id: int, secret: str, ttl_seconds: int, now: float | None = None) -> str:
    """Return a signed token for ``user_id`` valid for ``ttl_seconds``."""
    if ttl_seconds <= 0:
        raise ValueError("ttl_seconds must be positive")
    issued_at = int(time.time() if now is None else now)
    claims = {"sub": user_id, "iat": issued_at, "exp": issued_at + ttl_seconds}
    payload = _b64encode(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"{payload}.{_sign(payload, secret)}"


def verify_token(token: str, secret: str, now: float | None = None) -> TokenClaims:
    """Check the signature and expiry of ``token`` and return its claims.

    Raises :class:`TokenError` for any token that should not be trusted.
    """
    try:
        payload, signature = token.split(".")
    except ValueError:
        raise TokenError("malformed token") from None
    if not hmac.compare_digest(signature, _sign(payload, secret)):
        raise TokenError("bad signature")
    try:
        claims = json.loads(_b64decode(payload))
        result = TokenClaims(int(claims["sub"]), int(claims["iat"]), int(claims["exp"]))
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise TokenError("malformed payload") from None
    current = time.time() if now is None else now
    if current >= result.expires_at:
        raise TokenError("token expired")
    return result
