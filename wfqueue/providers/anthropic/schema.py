"""The JSON schema sent as ``output_config.format`` for a step's output model. Pure.

The API compiles the schema into a grammar for constrained decoding and accepts
only a subset of JSON Schema, with per-request limits (about 24 optional
properties and 16 union-typed properties; larger schemas are refused with a
400 "compiled grammar is too large"). The output models are richer than that
(``UnifiedTask`` alone has 14 optional fields), so the wire schema is derived:

- the SDK's ``transform_schema`` does the subset (``additionalProperties:
  false``, unsupported keywords moved into descriptions);
- every property is required (nullable stays nullable): no optional properties;
- ``title`` and ``default`` are dropped (noise in the grammar);
- free-form dicts cannot be expressed (objects must list their properties), so
  ``design_decisions`` items get the ``decision / rationale / tradeoff`` shape
  the rest of wfqueue writes, and free-form variants of unions are dropped;
- provenance fields the code owns (``UnifiedTask.source`` / ``meta``) are left out.

The answer is still validated against the pydantic model itself, so a
constraint the grammar could not carry (``maxItems``, ``pattern``, ``ge``) is
enforced there and reported back in the repair round.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from anthropic.lib._parse._transform import transform_schema
from pydantic import BaseModel

__all__ = ["output_format", "output_schema"]

DECISION_SHAPE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string"},
        "rationale": {"type": "string"},
        "tradeoff": {"type": "string"},
    },
}
CODE_OWNED: dict[str, frozenset[str]] = {"UnifiedTask": frozenset({"source", "meta"})}


def _is_free_form(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "object" and not node.get("properties")


def _prepare(node: Any, name: str | None = None) -> Any:
    """Before the SDK transform: drop titles/defaults, shape design_decisions, drop code-owned fields."""
    if isinstance(node, list):
        return [_prepare(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {k: v for k, v in node.items() if k not in ("title", "default")}
    if "properties" in node:
        owned = CODE_OWNED.get(name or "", frozenset())
        props = {key: _prepare(value) for key, value in node["properties"].items() if key not in owned}
        dd = props.get("design_decisions")
        if isinstance(dd, dict) and _is_free_form(dd.get("items")):
            props["design_decisions"] = {**dd, "items": copy.deepcopy(DECISION_SHAPE)}
        node["properties"] = props
        if "required" in node:
            node["required"] = [key for key in node["required"] if key not in owned]
    if "$defs" in node:
        node["$defs"] = {key: _prepare(value, key) for key, value in node["$defs"].items()}
    for key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties", "prefixItems"):
        if key in node and isinstance(node[key], (dict, list)):
            node[key] = _prepare(node[key])
    return node


def _finish(node: Any) -> Any:
    """After the SDK transform: every property required; free-form union variants dropped."""
    if isinstance(node, list):
        return [_finish(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _finish(value) for key, value in node.items()}
    if node.get("type") == "object" and isinstance(node.get("properties"), dict):
        node["required"] = list(node["properties"])
    if isinstance(node.get("anyOf"), list):
        kept = [variant for variant in node["anyOf"] if not _is_free_form(variant)]
        if len(kept) == 1 and len(node["anyOf"]) > 1:
            node.pop("anyOf")
            node.update(kept[0])
        elif kept:
            node["anyOf"] = kept
    return node


@functools.lru_cache(maxsize=64)
def _schema_json(model: type[BaseModel]) -> str:
    return json.dumps(_finish(transform_schema(_prepare(model.model_json_schema()))))


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The strict-subset JSON schema for ``model`` (a fresh copy, in field order)."""
    schema: dict[str, Any] = json.loads(_schema_json(model))
    return schema


def output_format(model: type[BaseModel]) -> dict[str, Any]:
    """The ``output_config`` value asking for JSON text that matches ``model``."""
    return {"format": {"type": "json_schema", "schema": output_schema(model)}}
