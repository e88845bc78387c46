"""A requirement that asks only for documentation ("Document the pool limits in README.md", "Update the README
to explain ...", "docs: ..."): the documents it is about and what their tasks say. Pure.

Such a plan changes no code and writes no test: a task per document, extended or created, naming the code it
describes so that the agent reads it first. Its verification is the suite, which a document cannot break and
a stray edit to the code can. (Docstrings and comments are documentation in the code: those plans change the
code files, without a test task; see lite_plan.)
"""

from __future__ import annotations

import posixpath
import re

from wfqueue.analysis import RepoIndex, tokenize
from wfqueue.providers.offline.changes import named_code, requirement_brief
from wfqueue.providers.offline.file_task import code_and_symbols, file_task
from wfqueue.unified_task import UnifiedTask

DOC_EXTENSIONS = (".md", ".markdown", ".rst", ".txt", ".adoc")
# A document the requirement names by path or file name ("docs/advanced/timeouts.md", "README.md").
_NAMED_DOC = re.compile(r"(?<![\w/.-])(?:\./)?((?:[\w.-]+/)*[\w-][\w.-]*\.(?:md|markdown|rst|txt|adoc))\b",
                        re.IGNORECASE)
_README = re.compile(r"\breadme\b", re.IGNORECASE)
_CHANGELOG = re.compile(r"\b(?:change\s*log|release\s+notes)\b", re.IGNORECASE)
_CHANGELOG_NAMES = ("changelog", "changes", "history", "news", "releases")
# Words every document shares with any requirement about documents: they choose no document.
_DOC_WORDS = frozenset(tokenize("document documentation docs doc readme guide explain describe update add write "
                                "section page usage example examples"))


def is_document(path: str) -> bool:
    """A Markdown, reStructuredText, AsciiDoc or text file that people read: not a licence, a requirements
    list, nor a hidden folder's template (.github/ISSUE_TEMPLATE/...); a project's documents GitHub shows from
    .github/ itself (.github/CONTRIBUTING.md, SECURITY.md) are (a fix of them created docs/CONTRIBUTING.md)."""
    hidden = (path.startswith(".") and not _GITHUB_DOCUMENT.match(path)) or "/." in path
    return (posixpath.splitext(path)[1].lower() in DOC_EXTENSIONS and not hidden
            and not posixpath.basename(path).lower().startswith(("license", "copying", "requirements")))


_GITHUB_DOCUMENT = re.compile(r"^\.github/[^/]+$")


def _named(index: RepoIndex, requirement: str, documents: list[str]) -> list[tuple[str, bool]]:
    """Documents the requirement names: existing ones (a bare name when one file has it), and new ones where it
    says (a new folder is no obstacle for a document; a bare new name goes in docs/ when the project keeps its
    docs there, else at the top)."""
    existing = {f.path for f in index.files}
    folders = {posixpath.dirname(p) for p in existing}
    found: list[tuple[str, bool]] = []
    for match in _NAMED_DOC.finditer(requirement):
        path = match.group(1)
        if path not in existing and "/" not in path:
            same_name = [p for p in documents if posixpath.basename(p).lower() == path.lower()]
            if len(same_name) > 1:
                continue  # "index.md" of several folders: which one is not said
            path = same_name[0] if same_name else (
                f"docs/{path}" if any(f == "docs" or f.startswith("docs/") for f in folders) else path)
        if ".." in path.split("/") or not is_document(path):
            continue
        if path not in (p for p, _ in found):
            found.append((path, path in existing))
    return found


# Where a change asks its documentation to go: "..., document it in README.md", "mention the option in the
# README", "add it to docs/cli.md", "update CHANGELOG.md" / "update the changelog".
_DOC_TARGET = r"(?P<doc>[\w./-]+\.(?:md|markdown|rst|adoc)|readme|change\s*log)\b"
_DOCUMENTED_IN = re.compile(r"\b(?:document|describe|explain|mention|note|list|add)\b(?:[^.;,\n]|\.(?=\S))*?"
                            rf"\b(?:in|to|into)\s+(?:the\s+)?{_DOC_TARGET}", re.IGNORECASE)
_UPDATED = re.compile(rf"\bupdate\s+(?:the\s+)?{_DOC_TARGET}", re.IGNORECASE)


def documents_beside_change(index: RepoIndex, requirement: str) -> list[tuple[str, bool]]:
    """The documents a change asks to update as well: where it says to document, describe, explain, mention,
    note, list or add something ("..., document it in README.md", "mention it in the README"), or a document it
    says to update ("update the changelog"). A document named otherwise ("read the front matter of
    README.md", "list the headings of README.md") is the change's data, not its docs."""
    documents = sorted(f.path for f in index.files if is_document(f.path))
    found: list[tuple[str, bool]] = []
    for match in [*_DOCUMENTED_IN.finditer(requirement), *_UPDATED.finditer(requirement)]:
        target = match.group("doc")
        if target.lower() == "readme":
            readme = _at_top(documents, ("readme",))
            place = [(readme, True) if readme else ("README.md", False)]
        elif re.fullmatch(r"change\s*log", target, re.IGNORECASE):
            changelog = _at_top(documents, _CHANGELOG_NAMES)
            place = [(changelog, True) if changelog else ("CHANGELOG.md", False)]
        else:
            place = _named(index, target, documents)
        found += [entry for entry in place if entry not in found]
    return found


def _at_top(documents: list[str], names: tuple[str, ...]) -> str | None:
    """The top-level document whose name (without extension) is one of ``names``, Markdown first."""
    top = [p for p in documents if "/" not in p and posixpath.splitext(p)[0].lower() in names]
    return min(top, key=lambda p: (not p.lower().endswith(".md"), p), default=None)


def documents_to_write(index: RepoIndex, requirement: str) -> list[tuple[str, bool]]:
    """The documents a documentation requirement changes, as (path, exists): those it names; else the README or
    the changelog when it says so; else the document sharing most of its words (the README on a tie, the
    top-level one first); else the README, created when there is none."""
    documents = sorted(f.path for f in index.files if is_document(f.path))
    named = _named(index, requirement, documents)
    if named:
        return named
    readme = _at_top(documents, ("readme",))
    if _CHANGELOG.search(requirement):
        changelog = _at_top(documents, _CHANGELOG_NAMES)
        return [(changelog, True) if changelog else ("CHANGELOG.md", False)]
    if not _README.search(requirement):
        words = set(tokenize(requirement)) - _DOC_WORDS

        def shared(path: str) -> int:
            # A page named after the topic (docs/advanced/proxies.md for proxies) before one mentioning it.
            return 3 * len(words & set(tokenize(path))) + len(words & set(index.doc_tokens.get(path, [])))

        # The changelog mentions every topic once: it is the place only when the requirement says so.
        topical = [p for p in documents if posixpath.splitext(posixpath.basename(p))[0].lower() not in _CHANGELOG_NAMES]
        best = max(topical, key=lambda p: (shared(p), p == readme, -p.count("/"), p), default=None)
        if best is not None and shared(best) > 0:
            return [(best, True)]
    return [(readme, True) if readme else ("README.md", False)]


def _description(index: RepoIndex, requirement: str, document: str, exists: bool, code: list[str]) -> str:
    """What a documentation task does: the requirement, the document, and the code to read first (unchanged)."""
    brief = requirement_brief(requirement)
    where = code_and_symbols(index, requirement, code)
    return (f"{brief[:1].upper() + brief[1:]}: in {document} ({'extended' if exists else 'a new document'})."
            + (f" Read the code it describes first, {where}; the code does not change." if code else ""))


def docs_task(index: RepoIndex, requirement: str, task_id: str, path: str, exists: bool,
              code: list[str]) -> UnifiedTask:
    """The task writing the document ``path`` about ``code``, verified by the suite (which a stray edit to the
    code fails)."""
    return file_task(index, requirement, task_id, path, exists, code, kind="docs",
                     description=_description(index, requirement, path, exists, code),
                     verification=index.test_command)


def change_docs_task(index: RepoIndex, requirement: str, task_id: str, path: str, exists: bool,
                     changed: list[str]) -> UnifiedTask:
    """The task updating the document ``path`` for a change to ``changed`` (the caller makes it wait for the
    change: it documents what the change made)."""
    brief = requirement_brief(requirement)
    task = file_task(index, requirement, task_id, path, exists, [], kind="docs", verification=index.test_command,
                     description=f"{brief[:1].upper() + brief[1:]}: update {path} for it"
                                 + (f", once {', '.join(changed[:3])} carry the change." if changed else "."))
    return task.model_copy(update={"focus_paths": [path, *changed[:3]], "scope": ", ".join([path, *changed[:3]])})


# Criteria that need a test of the change: documentation in the code has none.
_TEST_CRITERIA = ("fails without the change", "finds a test using it")


def as_docstrings_task(task: UnifiedTask) -> UnifiedTask:
    """A change task of a docstrings requirement: documentation, checked by the suite still passing (no test of
    the change is written)."""
    criteria = [c for c in task.convergence.criteria if not any(m in c for m in _TEST_CRITERIA)]
    return task.model_copy(update={"type": "docs", "convergence": task.convergence.model_copy(
        update={"criteria": criteria})})


def docstrings_scope(index: RepoIndex, requirement: str, ranked: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The files a docstrings requirement changes: the code it names (changes.named_code), not every module the
    localizer ranks beside it ("Add docstrings to the router" is router.py, not the server using it)."""
    keep = set(named_code(index, requirement, [p for p, _ in ranked]))
    return [(p, s) for p, s in ranked if p in keep] or ranked

