"""Regex symbol extraction for curly-brace languages: JS/TS, Go and Rust here, the class-based ones in
wfqueue.analysis.class_langs.

Each language supplies a *classifier* that looks at one cleaned line in a
context ("top" level, a "namespace" body, a type's "members", or the "object" literal a
JavaScript module exports) and reports
the declarations that line starts.  A shared driver tracks brace depth so that
nested code (function bodies, closures) is never mistaken for declarations,
and so that every symbol gets an end line from its matching brace.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from wfqueue.analysis.brace_decl import KEYWORDS, NAME, BodyKind, Classifier, Decl, first_match
from wfqueue.analysis.class_langs import (
    csharp_classify,
    java_classify,
    kotlin_classify,
    php_classify,
    scala_classify,
    swift_classify,
)
from wfqueue.analysis.scan import BraceMap, clean_code, declaration_extent
from wfqueue.analysis.symbol_model import Symbol

_JS_EXPORT = r"(?:export\s+(?:default\s+)?)?(?:declare\s+)?"
_JS_TOP: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (re.compile(rf"^\s*{_JS_EXPORT}(?:async\s+)?function\b\s*\*?\s*({NAME})"), "function", None),
    (re.compile(rf"^\s*{_JS_EXPORT}(?:abstract\s+)?class\s+({NAME})"), "class", "members"),
    (re.compile(rf"^\s*{_JS_EXPORT}interface\s+({NAME})"), "class", None),
    (re.compile(rf"^\s*{_JS_EXPORT}(?:const\s+)?enum\s+({NAME})"), "class", None),
    (re.compile(rf"^\s*{_JS_EXPORT}type\s+({NAME})\s*(?:<[^=]*>)?\s*="), "class", None),
    (re.compile(rf"^\s*{_JS_EXPORT}(?:namespace|module)\s+({NAME})\s*\{{"), "container", "namespace"),
    # `const f = (a) =>`, `= function`, `= x =>`; an unclosed "(" after "=" is
    # taken as a multi-line arrow parameter list.
    (
        re.compile(
            rf"^\s*{_JS_EXPORT}(?:const|let|var)\s+({NAME})\s*(?::[^=]+)?=\s*(?:async\s+)?"
            rf"(?:function\b|(?:\([^)]*\)|{NAME})\s*(?::[^=]*)?=>|\([^)]*$)"
        ),
        "function",
        None,
    ),
    (re.compile(rf"^\s*{_JS_EXPORT}const\s+([A-Z][A-Z0-9_]+)\s*(?::[^=]+)?="), "constant", None),
]
_JS_MODIFIERS = (
    r"(?:(?:public|private|protected|static|async|readonly|override|abstract|declare|get|set)\s+)*"
)
_JS_MEMBER: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (
        re.compile(
            rf"^\s*{_JS_MODIFIERS}(#?{NAME})\s*(?::[^=]+)?=\s*(?:async\s+)?"
            rf"(?:\([^)]*\)|{NAME})\s*(?::[^=]*)?=>"
        ),
        "method",
        None,
    ),
    (re.compile(rf"^\s*{_JS_MODIFIERS}\*?\s*(#?{NAME})\s*(?:<[^>()]*>)?\s*\("), "method", None),
]


# CommonJS and prototype code declares its API by assignment: `exports.parse = function`,
# `Router.prototype.route = function`, `res.json = function json(obj)` (express's response object).
_JS_ASSIGNED = re.compile(
    rf"^\s*((?:{NAME}\.)+)({NAME})\s*=\s*(?:async\s+)?"
    rf"(?:function\b|(?:\([^)]*\)|{NAME})\s*(?::[^=]*)?=>)"
)
_JS_EXPORTS = frozenset({"exports", "module.exports"})
_JS_NAMED_FUNCTION = re.compile(rf"\s*=\s*(?:async\s+)?function\b\s*\*?\s*({NAME})")
# A module whose API is one object literal: `module.exports = {`, `const proto = module.exports = {` (koa),
# `export default {`. Its functions are the literal's methods and function-valued properties.
_JS_EXPORTED_OBJECT = re.compile(
    rf"^\s*(?:(?:const|let|var)\s+{NAME}\s*=\s*)?(?:(?:module\.)?exports\s*=\s*)+\{{|^\s*export\s+default\s+\{{"
)
# Only lines that are plainly functions: a literal's other entries may spread a call over several lines
# (`plugins: [\n  foo(),`), which a looser rule would take for a method.
_JS_OBJECT_MEMBER: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (re.compile(rf"^\s*(?:async\s+)?(?:[gs]et\s+)?\*?\s*({NAME})\s*\([^)]*\)\s*\{{"), "function", None),
    # An arrow with a block body only: `isAbsolute: (p) => p[0] === '/',` ends at its comma, which the extent
    # scanner reads as a line that goes on.
    (
        re.compile(
            rf"^\s*({NAME})\s*:\s*(?:async\s+)?(?:function\b|(?:\([^)]*\)|{NAME})\s*(?::[^=]*)?=>\s*\{{)"
        ),
        "function",
        None,
    ),
]


def _js_assigned(line: str) -> list[Decl]:
    """A function assigned to a property at the top level, named as the code calls it."""
    match = _JS_ASSIGNED.match(line)
    if match is None or match.group(2) == "prototype":  # `Foo.prototype = function`: no member named
        return []
    owner, name = match.group(1).rstrip("."), match.group(2)
    if f"{owner}.{name}" == "module.exports":  # the module is one function: named by its own name, if any
        named = _JS_NAMED_FUNCTION.match(line, match.end(2))
        return [Decl(named.group(1), "function", named.start(1))] if named else []
    if owner in _JS_EXPORTS:
        return [Decl(name, "function", match.start(2))]
    owner = owner.removesuffix(".prototype").rsplit(".", 1)[-1]
    return [Decl(name, "method", match.start(2), None, f"{owner}.{name}")]


def _js_classify(line: str, context: str, owner: str) -> list[Decl]:
    if context == "members":
        found = first_match(line, _JS_MEMBER)
        return [d for d in found if d.name not in KEYWORDS]
    if context == "object":
        return [d for d in first_match(line, _JS_OBJECT_MEMBER) if d.name not in KEYWORDS]
    if context == "top" and _JS_EXPORTED_OBJECT.match(line):
        return [Decl("", "container", line.index("{"), "object")]
    return first_match(line, _JS_TOP) or (_js_assigned(line) if context == "top" else [])


_GO_METHOD = re.compile(rf"^func\s*\(\s*(?:{NAME}\s+)?\*?\s*({NAME})(?:\[[^\]]*\])?\s*\)\s*({NAME})")
_GO_RULES: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (re.compile(rf"^func\s+({NAME})"), "function", None),
    (re.compile(rf"^type\s+({NAME})"), "class", None),
    (re.compile(rf"^const\s+({NAME})\b"), "constant", None),
]


def _go_classify(line: str, context: str, owner: str) -> list[Decl]:
    # Go has no nesting of declarations: only column-0 top-level lines count.
    if context != "top":
        return []
    method = _GO_METHOD.match(line)
    if method:
        receiver, name = method.group(1), method.group(2)
        return [Decl(name, "method", method.start(2), None, f"{receiver}.{name}")]
    return first_match(line, _GO_RULES)


_RUST_VIS = r"(?:pub(?:\s*\([^)]*\))?\s+)?"
_RUST_FN = re.compile(
    rf"^\s*{_RUST_VIS}(?:default\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+)?fn\s+({NAME})"
)
_RUST_TOP: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (_RUST_FN, "function", None),
    (re.compile(rf"^\s*{_RUST_VIS}(?:struct|enum|union|type)\s+({NAME})"), "class", None),
    (re.compile(rf"^\s*{_RUST_VIS}(?:unsafe\s+)?(?:auto\s+)?trait\s+({NAME})"), "class", "members"),
    (re.compile(rf"^\s*{_RUST_VIS}(?:const|static)\s+(?:mut\s+)?([A-Z][A-Z0-9_]*)\s*:"), "constant", None),
    (re.compile(rf"^\s*{_RUST_VIS}mod\s+({NAME})\s*\{{"), "container", "namespace"),
]
_RUST_IMPL = re.compile(r"^\s*(?:unsafe\s+)?impl\b")


def _skip_generics(text: str) -> str:
    """``text`` without a leading ``<...>`` group (which may nest)."""
    text = text.lstrip()
    if not text.startswith("<"):
        return text
    depth = 0
    for index, char in enumerate(text):
        depth += (char == "<") - (char == ">")
        if depth == 0:
            return text[index + 1 :]
    return ""


def _rust_impl_target(line: str) -> str | None:
    """Type name of ``impl [<..>] [Trait for] Type``, last path segment."""
    impl = _RUST_IMPL.match(line)
    if impl is None:
        return None
    header = _skip_generics(line[impl.end() :])
    header = re.split(r"\{|\bwhere\b", header, maxsplit=1)[0]
    if re.search(r"\bfor\b", header):
        header = re.split(r"\bfor\b", header, maxsplit=1)[1]
    match = re.search(r"((?:\w+::)*\w+)", header.replace("&", " ").replace("mut ", " "))
    return match.group(1).split("::")[-1] if match else None


def _rust_classify(line: str, context: str, owner: str) -> list[Decl]:
    if context == "members":
        match = _RUST_FN.match(line)
        return [Decl(match.group(1), "method", match.start(1))] if match else []
    if _RUST_IMPL.match(line):
        target = _rust_impl_target(line)
        return [Decl(target, "container", 0, "members")] if target else []
    return first_match(line, _RUST_TOP)


_CLASSIFIERS: dict[str, Classifier] = {
    "javascript": _js_classify,
    "typescript": _js_classify,
    "go": _go_classify,
    "rust": _rust_classify,
    "java": java_classify,
    "csharp": csharp_classify,
    "kotlin": kotlin_classify,
    "php": php_classify,
    "swift": swift_classify,
    "scala": scala_classify,
}
BRACE_LANGUAGES: frozenset[str] = frozenset(_CLASSIFIERS)


class _Container(NamedTuple):
    open_offset: int
    close_offset: int
    body_depth: int
    qualname: str
    body: str


def braced_symbols(text: str, language: str) -> list[Symbol]:
    """Symbols of a curly-brace language file, via its line classifier."""
    classify = _CLASSIFIERS[language]
    clean = clean_code(text, language)
    braces = BraceMap(clean)
    containers: list[_Container] = []
    symbols: list[Symbol] = []
    for index, line in enumerate(clean.split("\n")):
        if not line.strip():
            continue
        start = braces.line_starts[index]
        depth = braces.depth_at(start)
        context, prefix = ("top", "") if depth == 0 else ("", "")
        for box in reversed(containers):  # innermost first
            if box.open_offset < start <= box.close_offset and box.body_depth == depth:
                context, prefix = box.body, box.qualname
                break
        if not context:
            continue  # inside a function body or an unrecognised block
        owner = prefix.rsplit(".", 1)[-1]
        for decl in classify(line, context, owner):
            qualname = decl.qualname if decl.qualname is not None else (f"{prefix}.{decl.name}" if prefix
                                                                          else decl.name)
            open_offset, end = declaration_extent(clean, start + decl.column, braces)
            if decl.body and open_offset is not None:
                containers.append(
                    _Container(
                        open_offset,
                        braces.close_of[open_offset],
                        braces.depth_at(open_offset) + 1,
                        qualname,
                        decl.body,
                    )
                )
            if decl.kind != "container":
                symbols.append(
                    Symbol(
                        name=decl.name,
                        qualname=qualname,
                        kind=decl.kind,
                        line=index + 1,
                        end_line=max(end, index) + 1,
                    )
                )
    return symbols
