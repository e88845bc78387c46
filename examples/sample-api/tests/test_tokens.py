import pytest

from notes_api.auth.tokens import TokenClaims, TokenError, issue_token, verify_token

SECRET = "token-secret"
NOW = 1_700_000_000


def test_roundtrip_returns_claims():
    token = issue_token(7, SECRET, ttl_seconds=300, now=NOW)
    assert verify_token(token, SECRET, now=NOW + 10) == TokenClaims(7, NOW, NOW + 300)


def test_token_is_deterministic_for_same_inputs():
    assert issue_token(1, SECRET, 60, now=NOW) == issue_token(1, SECRET, 60, now=NOW)


def test_expired_token_is_rejected():
    token = issue_token(7, SECRET, ttl_seconds=300, now=NOW)
    with pytest.raises(TokenError, match="expired"):
        verify_token(token, SECRET, now=NOW + 300)


def test_wrong_secret_is_rejected():
    token = issue_token(7, SECRET, ttl_seconds=300, now=NOW)
    with pytest.raises(TokenError, match="signature"):
        verify_token(token, "other-secret", now=NOW)


def test_tampered_payload_is_rejected():
    token = issue_token(7, SECRET, ttl_seconds=300, now=NOW)
    forged_payload = issue_token(8, SECRET, ttl_seconds=300, now=NOW).split(".")[0]
    forged = forged_payload + "." + token.split(".")[1]
    with pytest.raises(TokenError):
        verify_token(forged, SECRET, now=NOW)


@pytest.mark.parametrize("token", ["", "no-dot", "a.b.c"])
def test_malformed_tokens_are_rejected(token):
    with pytest.raises(TokenError):
        verify_token(token, SECRET, now=NOW)


def test_non_positive_ttl_is_invalid():
    with pytest.raises(ValueError):
        issue_token(1, SECRET, ttl_seconds=0, now=NOW)
