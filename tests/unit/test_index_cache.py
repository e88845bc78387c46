"""The repository index is built once per state of the repository and read back by every later task."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import commit_in, git_in
from wfqueue.analysis import index as index_module
from wfqueue.analysis import index_cache
from wfqueue.analysis.files import SourceFile, has_code_file, no_source_code
from wfqueue.analysis.index import RepoIndex, build_index
from wfqueue.analysis.index_cache import cache_file, cached_index
from wfqueue.providers.offline.provider import OfflineProvider
from wfqueue.samples import make_service_repo


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every repository the cache had to scan, in order."""
    scanned: list[Path] = []

    def counting(repo: Path, **options: Any) -> RepoIndex:
        scanned.append(repo)
        return build_index(repo, **options)

    monkeypatch.setattr(index_cache, "build_index", counting)
    return scanned


def symbols_of(index: RepoIndex, path: str) -> list[str]:
    return [s.name for s in index.symbols[path]]


def test_a_second_task_reads_the_index_the_first_one_built(tmp_path: Path, builds: list[Path]) -> None:
    repo = make_service_repo(tmp_path / "repo", 3)
    first = OfflineProvider().index(str(repo))  # one task (one provider instance)...
    second = OfflineProvider().index(str(repo))  # ...and the next, in what may be another process
    assert len(builds) == 1
    assert second == first == build_index(repo)
    stored = cache_file(repo, 512 * 1024)
    assert stored.is_relative_to(repo / ".workflow" / ".cache") and stored.is_file()
    assert not (repo / ".workflow" / ".queue").exists()
    cached_index(repo, max_bytes=1024)  # another scan limit is another index
    assert len(builds) == 2


def test_an_edited_added_or_removed_file_invalidates_the_cache(tmp_path: Path, builds: list[Path]) -> None:
    repo = make_service_repo(tmp_path / "repo", 2)
    before = cached_index(repo)
    store = repo / "app" / "billing" / "store.py"
    store.write_text(store.read_text() + "\n\ndef purge_billing_rows() -> None:\n    pass\n")
    after = cached_index(repo)
    assert len(builds) == 2
    assert "purge_billing_rows" in symbols_of(after, "app/billing/store.py")
    assert "purge_billing_rows" not in symbols_of(before, "app/billing/store.py")
    assert cached_index(repo) == after and len(builds) == 2

    (repo / "app" / "billing" / "limits.py").write_text("def limit_for(user_id: str) -> int:\n    return 5\n")
    assert "app/billing/limits.py" in {f.path for f in cached_index(repo).files}
    (repo / "app" / "billing" / "limits.py").unlink()
    assert "app/billing/limits.py" not in {f.path for f in cached_index(repo).files}
    assert len(builds) == 4


def test_a_quick_edit_that_keeps_size_and_time_is_still_seen(tmp_path: Path, builds: list[Path]) -> None:
    # Two writes within the file system's timestamp resolution can leave size and mtime equal.
    repo = make_service_repo(tmp_path / "repo", 1)
    api = repo / "app" / "billing" / "api.py"
    os.utime(api)  # written just now, as far as the cache can tell
    cached_index(repo)
    stat = api.stat()
    api.write_text(api.read_text().replace("handle_billing_request", "handle_billing_requesT"))
    os.utime(api, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert api.stat().st_size == stat.st_size
    assert "handle_billing_requesT" in symbols_of(cached_index(repo), "app/billing/api.py")
    assert len(builds) == 2


def test_a_corrupt_cache_file_is_rebuilt_not_fatal(tmp_path: Path, builds: list[Path]) -> None:
    repo = make_service_repo(tmp_path / "repo", 2)
    good = cached_index(repo)
    stored = cache_file(repo, 512 * 1024)
    for damage in (b"{not json", stored.read_bytes()[: stored.stat().st_size // 2], b""):
        stored.write_bytes(damage)
        assert cached_index(repo) == good
    assert len(builds) == 4
    assert cached_index(repo) == good and len(builds) == 4  # the rebuilt file is whole again


def committed_service_repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """A sample service repository with one commit, and the git command line to run more in it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = make_service_repo(tmp_path / "repo", 2)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    return repo, git


def test_git_does_not_list_the_untracked_files_of_skipped_folders(tmp_path: Path) -> None:
    """Months of sessions leave tens of thousands of files in .workflow/ (nobody is told to ignore it): git
    listed them all at every plan, and every planning task, to have them dropped here; a plan took seconds more
    (0.2 s of listing for 30 000 files). git prunes those folders itself now; tracked files there stay listed."""
    from wfqueue.analysis.files import _git_listed, repository_files

    repo, git = committed_service_repo(tmp_path)
    for n in range(3):
        (repo / ".workflow" / ".lite-plan" / f"s{n}").mkdir(parents=True)
        (repo / ".workflow" / ".lite-plan" / f"s{n}" / "plan.json").write_text("{}")
    (repo / "node_modules" / "left-pad").mkdir(parents=True)
    (repo / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
    (repo / "src" / "pkg.egg-info").mkdir(parents=True)
    (repo / "src" / "pkg.egg-info" / "PKG-INFO").write_text("Name: pkg\n")
    (repo / "src" / "build").mkdir(parents=True)
    (repo / "src" / "build" / "builder.py").write_text("X = 1\n")
    subprocess.run([*git, "add", "src/build/builder.py"], check=True)
    (repo / "src" / "build" / "scratch.py").write_text("Y = 2\n")  # untracked, in a skipped folder's name
    (repo / "src" / "new.py").write_text("Z = 3\n")
    listed = dict(_git_listed(repo) or [])
    assert not any(p.startswith((".workflow/", "node_modules/", "src/pkg.egg-info/")) for p in listed), listed
    assert listed["src/build/builder.py"] is True and listed["src/new.py"] is False
    assert "src/build/scratch.py" not in listed
    assert {"src/build/builder.py", "src/new.py"} <= set(repository_files(repo))


def test_uncommitted_changes_of_a_git_repository_are_seen(tmp_path: Path, builds: list[Path]) -> None:
    repo, _ = committed_service_repo(tmp_path)
    cached_index(repo)
    store = repo / "app" / "catalog" / "store.py"
    store.write_text(store.read_text() + "\n\ndef forget_user(user_id: str) -> None:\n    pass\n")
    (repo / "app" / "catalog" / "export.py").write_text("def export_users() -> None:\n    pass\n")  # not added yet
    index = cached_index(repo)
    assert "forget_user" in symbols_of(index, "app/catalog/store.py")
    assert "export_users" in symbols_of(index, "app/catalog/export.py")
    (repo / "app" / "catalog" / "export.py").write_text("def export_all() -> None:\n    pass\n")
    assert len(builds) == 2
    assert "export_all" in symbols_of(cached_index(repo), "app/catalog/export.py")
    assert len(builds) == 3
    # A build's output git ignores, changing: the index reads none of it, so it is not built again.
    (repo / ".gitignore").write_text("out/\n")
    cached_index(repo)
    assert len(builds) == 4  # the .gitignore is a file of the repository
    (repo / "out").mkdir()
    (repo / "out" / "bundle.js").write_text("var x = 1;\n")
    cached_index(repo)
    assert len(builds) == 4
    # An ignore rule outside the working tree's files (.git/info/exclude) hiding an untracked file: the index
    # stored with it is not what the planners may read any more.
    with (repo / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("app/catalog/export.py\n")
    assert "app/catalog/export.py" not in {f.path for f in cached_index(repo).files}
    assert len(builds) == 5


def test_files_git_ignores_and_a_submodules_files_are_not_the_repositorys_own(tmp_path: Path) -> None:
    """The scan read every file under the repository: a generated folder git ignores, or a vendored submodule,
    was planned (a whole collab area of its own), `validate` accepted it, and `execute` refused the plan (git
    does not track those files here). Their files are not indexed, nor looked at for "is there code at all"."""
    repo, git = committed_service_repo(tmp_path)
    lib = tmp_path / "vendor-lib"
    (lib / "src").mkdir(parents=True)
    (lib / "src" / "retry.py").write_text("def retry_job() -> None:\n    pass\n")
    subprocess.run(["git", "-C", str(lib), "-c", "user.name=t", "-c", "user.email=t@example.com", "init", "-q"],
                   check=True)
    subprocess.run(["git", "-C", str(lib), "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A"],
                   check=True)
    subprocess.run(["git", "-C", str(lib), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm",
                    "lib"], check=True)
    subprocess.run([*git, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "libs/retry"],
                   check=True, capture_output=True)
    (repo / ".gitignore").write_text("generated/\n")
    (repo / "generated").mkdir()
    (repo / "generated" / "retry_client.py").write_text("def retry_job() -> None:\n    pass\n")

    # A package git tracks under a name the walk skipped (pypa/build keeps its code in src/build/) is the project's;
    # an untracked virtual environment is not.
    (repo / "src" / "build").mkdir(parents=True)
    (repo / "src" / "build" / "builder.py").write_text("def build_sdist() -> None:\n    pass\n")
    subprocess.run([*git, "add", "src/build/builder.py"], check=True)
    (repo / "venv" / "lib").mkdir(parents=True)
    (repo / "venv" / "lib" / "site.py").write_text("X = 1\n")

    # A tracked file kept locally changed (`git update-index --skip-worktree`) is there, and the project's.
    subprocess.run([*git, "update-index", "--skip-worktree", "app/catalog/store.py"], check=True)

    paths = {f.path for f in build_index(repo).files}
    assert "app/catalog/store.py" in paths and ".gitignore" in paths and "src/build/builder.py" in paths
    assert not any(p.startswith(("generated/", "libs/", "venv/")) for p in paths), sorted(paths)

    only_ignored = tmp_path / "only-ignored"
    only_ignored.mkdir()
    (only_ignored / ".gitignore").write_text("*.py\n")
    (only_ignored / "tool.py").write_text("X = 1\n")
    subprocess.run(["git", "-C", str(only_ignored), "init", "-q"], check=True)
    assert not has_code_file(only_ignored) and has_code_file(repo)
    # Only a file that is not UTF-8 (the index leaves it out as well): no word about sizes.
    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "tool.py").write_bytes(b"NAME = 'caf\xe9'\n")
    assert has_code_file(latin) and "larger than" not in no_source_code(latin, 512 * 1024).message


def test_a_copy_inside_another_project_that_ignores_it_is_read_whole(tmp_path: Path) -> None:
    """`make demo` plans a copy under .demo/, which the surrounding checkout ignores: by git's list it would have
    no files at all."""
    outer, _ = committed_service_repo(tmp_path)
    (outer / ".gitignore").write_text(".demo/\n")
    copy = make_service_repo(outer / ".demo" / "sample", 2)
    assert "app/catalog/store.py" in {f.path for f in build_index(copy).files}
    assert has_code_file(copy)


def test_a_commit_of_edits_already_scanned_renews_the_history_without_a_scan(
        tmp_path: Path, builds: list[Path]) -> None:
    repo, git = committed_service_repo(tmp_path)
    assert cached_index(repo).history == []  # the first commit adds everything: it is not a change
    store = repo / "app" / "catalog" / "store.py"
    store.write_text(store.read_text() + "\n\ndef retry_order(order_id: str) -> None:\n    pass\n")
    edited = cached_index(repo)  # the edit is scanned (uncommitted)
    assert len(builds) == 2 and edited.history == []
    subprocess.run([*git, "commit", "-qam", "Retry failed orders"], check=True)
    index = cached_index(repo)  # no file changed: only HEAD says the history is stale
    assert len(builds) == 2  # not scanned again
    assert [change.paths for change in index.history] == [["app/catalog/store.py"]]
    assert index.model_copy(update={"history": []}) == edited.model_copy(update={"history": []})
    assert cached_index(repo) == index and len(builds) == 2  # stored with its new HEAD


def test_an_unwritable_cache_folder_only_costs_the_cache(tmp_path: Path, builds: list[Path]) -> None:
    repo = make_service_repo(tmp_path / "repo", 1)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    assert cached_index(repo, cache_dir=blocker / "index") == build_index(repo)
    assert cached_index(repo, cache_dir=blocker / "index") == build_index(repo)
    assert len(builds) == 2


RACE = """
import sys
from pathlib import Path
from wfqueue.analysis.index_cache import cached_index
print(len(cached_index(Path(sys.argv[1])).files))
"""


def test_processes_racing_on_one_repository_all_get_a_valid_index(tmp_path: Path) -> None:
    repo = make_service_repo(tmp_path / "repo", 12)
    racers = [subprocess.Popen([sys.executable, "-c", RACE, str(repo)], stdout=subprocess.PIPE, text=True)
              for _ in range(3)]
    outputs = [proc.communicate(timeout=120)[0].strip() for proc in racers]
    expected = build_index(repo)
    assert [proc.returncode for proc in racers] == [0, 0, 0]
    assert outputs == [str(len(expected.files))] * 3
    stored = cache_file(repo, 512 * 1024).read_bytes().split(b"\n", 1)[1]
    assert RepoIndex.model_validate_json(stored) == expected


def test_a_repository_past_what_the_index_reads_is_told_before_the_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The index read the first 20 000 files in path order and planned the wrong files of a 45 000-file
    repository, saying nothing. A command planning a repository past WFQUEUE_INDEX_MAX_FILES says what it may
    leave out, and the setting reaches the index."""
    from wfqueue.analysis import files
    from wfqueue.cli.main import main
    from wfqueue.providers.offline.provider import OfflineProvider
    from wfqueue.workflow import base

    repo, _ = committed_service_repo(tmp_path)
    listed = len(list(files.repository_files(repo)))
    assert files.files_past_the_index(repo, files.DEFAULT_MAX_INDEXED_FILES) == (listed, 0)
    assert files.files_past_the_index(repo, listed - 3) == (listed, 3)
    indexed = OfflineProvider(max_files=listed - 3).index(str(repo))
    assert len(indexed.files) <= listed - 3 and indexed.files[-1].path < indexed.unread[-1]  # the last in order
    monkeypatch.setenv("WFQUEUE_INDEX_MAX_FILES", str(listed - 3))
    # Stopped right after its checks, before a Redis and workers start.
    monkeypatch.setattr(base.WorkflowCoordinator, "runtime", lambda *_a, **_k: (_ for _ in ()).throw(SystemExit))
    with pytest.raises(SystemExit):
        main(["lite-plan", "Retry failed jobs", "--repo", str(repo), "-y"])
    err = " ".join(capsys.readouterr().err.split())
    assert f"{repo} has {listed} files: the offline planner reads the first {listed - 3} text files in path " \
           "order (WFQUEUE_INDEX_MAX_FILES), so up to 3 files after them may not be planned; raise it" in err, err


def test_a_file_the_index_did_not_read_is_changed_when_the_requirement_names_it(tmp_path: Path) -> None:
    """A file over the size limit (or not UTF-8) was not in the index: a requirement naming it had the plan
    create it anew ("Create app/schema.py") or change other files."""
    from wfqueue.analysis.index import build_index
    from wfqueue.providers.offline.changes import named_paths
    from wfqueue.providers.offline.new_module import new_module_path
    from wfqueue.providers.offline.understand import relevant_files

    repo, git = committed_service_repo(tmp_path)
    (repo / "app" / "schema.py").write_text("".join(f"class Model{k}:\n    field = {k}\n\n" for k in range(200)))
    (repo / "app" / "legacy.py").write_bytes("# Auteur: Fran\xe7ois\nclass Legacy:\n    pass\n".encode("latin-1"))
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "big and old files"], check=True)
    index = build_index(repo, max_bytes=2_000)
    assert "app/schema.py" not in {f.path for f in index.files}
    assert {"app/schema.py", "app/legacy.py"} <= set(index.unread)
    requirement = "Add a created_at field to Model7 in app/schema.py"
    assert named_paths(index, requirement) == [("app/schema.py", True)]
    assert new_module_path(index, [p for p, _ in relevant_files(index, requirement)], requirement) is None
    assert relevant_files(index, requirement) == [("app/schema.py", 1.0)]
    assert relevant_files(index, "Export CSV from app/legacy.py") == [("app/legacy.py", 1.0)]
    # A collaborative plan's area task too (it created the file anew: validate saw nothing wrong).
    from wfqueue.collab.assemble import allocate
    from wfqueue.providers.offline.area import plan_area
    from wfqueue.providers.offline.understand import understand

    analysis = allocate(understand(index, requirement, 2), "CPLAN-u", requirement, 2)
    files = [(f.path, f.action) for s in analysis.sub_domains
             for t in plan_area(index, analysis, s.focus_area).tasks for f in t.files]
    assert ("app/schema.py", "modify") in files and ("app/schema.py", "create") not in files, files


def test_a_large_repository_is_told_its_index_is_built_first_until_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A 45 000-file repository's plan printed nothing for 30 s after its workers were ready: the first task was
    building the index."""
    from wfqueue.analysis import files
    from wfqueue.cli.main import main
    from wfqueue.workflow import base

    repo, _ = committed_service_repo(tmp_path)
    listed = len(list(files.repository_files(repo)))
    monkeypatch.setattr(base, "LARGE_REPOSITORY_FILES", listed)
    monkeypatch.setattr(base.WorkflowCoordinator, "runtime", lambda *_a, **_k: (_ for _ in ()).throw(SystemExit))
    said = f"the offline planner indexes the repository's {listed} files first, in the plan's first task"
    with pytest.raises(SystemExit):
        main(["lite-plan", "Retry failed jobs", "--repo", str(repo), "-y"])
    assert said in " ".join(capsys.readouterr().err.split())
    cached_index(repo)  # as the plan's first task leaves it
    with pytest.raises(SystemExit):
        main(["lite-plan", "Retry failed jobs", "--repo", str(repo), "-y"])
    assert "indexes the repository" not in capsys.readouterr().err


def test_an_edit_to_one_file_parses_that_file_again_not_the_others(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing one file of a large repository made the next plan parse every file again (20 000 files: 8.7 s
    of scan before its first model call)."""
    repo = make_service_repo(tmp_path / "repo", 3)
    (repo / "web").mkdir()
    (repo / "web" / "client.js").write_text("import { api } from './api.js'\nexport function load() {}\n")
    (repo / "web" / "api.js").write_text("export const api = 1\n")
    cached_index(repo)
    parsed: list[str] = []
    analyse = index_module._analyse

    def counting(source: SourceFile, *args: Any) -> Any:
        parsed.append(source.path)
        return analyse(source, *args)

    monkeypatch.setattr(index_module, "_analyse", counting)
    store = repo / "app" / "billing" / "store.py"
    store.write_text(store.read_text() + "\n\ndef purge_billing_rows() -> None:\n    pass\n")
    edited = cached_index(repo)
    assert parsed == ["app/billing/store.py"]
    assert "purge_billing_rows" in symbols_of(edited, "app/billing/store.py")
    assert edited == build_index(repo)  # what a full scan gives, the other files' analyses included

    parsed.clear()  # a file added (every import may resolve anew), then one removed: each a full scan
    (repo / "web" / "extra.js").write_text("export const extra = 2\n")
    assert cached_index(repo) == build_index(repo) and "web/client.js" in parsed
    parsed.clear()
    (repo / "web" / "api.js").unlink()
    after = cached_index(repo)
    assert after == build_index(repo) and "web/client.js" in parsed and after.imports["web/client.js"] == []


def test_a_task_lists_the_repository_once_to_read_build_or_renew_its_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each task listed a repository up to four times to get its index (the cache's check, its manifest, the
    scan, the files it did not read): git walks every folder to list untracked files, 0.4 s at 20 000 files."""
    from wfqueue.analysis import files

    repo, _ = committed_service_repo(tmp_path)
    listings: list[Path] = []
    git_listed = files._git_listed

    def counting(root: Path) -> Any:
        listings.append(root)
        return git_listed(root)

    monkeypatch.setattr(files, "_git_listed", counting)
    built = cached_index(repo)
    assert built == build_index(repo) and len(listings) == 2  # the cache's build, then a scan of its own
    listings.clear()
    assert cached_index(repo) == built and len(listings) == 1
    store = repo / "app" / "billing" / "store.py"
    store.write_text(store.read_text() + "\n\ndef purge_billing_rows() -> None:\n    pass\n")
    renewed = cached_index(repo)
    assert "purge_billing_rows" in symbols_of(renewed, "app/billing/store.py") and len(listings) == 2
    (repo / "app" / "billing" / "limits.py").write_text("def limit_for(user_id: str) -> int:\n    return 5\n")
    assert "app/billing/limits.py" in {f.path for f in cached_index(repo).files} and len(listings) == 3


def test_a_file_recorded_with_its_digest_counts_as_unchanged_only_with_that_content() -> None:
    before = [("a.py", 10, 5, ""), ("b.py", 10, 5, "digest-b"), ("c.py", 10, 5, ""), ("gone.py", 1, 1, "")]
    now = [("a.py", 10, 5, ""), ("b.py", 10, 5, ""), ("c.py", 11, 6, ""), ("new.py", 3, 3, "")]
    digests = {"b.py": "digest-b"}
    assert index_cache.unchanged_files(before, now, lambda p: digests.get(p, "other")) == {"a.py", "b.py"}
    digests["b.py"] = "edited within the timestamps' resolution"
    assert index_cache.unchanged_files(before, now, lambda p: digests.get(p, "other")) == {"a.py"}
    # A digest the manifest of now recorded is the one compared: the file is not read again.
    recorded_now = [("b.py", 10, 5, "digest-b")]
    assert index_cache.unchanged_files(before, recorded_now, lambda p: pytest.fail(f"{p} read again")) == {"b.py"}


def test_a_tracked_file_deleted_from_the_disk_is_not_listed_as_there(tmp_path: Path) -> None:
    """git lists a tracked file deleted since: the index listed it among the files it did not read (a requirement
    naming it was planned as a change to it), and kept listing it from the cache once the deletion was committed."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git_in(repo, "init", "-q")
    commit_in(repo, "start", {"app.py": "def serve():\n    return 1\n", "docs/logo.svg": "<svg/>\n"})
    (repo / "docs" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    git_in(repo, "add", "-A")
    git_in(repo, "commit", "-qm", "logo")
    assert cached_index(repo).unread == ["docs/logo.png"]  # binary: there, not read
    (repo / "docs" / "logo.png").unlink()
    assert cached_index(repo).unread == [] == build_index(repo).unread
    git_in(repo, "commit", "-qam", "drop the logo")
    assert cached_index(repo) == build_index(repo)
