"""The module a requirement moves code into, when it says so: "Moved templating stuff into a separate module",
"Extract the retry loop into its own file", "Refactored the async parser out of JsonParser into a new class
JsonParserAsync", "Move parse_wheel and its helpers to utils.wheel". Pure.

Such a change creates a file, and the plan said so only when the requirement named a component kind ("a new retry
module"); on real commits that moved code out, the plan changed the existing files alone.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from wfqueue.analysis import RepoIndex
from wfqueue.providers.offline.changes import has_file

_VERB = (r"\b(?:mov(?:e|es|ed|ing)|extract(?:s|ed|ing)?|factor(?:s|ed|ing)?\s+out|split(?:s|ting)?|"
         r"refactor(?:s|ed|ing)?|pull(?:s|ed|ing)?\s+out|separat(?:e|es|ed|ing))\s+")
# "... X into its own file", "... X to a separate module" (what is moved ends before "from"/"out of" a file).
_OWN = re.compile(_VERB + r"(?:the\s+|all\s+|some\s+)?(.+?)\s+(?:(?:from|out\s+of)\s+\S+\s+)?(?:in)?to\s+"
                  r"(?:(?:its|their)\s+own\s+(?:file|module)|an?\s+(?:separate|new|dedicated|own)\s+(?:file|module))\b",
                  re.IGNORECASE)
# "... into a new class JsonParserAsync", "... into a new module called loaders": a name, not a word of the sentence.
_NEW_CLASS = re.compile(r"\b(?:in)?to\s+a\s+new\s+(?:class|module|file)\s+(?:(?:called|named)\s+`?([A-Za-z_][\w.]*)`?"
                        r"|`?((?:[A-Z][a-z0-9]+){2,}|[a-z][a-z0-9]*_[a-z0-9_]+|[A-Z][a-z0-9]+|[a-z]+(?=`))`?(?!\w))")
# "... into a separate module called hashing", "... its own file named proxies.py": the name given, whatever the
# words before it.
_CALLED = re.compile(r"\b(?:module|file|class)\s+(?:called|named)\s+`?([A-Za-z_][\w.]*)`?", re.IGNORECASE)
# "... to utils.wheel": a dotted module path, not a file name ("to config.py").
_DOTTED = re.compile(_VERB + r".+?\s+to\s+`?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)`?(?=[\s,;:]|\.?$)", re.IGNORECASE)
_FILE_EXTENSIONS = frozenset({"py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "go", "rs", "java", "kt", "rb",
                              "php", "cs", "swift", "c", "h", "cc", "cpp"})
# Words of what is moved that name no module ("templating stuff", "the helper functions").
_NOT_A_NAME = {"a", "an", "the", "new", "own", "separate", "dedicated", "stuff", "code", "logic", "functions",
               "function", "routines", "methods", "classes", "things", "bits", "parts", "process", "all", "some",
               "helpers", "helper", "related", "its", "their"}


def _words(text: str, skip: set[str]) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", text) if w.lower() not in skip]


def moved_module(index: RepoIndex, code: list[str], subject: str,
                 beside: Callable[[list[str]], str | None]) -> str | None:
    """The module ``subject`` (the requirement's first line) moves code into, or None. ``code``: the planned code
    files, most relevant first; ``beside``: names a new module from words, beside its closest relative among them
    (new_module.new_module_path's placing)."""
    if not re.search(_VERB, subject, re.IGNORECASE):
        return None
    dotted = _DOTTED.search(subject)
    if dotted and dotted.group(1).rsplit(".", 1)[1].lower() not in _FILE_EXTENSIONS:
        # A package the repository has (whole folder names), in the planned code's language.
        *package, module = dotted.group(1).split(".")
        extension = posixpath.splitext(code[0])[1] if code else ".py"
        folders = sorted({posixpath.dirname(f.path) for f in index.files if not f.is_test
                          and f.path.endswith(extension)
                          and posixpath.dirname(f.path).split("/")[-len(package):] == package},
                         key=lambda d: (len(d), d))
        if folders:
            path = posixpath.join(folders[0], module + extension)
            return None if has_file(index, path) else path
        return None
    called = _CALLED.search(subject)
    named = called or _NEW_CLASS.search(subject)
    if named:  # its name, without a file's extension ("urls.py")
        name = (named.group(1) if called else named.group(1) or named.group(2)).rstrip(".")
        stem, extension = posixpath.splitext(name)
        return beside(_words(stem if extension[1:].lower() in _FILE_EXTENSIONS else name, set()))
    moved = _OWN.search(subject)
    if moved:  # not a file named in it ("url_for from helpers.py"), nor what moving tests makes
        what = " ".join(w for w in moved.group(1).split() if not re.search(r"\.\w+$", w))
        words = _words(what, _NOT_A_NAME)[-2:]
        return beside(words) if words and not set(words) & {"test", "tests", "spec", "specs"} else None
    return None
