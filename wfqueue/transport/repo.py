"""The coordinator's side of the repository's journey: pin a commit, publish it as a git bundle in Redis, and
bring an executed task's commits back into the user's repository. The worker's side is in ``checkouts``.

Pinning: the commit every agent reads is HEAD, or, when the work tree has uncommitted changes (tracked edits,
staged changes, untracked files git does not ignore), a snapshot commit on top of HEAD. The snapshot is built
in a temporary index (``GIT_INDEX_FILE``), so the user's branch, index, stash list and work tree are never
touched, and with a fixed author, committer and date, so pinning the same state twice gives the same commit
(and the bundle already in Redis is reused). ``refs/wfqueue/pins/<commit>`` keeps it from ``git gc``: the
session folder's ``repo-pin.json`` names it as what the plan was made against, and a resume publishes it again,
so the ref stays until the user deletes it (docs/OPERATIONS.md says how); refs outside ``refs/heads`` never
show in ``git branch``.

Bundles in Redis (``keys.bundle_prefix(commit)`` for a pinned commit, ``keys.commits_prefix(name)`` for commits
sent back): ``chunk:0..N-1`` hold the bundle in slices of :data:`CHUNK_BYTES`, written in pipelines of a few
chunks so neither side holds one huge value, then ``meta`` (a :class:`BundleMeta`), written last: a reader that
finds ``meta`` finds every chunk, and checks the whole against its sha256. Every key expires after
``bundle_ttl_s``; publishing a commit that is already there only refreshes the expiry (of the bundles it
builds on too). A bundle may be thin (``commit ^have``): ``meta.prerequisite`` names the commit whose bundle a
reader fetches first. Git bundles name refs, never bare commits, so each is made from a temporary ref under
``refs/wfqueue/bundle/`` that is deleted afterwards; ``meta.ref`` names it for the reader's fetch.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import redis
from pydantic import BaseModel, ConfigDict, Field

from wfqueue import keys
from wfqueue.errors import ConfigError, InfrastructureError, UnsafeRepositoryError
from wfqueue.gitcmd import SNAPSHOT_SUBJECT, is_shallow_repository, run_git
from wfqueue.sessions import WORKFLOW_DIR
from wfqueue.settings import Settings
from wfqueue.state import as_text, raw_reply
from wfqueue.step_runner import RELEASE_IF_OWNER, held_step
from wfqueue.transport.models import RepoPin

CHUNK_BYTES = 4 * 1024 * 1024  # one Redis value: far below its 512 MB limit, and cheap to hold in memory
PIPELINE_CHUNKS = 4  # chunks sent per round trip: 16 MiB in flight at most
META = "meta"
WRITING = "writing"  # SET NX while one process stores a bundle, so two never interleave their chunks
PIN_REF_PREFIX = "refs/wfqueue/pins/"
BUNDLE_REF_PREFIX = "refs/wfqueue/bundle/"
GIT_TIMEOUT_S = 600.0  # a fetch of a large repository from a slow remote takes minutes
SNAPSHOT_IDENTITY = ("wfqueue", "wfqueue@localhost")
MAX_CHAIN = 1000  # prerequisites followed at most: a cycle in stored metas must not loop forever


class BundleMeta(BaseModel):
    """A stored bundle's ``meta`` key."""

    model_config = ConfigDict(frozen=True)

    commit: str  # the commit the bundle's ref points at
    ref: str  # the ref inside the bundle (fetch it from there)
    size: int = Field(ge=0)
    chunks: int = Field(ge=0)
    chunk_bytes: int = Field(gt=0)  # the writer's chunk size: a reader of another version still cuts alike
    sha256: str
    prerequisite: str | None = None  # a commit the reader must already have (a thin bundle)


class ChunkSpan(BaseModel):
    """One chunk of a bundle: bytes ``start`` to ``end`` (exclusive)."""

    model_config = ConfigDict(frozen=True)

    index: int
    start: int
    end: int


def chunk_plan(size: int, chunk_bytes: int | None = None) -> list[ChunkSpan]:
    """The chunks a bundle of ``size`` bytes is stored in (of :data:`CHUNK_BYTES` unless told). Pure."""
    step = chunk_bytes or CHUNK_BYTES
    starts = range(0, size, step)
    return [ChunkSpan(index=i, start=start, end=min(start + step, size)) for i, start in enumerate(starts)]


def chunk_key(prefix: str, index: int) -> str:
    return f"{prefix}chunk:{index}"


def human_size(size: int) -> str:
    """``52428800`` -> ``50.0 MiB``. Pure."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


# -- git ------------------------------------------------------------------------------------------------------


def git(cwd: Path, *args: str, env: Mapping[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Git for the repository's transport (wfqueue.gitcmd): its failures are InfrastructureErrors."""
    return run_git(cwd, *args, check=check, env=env, timeout_s=GIT_TIMEOUT_S,
                   needed_for="the repository travels to workers by git",
                   install_hint="install git on the coordinator's machine and on every worker",
                   failure_hint="check the repository with `git status` and `git fsck`")


def rev(cwd: Path, name: str) -> str | None:
    """The commit ``name`` resolves to in ``cwd``, or None."""
    done = git(cwd, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def is_ancestor(cwd: Path, older: str, newer: str) -> bool:
    return git(cwd, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0


# -- pinning --------------------------------------------------------------------------------------------------


SHALLOW_HINT = ("run `git fetch --unshallow` in it, or set WFQUEUE_REPO_URL to a git URL every worker can fetch "
                "the commit from, or WFQUEUE_SHARED_DISK=true if every worker mounts the repository at this path")


def refuse_shallow(repo: Path) -> None:
    """A shallow clone (a CI job's `git clone --depth 1`) cannot travel as a bundle: git writes one that names no
    prerequisite for the missing parents, and a worker's fetch of it fails ("did not send all necessary objects"),
    which read as its cache being full."""
    if is_shallow_repository(repo):
        raise UnsafeRepositoryError(f"{repo} is a shallow clone: workers on other machines receive the repository "
                                    "as a git bundle, which needs its whole history", hint=SHALLOW_HINT)


def pin_repository(repo: Path, *, history_from_url: bool = False, keep: bool = True) -> RepoPin:
    """Pin ``repo`` at HEAD, or at a snapshot commit of its uncommitted changes on top of HEAD (``.workflow/``
    left out: planning writes there). Refuses a folder that is not a git repository or has no commit, and a
    shallow clone unless ``history_from_url`` (workers fetch HEAD from WFQUEUE_REPO_URL). ``keep``: write the pin
    ref now (else :func:`keep_pin`, once the commit is published: a publish refused, the ref would be no
    session's)."""
    top_done = git(repo, "rev-parse", "--show-toplevel", check=False)
    if top_done.returncode != 0:
        raise UnsafeRepositoryError(f"{repo} is not a git repository; workers on other machines receive it by git",
                                    hint="run `git init` and commit your files, or set WFQUEUE_SHARED_DISK=true "
                                         "if every worker mounts the repository at this path")
    top = Path(top_done.stdout.strip())
    head = rev(top, "HEAD")
    if head is None:
        raise UnsafeRepositoryError(f"{top} has no commit yet; workers on other machines receive a commit of it",
                                    hint="commit your files first (git add -A && git commit)")
    if not history_from_url:
        refuse_shallow(top)
    prefix = git(repo, "rev-parse", "--show-prefix").stdout.strip()
    tree = _work_tree_tree(top, f"{prefix}{WORKFLOW_DIR}")
    commit = head
    if tree != git(top, "rev-parse", f"{head}^{{tree}}").stdout.strip():
        commit = _snapshot_commit(top, head, tree)
    if keep:
        keep_pin(top, commit)
    return RepoPin(repo=str(repo), head=head, commit=commit, snapshot=commit != head, prefix=prefix)


def keep_pin(repo: Path, commit: str) -> None:
    """``refs/wfqueue/pins/<commit>``: keeps a pinned commit (a snapshot no branch holds) from ``git gc``."""
    git(repo, "update-ref", f"{PIN_REF_PREFIX}{commit}", commit)


def _work_tree_tree(top: Path, excluded: str) -> str:
    """The tree of the work tree as ``git add -A`` sees it, built in a temporary index (the user's is never
    written)."""
    with tempfile.TemporaryDirectory(prefix="wfqueue-pin-") as scratch:
        index = Path(scratch) / "index"
        env = {"GIT_INDEX_FILE": str(index)}
        # A copy of the user's index, when there is one: its stat cache spares hashing every file again, and its
        # skip-worktree bits keep the files a sparse checkout leaves out of the work tree. copy2 keeps its mtime,
        # which git's check of entries changed in the same instant as the index compares against.
        user_index = Path(git(top, "rev-parse", "--path-format=absolute", "--git-path", "index").stdout.strip())
        if user_index.is_file():
            shutil.copy2(user_index, index)
        else:
            git(top, "read-tree", "HEAD", env=env)
        # A repository inside the work tree that git does not track and that has no commit yet (a `git init`
        # scratch folder): `git add` refuses it ("does not have a commit checked out") and failed every plan. Left
        # out, as the planners leave out every nested repository's files (wfqueue.analysis.files).
        untracked = git(top, "-c", "core.quotePath=false", "ls-files", "-z", "--others", "--exclude-standard",
                        f"--exclude=/{excluded}/", env=env).stdout.split("\0")
        empty = [path.rstrip("/") for path in untracked if path.endswith("/") and rev(top / path, "HEAD") is None]
        # ``excluded`` (months of sessions) is not hashed only to be reset below: left out of the add, unless
        # .gitignore ignores it already (then naming it makes `git add` fail, and the add skips it anyway).
        skipped = [] if git(top, "check-ignore", "-q", "--", excluded, check=False).returncode == 0 \
            else [f":(exclude,literal){excluded}"]
        git(top, "add", "--all", "--", ".", *[f":(exclude,literal){path}" for path in empty], *skipped, env=env)
        # ``excluded`` as HEAD has it (usually: absent). Not an exclude pathspec on the add: naming a path that
        # .gitignore ignores makes `git add` fail.
        git(top, "reset", "-q", "HEAD", "--", excluded, env=env)
        return git(top, "write-tree", env=env).stdout.strip()


def _snapshot_commit(top: Path, head: str, tree: str) -> str:
    date = f"@{git(top, 'show', '-s', '--format=%ct', head).stdout.strip()} +0000"
    name, email = SNAPSHOT_IDENTITY
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date}
    message = f"{SNAPSHOT_SUBJECT} {head[:12]}"
    return git(top, "commit-tree", "--no-gpg-sign", tree, "-p", head, "-m", message, env=env).stdout.strip()


# -- bundles in Redis ------------------------------------------------------------------------------------------


def read_meta(client: redis.Redis, prefix: str) -> BundleMeta | None:
    value = client.get(f"{prefix}{META}")
    return None if value is None else BundleMeta.model_validate_json(as_text(value))


def _refresh(client: redis.Redis, prefix: str, meta: BundleMeta, ttl_s: int) -> bool:
    """Extend the expiry of a stored bundle's keys; False (and ``meta`` deleted, so that the bundle is stored again)
    when a chunk is gone: evicted by Redis's memory policy, or expired a moment before its ``meta`` (written last).
    Kept, such a ``meta`` made every publish a no-op and every reader fail, `wfqueue resume` included."""
    pipe = client.pipeline(transaction=False)
    for index in range(meta.chunks):
        pipe.expire(chunk_key(prefix, index), ttl_s)
    pipe.expire(f"{prefix}{META}", ttl_s)
    *chunks, kept = pipe.execute()
    if all(chunks) and kept:  # EXPIRE answers 0 for a key that does not exist
        return True
    # Only the meta read, not one another publisher stored meanwhile (with other chunks) under the writing claim.
    client.eval(RELEASE_IF_OWNER, 1, f"{prefix}{META}", meta.model_dump_json())  # delete if it is still that value
    return False


def _refresh_chain(client: redis.Redis, commit: str, ttl_s: int) -> bool:
    """Refresh the expiry of ``commit``'s bundle and of those it builds on; False unless all are stored."""
    seen: set[str] = set()
    current: str | None = commit
    while current is not None and current not in seen and len(seen) < MAX_CHAIN:
        seen.add(current)
        meta = read_meta(client, keys.bundle_prefix(current))
        if meta is None or not _refresh(client, keys.bundle_prefix(current), meta, ttl_s):
            return False  # also when a prerequisite expired: the commit's bundle is then stored again
        current = meta.prerequisite
    return True


def _store(client: redis.Redis, prefix: str, bundle: Path, meta: BundleMeta, ttl_s: int) -> None:
    """Chunks first, ``meta`` last (see the module docstring)."""
    digest = hashlib.sha256()
    with open(bundle, "rb") as handle:
        pipe = client.pipeline(transaction=False)  # bytes values go out unchanged
        for span in chunk_plan(meta.size, meta.chunk_bytes):
            data = handle.read(span.end - span.start)
            digest.update(data)
            pipe.set(chunk_key(prefix, span.index), data, ex=ttl_s)
            if (span.index + 1) % PIPELINE_CHUNKS == 0:
                pipe.execute()
        pipe.execute()
    if digest.hexdigest() != meta.sha256:
        raise InfrastructureError(f"the bundle file {bundle} changed while it was stored in Redis",
                                  hint="run the command again")
    client.set(f"{prefix}{META}", meta.model_dump_json(), ex=ttl_s)


REPUBLISH_HINT = "the coordinator must publish it again: run `wfqueue resume` on the session"
RESEND_HINT = "run the task again (`wfqueue resume`)"


def download(client: redis.Redis, prefix: str, meta: BundleMeta, target: Path, hint: str = REPUBLISH_HINT) -> None:
    """Write the stored bundle to ``target``, checking every chunk is there and the whole its sha256."""
    digest = hashlib.sha256()
    with open(target, "wb") as handle:
        for span in chunk_plan(meta.size, meta.chunk_bytes):
            data = raw_reply(client, "GET", chunk_key(prefix, span.index))
            if not isinstance(data, bytes) or len(data) != span.end - span.start:
                raise InfrastructureError(
                    f"chunk {span.index} of the bundle of {meta.commit[:12]} in Redis is missing or cut short",
                    hint=f"it expired or Redis evicted it: {hint}")
            digest.update(data)
            handle.write(data)
    if digest.hexdigest() != meta.sha256:
        raise InfrastructureError(f"the bundle of {meta.commit[:12]} in Redis does not match its checksum", hint=hint)


def _writing(client: redis.Redis, prefix: str) -> contextlib.AbstractContextManager[None]:
    """Hold the claim to write one bundle's keys: two processes storing the same bundle (two plans pinned at the
    same commit, one thin and one full) would otherwise interleave their chunks. The claim of a process killed
    while it stored (SIGKILL, the OOM killer) is taken over at once on its host, else when its lease runs out
    (wfqueue.step_runner): a 10-minute claim held the next plan of the same commit that long, without a word."""
    return held_step(client, f"{prefix}{WRITING}", f"storing {prefix}*")


def _bundle(repo: Path, tip: str, exclude: str | None, target: Path) -> str:
    """``git bundle create target <tip> [^exclude]`` through a temporary ref; returns the ref's name."""
    ref = f"{BUNDLE_REF_PREFIX}{tip}-{secrets.token_hex(4)}"
    git(repo, "update-ref", ref, tip)
    try:
        git(repo, "bundle", "create", "--quiet", str(target), ref, *([f"^{exclude}"] if exclude else []))
    finally:
        git(repo, "update-ref", "-d", ref, check=False)
    return ref


def _make_and_store(client: redis.Redis, repo: Path, prefix: str, tip: str, exclude: str | None,
                    settings: Settings, what: str, hint: str) -> None:
    with tempfile.TemporaryDirectory(prefix="wfqueue-bundle-") as scratch:
        target = Path(scratch) / "repo.bundle"
        ref = _bundle(repo, tip, exclude, target)
        size = target.stat().st_size
        if size > settings.bundle_max_bytes:
            raise ConfigError(f"{what} is {human_size(size)} ({size} bytes), above WFQUEUE_BUNDLE_MAX_BYTES "
                              f"({human_size(settings.bundle_max_bytes)}); nothing was stored in Redis", hint=hint)
        digest = hashlib.sha256()
        with open(target, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        meta = BundleMeta(commit=tip, ref=ref, size=size, chunks=len(chunk_plan(size)), chunk_bytes=CHUNK_BYTES,
                          sha256=digest.hexdigest(), prerequisite=exclude)
        _store(client, prefix, target, meta, settings.bundle_ttl_s)


def publish(client: redis.Redis, repo: Path, commit: str, settings: Settings, *, have: str | None = None,
            have_at_url: bool = False) -> None:
    """Store ``commit`` of ``repo`` as a bundle in Redis for workers to materialise; a no-op (but for refreshing
    its expiry) when it is already there. With ``have`` (an ancestor of ``commit`` already published, or, with
    ``have_at_url``, one workers fetch from WFQUEUE_REPO_URL) only what ``commit`` adds is stored. Refuses a
    bundle above ``bundle_max_bytes``."""
    if have_at_url and have == commit:  # workers fetch it from the URL themselves: nothing to store
        return
    prefix = keys.bundle_prefix(commit)
    if _refresh_chain(client, commit, settings.bundle_ttl_s):
        return
    thin = (have is not None and have != commit and is_ancestor(repo, have, commit)
            and (have_at_url or _refresh_chain(client, have, settings.bundle_ttl_s)))
    if not thin:  # a whole history to bundle (a resume's bundle expired): a shallow clone has none to give
        refuse_shallow(repo)
    with _writing(client, prefix):
        if _refresh_chain(client, commit, settings.bundle_ttl_s):  # stored by another process meanwhile
            return
        _make_and_store(client, repo, prefix, commit, have if thin else None, settings,
                        what=f"the repository bundle of {commit[:12]}",
                        hint="set WFQUEUE_REPO_URL to a git URL every worker can fetch from (push the commit "
                             "there first), or raise WFQUEUE_BUNDLE_MAX_BYTES")


# -- commits sent back ----------------------------------------------------------------------------------------


def send_commits(client: redis.Redis, repo: Path, tip: str, base: str, name: str, settings: Settings) -> None:
    """Store the commits of ``repo`` from ``base`` (exclusive) to ``tip`` under ``name``, for the coordinator's
    :func:`receive_commits`. Sending the same tip again only refreshes the expiry."""
    prefix = keys.commits_prefix(name)
    tip_commit = rev(repo, tip)
    if tip_commit is not None and (tip_commit == rev(repo, base) or is_ancestor(repo, tip_commit, base)):
        raise InfrastructureError(f"no commits to send as {name}: {tip} adds nothing to {base}",
                                  hint="commit the task's change before sending it")
    with _writing(client, prefix):
        meta = read_meta(client, prefix)
        if meta is not None and meta.commit == (tip_commit or tip) \
                and _refresh(client, prefix, meta, settings.bundle_ttl_s):
            return
        if tip_commit is None:
            # A result remembered by another worker, its commit made in that worker's repository: sent from there
            # (a coordinator that died before taking it sends the task again, and any worker may answer).
            raise InfrastructureError(
                f"the commits of {name} ({tip[:12]}) are neither in this worker's repository nor in Redis: they were "
                "made on another worker, which did not send them or whose copy in Redis expired",
                hint="`wfqueue execute --continue` runs the task again as a new attempt; raise WFQUEUE_BUNDLE_TTL_S "
                     "if results wait longer than it before the coordinator takes them")
        _make_and_store(client, repo, prefix, tip_commit, base, settings, what=f"the commits of {name}",
                        hint="raise WFQUEUE_BUNDLE_MAX_BYTES, or make the task's change smaller")


def receive_commits(client: redis.Redis, name: str, repo: Path, ref: str) -> str:
    """Bring the commits sent as ``name`` into ``repo`` at ``ref`` (e.g. ``refs/heads/wfqueue/tasks/...``) and
    return their tip. Only ``ref`` changes: git refuses to move the checked-out branch, and the index and work
    tree are never read or written. Nothing is fetched when ``ref`` already points at the tip."""
    prefix = keys.commits_prefix(name)
    meta = read_meta(client, prefix)
    if meta is None:
        raise InfrastructureError(f"the commits of {name} are not in Redis (never sent, or expired)",
                                  hint=f"{RESEND_HINT}; raise WFQUEUE_BUNDLE_TTL_S if "
                                       "results wait longer than it before the coordinator takes them")
    if rev(repo, ref) == meta.commit:
        return meta.commit
    with tempfile.TemporaryDirectory(prefix="wfqueue-commits-") as scratch:
        target = Path(scratch) / "commits.bundle"
        download(client, prefix, meta, target, hint=RESEND_HINT)
        git(repo, "fetch", "--quiet", "--no-write-fetch-head", str(target), f"+{meta.ref}:{ref}")
    return meta.commit
