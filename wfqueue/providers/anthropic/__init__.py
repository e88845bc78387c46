"""The Anthropic provider: Claude answers planning steps with validated structured output."""

from __future__ import annotations

from wfqueue.providers.anthropic.client import AnthropicProvider

__all__ = ["AnthropicProvider"]
