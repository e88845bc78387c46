"""Per-file planning decisions shared by the offline planners (collab areas, lite plans). Pure.

Which symbols of a file a requirement touches, how risky and large a change
is, where a module for a concept the code lacks would go, and the order in
which files should change (a module after the modules it imports).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections import Counter

from wfqueue.analysis import RepoIndex, code_symbols, fan_in, rank_symbols, test_command_for, tokenize
from wfqueue.analysis.files import TEST_FOLDERS, is_test_path
from wfqueue.analysis.localize import named_identifiers
from wfqueue.analysis.roles import file_role
from wfqueue.analysis.symbols import Symbol
from wfqueue.analysis.testmap import PACKAGE_FILES, subject_stem, tested_stem
from wfqueue.providers.offline.moved_code import moved_module
from wfqueue.sentences import first_sentence
from wfqueue.unified_task import TaskFile

_VERB_TYPES = {
    "add": "feature", "implement": "feature", "support": "feature", "create": "feature", "introduce": "feature",
    "fix": "fix", "repair": "fix", "resolve": "fix", "refactor": "refactor", "restructure": "refactor",
    "test": "testing", "document": "docs", "remove": "chore", "upgrade": "chore",
}


# "fix(scope): ", "[area] feat: ", "GOAL: ": a prefix that says how the requirement is filed, not what it asks.
_CONVENTIONAL = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?(?:[a-z]+(?:\([^)]*\))?!?:\s*)?", re.IGNORECASE)


def requirement_short(requirement: str, limit: int = 80) -> str:
    first = first_sentence(requirement).rstrip(".。")
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def requirement_brief(requirement: str, limit: int = 300) -> str:
    """What a task is for: the requirement's first line that says something (not a Markdown heading, not a bare
    "GOAL:"), whole up to ``limit`` characters (cut at a word).

    Titles say it shorter (``change_phrase``); a description keeps what follows the first sentence or the
    80th character (the value to accept, the case to handle), which the task is there to do."""
    lines = (" ".join(_CONVENTIONAL.sub("", line).split()).rstrip(".。") for line in requirement.splitlines()
             if not line.lstrip().startswith("#"))
    first = next((line for line in lines if line), "") or requirement_short(requirement)
    return _cut_at_word(first, limit)


def _cut_at_word(text: str, limit: int) -> str:
    """``text`` whole when it fits in ``limit`` characters, else cut after a word, with "..."."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0].rstrip(",;:-") + "..."


def task_type(requirement: str) -> str:
    words = re.findall(r"[a-z]+", requirement.lower())
    return next((_VERB_TYPES[w] for w in words[:3] if w in _VERB_TYPES), "enhancement")


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
    existing = {f.path for f in index.files}
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
        subject = " ".join(_CONVENTIONAL.sub("", requirement.strip().splitlines()[0] if requirement.strip() else "")
                           .split())
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
    return None if any(f.path == path for f in index.files) else path


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
    phrase = _CONVENTIONAL.sub("", requirement_short(requirement, limit=400)).strip() or requirement_short(requirement)
    phrase = _cut_at_word(phrase, limit)
    return phrase[:1].upper() + phrase[1:]


def task_title(requirement: str, path: str, target: str = "") -> str:
    """ "Fix stream auto-end for empty bodies in Request.flush (source/core/index.ts)": the change and where. A
    target the change already names goes beside the path: "Add rate limiting to login (login in auth.py)", not
    "... to login in login (auth.py)"."""
    phrase = change_phrase(requirement)
    if not target:
        return f"{phrase} in {path}"
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
