"""Line classifiers of the class-based curly-brace languages: Java, C#, Kotlin, PHP, Swift and Scala.

Each looks at one cleaned line in a context ("top" level, a "namespace" body, a type's "members") and reports
the declarations the line starts (wfqueue.analysis.brace_langs tracks the braces around them).
"""

from __future__ import annotations

import re

from wfqueue.analysis.brace_decl import KEYWORDS, NAME, NOT_TYPES, Decl


def _type_opened(pattern: re.Pattern[str], line: str) -> list[Decl]:
    """The type ``line`` declares with ``pattern`` (its name the first group; its members follow in its body),
    or []: how each of these languages' classifiers begins."""
    found = pattern.match(line)
    return [Decl(found.group(1), "class", found.start(1), "members")] if found else []


def _callable_kind(context: str) -> str:
    """A function declared in a type's body is one of its methods."""
    return "method" if context == "members" else "function"


_JAVA_CLASS = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|protected|private|static|final|abstract|sealed|"
    rf"non-sealed|strictfp)\s+)*(?:class|interface|enum|record|@interface)\s+({NAME})"
)
_JAVA_MODIFIERS = (
    r"(?:(?:public|protected|private|static|final|abstract|synchronized|native|default|strictfp)\s+)*"
)
_JAVA_METHOD = re.compile(
    rf"^\s*(?:@\w+(?:\([^)]*\))?\s+)*{_JAVA_MODIFIERS}(?:<[^>]*>\s*)?"
    rf"(?:([\w$][\w$.<>\[\],?]*(?:\s*<[^()]*>)?(?:\[\])*)\s+)?({NAME})\s*\("
)
_JAVA_CONSTANT = re.compile(
    rf"^\s*{_JAVA_MODIFIERS}static\s+final\s+[\w$.<>\[\],? ]+?\s+([A-Z][A-Z0-9_]*)\s*[=;]"
)


def java_classify(line: str, context: str, owner: str) -> list[Decl]:
    if opened := _type_opened(_JAVA_CLASS, line):
        return opened
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
    if return_type in NOT_TYPES or name in KEYWORDS:
        return []
    return [Decl(name, "method", method.start(2))]


_CS_MODIFIERS = (r"(?:(?:public|private|protected|internal|static|sealed|abstract|partial|readonly|unsafe|new|"
                 r"virtual|override|async|extern|file|required|ref)\s+)*")
_CS_ATTRIBUTES = r"(?:\[[^\]]*\]\s*)*"
_CS_TYPE = re.compile(rf"^\s*{_CS_ATTRIBUTES}{_CS_MODIFIERS}(?:class|interface|struct|enum|"
                      rf"record(?:\s+(?:class|struct))?)\s+({NAME})")
# A block namespace holds top-level-like declarations; a file-scoped one (`namespace Shop;`) opens no block.
_CS_NAMESPACE = re.compile(r"^\s*namespace\s+[\w.]+\s*(?:\{|$)")
# A type as a member's declaration writes it: Dictionary<string, int>, (int, string), int[]?, Task<bool>.
_CS_TYPE_REF = r"(?:\([^()]*\)|[\w.]+(?:\s*<[^()]*?>)?)(?:\s*\[[,\s]*\])*\??"
_CS_METHOD = re.compile(rf"^\s*{_CS_ATTRIBUTES}{_CS_MODIFIERS}(?:({_CS_TYPE_REF})\s+)?({NAME})\s*"
                        r"(?:<[^>()]*>)?\s*\(")
_CS_PROPERTY = re.compile(rf"^\s*{_CS_ATTRIBUTES}{_CS_MODIFIERS}{_CS_TYPE_REF}\s+({NAME})\s*(?:\{{|=>)")
_CS_CONSTANT = re.compile(rf"^\s*{_CS_MODIFIERS}const\s+[\w.<>\[\]?]+\s+({NAME})\s*=")


def csharp_classify(line: str, context: str, owner: str) -> list[Decl]:
    if opened := _type_opened(_CS_TYPE, line):
        return opened
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
        if (return_type is None and name != owner) or return_type in NOT_TYPES or name in KEYWORDS:
            return []
        return [Decl(name, "method", method.start(2))]
    prop = _CS_PROPERTY.match(line)
    return [Decl(prop.group(1), "method", prop.start(1))] if prop and prop.group(1) not in KEYWORDS else []


_KT_MODIFIERS = (r"(?:(?:public|private|protected|internal|open|abstract|sealed|data|enum|annotation|inner|value|"
                 r"inline|override|suspend|operator|infix|tailrec|external|lateinit|final|expect|actual)\s+)*")
_KT_ANNOTATIONS = r"(?:@[\w.]+(?:\([^)]*\))?\s+)*"
_KT_TYPE = re.compile(rf"^\s*{_KT_ANNOTATIONS}{_KT_MODIFIERS}(?:fun\s+)?(?:class|interface|object)\s+({NAME})")
_KT_COMPANION = re.compile(rf"^\s*{_KT_MODIFIERS}companion\s+object\b\s*({NAME})?")
# `fun name(`, `fun <T> name(`, an extension `fun String.name(`, a test named in backticks `fun `adds one`(`
_KT_FUN = re.compile(rf"^\s*{_KT_ANNOTATIONS}{_KT_MODIFIERS}fun\s+(?:<[^>]*>\s*)?(?:([\w.<>?]+)\.)?"
                     rf"({NAME}|`[^`\n]+`)\s*\(")
_KT_CONSTANT = re.compile(rf"^\s*{_KT_MODIFIERS}const\s+val\s+({NAME})")


def kotlin_classify(line: str, context: str, owner: str) -> list[Decl]:
    if opened := _type_opened(_KT_TYPE, line):
        return opened
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
    kind = _callable_kind(context)
    return [Decl(name, kind, fun.start(2), qualname=f"{receiver}.{name}" if receiver and context == "top" else None)]


_PHP_ATTRIBUTES = r"(?:#\[[^\]]*\]\s*)*"  # #[Entity], #[Route('/')] before a declaration on its line
_PHP_TYPE = re.compile(rf"^\s*{_PHP_ATTRIBUTES}(?:(?:abstract|final|readonly)\s+)*(?:class|interface|trait|enum)\s+"
                       rf"({NAME})")
_PHP_FUNCTION = re.compile(rf"^\s*{_PHP_ATTRIBUTES}(?:(?:public|private|protected|static|abstract|final)\s+)*"
                           rf"function\s+&?\s*({NAME})\s*\(")


def php_classify(line: str, context: str, owner: str) -> list[Decl]:
    if opened := _type_opened(_PHP_TYPE, line):
        return opened
    function = _PHP_FUNCTION.match(line)
    if function:
        return [Decl(function.group(1), _callable_kind(context), function.start(1))]
    return []


_SWIFT_ATTRIBUTES = r"(?:@\w+(?:\([^)]*\))?\s+)*"  # @MainActor, @objc(name), @discardableResult
_SWIFT_MODIFIERS = (r"(?:(?:public|private|fileprivate|internal|open|package|final|static|class|override|mutating|"
                    r"nonmutating|convenience|required|lazy|weak|unowned|dynamic|indirect|nonisolated|distributed|"
                    r"(?:private|fileprivate|internal|public)\(set\))\s+)*")
_SWIFT_TYPE = re.compile(rf"^\s*{_SWIFT_ATTRIBUTES}{_SWIFT_MODIFIERS}(?:class|struct|enum|protocol|actor)\s+"
                         rf"(?!(?:func|var|let|subscript|init)\b)({NAME})")  # not `class func` (a type method)
# `extension Cart`, `extension Array where Element: Item`, `extension Shop.Cart: Codable`: members of that type
_SWIFT_EXTENSION = re.compile(rf"^\s*{_SWIFT_ATTRIBUTES}{_SWIFT_MODIFIERS}extension\s+(?:{NAME}\.)*({NAME})")
_SWIFT_FUNC = re.compile(rf"^\s*{_SWIFT_ATTRIBUTES}{_SWIFT_MODIFIERS}func\s+({NAME})\s*(?:<[^>]*>\s*)?\(")
_SWIFT_INIT = re.compile(rf"^\s*{_SWIFT_ATTRIBUTES}{_SWIFT_MODIFIERS}(init)[?!]?\s*(?:<[^>]*>\s*)?\(")
# A computed property, whose body is code (`var total: Int {`, SwiftUI's `var body: some View {`); a stored one
# is data.
_SWIFT_PROPERTY = re.compile(rf"^\s*{_SWIFT_ATTRIBUTES}{_SWIFT_MODIFIERS}var\s+({NAME})\s*:[^={{]+\{{")


def swift_classify(line: str, context: str, owner: str) -> list[Decl]:
    if opened := _type_opened(_SWIFT_TYPE, line):
        return opened
    extension = _SWIFT_EXTENSION.match(line)
    if extension and context == "top":
        return [Decl(extension.group(1), "container", extension.start(1), "members")]
    kind = _callable_kind(context)
    function = _SWIFT_FUNC.match(line) or (_SWIFT_INIT.match(line) if context == "members" else None)
    if function:
        return [Decl(function.group(1), kind, function.start(1))]
    prop = _SWIFT_PROPERTY.match(line)
    return [Decl(prop.group(1), kind, prop.start(1))] if prop and context == "members" else []


_SCALA_MODIFIERS = (r"(?:(?:private|protected)(?:\[\w+\])?\s+|(?:final|sealed|abstract|implicit|lazy|override|"
                    r"case|inline|transparent|open|opaque)\s+)*")
_SCALA_ANNOTATIONS = r"(?:@\w+(?:\([^)]*\))?\s+)*"
_SCALA_TYPE = re.compile(rf"^\s*{_SCALA_ANNOTATIONS}{_SCALA_MODIFIERS}(?:class|trait|object|enum)\s+({NAME})")
_SCALA_DEF = re.compile(rf"^\s*{_SCALA_ANNOTATIONS}{_SCALA_MODIFIERS}def\s+({NAME})\b")
_SCALA_CONSTANT = re.compile(rf"^\s*{_SCALA_MODIFIERS}(?:final\s+)?val\s+([A-Z][A-Z0-9_]+)\s*[:=]")


def scala_classify(line: str, context: str, owner: str) -> list[Decl]:
    if opened := _type_opened(_SCALA_TYPE, line):
        return opened
    if context == "top" and line.lstrip().startswith("package ") and line.rstrip().endswith("{"):
        return [Decl("package", "container", 0, "namespace", qualname="")]  # a package block: no name part
    definition = _SCALA_DEF.match(line)
    if definition:
        return [Decl(definition.group(1), _callable_kind(context), definition.start(1))]
    constant = _SCALA_CONSTANT.match(line)
    return [Decl(constant.group(1), "constant", constant.start(1))] if constant else []
