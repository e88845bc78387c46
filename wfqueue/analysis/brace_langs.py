"""Regex symbol extraction for curly-brace languages: JS/TS, Go, Rust, Java, C#, Kotlin, PHP.

Each language supplies a *classifier* that looks at one cleaned line in a
context ("top" level, a "namespace" body, a type's "members", or the "object" literal a
JavaScript module exports) and reports
the declarations that line starts.  A shared driver tracks brace depth so that
nested code (function bodies, closures) is never mistaken for declarations,
and so that every symbol gets an end line from its matching brace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from wfqueue.analysis.scan import BraceMap, clean_code, declaration_extent
from wfqueue.analysis.symbol_model import Symbol

# What a declaration's body holds: "members" (methods of a type), "namespace"
# (more top-level-like declarations), "object" (an exported JS object literal's
# entries) or None (nothing we extract).
BodyKind = str | None


class Decl(NamedTuple):
    """A declaration found on a line, before its extent is known."""

    name: str
    kind: str  # a Symbol kind, or "container" for impl/mod/namespace blocks
    column: int
    body: BodyKind = None
    qualname: str | None = None  # overrides prefix.name (Go receivers, Rust impls)


Classifier = Callable[[str, str, str], list[Decl]]

_NAME = r"[A-Za-z_$][\w$]*"
_JS_EXPORT = r"(?:export\s+(?:default\s+)?)?(?:declare\s+)?"
_JS_KEYWORDS = frozenset(
    {"if", "for", "while", "switch", "catch", "return", "function", "with", "super", "new", "typeof"}
)
_JS_TOP: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (re.compile(rf"^\s*{_JS_EXPORT}(?:async\s+)?function\b\s*\*?\s*({_NAME})"), "function", None),
    (re.compile(rf"^\s*{_JS_EXPORT}(?:abstract\s+)?class\s+({_NAME})"), "class", "members"),
    (re.compile(rf"^\s*{_JS_EXPORT}interface\s+({_NAME})"), "class", None),
    (re.compile(rf"^\s*{_JS_EXPORT}(?:const\s+)?enum\s+({_NAME})"), "class", None),
    (re.compile(rf"^\s*{_JS_EXPORT}type\s+({_NAME})\s*(?:<[^=]*>)?\s*="), "class", None),
    (re.compile(rf"^\s*{_JS_EXPORT}(?:namespace|module)\s+({_NAME})\s*\{{"), "container", "namespace"),
    # `const f = (a) =>`, `= function`, `= x =>`; an unclosed "(" after "=" is
    # taken as a multi-line arrow parameter list.
    (
        re.compile(
            rf"^\s*{_JS_EXPORT}(?:const|let|var)\s+({_NAME})\s*(?::[^=]+)?=\s*(?:async\s+)?"
            rf"(?:function\b|(?:\([^)]*\)|{_NAME})\s*(?::[^=]*)?=>|\([^)]*$)"
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
            rf"^\s*{_JS_MODIFIERS}(#?{_NAME})\s*(?::[^=]+)?=\s*(?:async\s+)?"
            rf"(?:\([^)]*\)|{_NAME})\s*(?::[^=]*)?=>"
        ),
        "method",
        None,
    ),
    (re.compile(rf"^\s*{_JS_MODIFIERS}\*?\s*(#?{_NAME})\s*(?:<[^>()]*>)?\s*\("), "method", None),
]


# CommonJS and prototype code declares its API by assignment: `exports.parse = function`,
# `Router.prototype.route = function`, `res.json = function json(obj)` (express's response object).
_JS_ASSIGNED = re.compile(
    rf"^\s*((?:{_NAME}\.)+)({_NAME})\s*=\s*(?:async\s+)?"
    rf"(?:function\b|(?:\([^)]*\)|{_NAME})\s*(?::[^=]*)?=>)"
)
_JS_EXPORTS = frozenset({"exports", "module.exports"})
_JS_NAMED_FUNCTION = re.compile(rf"\s*=\s*(?:async\s+)?function\b\s*\*?\s*({_NAME})")
# A module whose API is one object literal: `module.exports = {`, `const proto = module.exports = {` (koa),
# `export default {`. Its functions are the literal's methods and function-valued properties.
_JS_EXPORTED_OBJECT = re.compile(
    rf"^\s*(?:(?:const|let|var)\s+{_NAME}\s*=\s*)?(?:(?:module\.)?exports\s*=\s*)+\{{|^\s*export\s+default\s+\{{"
)
# Only lines that are plainly functions: a literal's other entries may spread a call over several lines
# (`plugins: [\n  foo(),`), which a looser rule would take for a method.
_JS_OBJECT_MEMBER: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (re.compile(rf"^\s*(?:async\s+)?(?:[gs]et\s+)?\*?\s*({_NAME})\s*\([^)]*\)\s*\{{"), "function", None),
    # An arrow with a block body only: `isAbsolute: (p) => p[0] === '/',` ends at its comma, which the extent
    # scanner reads as a line that goes on.
    (
        re.compile(
            rf"^\s*({_NAME})\s*:\s*(?:async\s+)?(?:function\b|(?:\([^)]*\)|{_NAME})\s*(?::[^=]*)?=>\s*\{{)"
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


def _first_match(line: str, rules: list[tuple[re.Pattern[str], str, BodyKind]]) -> list[Decl]:
    """The first rule that matches wins: rules are ordered most specific first."""
    for pattern, kind, body in rules:
        match = pattern.match(line)
        if match:
            return [Decl(match.group(1), kind, match.start(1), body)]
    return []


def _js_classify(line: str, context: str, owner: str) -> list[Decl]:
    if context == "members":
        found = _first_match(line, _JS_MEMBER)
        return [d for d in found if d.name not in _JS_KEYWORDS]
    if context == "object":
        return [d for d in _first_match(line, _JS_OBJECT_MEMBER) if d.name not in _JS_KEYWORDS]
    if context == "top" and _JS_EXPORTED_OBJECT.match(line):
        return [Decl("", "container", line.index("{"), "object")]
    return _first_match(line, _JS_TOP) or (_js_assigned(line) if context == "top" else [])


_GO_METHOD = re.compile(rf"^func\s*\(\s*(?:{_NAME}\s+)?\*?\s*({_NAME})(?:\[[^\]]*\])?\s*\)\s*({_NAME})")
_GO_RULES: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (re.compile(rf"^func\s+({_NAME})"), "function", None),
    (re.compile(rf"^type\s+({_NAME})"), "class", None),
    (re.compile(rf"^const\s+({_NAME})\b"), "constant", None),
]


def _go_classify(line: str, context: str, owner: str) -> list[Decl]:
    # Go has no nesting of declarations: only column-0 top-level lines count.
    if context != "top":
        return []
    method = _GO_METHOD.match(line)
    if method:
        receiver, name = method.group(1), method.group(2)
        return [Decl(name, "method", method.start(2), None, f"{receiver}.{name}")]
    return _first_match(line, _GO_RULES)


_RUST_VIS = r"(?:pub(?:\s*\([^)]*\))?\s+)?"
_RUST_FN = re.compile(
    rf"^\s*{_RUST_VIS}(?:default\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+)?fn\s+({_NAME})"
)
_RUST_TOP: list[tuple[re.Pattern[str], str, BodyKind]] = [
    (_RUST_FN, "function", None),
    (re.compile(rf"^\s*{_RUST_VIS}(?:struct|enum|union|type)\s+({_NAME})"), "class", None),
    (re.compile(rf"^\s*{_RUST_VIS}(?:unsafe\s+)?(?:auto\s+)?trait\s+({_NAME})"), "class", "members"),
    (re.compile(rf"^\s*{_RUST_VIS}(?:const|static)\s+(?:mut\s+)?([A-Z][A-Z0-9_]*)\s*:"), "constant", None),
    (re.compile(rf"^\s*{_RUST_VIS}mod\s+({_NAME})\s*\{{"), "container", "namespace"),
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
    return _first_match(line, _RUST_TOP)


_JAVA_CLASS = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|protected|private|static|final|abstract|sealed|"
    rf"non-sealed|strictfp)\s+)*(?:class|interface|enum|record|@interface)\s+({_NAME})"
)
_JAVA_MODIFIERS = (
    r"(?:(?:public|protected|private|static|final|abstract|synchronized|native|default|strictfp)\s+)*"
)
_JAVA_METHOD = re.compile(
    rf"^\s*(?:@\w+(?:\([^)]*\))?\s+)*{_JAVA_MODIFIERS}(?:<[^>]*>\s*)?"
    rf"(?:([\w$][\w$.<>\[\],?]*(?:\s*<[^()]*>)?(?:\[\])*)\s+)?({_NAME})\s*\("
)
_JAVA_CONSTANT = re.compile(
    rf"^\s*{_JAVA_MODIFIERS}static\s+final\s+[\w$.<>\[\],? ]+?\s+([A-Z][A-Z0-9_]*)\s*[=;]"
)
_JAVA_NOT_TYPES = frozenset({"return", "new", "throw", "else", "case", "yield", "await"})


def _java_classify(line: str, context: str, owner: str) -> list[Decl]:
    decl = _JAVA_CLASS.match(line)
    if decl:
        return [Decl(decl.group(1), "class", decl.start(1), "members")]
    if context != "members":
        return []
    constant = _JAVA_CONSTANT.match(line)
    if constant:
        return [Decl(constant.group(1), "constant", constant.start(1))]
    method = _JAVA_METHOD.match(line)
    if not method:
        return []
    return_type, name = method.group(1), method.group(2)
    # Without a return type only a constructor (named after its class) counts;
    # anything else is a continuation line of a multi-line expression.
    if return_type is None and name != owner:
        return []
    if return_type in _JAVA_NOT_TYPES or name in _JS_KEYWORDS:
        return []
    return [Decl(name, "method", method.start(2))]


_CS_MODIFIERS = (r"(?:(?:public|private|protected|internal|static|sealed|abstract|partial|readonly|unsafe|new|"
                 r"virtual|override|async|extern|file|required|ref)\s+)*")
_CS_ATTRIBUTES = r"(?:\[[^\]]*\]\s*)*"
_CS_TYPE = re.compile(rf"^\s*{_CS_ATTRIBUTES}{_CS_MODIFIERS}(?:class|interface|struct|enum|"
                      rf"record(?:\s+(?:class|struct))?)\s+({_NAME})")
# A block namespace holds top-level-like declarations; a file-scoped one (`namespace Shop;`) opens no block.
_CS_NAMESPACE = re.compile(r"^\s*namespace\s+[\w.]+\s*(?:\{|$)")
# A type as a member's declaration writes it: Dictionary<string, int>, (int, string), int[]?, Task<bool>.
_CS_TYPE_REF = r"(?:\([^()]*\)|[\w.]+(?:\s*<[^()]*?>)?)(?:\s*\[[,\s]*\])*\??"
_CS_METHOD = re.compile(rf"^\s*{_CS_ATTRIBUTES}{_CS_MODIFIERS}(?:({_CS_TYPE_REF})\s+)?({_NAME})\s*"
                        r"(?:<[^>()]*>)?\s*\(")
_CS_PROPERTY = re.compile(rf"^\s*{_CS_ATTRIBUTES}{_CS_MODIFIERS}{_CS_TYPE_REF}\s+({_NAME})\s*(?:\{{|=>)")
_CS_CONSTANT = re.compile(rf"^\s*{_CS_MODIFIERS}const\s+[\w.<>\[\]?]+\s+({_NAME})\s*=")


def _csharp_classify(line: str, context: str, owner: str) -> list[Decl]:
    decl = _CS_TYPE.match(line)
    if decl:
        return [Decl(decl.group(1), "class", decl.start(1), "members")]
    if context in ("top", "namespace"):
        # Types in a namespace are named without it, as code and requirements name them (Cart.Add).
        return [Decl("namespace", "container", 0, "namespace", qualname="")] if _CS_NAMESPACE.match(line) else []
    if context != "members":
        return []
    constant = _CS_CONSTANT.match(line)
    if constant:
        return [Decl(constant.group(1), "constant", constant.start(1))]
    method = _CS_METHOD.match(line)
    if method:
        return_type, name = method.group(1), method.group(2)
        if (return_type is None and name != owner) or return_type in _JAVA_NOT_TYPES or name in _JS_KEYWORDS:
            return []
        return [Decl(name, "method", method.start(2))]
    prop = _CS_PROPERTY.match(line)
    return [Decl(prop.group(1), "method", prop.start(1))] if prop and prop.group(1) not in _JS_KEYWORDS else []


_KT_MODIFIERS = (r"(?:(?:public|private|protected|internal|open|abstract|sealed|data|enum|annotation|inner|value|"
                 r"inline|override|suspend|operator|infix|tailrec|external|lateinit|final|expect|actual)\s+)*")
_KT_ANNOTATIONS = r"(?:@[\w.]+(?:\([^)]*\))?\s+)*"
_KT_TYPE = re.compile(rf"^\s*{_KT_ANNOTATIONS}{_KT_MODIFIERS}(?:fun\s+)?(?:class|interface|object)\s+({_NAME})")
_KT_COMPANION = re.compile(rf"^\s*{_KT_MODIFIERS}companion\s+object\b\s*({_NAME})?")
# `fun name(`, `fun <T> name(`, an extension `fun String.name(`, a test named in backticks `fun `adds one`(`
_KT_FUN = re.compile(rf"^\s*{_KT_ANNOTATIONS}{_KT_MODIFIERS}fun\s+(?:<[^>]*>\s*)?(?:([\w.<>?]+)\.)?"
                     rf"({_NAME}|`[^`\n]+`)\s*\(")
_KT_CONSTANT = re.compile(rf"^\s*{_KT_MODIFIERS}const\s+val\s+({_NAME})")


def _kotlin_classify(line: str, context: str, owner: str) -> list[Decl]:
    decl = _KT_TYPE.match(line)
    if decl:
        return [Decl(decl.group(1), "class", decl.start(1), "members")]
    companion = _KT_COMPANION.match(line)
    if companion and context == "members":  # Foo.Companion.of: its members, named as Kotlin names them
        return [Decl(companion.group(1) or "Companion", "container", companion.start(), "members")]
    constant = _KT_CONSTANT.match(line)
    if constant:
        return [Decl(constant.group(1), "constant", constant.start(1))]
    fun = _KT_FUN.match(line)
    if not fun:
        return []
    receiver, name = fun.group(1), fun.group(2)
    kind = "method" if context == "members" else "function"
    return [Decl(name, kind, fun.start(2), qualname=f"{receiver}.{name}" if receiver and context == "top" else None)]


_PHP_ATTRIBUTES = r"(?:#\[[^\]]*\]\s*)*"  # #[Entity], #[Route('/')] before a declaration on its line
_PHP_TYPE = re.compile(rf"^\s*{_PHP_ATTRIBUTES}(?:(?:abstract|final|readonly)\s+)*(?:class|interface|trait|enum)\s+"
                       rf"({_NAME})")
_PHP_FUNCTION = re.compile(rf"^\s*{_PHP_ATTRIBUTES}(?:(?:public|private|protected|static|abstract|final)\s+)*"
                           rf"function\s+&?\s*({_NAME})\s*\(")


def _php_classify(line: str, context: str, owner: str) -> list[Decl]:
    decl = _PHP_TYPE.match(line)
    if decl:
        return [Decl(decl.group(1), "class", decl.start(1), "members")]
    function = _PHP_FUNCTION.match(line)
    if function:
        return [Decl(function.group(1), "method" if context == "members" else "function", function.start(1))]
    return []


_CLASSIFIERS: dict[str, Classifier] = {
    "javascript": _js_classify,
    "typescript": _js_classify,
    "go": _go_classify,
    "rust": _rust_classify,
    "java": _java_classify,
    "csharp": _csharp_classify,
    "kotlin": _kotlin_classify,
    "php": _php_classify,
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
