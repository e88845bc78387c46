"""The repository's journey to workers that share no disk with the coordinator, and an executed task's commits
back: pinning (with a snapshot of uncommitted changes), bundles in Redis, checkouts in a worker's cache."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from wfqueue import keys
from wfqueue.analysis import build_index
from wfqueue.cli.main import main
from wfqueue.errors import BadInputError, ConfigError, InfrastructureError, UnsafeRepositoryError
from wfqueue.pids import pid_namespace
from wfqueue.settings import Settings
from wfqueue.state import redis_client
from wfqueue.transport import repo as transport_repo
from wfqueue.transport.checkouts import (
    TMP_DIR,
    CheckoutUse,
    cache_dir,
    checked_out,
    choose_evictions,
    materialise,
    repository_for,
)
from wfqueue.transport.repo import (
    BundleMeta,
    ChunkSpan,
    chunk_plan,
    pin_repository,
    publish,
    read_meta,
    receive_commits,
    rev,
    send_commits,
)
from wfqueue.transport.workspace import CoordinatorFiles

PROJECT = Path(__file__).resolve().parents[2]
IDENTITY = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
            "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, **IDENTITY})
    return done.stdout


def raw_git(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True).stdout


def commit_files(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", message)
    return sh(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small user repository: a file in a folder, an executable script, a symlink, an ignore rule."""
    path = tmp_path / "project"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    commit_files(path, {"README.md": "hello\n", "src/app.py": "print('app')\n", ".gitignore": "*.log\n",
                        "run.sh": "#!/bin/sh\necho run\n"}, "first")
    (path / "run.sh").chmod(0o755)
    (path / "link").symlink_to("README.md")
    sh(path, "add", "-A")
    sh(path, "commit", "-q", "-m", "script and link")
    return path


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis_client(redis_url, 2.0)
    connection.flushdb()  # commits of different tests may coincide: each test starts with nothing published
    yield connection
    connection.close()


def worker_settings(tmp_path: Path, name: str = "worker", **values: int) -> Settings:
    return Settings(worker_cache_dir=tmp_path / name, **values)  # type: ignore[arg-type]


def tree_listing(repo: Path, commit: str) -> list[str]:
    """``mode sha path`` of every file of ``commit``, as ``git ls-tree -r`` lists them."""
    lines = sh(repo, "ls-tree", "-r", commit).splitlines()
    return sorted(f"{line.split()[0]} {line.split()[2]} {line.split(chr(9), 1)[1]}" for line in lines)


def folder_listing(folder: Path) -> list[str]:
    """The same listing, computed from the files of a folder (its own ``.git`` left out)."""
    entries = []
    for path in folder.rglob("*"):
        if (path.is_dir() and not path.is_symlink()) or path.relative_to(folder).parts[0] == ".git":
            continue
        if path.is_symlink():
            mode, data = "120000", os.readlink(path).encode()
        else:
            mode = "100755" if path.stat().st_mode & stat.S_IXUSR else "100644"
            data = path.read_bytes()
        sha = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        entries.append(f"{mode} {sha} {path.relative_to(folder).as_posix()}")
    return sorted(entries)


def user_state(repo: Path) -> dict[str, bytes]:
    """Everything of the user's repository that wfqueue must leave byte for byte as it was."""
    git_dir = repo / ".git"
    return {
        "status": raw_git(repo, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all"),
        "index": (git_dir / "index").read_bytes(),
        "stash": raw_git(repo, "stash", "list"),
        "branch": raw_git(repo, "branch", "-a", "-v"),
        "head": (git_dir / "HEAD").read_bytes(),
        "head_commit": raw_git(repo, "rev-parse", "HEAD"),
        "files": b"\n".join(f"{p}:{p.read_bytes()!r}".encode() for p in sorted(repo.rglob("*"))
                            if ".git" not in p.parts and p.is_file()),
    }


def make_dirty(repo: Path) -> None:
    (repo / "README.md").write_text("hello, edited\n", encoding="utf-8")  # a tracked edit
    (repo / "src" / "app.py").write_text("print('staged')\n", encoding="utf-8")
    sh(repo, "add", "src/app.py")  # a staged change
    (repo / "notes.txt").write_text("new file\n", encoding="utf-8")  # untracked, not ignored
    (repo / "debug.log").write_text("ignored\n", encoding="utf-8")
    (repo / ".workflow").mkdir()
    (repo / ".workflow" / "plan.md").write_text("planning writes here\n", encoding="utf-8")


# -- pure helpers ----------------------------------------------------------------------------------------------


def test_a_bundle_is_cut_into_chunks_that_cover_it_exactly() -> None:
    assert chunk_plan(0, 4) == []
    assert chunk_plan(3, 4) == [ChunkSpan(index=0, start=0, end=3)]
    assert chunk_plan(8, 4) == [ChunkSpan(index=0, start=0, end=4), ChunkSpan(index=1, start=4, end=8)]
    assert [span.end for span in chunk_plan(9, 4)] == [4, 8, 9]


def test_eviction_removes_the_least_recently_used_and_spares_those_in_use() -> None:
    uses = [CheckoutUse(commit=c, last_used_ns=t) for c, t in (("a", 30), ("b", 10), ("c", 20), ("d", 40))]
    assert choose_evictions(uses, 4, frozenset()) == []
    assert choose_evictions(uses, 2, frozenset()) == ["b", "c"]
    assert choose_evictions(uses, 2, frozenset({"b"})) == ["c", "a"]
    assert choose_evictions(uses, 1, frozenset({"a", "b", "c", "d"})) == []


def test_the_cache_is_the_setting_else_xdg_else_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_dir(worker_settings(tmp_path)) == (tmp_path / "worker").resolve()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir(Settings()) == (tmp_path / "xdg" / "wfqueue").resolve()
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # invalid by the XDG spec: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir(Settings()) == (tmp_path / "home" / ".cache" / "wfqueue").resolve()


# -- pinning ---------------------------------------------------------------------------------------------------


def test_a_clean_tree_pins_head_and_keeps_it_out_of_git_branch(repo: Path) -> None:
    head = sh(repo, "rev-parse", "HEAD").strip()
    pin = pin_repository(repo)
    assert (pin.head, pin.commit, pin.snapshot) == (head, head, False)
    assert sh(repo, "rev-parse", f"refs/wfqueue/pins/{head}").strip() == head
    assert "wfqueue" not in sh(repo, "branch", "-a")


@pytest.mark.parametrize("ignored", [True, False], ids=["workflow-ignored", "workflow-untracked"])
def test_session_folders_never_go_into_the_pinned_commit(repo: Path, ignored: bool) -> None:
    """Plans write under .workflow/: whether .gitignore names it or not, a tree clean apart from it pins HEAD."""
    if ignored:
        commit_files(repo, {".gitignore": "*.log\n.workflow/\n"}, "ignore sessions")
    (repo / ".workflow" / ".planning" / "CPLAN-x").mkdir(parents=True)
    (repo / ".workflow" / ".planning" / "CPLAN-x" / "plan-note.md").write_text("# note\n", encoding="utf-8")
    head = sh(repo, "rev-parse", "HEAD").strip()
    assert pin_repository(repo).commit == head
    (repo / "src" / "app.py").write_text("print('edited')\n", encoding="utf-8")
    pin = pin_repository(repo)
    assert pin.snapshot and not [p for p in tree_listing(repo, pin.commit) if ".workflow" in p]
    # Nor into the object store: every session file was hashed into .git/objects at every pin, to be reset after.
    note = repo / ".workflow" / ".planning" / "CPLAN-x" / "plan-note.md"
    blob = sh(repo, "hash-object", str(note)).strip()
    assert subprocess.run(["git", "-C", str(repo), "cat-file", "-e", blob], capture_output=True).returncode != 0


def test_uncommitted_changes_are_pinned_as_a_snapshot_without_touching_the_users_repository(repo: Path) -> None:
    make_dirty(repo)
    sh(repo, "stash", "push", "-q", "--", "src/app.py")  # a stash entry that must stay the only one
    (repo / "src" / "app.py").write_text("print('staged')\n", encoding="utf-8")
    sh(repo, "add", "src/app.py")
    before = user_state(repo)
    head = sh(repo, "rev-parse", "HEAD").strip()

    pin = pin_repository(repo)

    assert user_state(repo) == before
    assert pin.snapshot and pin.head == head and pin.commit != head
    assert sh(repo, "rev-parse", f"{pin.commit}^").strip() == head
    assert sh(repo, "show", f"{pin.commit}:README.md") == "hello, edited\n"
    assert sh(repo, "show", f"{pin.commit}:src/app.py") == "print('staged')\n"
    assert sh(repo, "show", f"{pin.commit}:notes.txt") == "new file\n"
    files = sh(repo, "ls-tree", "-r", "--name-only", pin.commit).split()
    assert "debug.log" not in files and ".workflow/plan.md" not in files
    # Kept from `git gc` by a ref that `git branch` does not show; the same state pins the same commit.
    sh(repo, "reflog", "expire", "--expire=now", "--all")
    sh(repo, "gc", "-q", "--prune=now")
    assert sh(repo, "cat-file", "-t", pin.commit).strip() == "commit"
    assert pin_repository(repo).commit == pin.commit
    assert "wfqueue" not in sh(repo, "branch", "-a")


def test_a_sparse_checkout_snapshot_keeps_the_files_left_out_of_the_work_tree(repo: Path) -> None:
    commit_files(repo, {"docs/guide.md": "guide\n"}, "docs")
    sh(repo, "sparse-checkout", "set", "src")
    assert not (repo / "docs").exists()
    (repo / "src" / "app.py").write_text("print('edited')\n", encoding="utf-8")
    pin = pin_repository(repo)
    assert pin.snapshot
    assert sh(repo, "show", f"{pin.commit}:docs/guide.md") == "guide\n"
    assert sh(repo, "show", f"{pin.commit}:src/app.py") == "print('edited')\n"


def test_a_folder_that_is_not_a_repository_or_has_no_commit_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(UnsafeRepositoryError) as not_git:
        pin_repository(plain)
    assert isinstance(not_git.value, BadInputError) and "git init" in not_git.value.hint
    sh(plain, "init", "-q")
    with pytest.raises(UnsafeRepositoryError) as empty:
        pin_repository(plain)
    assert "no commit" in empty.value.message and "git commit" in empty.value.hint


def test_a_shallow_clone_is_refused_unless_workers_fetch_from_repo_url(repo: Path, tmp_path: Path,
                                                                       client: redis.Redis) -> None:
    """`git clone --depth 1` (a CI job's checkout): the bundle named no prerequisite for the missing parents and
    every worker's fetch of it failed, hinted as a full cache; `wfqueue resume` failed the same way."""
    commit_files(repo, {"src/more.py": "x = 2\n"}, "more")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    with pytest.raises(UnsafeRepositoryError) as refused:
        pin_repository(shallow)
    assert "shallow clone" in refused.value.message and "git fetch --unshallow" in refused.value.hint
    assert "refs/wfqueue" not in sh(shallow, "for-each-ref")
    # From WFQUEUE_REPO_URL a worker fetches HEAD itself: nothing of the missing history travels in a bundle.
    assert pin_repository(shallow, history_from_url=True).commit == sh(shallow, "rev-parse", "HEAD").strip()
    # A resume whose bundle expired publishes the pinned commit again: refused too, nothing stored.
    head = sh(shallow, "rev-parse", "HEAD").strip()
    with pytest.raises(UnsafeRepositoryError, match="shallow clone"):
        publish(client, shallow, head, worker_settings(tmp_path))
    # An execution's first wave on the pin workers fetch from the URL: nothing to bundle (the whole history was).
    publish(client, shallow, head, worker_settings(tmp_path), have=head, have_at_url=True)
    assert client.keys("wfq:*") == []


def test_a_nested_repository_without_a_commit_is_left_out_of_the_snapshot(repo: Path) -> None:
    """`git add` refuses a repository inside the work tree that has no commit yet ("does not have a commit checked
    out"): every plan without a shared disk failed on a scratch `git init` folder."""
    scratch = repo / "tools" / "scratch"
    scratch.mkdir(parents=True)
    sh(scratch, "init", "-q")
    (scratch / "a.py").write_text("print(1)\n", encoding="utf-8")
    (repo / "notes.txt").write_text("new file\n", encoding="utf-8")
    pin = pin_repository(repo)
    assert pin.snapshot and sh(repo, "show", f"{pin.commit}:notes.txt") == "new file\n"
    assert "tools/" not in sh(repo, "ls-tree", "-r", "--name-only", pin.commit)


# -- bundles and checkouts --------------------------------------------------------------------------------------


def test_a_published_snapshot_materialises_on_a_worker_with_identical_files(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    make_dirty(repo)
    pin = pin_repository(repo)
    settings = worker_settings(tmp_path, bundle_ttl_s=900)
    publish(client, repo, pin.commit, settings)

    prefix = keys.bundle_prefix(pin.commit)
    stored = sorted(client.keys(f"{prefix}*"))
    assert stored == sorted([f"{prefix}meta", f"{prefix}chunk:0"])
    assert all(0 < int(client.ttl(key)) <= 900 for key in stored)

    checkout = materialise(client, pin.commit, settings)
    assert checkout.is_relative_to(tmp_path / "worker")
    assert folder_listing(checkout) == tree_listing(repo, pin.commit)
    assert (checkout / "notes.txt").read_text(encoding="utf-8") == "new file\n"
    assert materialise(client, pin.commit, settings) == checkout  # one checkout per commit
    # The checkout is a repository at the pinned commit with its history: the planner reads past changes there.
    log = subprocess.run(["git", "-C", str(checkout), "log", "--format=%H"], capture_output=True, text=True, check=True)
    assert log.stdout.split() == subprocess.run(["git", "-C", str(repo), "log", "--format=%H", pin.commit],
                                                capture_output=True, text=True, check=True).stdout.split()
    # ... less the commit that carries the uncommitted changes: the planner sees the user's own history.
    assert build_index(checkout).history == build_index(repo).history != []
    # A checkout made when checkouts were files alone gets its repository on its next use, files untouched.
    shutil.rmtree(checkout / ".git")
    assert materialise(client, pin.commit, settings) == checkout
    assert folder_listing(checkout) == tree_listing(repo, pin.commit)
    assert build_index(checkout).history == build_index(repo).history


def test_a_bundle_of_many_chunks_comes_back_whole_and_a_lost_chunk_is_reported(
        repo: Path, client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport_repo, "CHUNK_BYTES", 97)
    commit = pin_repository(repo).commit
    publish(client, repo, commit, worker_settings(tmp_path))
    meta = read_meta(client, keys.bundle_prefix(commit))
    assert meta is not None and meta.chunks > transport_repo.PIPELINE_CHUNKS + 1
    assert len(client.keys(f"{keys.bundle_prefix(commit)}chunk:*")) == meta.chunks

    checkout = materialise(client, commit, worker_settings(tmp_path, "first"))
    assert folder_listing(checkout) == tree_listing(repo, commit)

    client.delete(f"{keys.bundle_prefix(commit)}chunk:3")  # evicted by Redis under memory pressure
    with pytest.raises(InfrastructureError) as lost:
        materialise(client, commit, worker_settings(tmp_path, "second"))
    assert "chunk 3" in lost.value.message and "wfqueue resume" in lost.value.hint
    assert list((tmp_path / "second" / "checkouts").glob("*")) == []


def test_publishing_a_commit_again_stores_nothing_and_refreshes_its_expiry(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    commit = pin_repository(repo).commit
    settings = worker_settings(tmp_path, bundle_ttl_s=900)
    publish(client, repo, commit, settings)
    prefix = keys.bundle_prefix(commit)
    first = read_meta(client, prefix)
    for key in client.keys(f"{prefix}*"):
        client.expire(key, 5)

    publish(client, repo, commit, settings)

    assert read_meta(client, prefix) == first  # same temporary ref name inside: the bundle was not made again
    assert all(int(client.ttl(key)) > 5 for key in client.keys(f"{prefix}*"))


def test_a_thin_bundle_materialises_on_a_worker_that_never_saw_the_earlier_commit(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    settings = worker_settings(tmp_path)
    first = pin_repository(repo).commit
    publish(client, repo, first, settings)
    second = commit_files(repo, {"src/extra.py": "x = 1\n"}, "extra")
    publish(client, repo, second, settings, have=first)

    thin = read_meta(client, keys.bundle_prefix(second))
    full = read_meta(client, keys.bundle_prefix(first))
    assert isinstance(thin, BundleMeta) and isinstance(full, BundleMeta)
    assert thin.prerequisite == first and thin.size < full.size

    checkout = materialise(client, second, settings)
    assert folder_listing(checkout) == tree_listing(repo, second)


def test_a_bundle_above_the_cap_is_refused_and_nothing_is_stored(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    commit = pin_repository(repo).commit
    with pytest.raises(ConfigError) as refused:
        publish(client, repo, commit, worker_settings(tmp_path, bundle_max_bytes=100))
    assert "WFQUEUE_BUNDLE_MAX_BYTES (100 bytes)" in refused.value.message
    assert "WFQUEUE_REPO_URL" in refused.value.hint
    assert client.keys("wfq:*") == []
    assert "wfqueue/bundle" not in sh(repo, "for-each-ref")  # its temporary ref is gone too


def test_a_bundle_missing_a_chunk_is_stored_again_by_the_next_publish(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    """A chunk evicted (maxmemory with allkeys-lru) or expired a moment before its meta: the meta alone made every
    publish a no-op, so the error's own advice (`wfqueue resume`) failed the same way, for ever."""
    commit = pin_repository(repo).commit
    settings = worker_settings(tmp_path)
    publish(client, repo, commit, settings)
    client.delete(f"{keys.bundle_prefix(commit)}chunk:0")
    publish(client, repo, commit, settings)
    checkout = materialise(client, commit, settings)
    assert folder_listing(checkout) == tree_listing(repo, commit)


def test_a_bundle_claim_left_by_a_killed_publisher_holds_the_next_one_back_briefly(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    """A coordinator killed while it stored a bundle (SIGKILL, the OOM killer) left a 10-minute claim: the next plan
    of the same commit waited that long, silently. A claim whose holder died on this host is taken over at once."""
    commit = pin_repository(repo).commit
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    claim = f"{keys.bundle_prefix(commit)}{transport_repo.WRITING}"
    client.set(claim, f"{os.uname().nodename}:{dead}:{pid_namespace()}:feedbeef", ex=600)
    publish(client, repo, commit, worker_settings(tmp_path))
    assert read_meta(client, keys.bundle_prefix(commit)) is not None and client.get(claim) is None


def test_a_session_whose_bundle_is_refused_leaves_no_pin_in_the_users_repository(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    """The pin ref was written before the publish refused the bundle's size: no session named the commit, so
    nothing led the user to delete the ref, and it kept the snapshot's objects from `git gc`."""
    make_dirty(repo)
    settings = Settings(shared_disk=False, bundle_max_bytes=100)
    files = CoordinatorFiles(settings, client, "LPLAN-x", tmp_path / "session")
    with pytest.raises(ConfigError, match="WFQUEUE_BUNDLE_MAX_BYTES"):
        files.start(repo, None)
    assert "refs/wfqueue" not in sh(repo, "for-each-ref")
    published = CoordinatorFiles(Settings(shared_disk=False), client, "LPLAN-y", tmp_path / "session")
    transport = published.start(repo, None)
    assert transport is not None and sh(repo, "for-each-ref", "--format=%(refname)") == (
        f"refs/heads/main\nrefs/wfqueue/pins/{transport.commit}\n")


def test_a_bundle_that_is_not_in_redis_says_the_coordinator_must_publish_it_again(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    commit = pin_repository(repo).commit
    with pytest.raises(InfrastructureError) as missing:
        materialise(client, commit, worker_settings(tmp_path))
    assert "not in Redis" in missing.value.message and "wfqueue resume" in missing.value.hint
    assert not (tmp_path / "worker" / "checkouts" / commit).exists()


def test_two_processes_materialising_one_commit_build_one_checkout(
        repo: Path, client: redis.Redis, redis_url: str, tmp_path: Path) -> None:
    commit = pin_repository(repo).commit
    publish(client, repo, commit, worker_settings(tmp_path))
    (tmp_path / "worker" / TMP_DIR / "half-built").mkdir(parents=True)  # what a worker killed mid-build leaves
    script = ("import sys; from pathlib import Path; from wfqueue.settings import Settings; "
              "from wfqueue.state import redis_client; from wfqueue.transport.checkouts import materialise; "
              "print(materialise(redis_client(sys.argv[1], 5.0), sys.argv[2], "
              "Settings(worker_cache_dir=Path(sys.argv[3]))))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WFQUEUE_")}
    workers = [subprocess.Popen([sys.executable, "-c", script, redis_url, commit, str(tmp_path / "worker")],
                                cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    outputs = [worker.communicate(timeout=120) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], outputs
    assert {out.strip() for out, _ in outputs} == {str((tmp_path / "worker" / "checkouts" / commit).resolve())}
    assert [p.name for p in (tmp_path / "worker" / "checkouts").iterdir()] == [commit]
    assert list((tmp_path / "worker" / TMP_DIR).iterdir()) == []
    assert folder_listing(tmp_path / "worker" / "checkouts" / commit) == tree_listing(repo, commit)


def test_the_least_recently_used_checkout_is_evicted_but_never_one_in_use(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    commits = [pin_repository(repo).commit]
    for n in (2, 3, 4):
        commits.append(commit_files(repo, {f"f{n}.txt": f"{n}\n"}, f"commit {n}"))
    settings = worker_settings(tmp_path, checkout_cache_max=2)
    for commit in commits:
        publish(client, repo, commit, settings)
    c1, c2, c3, c4 = commits
    checkouts = tmp_path / "worker" / "checkouts"

    materialise(client, c1, settings)
    materialise(client, c2, settings)
    materialise(client, c1, settings)  # c1 used again: c2 is now the least recently used
    materialise(client, c3, settings)
    assert sorted(p.name for p in checkouts.iterdir()) == sorted([c1, c3])

    with checked_out(client, c1, worker_settings(tmp_path, checkout_cache_max=1)) as held:
        materialise(client, c3, settings)  # c1 becomes the least recently used, but a task reads it
        materialise(client, c4, worker_settings(tmp_path, checkout_cache_max=1))
        assert sorted(p.name for p in checkouts.iterdir()) == sorted([c1, c4])
        assert (held / "README.md").read_text(encoding="utf-8") == "hello\n"
    materialise(client, c2, worker_settings(tmp_path, checkout_cache_max=1))
    assert [p.name for p in checkouts.iterdir()] == [c2]


def test_a_worker_fetches_the_commit_from_repo_url_instead_of_redis(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    sh(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    commit = pin_repository(repo).commit
    for url, cache in ((str(remote), "by-path"), (remote.as_uri(), "by-url")):
        checkout = materialise(client, commit, worker_settings(tmp_path, cache), repo_url=url)
        assert folder_listing(checkout) == tree_listing(repo, commit)
    assert client.keys("wfq:*") == []  # nothing went through Redis

    make_dirty(repo)
    snapshot = pin_repository(repo).commit  # never pushed
    with pytest.raises(InfrastructureError) as refused:
        materialise(client, snapshot, worker_settings(tmp_path, "by-url"), repo_url=remote.as_uri())
    assert "push the commit" in refused.value.hint


def test_an_executed_branch_of_two_commits_comes_back_into_the_users_repository(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    base = pin_repository(repo).commit
    settings = worker_settings(tmp_path)
    publish(client, repo, base, settings)
    before = user_state(repo)

    # The worker: a task worktree in the cache's repository, two commits on the task's branch.
    local = repository_for(client, base, settings)
    worktree = tmp_path / "task"
    sh(local, "worktree", "add", "-q", "-b", "wfqueue/tasks/E1/T1", str(worktree), base)
    tip = ""
    for n in (1, 2):
        tip = commit_files(worktree, {f"task{n}.txt": f"change {n}\n"}, f"task change {n}")
    send_commits(client, local, tip, base, "E1/T1#1", settings)

    ref = "refs/heads/wfqueue/tasks/E1/T1"
    assert receive_commits(client, "E1/T1#1", repo, ref) == tip
    assert sh(repo, "log", "--format=%s", f"{base}..{ref}").split("\n")[:2] == ["task change 2", "task change 1"]
    assert sh(repo, "show", f"{ref}:task1.txt") == "change 1\n"
    assert receive_commits(client, "E1/T1#1", repo, ref) == tip  # again: nothing to do
    with pytest.raises(InfrastructureError):  # git refuses to move the checked-out branch
        receive_commits(client, "E1/T1#1", repo, "refs/heads/main")
    after = user_state(repo)
    assert after.pop("branch") != before.pop("branch")  # the task's branch is new; nothing else changed
    assert after == before
    assert sh(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"



def test_a_result_remembered_on_another_worker_is_sent_again_from_redis_or_refused_saying_why(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    """A coordinator that died before taking a task's result sends the task again; a worker whose repository
    never held the commit answered with the remembered one and failed (\"adds nothing\"), every `--continue`."""
    base = pin_repository(repo).commit
    publish(client, repo, base, worker_settings(tmp_path))
    first = repository_for(client, base, worker_settings(tmp_path, "host-a"))
    worktree = tmp_path / "task"
    sh(first, "worktree", "add", "-q", "-b", "wfqueue/tasks/E1/T1", str(worktree), base)
    tip = commit_files(worktree, {"task.txt": "change\n"}, "task change")
    send_commits(client, first, tip, base, "E1/T1#1", worker_settings(tmp_path, "host-a"))

    other = repository_for(client, base, worker_settings(tmp_path, "host-c"))
    assert rev(other, tip) is None  # host C's repository never had it
    send_commits(client, other, tip, base, "E1/T1#1", worker_settings(tmp_path, "host-c"))
    assert receive_commits(client, "E1/T1#1", repo, "refs/heads/wfqueue/tasks/E1/T1") == tip

    client.delete(*client.keys("wfq:commits:*"))  # expired before the task was sent again
    with pytest.raises(InfrastructureError) as lost:
        send_commits(client, other, tip, base, "E1/T1#1", worker_settings(tmp_path, "host-c"))
    assert "made on another worker" in lost.value.message and "--continue" in (lost.value.hint or "")

FULL_CACHE = """
import json, sys
from pathlib import Path
from wfqueue.errors import InfrastructureError
from wfqueue.settings import Settings
from wfqueue.state import redis_client
from wfqueue.transport.checkouts import materialise
url, commit, cache = sys.argv[1:]
try:
    materialise(redis_client(url, 2.0), commit, Settings(worker_cache_dir=Path(cache)))
    print(json.dumps({"error": None}))
except InfrastructureError as exc:
    print(json.dumps({"error": exc.message, "hint": exc.hint,
                      "left": [str(p) for p in (Path(cache) / "wfqueue-tmp").rglob("*")]}))
"""


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="mounts a small tmpfs")
def test_a_worker_cache_too_full_for_the_repository_says_so_and_keeps_no_bundle(
        repo: Path, client: redis.Redis, redis_url: str, tmp_path: Path) -> None:
    """Git's "No space left on device" came with a hint to `git fsck` the user's repository, and the bundle (as
    large as the repository) stayed in the cache until the next build."""
    (repo / "blob.bin").write_bytes(os.urandom(2_000_000))  # does not compress: the bundle is 2 MB, its pack too
    commit = commit_files(repo, {"more.txt": "more\n"}, "a large file")
    publish(client, repo, commit, worker_settings(tmp_path))
    cache = tmp_path / "small-cache"
    cache.mkdir()
    # Room for the bundle, not for the pack git makes of it as well: the disk fills during git's fetch.
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           f'mount -t tmpfs -o size=3m full "{cache}" && exec "$0" -c "$1" "$2" "$3" "$4"',
                           sys.executable, FULL_CACHE, redis_url, commit, str(cache)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["error"] and "No space left on device" in outcome["error"], outcome
    assert "WFQUEUE_WORKER_CACHE_DIR" in outcome["hint"] and "fsck" not in outcome["hint"], outcome
    assert outcome["left"] == [], "the bundle stayed in the cache"


def test_a_plan_of_a_shallow_clone_without_a_shared_disk_is_refused_before_anything_starts(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused after its session folder was made (an empty one left, listed by `status`), with exit 3."""
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing answers there: never asked
    assert main(["lite-plan", "Add a greeting", "--repo", str(shallow), "-y"]) == 2
    assert "is a shallow clone" in " ".join(capsys.readouterr().err.split())
    assert not (shallow / ".workflow").exists()
