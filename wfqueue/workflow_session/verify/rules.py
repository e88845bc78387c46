"""The fixed rules behind `wfqueue verify`, and the checks that are nothing but rules (tiers 3 and 4).

Shared by ``wfqueue.workflow_session.verify.checks``: the dimension table and ``finding``, how a task's
changed paths and text are read, goal coverage, which constraint text forbids which path,
and when a criterion is testable. Pure functions of text and of the loaded VerifyInput.

- F specification: criteria are testable (a number, a `command`, a path or identifier,
  or an observable verb without vague words); verification and definition of done are
  not placeholders; focus is not only directories/globs.
- G duplication: tasks with the same title terms; a file changed by 3 or more tasks.
- H feasibility: a file to create already exists; verification that execution would not
  run (not a known tool, not marked manual); oversized tasks.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from wfqueue.analysis import tokenize
from wfqueue.plan_check import repo_relative
from wfqueue.sandboxed_commands import KNOWN_TOOLS, refusal, starts_with_known_tool
from wfqueue.tasks_file import LEGACY_VERIFICATION
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import Finding

if TYPE_CHECKING:  # annotations only: verify_checks imports this module
    from wfqueue.workflow_session.verify.checks import VerifyInput

DIMENSIONS: dict[str, tuple[str, int]] = {
    "A": ("User Intent Alignment", 1), "B": ("Requirements Coverage", 1), "C": ("Consistency", 1),
    "I": ("Constraints Compliance", 1), "D": ("Dependency Integrity", 2), "E": ("Synthesis Alignment", 2),
    "J": ("N+1 Context", 2), "F": ("Task Specification Quality", 3), "G": ("Duplication", 4),
    "H": ("Feasibility", 4),
}
CONTROL_ARTIFACTS = ("plan.json", "IMPL_PLAN.md", "TODO_LIST.md")  # missing -> C; others -> E
MANY_TASKS_PER_FILE = 3
MAX_FILES_PER_TASK = 8
_PLACEHOLDER = re.compile(r"^\W*(tbd|todo|tba|n/?a|none|null|-+|\?+|\.\.\.|fixme|xxx)?\W*$", re.I)
_PROHIBIT = re.compile(
    r"\b(do not|don't|dont|must not|mustn't|should not|shouldn't|never|avoid|no changes? to|"
    r"without (?:modifying|changing|touching|editing)|not be (?:modified|changed|touched|edited)|read-only|frozen)\b"
    r"|\b(?:keep|leave)\b.*\b(?:unchanged|untouched|intact|alone|as is)\b", re.I)
# Clauses end at ";", ". ", "but", "instead", and at ",/and/then" before a new instruction, so
# "keep a.py unchanged and add b.py" forbids a.py only.
_CLAUSE = re.compile(r";|\.\s|\bbut\b|\binstead\b|(?:,|\band\b|\bthen\b)\s*(?=(?:then\s+)?(?:add|create|use|put|"
                     r"implement|write|extend|wrap|move|introduce|place|update|modify|change|edit|do not|don't|never|"
                     r"avoid)\b)", re.I)
# A path: has a "/", or a name with an extension ("e.g"/"i.e": one-letter name and extension, are not).
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.*-]*|[\w*-]{2,}\.[A-Za-z][A-Za-z0-9]{0,5}|"
                   r"[\w*-]\.[A-Za-z][A-Za-z0-9]{1,5})(?![\w/-])")
_VAGUE = re.compile(r"\b(properly|correctly|works?|working|as expected|good|better|clean|robust|efficient|"
                    r"user[- ]friendly|appropriate(ly)?|reasonabl[ey]|nice|fast|improved?|well|smooth(ly)?|"
                    r"optimi[sz]ed|seamless(ly)?|adequate(ly)?)\b", re.I)
_OBSERVABLE = re.compile(r"\b(pass(es)?|returns?|raises?|exits?|prints?|contains?|exists?|equals?|match(es)?|"
                         r"implements?|responds?|logs?|rejects?|accepts?|fails?|succeeds?|shows?|displays?|emits?|"
                         r"writes?|reads?|creates?|deletes?|covers?|keeps?|stores?|sends?|retries|times? out|"
                         r"validates?|calls?|uses?|provides?|reports?|lists?|blocks?|limits?)\b", re.I)
# A word as written: letters and digits of any script (tokenize then splits it into its terms).
_WORD_RUN = re.compile(r"[^\W_]+")
_ANCHOR = re.compile(r"\d|`[^`]+`|[\w-]+/[\w.-]+|\b\w+\.[A-Za-z]{1,5}\b|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w*\b")


# No key term to look for (a goal of stopwords, or in a script tokenize does not split): coverage cannot be measured,
# and must not read as 100 % GREEN.
UNMEASURED = "UNMEASURED"


class Coverage(BaseModel):
    percent: float  # 0.0 when UNMEASURED
    colour: str
    terms: list[str]  # the goal's key words, as the goal wrote them
    missing: list[str]  # those no task addresses, as written


def finding(dim: str, severity: str, location: list[str], summary: str, recommendation: str) -> Finding:
    return Finding(id="", dimension=dim, dimension_name=DIMENSIONS[dim][0], severity=severity,
                   location=location, summary=summary, recommendation=recommendation)


# -- task text, paths and coverage -------------------------------------------------------------


def goal_of(inp: VerifyInput) -> str:
    return (inp.session.structured.goal if inp.session.structured else "") or inp.session.description


def key_terms(text: str) -> list[str]:
    """Stems, for matching: "caching" and "cache" meet as "cach". Never shown to the user (see term_words).

    Numbers are left out (tokenize splits them from the letters around them): mostly examples, such as the
    pieces of "2025-01-01T10:00:00+02:00" or "[10, 30]", that a task need not repeat; a status code such as
    429 goes uncounted with them."""
    return list(dict.fromkeys(t for t in tokenize(text) if not t.isdigit()))


def term_words(text: str) -> dict[str, str]:
    """Each key term of ``text`` -> the word of ``text`` it came from, as written ("cach" -> "caching").

    A word is a run of letters and digits, so an identifier such as "RateLimiter" is shown whole for both of
    its terms; each term keeps the first word that gave it."""
    words: dict[str, str] = {}
    for word in _WORD_RUN.findall(text):
        for term in tokenize(word):
            words.setdefault(term, word)
    return words


def task_text(t: UnifiedTask) -> str:
    return " ".join([t.title, t.description, *t.convergence.criteria])


def norm_text(text: str) -> str:
    return " ".join(text.replace("\\|", "|").split()).lower()


def changes(t: UnifiedTask) -> list[tuple[str, str]]:
    """(repo-relative path, action) the task changes: files[], else its focus paths (modified)."""
    pairs = [(f.path, f.action) for f in t.files] or [(p, "modify") for p in t.focus_paths]
    return [(repo_relative(p) or p, action) for p, action in pairs]


def coverage_colour(percent: float) -> str:
    return "GREEN" if percent >= 90 else "YELLOW" if percent >= 75 else "RED"


def compute_coverage(inp: VerifyInput) -> Coverage:
    """Share of the goal's key terms some task mentions. Matched by stem, reported as the goal's words."""
    goal = goal_of(inp)
    terms = key_terms(goal)
    if not terms:
        return Coverage(percent=0.0, colour=UNMEASURED, terms=[], missing=[])
    planned = set(tokenize(" ".join(task_text(t) for t in inp.tasks)))
    missing = [term for term in terms if term not in planned]
    percent = 100.0 * (len(terms) - len(missing)) / len(terms)
    words = term_words(goal)

    def shown(stems: list[str]) -> list[str]:
        # Two terms of one word ("RateLimiter") show it once.
        return list(dict.fromkeys(words.get(stem, stem) for stem in stems))

    return Coverage(percent=round(percent, 1), colour=coverage_colour(percent), terms=shown(terms),
                    missing=shown(missing))


def is_under(path: str, names: Iterable[str]) -> bool:
    return any(path == n or path.startswith(n + "/") or ("/" not in n and path.rsplit("/", 1)[-1] == n)
               for n in names)


def forbidden_paths(text: str) -> list[str]:
    """Paths a constraint forbids changing: path-like words in a clause that prohibits (see _PROHIBIT)."""
    found: list[str] = []
    for clause in _CLAUSE.split(text):
        if _PROHIBIT.search(clause):
            found += [m.rstrip(".") for m in _PATH.findall(clause.replace("`", " "))]
    return list(dict.fromkeys(found))


def _violates(path: str, forbidden: str) -> bool:
    rule = repo_relative(forbidden) or forbidden
    if any(c in rule for c in "*?["):
        return fnmatch.fnmatch(path, rule) or fnmatch.fnmatch(path.rsplit("/", 1)[-1], rule)
    return is_under(path, [rule.rstrip("/")])


def forbidden_changes(inp: VerifyInput, rules: list[tuple[str, str]]) -> list[tuple[UnifiedTask, str, str, str]]:
    """(task, path, rule text, source) for each task change a (text, source) rule forbids."""
    hits = []
    for text, source in rules:
        for forbidden in forbidden_paths(text):
            for t in inp.tasks:
                for path, _action in changes(t):
                    if _violates(path, forbidden):
                        hits.append((t, path, text, source))
    return hits


# -- tiers 3 and 4 ----------------------------------------------------------------------------


def is_testable(criterion: str) -> bool:
    """A number, a `command`, a path or code identifier, or an observable verb with no vague word."""
    return bool(_ANCHOR.search(criterion)) or (bool(_OBSERVABLE.search(criterion)) and not _VAGUE.search(criterion))


def check_specification(inp: VerifyInput) -> list[Finding]:
    """F: every task says precisely what to change and how to check it."""
    out: list[Finding] = []
    for t in inp.tasks:
        where = [f"task:{t.id}"]
        c = t.convergence
        blank = [x for x in c.criteria if _PLACEHOLDER.match(x)]
        vague = [x for x in c.criteria if not _PLACEHOLDER.match(x) and not is_testable(x)]
        if blank:
            out.append(finding("F", "MEDIUM", where, f"{t.id} has {len(blank)} empty criterion/criteria",
                               "write 1-5 testable criteria"))
        if vague:
            out.append(finding("F", "MEDIUM", where, f"{t.id} criteria not testable: {'; '.join(vague)}",
                               "name a number, command, file or observable result in each criterion"))
        if _PLACEHOLDER.match(c.verification):
            out.append(finding("F", "MEDIUM", where, f"{t.id} has no verification ({c.verification!r})",
                               "give a test command or manual steps"))
        if _PLACEHOLDER.match(c.definition_of_done):
            out.append(finding("F", "MEDIUM", where, f"{t.id} has no definition of done",
                               "state when the task is done"))
        concrete = [f.path for f in t.files if not any(ch in f.path for ch in "*?[") and not inp.is_dir(f.path)]
        if not t.focus_paths and not t.files:
            out.append(finding("F", "MEDIUM", where, f"{t.id} names no file to change", "add focus_paths and files[]"))
        elif t.focus_paths and not concrete and all(any(ch in p for ch in "*?[") or p.endswith("/") or inp.is_dir(p)
                                                    for p in t.focus_paths):
            out.append(finding("F", "MEDIUM", where, f"{t.id} focus paths are only directories or globs: "
                               f"{', '.join(t.focus_paths)}", "name the files to change"))
    return out


def check_duplication(inp: VerifyInput) -> list[Finding]:
    """G: no task repeats another; no file is churned by many tasks."""
    out: list[Finding] = []
    groups: dict[frozenset[str], list[str]] = {}
    for t in inp.tasks:
        terms = frozenset(tokenize(t.title))
        if terms:
            groups.setdefault(terms, []).append(t.id)
    for ids in groups.values():
        if len(ids) > 1:
            out.append(finding("G", "LOW", [f"task:{i}" for i in ids], f"tasks {', '.join(ids)} have the same title "
                               "terms", "merge them or make each title say what differs"))
    users: dict[str, list[str]] = {}
    for t in inp.tasks:
        for path in dict.fromkeys(p for p, _ in changes(t)):
            users.setdefault(path, []).append(t.id)
    for path, ids in users.items():
        if len(ids) >= MANY_TASKS_PER_FILE:
            out.append(finding("G", "LOW", [f"task:{i}" for i in ids], f"{path} is changed by {len(ids)} tasks "
                               f"({', '.join(ids)})", "group the changes to this file in fewer tasks"))
    return out


def auto_runnable(verification: str) -> bool:
    """Whether execution would run this command (``wfqueue.sandboxed_commands.parse_command`` accepts it)."""
    return refusal(verification) is None


def check_feasibility(inp: VerifyInput) -> list[Finding]:
    """H: each task can be carried out and checked as written."""
    out: list[Finding] = []
    for t in inp.tasks:
        where = [f"task:{t.id}"]
        for path in [p for p, a in changes(t) if a == "create" and inp.exists(p)]:
            out.append(finding("H", "LOW", where, f"{t.id} creates {path}, which already exists",
                               "use action modify, or pick a new path"))
        v = t.convergence.verification.strip()
        refused = refusal(v)
        if refused is not None and starts_with_known_tool(v):
            # A test command with something attached (``pytest; rm -rf ~``, ``make > /etc/x``): never run.
            out.append(finding("H", "HIGH", where, f"execution will refuse {t.id}'s verification: {refused.message}",
                               refused.hint or "make it one command inside the repository"))
        elif refused is not None and not (v.lower().startswith("manual") or v == LEGACY_VERIFICATION
                                          or _PLACEHOLDER.match(v)):
            out.append(finding("H", "LOW", where, f"execution will not run {t.id}'s verification {v!r}",
                               f"start it with one of {', '.join(KNOWN_TOOLS)}, or prefix manual steps with 'manual:'"))
        files = len({path for path, _ in changes(t)})  # files[] holds one entry per symbol changed in a file
        if files > MAX_FILES_PER_TASK or (t.effort == "small" and files > 3):
            out.append(finding("H", "LOW", where, f"{t.id} changes {files} files (effort {t.effort or '-'})",
                               "split the task or raise its effort"))
    return out
