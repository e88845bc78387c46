"""Per-file planning decisions shared by the offline planners (collab areas, lite plans). Pure.

Which symbols of a file a requirement touches, how risky and large a change is, the paths and names it
gives, a task's title and criteria, and the order in which files should change (a module after the modules it
imports). Where a new module goes is new_module's.
"""

from __future__ import annotations

import posixpath
import re
import shlex

from wfqueue.analysis import RepoIndex, code_symbols, fan_in, rank_symbols, test_command_for, tokenize
from wfqueue.analysis.files import TEST_FOLDERS, is_test_path
from wfqueue.analysis.localize import named_identifiers
from wfqueue.analysis.symbols import Symbol
from wfqueue.analysis.testmap import PACKAGE_FILES, subject_stem, tested_stem
from wfqueue.sentences import first_sentence
from wfqueue.unified_task import TaskFile

_VERB_TYPES = {
    "add": "feature", "implement": "feature", "support": "feature", "create": "feature", "introduce": "feature",
    "fix": "fix", "repair": "fix", "resolve": "fix", "refactor": "refactor", "restructure": "refactor",
    "test": "testing", "document": "docs", "remove": "chore", "upgrade": "chore",
}


# "fix(scope): ", "[area] feat: ", "GOAL: ": a prefix that says how the requirement is filed, not what it asks.
CONVENTIONAL_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?(?:[a-z]+(?:\([^)]*\))?!?:\s*)?", re.IGNORECASE)


def requirement_short(requirement: str, limit: int = 80) -> str:
    first = first_sentence(requirement).rstrip(".。")
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def requirement_brief(requirement: str, limit: int = 300) -> str:
    """What a task is for: the requirement's first line that says something (not a Markdown heading, not a bare
    "GOAL:"), whole up to ``limit`` characters (cut at a word).

    Titles say it shorter (``change_phrase``); a description keeps what follows the first sentence or the
    80th character (the value to accept, the case to handle), which the task is there to do."""
    lines = (" ".join(CONVENTIONAL_PREFIX.sub("", line).split()).rstrip(".。") for line in requirement.splitlines()
             if not line.lstrip().startswith("#"))
    first = next((line for line in lines if line), "") or requirement_short(requirement)
    return _cut_at_word(first, limit)


def _cut_at_word(text: str, limit: int) -> str:
    """``text`` whole when it fits in ``limit`` characters, else cut after a word, with "..."."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0].rstrip(",;:-") + "..."


def task_type(requirement: str) -> str:
    words = re.findall(r"[a-z]+", requirement.lower())
    return next((_VERB_TYPES[w] for w in words[:3] if w in _VERB_TYPES), "enhancement")


def has_file(index: RepoIndex, path: str) -> bool:
    """Whether the repository has ``path``: a file the index read, or one it left unread (too large, not UTF-8):
    a plan changes such a file, never creates it anew."""
    return any(f.path == path for f in index.files) or path in index.unread


def is_code(index: RepoIndex, path: str) -> bool:
    return any(f.path == path and not f.is_test for f in index.files)


def dependency_order(nodes: list[str], needs: dict[str, list[str]]) -> list[str]:
    """``nodes`` ordered so each comes after what it needs (stable); a cycle keeps the given order.

    Every planner dependency points backwards in this order, so a plan built from it is
    acyclic by construction, even over an import cycle (its files are simply ordered)."""
    remaining = list(nodes)
    done: list[str] = []
    while remaining:
        ready = [n for n in remaining if not any(g in remaining and g != n for g in needs.get(n, []))]
        pick = ready[0] if ready else remaining[0]  # a cycle: the earliest given goes first
        done.append(pick)
        remaining.remove(pick)
    return done


def plan_needs(index: RepoIndex, files: list[str]) -> dict[str, list[str]]:
    """For each planned file, what it needs changed first: what it imports, and for a test file the planned
    modules it tests (a test of a private module may import only its package; a test file still to be created
    imports nothing yet: it is named after its module)."""

    def tests(test: str, source: str) -> bool:
        return test in index.tests_for.get(source, []) or (
            is_test_path(test) and tested_stem(test) == subject_stem(source)
            and not any(f.path == test for f in index.files))

    return {f: list(dict.fromkeys([*index.imports.get(f, []), *(g for g in files if g != f and tests(f, g))]))
            for f in files}


def import_order(index: RepoIndex, files: list[str]) -> list[str]:
    """Files ordered so that a module comes after the modules it imports (stable)."""
    return dependency_order(files, index.imports)


def earlier_needs(order: list[str], needs: dict[str, list[str]]) -> dict[str, list[str]]:
    """For each node, what it needs among the nodes placed before it in ``order`` (never a cycle)."""
    position = {n: k for k, n in enumerate(order)}
    return {n: sorted({g for g in needs.get(n, []) if g in position and position[g] < position[n]},
                      key=position.__getitem__) for n in order}


MAX_NAMED_SYMBOLS = 5  # symbols of one file a task changes because the requirement names them
# A source file's path as a requirement writes it ("rq/backoff.py", "./src/retry.ts", "nushell_completions.go").
_NAMED_PATH = re.compile(r"(?<![\w/.-])(?:\./)?((?:[\w.-]+/)*[\w-][\w.-]*\.(?:py|js|ts|tsx|jsx|go|rs|java|rb))\b")
# Words before a path that make it an example, not a file to make ("paths like app/settings.py").
_EXAMPLE_CUE = re.compile(r"(?:\blike|such as|e\.g\.|for example|for instance)\s*[`'\"(]?\s*$", re.IGNORECASE)
# A bare file name ("Next.js" is prose) names a file to make only after words that say so: "a new file x.go".
_FILE_CUE = re.compile(r"\b(?:file|module|called|named)\s*:?\s*[`'\"]?\s*$", re.IGNORECASE)


def named_paths(index: RepoIndex, requirement: str) -> list[tuple[str, bool]]:
    """Code files the requirement names, as (path, exists): a bare name is an existing file of that name when
    exactly one has it ("extend test_worker.py" is tests/test_worker.py), else a new one only if it is a test's
    name or the words before it say it is a file; a path, in a folder the repository has; none given as an
    example. A bare new name has no folder yet: its caller places it."""
    existing = {f.path for f in index.files} | set(index.unread)  # has_file, for every path at once
    folders = {posixpath.dirname(path) for path in existing}
    tops = sorted({path.split("/", 1)[0] for path in existing if "/" in path} - TEST_FOLDERS)
    found: list[tuple[str, bool]] = []
    for match in _NAMED_PATH.finditer(requirement):
        path, before = match.group(1), requirement[: match.start()]
        if _EXAMPLE_CUE.search(before):
            continue
        # A sub-project named in the path's sentence: "to sinatra-contrib in lib/sinatra/request_id.rb" is a path
        # in it (lib/sinatra/ is also core's); a folder named in another sentence is not.
        sentence = re.split(r"[.;\n]\s", before)[-1] + re.split(r"[.;\n]\s", requirement[match.end():])[0]
        projects = [top for top in tops if re.search(rf"(?<![\w/.-]){re.escape(top)}(?![\w/-])", sentence)]
        if "/" in path and path not in existing:
            path = next((f"{top}/{path}" for top in projects if posixpath.dirname(f"{top}/{path}") in folders), path)
        if "/" not in path and path not in existing:
            same_name = [p for p in existing if posixpath.basename(p) == path]
            if len(same_name) == 1:
                path = same_name[0]
            elif same_name or not (is_test_path(path) or _FILE_CUE.search(before)):
                continue  # ambiguous, or "Next.js" in prose
        elif posixpath.dirname(path) not in folders:
            continue
        if path not in (p for p, _ in found):
            found.append((path, path in existing))
    return found


def named_symbols(symbols: list[Symbol], requirement: str) -> list[Symbol]:
    """The symbols the requirement names (`NameAllocator.newName`, `Error::root_cause`, `content_type`), in the
    order it names them; the first of overloads."""
    found: dict[str, Symbol] = {}
    for name in named_identifiers(requirement):
        for symbol in symbols:
            if symbol.qualname == name or symbol.qualname.endswith("." + name) if "." in name else (
                    symbol.name == name and not symbol.qualname.endswith(f"{name}.{name}")):  # not its constructor
                found.setdefault(symbol.qualname, symbol)
    return list(found.values())[:MAX_NAMED_SYMBOLS]


def matching_symbols(index: RepoIndex, path: str, requirement: str) -> list[Symbol]:
    """The symbols of ``path`` the requirement touches: those it names first (a constructor sharing the
    class's words does not push `NameAllocator.newName` out), then those matching its words best."""
    code = code_symbols(index, path)  # a Rust file's own tests are no code a change targets
    named = named_symbols(code, requirement)
    kept = {s.qualname for s in code} - {s.qualname for s in named}
    ranked = rank_symbols(index, path, requirement, limit=len(index.symbols.get(path, [])))
    return (named + [s for s in ranked if s.qualname in kept])[: max(3, len(named))]


def symbols_to_change(index: RepoIndex, path: str, requirement: str) -> list[Symbol]:
    """What a task changes in ``path``: the symbols the requirement touches, else its first public ones."""
    public = [s for s in code_symbols(index, path) if s.kind in ("class", "function") and not s.name.startswith("_")]
    return matching_symbols(index, path, requirement) or public[:2]


def named_code(index: RepoIndex, requirement: str, ranked: list[str]) -> list[str]:
    """The code files a requirement asking for tests or documentation is about, in ``ranked`` order (the
    localizer's): the files it names; else those defining an identifier it names (``verify_token``); else those
    its words name (router.py for "the router"); else the files of a folder it names ("the auth package"); else
    the best ranked. The localizer also ranks the modules using that code, which are not what is asked about."""
    code = [p for p in ranked if is_code(index, p)]
    # A test file named says where the tests go, not what they test ("in tests/test_handlers.py for the router").
    words = set(tokenize(" ".join(w for w in requirement.split() if not is_test_path(w.strip("`'\",.;:()")))))
    identifiers = {name.lower() for name in named_identifiers(requirement)}

    def defines_named(path: str) -> bool:
        return any(s.qualname.lower() in identifiers or s.name.lower() in identifiers
                   for s in index.symbols.get(path, []))

    def named_by(name: str) -> bool:
        terms = set(tokenize(name))
        return bool(terms) and terms <= words

    def package_file(path: str) -> bool:  # named after its folder (subject_stem), or main: the folder's tier decides
        return posixpath.basename(path).split(".")[0] in (*PACKAGE_FILES, "main")

    tiers = [
        [p for p in code if p in requirement],
        [p for p in code if defines_named(p)],
        [p for p in code if not package_file(p) and named_by(subject_stem(p))],
        [p for p in code if index.symbols.get(p) and named_by(posixpath.basename(posixpath.dirname(p)))],
    ]
    return next((tier for tier in tiers if tier), code[:1])


def conflict_risk(index: RepoIndex, path: str) -> str:
    count = fan_in(index, path)
    return "high" if count >= 3 else ("medium" if count >= 1 else "low")


def effort_of(index: RepoIndex, path: str, requirement: str = "") -> tuple[str, str]:
    """How large changing ``path`` is: the lines of the symbols the requirement touches there (a one-method fix
    in a 1000-line module is small), else of the whole file."""
    chosen = matching_symbols(index, path, requirement)
    # What they span, once each: a class holding a chosen method is where the change is, not its size (flask's
    # 1500-line Flask class for a make_response fix).
    inner = [s for s in chosen if not any(o is not s and s.line <= o.line and o.end_line <= s.end_line
                                         for o in chosen)]
    lines = len({n for s in inner for n in range(s.line, s.end_line + 1)}) if inner else next(
        (f.line_count for f in index.files if f.path == path), 0)
    if lines > 300:
        return "large", "High"
    return ("medium", "Medium") if lines > 100 else ("small", "Low")


def written_in(index: RepoIndex, paths: list[str], requirement: str) -> frozenset[str]:
    """The names the requirement writes out that ``paths`` already contain (as their words run)."""
    return frozenset(name.rsplit(".", 1)[-1] for name in named_identifiers(requirement)
                     if any(runs_in(tokenize(name.rsplit(".", 1)[-1]), index.doc_tokens.get(p, [])) for p in paths))


def defined_elsewhere(index: RepoIndex, paths: list[str], requirement: str) -> frozenset[str]:
    """The names the requirement writes out that code outside ``paths`` defines already ("Fix should_strip_auth",
    defined in sessions.py): a change of one of ``paths`` is not asked to hold them, as a new name would be; unless
    the requirement names one of ``paths`` ("Add a `purge_expired` function to tokens.py": there it is asked for)."""
    names = {name.rsplit(".", 1)[-1] for name in named_identifiers(requirement)}
    if not names or set(paths) & {path for path, _ in named_paths(index, requirement)}:
        return frozenset()  # (most requirements name none: the repository's symbols are not gone through)
    return frozenset(s.name for path, symbols in index.symbols.items() if path not in paths for s in symbols
                     if s.name in names)


def already_named(index: RepoIndex, paths: list[str], requirement: str, *, tests_only: bool) -> frozenset[str]:
    """The names the requirement writes out that no criterion asks a task of ``paths`` to hold: those its files
    contain already, and for a change of code (not ``tests_only``) those code elsewhere defines; a test is asked to
    use them."""
    present = written_in(index, paths, requirement)
    return present if tests_only else present | defined_elsewhere(index, paths, requirement)


def uses_of(terms: list[str], words: list[str]) -> int:
    """How many times ``terms`` occur one after the other in ``words``."""
    width = len(terms)
    return sum(words[i:i + width] == terms for i in range(len(words) - width + 1))


def runs_in(terms: list[str], words: list[str]) -> bool:
    """Whether ``terms`` occur one after the other somewhere in ``words``."""
    return uses_of(terms, words) > 0


def file_entries(index: RepoIndex, path: str, requirement: str) -> list[TaskFile]:
    """One ``files[]`` entry per symbol to change (the module itself when none stands out)."""
    risk = conflict_risk(index, path)
    entries = [
        TaskFile(path=path, action="modify", target=s.qualname, conflict_risk=risk,
                 changes=[f"adapt {s.kind} {s.qualname} (lines {s.line}-{s.end_line})"])
        for s in symbols_to_change(index, path, requirement)
    ]
    return entries or [TaskFile(path=path, action="modify", changes=["adapt the module"], conflict_risk=risk)]


def verification_for(index: RepoIndex, tests: list[str]) -> str:
    """A command that runs ``tests`` (the whole suite's command when there are none)."""
    return test_command_for(index, tests) if tests else index.test_command


def change_phrase(requirement: str, limit: int = 72) -> str:
    """What the change does, as a title would say it: first line, no "fix(scope):" prefix, capitalised, short."""
    phrase = (CONVENTIONAL_PREFIX.sub("", requirement_short(requirement, limit=400)).strip()
              or requirement_short(requirement))
    phrase = _cut_at_word(phrase, limit)
    return phrase[:1].upper() + phrase[1:]


def task_title(requirement: str, path: str, target: str = "") -> str:
    """ "Fix stream auto-end for empty bodies in Request.flush (source/core/index.ts)": the change and where. A
    target the change already names goes beside the path: "Add rate limiting to login (login in auth.py)", not
    "... to login in login (auth.py)"."""
    phrase = change_phrase(requirement)
    if not target:
        # "Add a created_at field to Model7 in app/schema.py": the path said once.
        return phrase if re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/-])", phrase) else f"{phrase} in {path}"
    name = target.rsplit(".", 1)[-1]
    # The name alone ("login"), or the whole dotted target ("res.sendFile": express's ETag requirement read
    # "... in res.sendFile in res.sendFile").
    if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", phrase, re.IGNORECASE) or \
            re.search(rf"(?<![\w.]){re.escape(target)}(?![\w])", phrase, re.IGNORECASE):
        return f"{phrase} ({target} in {path})"
    return f"{phrase} in {target} ({path})"


# A file extension right after a name (not a call): "args_test" in "args_test.go" is that file's name.
_EXTENSION = re.compile(r"\.(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|go|rs|java|kt|rb|php|c|h|cpp|cs|swift|md|rst|txt|json|"
                        r"ya?ml|toml|ini|cfg|html|css|sh)\b(?!\()", re.IGNORECASE)


def _only_a_file_name(name: str, requirement: str) -> bool:
    """Whether every mention of ``name`` in ``requirement`` is a file's name (followed by an extension)."""
    mentions = list(re.finditer(rf"(?<![\w.]){re.escape(name)}(?!\w)", requirement))
    return bool(mentions) and all(_EXTENSION.match(requirement, m.end()) for m in mentions)


def names_to_find(requirement: str, present: frozenset[str] = frozenset()) -> list[str]:
    """The identifiers the requirement writes out that a change should leave in its files, less those the files
    already contain (``present``). A file's name ("args_test.go", read as args_test) is no identifier to find
    in the code; a name also written on its own (`retry` ... retry.py) or a call (response.json()) still is."""
    return [n.rsplit(".", 1)[-1] for n in named_identifiers(requirement)
            if not _only_a_file_name(n, requirement) and n.rsplit(".", 1)[-1] not in present]


# How many of a task's files a criterion's command names; a task of more files says how many more.
MOST_FILES_IN_A_CRITERION = 8


def criteria_for(requirement: str, paths: list[str], tests: list[str], verification: str,
                 present: frozenset[str] = frozenset(), *, adds_test: bool = False) -> list[str]:
    """Acceptance criteria a reviewer checks with a command: the files changed, the tests pass,
    and the names the requirement writes out appear where they belong. A name ``paths`` already contain
    (``present``) is no criterion: `grep -n "newName"` finds it before any change. ``tests``: the test files the
    task writes itself, where its test is looked for; ``adds_test``: it adds one not named yet. A task writing no
    test gets no criterion of one (a lite plan's test task has it): one it may not change cannot hold it."""
    # Every file, as the criterion says "each file" (with the first three only, three of six were checked).
    shown = [shlex.quote(p) for p in paths[:MOST_FILES_IN_A_CRITERION]]
    more = f" (and {len(paths) - len(shown)} more of the task's files)" if len(paths) > len(shown) else ""
    criteria = [f"`git status --short -- {' '.join(shown)}` lists {'each file' if len(paths) > 1 else 'the file'}"
                f"{more}"]
    if verification:
        criteria.append(f"`{verification}` passes")
    names = names_to_find(requirement, present)[:1]
    for name in names:
        criteria.append(f"`grep -n \"{name}\" {' '.join(shown[:3])}` finds it")
    if names and tests:
        searched = " ".join(shlex.quote(t) for t in tests[:2])
        criteria.append(f"`grep -rn \"{names[0]}\" {searched}` finds a test using it")
    elif tests and verification:
        criteria.append(f"`{verification}` runs a test that fails without the change and passes with it")
    elif tests:
        criteria.append(f"a test in {' '.join(tests[:2])} fails without the change and passes with it")
    elif adds_test:  # (`grep -rn NAME .` was met by the change alone; the command's tests are not the new one)
        criteria.append("`git status --short --untracked-files=all` lists a test file it adds, which fails without "
                        "the change and passes with it")
    return criteria  # at most four: a task has room for five
