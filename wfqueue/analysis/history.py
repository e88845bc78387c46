"""The repository's own history as evidence of where a requirement lands.

A requirement usually resembles earlier changes of the same code ("Fix the retry
of failed jobs" after "Retry failed jobs with backoff"), and the files those
changes touched are the likeliest to change again. ``read_history`` takes the
last commits once, when the index is built (the only I/O here);
``history_credit`` is pure: it ranks the past changes by how well their messages
match the requirement (BM25 over commit messages) and shares each of the best
matches' score among the files it touched. Localization adds that credit to each
file's own text score (wfqueue.analysis.localize).

Without git, outside a repository or in a shallow clone with little history,
there is little or nothing to read and the ranking falls back to the files' text.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel

from wfqueue.analysis.ranking import bm25_scores, tokenize
from wfqueue.errors import WfqueueError
from wfqueue.gitcmd import SNAPSHOT_SUBJECT, run_git

log = logging.getLogger(__name__)

HISTORY_COMMITS = 1500  # the last non-merge commits read (`git log` took 0.05 s for them on knex, 3 200 commits)
# A commit touching more files is a sweep (a rename, a reformat, a licence header): it says
# nothing about which one file a requirement is about.
MAX_FILES_PER_CHANGE = 20
SIMILAR_CHANGES = 10  # how many of the best-matching past changes give credit
# A small folder of a very large repository can make git walk far back for its commits; past this, the
# text alone ranks the files.
_GIT_TIMEOUT_S = 10.0
_RECORD, _FIELD = "\x1e", "\x00"  # what %x1e and %x00 in the log format print


class PastChange(BaseModel):
    """One earlier commit: its message's ranking tokens and the indexed files it changed."""

    words: list[str]
    paths: list[str]


def parse_log(output: str, known: Collection[str]) -> list[PastChange]:
    """Past changes from ``git log --format=%x1e%P%x00%B%x00 --name-only`` output; files not in ``known``
    (deleted or renamed since, or not indexed) are dropped, and so are sweeps, commits left with no file,
    and commits without a parent: a repository's first commit (or a shallow clone's oldest) adds
    everything there was, and in a small project it would credit every file alike."""
    changes: list[PastChange] = []
    for record in output.split(_RECORD):
        if record.count(_FIELD) < 2:
            continue
        parents, message, names = record.split(_FIELD, 2)
        touched = [name for name in names.splitlines() if name]
        paths = [path for path in touched if path in known]
        if parents.strip() and paths and len(touched) <= MAX_FILES_PER_CHANGE:
            changes.append(PastChange(words=tokenize(message), paths=paths))
    return changes


def read_history(repo: Path, known: Collection[str], limit: int = HISTORY_COMMITS) -> list[PastChange]:
    """The last ``limit`` non-merge commits reachable from HEAD, paths relative to ``repo`` (which may
    be a folder inside the repository); [] when ``repo`` is not in a git repository or git fails."""
    try:
        # The commit carrying uncommitted changes to workers (no shared disk) is not a past change:
        # left out, the history is the same as in the user's repository.
        # core.quotePath=false: names with non-ASCII letters come as they are, not quoted and escaped, and
        # bytes that are not UTF-8 decode as the file scan decodes them (surrogateescape). Names git still
        # quotes (a double quote, a backslash or a control character in them) match no indexed file.
        done = run_git(repo, "-c", "core.quotePath=false", "log", "--no-merges", f"-{limit}",
                       "--format=%x1e%P%x00%B%x00", "--name-only", "--relative",
                       "--invert-grep", f"--grep=^{SNAPSHOT_SUBJECT}", "HEAD", "--", ".",
                       check=False, timeout_s=_GIT_TIMEOUT_S, errors="surrogateescape")
    except WfqueueError as exc:  # no git here: the text alone ranks the files
        log.info("no history read from %s: %s", repo, exc.message)
        return []
    if done.returncode != 0:  # not a repository, no commit yet, or one git refuses to read
        if "dubious ownership" in done.stderr:  # owned by another user: plans here differ from its owner's
            log.warning("no history read from %s: %s", repo, done.stderr.strip())
        return []
    return parse_log(done.stdout, set(known))


def history_credit(history: list[PastChange], query: str, allowed: Collection[str],
                   similar: int = SIMILAR_CHANGES) -> dict[str, float]:
    """path -> credit from the ``similar`` past changes whose messages best match ``query``: each
    shares its BM25 score equally among the ``allowed`` files it changed. Pure."""
    allowed = set(allowed)
    relevant = {f"{k:06d}": change for k, change in enumerate(history) if any(p in allowed for p in change.paths)}
    scores = bm25_scores(tokenize(query), {key: change.words for key, change in relevant.items()})
    # Ties go to the more recent change (keys are positions in the log, newest first).
    best = sorted(((score, key) for key, score in scores.items() if score > 0), key=lambda item: (-item[0], item[1]))
    credit: dict[str, float] = {}
    for score, key in best[:similar]:
        paths = [path for path in relevant[key].paths if path in allowed]
        for path in paths:
            credit[path] = credit.get(path, 0.0) + score / len(paths)
    return credit
