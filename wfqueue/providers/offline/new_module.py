"""Where a module the requirement asks for goes: one it names by path, a component it names ("a new
RateLimiter class"), or one code is moved into ("... into a separate module"). Pure.

The offline planners (collab understanding, lite plans, workflow sessions) plan such a module as a file to
create, beside its closest relative among the files the requirement touches, named in its siblings' style.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter

from wfqueue.analysis import RepoIndex
from wfqueue.analysis.files import TEST_FOLDERS, is_test_path
from wfqueue.analysis.roles import file_role
from wfqueue.providers.offline.changes import CONVENTIONAL_PREFIX, has_file, is_code, named_paths
from wfqueue.providers.offline.moved_code import moved_module

_KINDS = ("module", "class", "component", "backend", "plugin", "command", "adapter", "middleware", "handler",
          "provider", "serializer", "driver", "transport", "helper", "extension", "service", "package", "store",
          "renderer", "binding", "codec", "encoder", "decoder", "formatter", "exporter", "loader", "validator",
          "parser", "reporter")
# "add a RateLimiter class", "a new `retry` module", "new redis backend": one or two words before the kind,
# the last part of a qualified name ("a Rack::Protection::PermissionsPolicy middleware"). Not "add docstrings to
# middleware.py" nor "add logging to the store": a preposition names where, not the component, and a kind
# followed by an extension is a file's name.
_WORD = r"(?!(?:to|for|of|in|on|into|onto|with|from|at|by|the)\b)[A-Za-z][\w-]*"
_COMPONENT = re.compile(
    r"\b(?:new\s+|(?:add|adds|added|adding|create|creates|introduce|introduces)\s+(?:an?\s+|the\s+)?(?:new\s+)?)"
    rf"`?(?:[A-Za-z]\w*(?:::|\.))*({_WORD}(?:\s+{_WORD})?)`?\s+(" + "|".join(_KINDS) + r")\b(?!\.\w)",
    re.IGNORECASE,
)
_FILLER = {"a", "an", "the", "new", "own", "separate", "dedicated", "small", "simple", "missing"}
# Words after a component that place it in code that exists ("... next to the existing redirect helper").
_IN_EXISTING = re.compile(r"\b(?:next to|beside|alongside|inside|into|in)\s+(?:the\s+)?existing\b", re.IGNORECASE)


def named_component(index: RepoIndex, requirement: str) -> tuple[list[str], str] | None:
    """The new component the requirement names, as (its words, its kind), when the code lacks it.

    Only a component the requirement asks for by name gets a module: loose new words in a
    fix ("mistake", "budget") never do; nor one it places in existing code ("a redirect_permanent helper ...,
    next to the existing redirect helper": a method beside a method)."""
    existing = {re.sub(r"[^a-z0-9]", "", s.name.lower()) for symbols in index.symbols.values() for s in symbols}
    existing |= {re.sub(r"[^a-z0-9]", "", posixpath.basename(f.path).split(".", 1)[0].lower()) for f in index.files}
    for match in _COMPONENT.finditer(requirement):
        words = [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", match.group(1))
                 if w.lower() not in _FILLER]
        clause = re.split(r"[.;\n]", requirement[match.end():], maxsplit=1)[0]
        if words and "".join(words) not in existing and not _IN_EXISTING.search(clause):
            return words, match.group(2).lower()
    return None


def _styled(words: list[str], like: str, siblings: list[str] | None = None) -> str:
    """A module name from ``words`` in the naming style of the sibling files (``siblings``, the files of its
    folder and language; else ``like`` alone): the style most of them use, of several words (zod's core/ names
    files to-json-schema.ts: one sibling, compile.ts, gave toZod.ts)."""
    if like.endswith((".py", ".pyi", ".rb", ".rs")):
        return "_".join(words)
    stems = [posixpath.basename(p).split(".", 1)[0] for p in siblings or [like]]
    styles = Counter("snake" if "_" in stem.strip("_") else "kebab" if "-" in stem else
                     "pascal" if stem[:1].isupper() else "camel" if any(c.isupper() for c in stem) else None
                     for stem in stems)
    styles.pop(None, None)
    style = styles.most_common(1)[0][0] if styles else "pascal" if posixpath.basename(like)[:1].isupper() else "camel"
    if style == "snake":
        return "_".join(words)
    if style == "kebab":
        return "-".join(words)
    if style == "pascal":
        return "".join(w.capitalize() for w in words)
    return words[0] + "".join(w.capitalize() for w in words[1:])


def named_new_path(index: RepoIndex, requirement: str) -> str | None:
    """A source file the requirement names that the repository lacks, in a folder it has: the module it asks
    for ("an exponential backoff helper in rq/backoff.py"), by the name it gave. Not a test file (the test
    task places those) nor a path given as an example."""
    return next((path for path, exists in named_paths(index, requirement) if not exists and not is_test_path(path)),
                None)


def new_module_path(index: RepoIndex, focus_paths: list[str], requirement: str) -> str | None:
    """Where the new component the requirement names would go: the missing file it names, else named after
    the component, beside its closest relative among ``focus_paths`` (the file whose path shares most of its
    words, the most relevant one on a tie); None when the requirement names no new component."""
    named = named_new_path(index, requirement)
    if named is not None:
        if "/" in named:
            return named
        # A bare name goes beside the most relevant code file of its language (rq/backoff.py for "backoff.py").
        extension = posixpath.splitext(named)[1]
        relative = next((p for p in focus_paths if p.endswith(extension) and is_code(index, p)), None)
        return posixpath.join(posixpath.dirname(relative), named) if relative else named
    component = named_component(index, requirement)
    code = [p for p in focus_paths if is_code(index, p)]
    if not code:
        return None
    if component is None:  # code it moves into a module of its own ("... into its own file")
        first_line = requirement.strip().splitlines()[0] if requirement.strip() else ""
        subject = " ".join(CONVENTIONAL_PREFIX.sub("", first_line).split())
        return moved_module(index, code, subject, lambda words: _module_beside(index, code, words))
    words, kind = component
    return _module_beside(index, code, words, {kind})


def _module_beside(index: RepoIndex, code: list[str], words: list[str], kind: set[str] | None = None) -> str | None:
    """A new module named from ``words`` beside its closest relative among ``code`` (the file whose path shares most
    of its words and ``kind``, the most relevant on a tie), in its siblings' naming style. Product code only (not a
    spec helper the ranking offered: express's spec/lib/jspec.js); a word naming its folder is left out ("the new
    flask run module" is flask/run.py). None when that file exists."""
    wanted = set(words) | (kind or set())
    code = [p for p in code if p.split("/", 1)[0] not in TEST_FOLDERS and file_role(p, is_test_path(p)) == "source"]
    if not code:
        return None
    relative = max(code, key=lambda p: (len(wanted & set(re.findall(r"[a-z0-9]+", p.lower()))), -code.index(p)))
    extension = posixpath.splitext(relative)[1] or ".py"
    folder = posixpath.dirname(relative)
    in_folder = {part.lower() for part in folder.split("/") if part}
    words = [w for w in words if w not in in_folder] or words
    siblings = [f.path for f in index.files if posixpath.dirname(f.path) == folder and f.path.endswith(extension)
                and not f.is_test]
    path = posixpath.join(folder, _styled(words, relative, siblings) + extension)
    return None if has_file(index, path) else path
