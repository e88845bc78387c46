"""What a repository must not bring under ``.workflow/``: files wfqueue would write through or trust.

wfqueue writes its sessions, logs and embedded Redis under the repository's ``.workflow/`` and reads
``wfqueue up``'s address there. A repository that commits a symbolic link there (``.workflow/.lite-plan`` to
a folder of the user's, ``.workflow/.queue/worker.log`` to ``~/.bashrc``) would have every plan written, or a
log appended, where the link points, outside the repository; one that commits ``.workflow/.queue/up.json``
would send the user's plans to the broker it names; a submodule there brings either unseen. Plans themselves
may be committed (teams share them): only links and submodules, anywhere under ``.workflow/``, and the runtime
folder ``.workflow/.queue/`` are refused, before a command writes its session folder and where `up.json` is
read.
"""

from __future__ import annotations

from pathlib import Path

from wfqueue.errors import UnsafeRepositoryError, WfqueueError
from wfqueue.gitcmd import run_git
from wfqueue.sessions import QUEUE_DIR, WORKFLOW_DIR

SYMLINK_MODE = "120000"  # git's mode for a symbolic link
GITLINK_MODE = "160000"  # a submodule: another repository's files, runtime files or links among them
MOST_NAMED = 3  # planted paths an error names


def planted_paths(repo: Path) -> tuple[list[str], list[str]]:
    """What git tracks under ``repo``'s ``.workflow/`` that wfqueue must not use, as (symbolic links and
    submodules anywhere there, files of ``.workflow/.queue/``), whatever the case of their names (a
    case-insensitive disk, as a macOS clone has, reads `.Workflow/.Queue/up.json` as the one wfqueue reads).
    Nothing where git cannot tell (not a repository, no git)."""
    try:
        listed = run_git(repo, "-c", "core.quotePath=false", "ls-files", "--stage", "-z", "--",
                         f":(icase){WORKFLOW_DIR}", check=False, errors="surrogateescape")
    except WfqueueError:
        return [], []
    if listed.returncode != 0:
        return [], []
    runtime = f"{WORKFLOW_DIR}/{QUEUE_DIR}".casefold()
    links: list[str] = []
    runtime_files: list[str] = []
    for entry in filter(None, listed.stdout.split("\0")):
        meta, _, path = entry.partition("\t")  # "MODE OBJECT STAGE\tPATH"
        folded = path.casefold()
        if not (folded == WORKFLOW_DIR or folded.startswith(f"{WORKFLOW_DIR}/")):
            continue  # the pathspec's case-insensitive match also takes `.workflowx`
        if meta.split(" ", 1)[0] in (SYMLINK_MODE, GITLINK_MODE):
            links.append(path)
        elif folded == runtime or folded.startswith(f"{runtime}/"):
            runtime_files.append(path)
    return links, runtime_files


def _named(paths: list[str]) -> str:
    shown = ", ".join(repr(p) for p in paths[:MOST_NAMED])
    return shown + (f" and {len(paths) - MOST_NAMED} more" if len(paths) > MOST_NAMED else "")


def refuse_planted(repo: Path) -> None:
    """Raise UnsafeRepositoryError, before anything is written or `up.json` is read, when git tracks what wfqueue
    must not use under ``repo``'s ``.workflow/`` (see the module's docstring)."""
    links, runtime_files = planted_paths(repo)  # asked each time (one `git ls-files`): a pull may bring them
    if not links and not runtime_files:
        return
    said = []
    if links:
        said.append(f"a symbolic link or a submodule under {WORKFLOW_DIR}/ ({_named(links)}): wfqueue would write "
                    "where it points, which may be outside the repository, or trust files it did not write")
    if runtime_files:
        said.append(f"files of {WORKFLOW_DIR}/{QUEUE_DIR}/ ({_named(runtime_files)}): that folder holds this "
                    "machine's runtime files (the embedded Redis, logs, the address of `wfqueue up`), which no "
                    "repository may bring")
    raise UnsafeRepositoryError(
        f"{repo} commits " + "; and ".join(said),
        hint="if you trust the repository, remove them from it and from the folder (`git rm -r -- PATH`, then "
             f"commit) and add {WORKFLOW_DIR}/{QUEUE_DIR}/ to .gitignore; otherwise do not plan it")
