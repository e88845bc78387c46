"""Rules every offline plan obeys by construction: no dependency cycles, support files left alone,
new modules only for named components, plan size following complexity, titles and criteria a person
can act on; plan.md in English."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.conftest import write
from wfqueue.analysis import build_index, rank_symbols
from wfqueue.analysis.files import is_test_path
from wfqueue.analysis.localize import MOST_FILES, RELATIVE_CUT, focus, localize, named_identifiers
from wfqueue.analysis.roles import file_role, plannable
from wfqueue.collab.assemble import allocate
from wfqueue.lite.render import render_plan
from wfqueue.providers.offline.area import plan_area
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.changes import (
    dependency_order,
    earlier_needs,
    effort_of,
    symbols_to_change,
    task_title,
)
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.providers.offline.new_module import named_component, new_module_path
from wfqueue.providers.offline.understand import understand

CYCLE = {
    "shop/__init__.py": "",
    "shop/orders.py": ("from shop.payments import charge\n\ndef place_order(cart):\n"
                       "    '''Place an order and charge the payment.'''\n    return charge(cart)\n"),
    "shop/payments.py": ("from shop.orders import place_order\n\ndef charge(cart):\n"
                         "    '''Charge a payment for an order.'''\n    return refund_order(cart)\n\n"
                         "def refund_order(cart):\n    return place_order\n"),
    "shop/receipts.py": ("from shop.payments import charge\n\ndef print_receipt(order):\n"
                         "    '''Receipt of an order payment.'''\n    return charge\n"),
    "tests/test_orders.py": "from shop.orders import place_order\n\ndef test_place():\n    assert place_order\n",
}


def collab_plan(repo: Path, requirement: str, max_agents: int = 4):  # type: ignore[no-untyped-def]
    index = build_index(repo)
    analysis = allocate(understand(index, requirement, max_agents), "CPLAN-r", requirement, max_agents)
    return index, analysis, [t for s in analysis.sub_domains for t in plan_area(index, analysis, s.focus_area).tasks]


def has_cycle(edges: dict[str, list[str]]) -> bool:
    state: dict[str, int] = {}

    def visit(node: str) -> bool:
        state[node] = 1
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1 or (nxt not in state and visit(nxt)):
                return True
        state[node] = 2
        return False

    return any(node not in state and visit(node) for node in list(edges))


def test_an_import_cycle_orders_its_files_instead_of_making_a_task_cycle(tmp_path: Path) -> None:
    repo = write(tmp_path, CYCLE)
    _index, analysis, tasks = collab_plan(
        repo, "Refund the order in shop/orders.py when the charge in shop/payments.py fails")
    planned = {f.path for t in tasks for f in t.files}
    assert {"shop/orders.py", "shop/payments.py"} <= planned  # both sides of the import cycle are planned
    assert not has_cycle({t.id: t.depends_on for t in tasks})
    assert not has_cycle({s.focus_area: s.dependencies for s in analysis.sub_domains})
    # the order still says something: one of the two waits for the other
    by_path = {t.files[0].path: t for t in tasks}
    assert by_path["shop/orders.py"].depends_on or by_path["shop/payments.py"].depends_on


def test_dependency_order_breaks_cycles_by_position() -> None:
    needs = {"a": ["b"], "b": ["a"], "c": ["a"]}
    order = dependency_order(["a", "b", "c"], needs)
    earlier = earlier_needs(order, needs)
    assert not has_cycle(earlier) and earlier["c"] == ["a"]


def test_support_files_are_not_planned_unless_named(tmp_path: Path) -> None:
    body = "export function buildRequest(config) { /* proxy request config headers */ return config }\n"
    repo = write(tmp_path, {
        "lib/request.js": body,
        "lib/proxy.js": "export function proxyRequest(config) { return config }\n",
        "index.d.ts": "export interface RequestConfig { proxy: string; headers: object } // proxy request config\n" * 5,
        "gulpfile.js": "// build the proxy request bundle\nexport function proxyRequestBuild() {}\n",
        "karma.conf.js": "// proxy request config for the browser tests\nmodule.exports = {}\n",
        "bin/release.js": "// release the proxy request config package\n",
        "vendor/agent.js": "export function proxyRequestConfig() {}\n",
        "test/request.test.js": "import { buildRequest } from '../lib/request.js'\n",
    })
    index = build_index(repo)
    requirement = "Honour the proxy setting of the request config"
    planned = [p for p, _ in localize(index, requirement)]
    assert planned and all(file_role(p) == "source" for p in planned), planned
    assert plannable("index.d.ts", False, "Fix the TypeScript types of the request config in index.d.ts")
    assert plannable("gulpfile.js", False, "Speed up the gulpfile build")
    assert not plannable("gulpfile.js", False, requirement)
    assert [file_role(p) for p in ("index.d.ts", "gulpfile.js", "karma.conf.js", "bin/release.js",
                                   "vendor/agent.js", ".github/workflows/ci.js")] == \
        ["types", "build", "build", "script", "vendored", "ci"]
    # A monorepo's benchmark package is no product code (zod's packages/bench was planned for a string fix); a
    # package's own tools/ module under src/ is.
    assert [file_role(p) for p in ("packages/bench/compile-matrix.ts", "packages/zod/src/tools/x.ts",
                                   "crates/benchmarks/src/main.rs", "src/tools/cli.py")] == \
        ["script", "source", "script", "source"]


def test_a_new_module_only_for_a_named_component_beside_its_relative(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    named = "Add a RateLimiter middleware that limits API requests per user"
    assert named_component(index, named) == (["rate", "limiter"], "middleware")
    assert named_component(index, "Ship a new `retry` module for flaky calls") == (["retry"], "module")
    assert new_module_path(index, ["notes_api/server.py", "notes_api/api/middleware.py"], named) == \
        "notes_api/api/rate_limiter.py"  # beside middleware.py, the file sharing its kind
    _, _, tasks = collab_plan(sample_repo, named)
    create = next(t for t in tasks if t.files[0].action == "create")
    assert create.files[0].path == "notes_api/api/rate_limiter.py" and not create.depends_on
    assert all(re.search(r"`[^`]+`", c) for c in create.convergence.criteria)
    assert any(create.id in t.depends_on for t in tasks if t.files[0].path == "notes_api/api/middleware.py")
    for loose in ("Fix the mistake in job budget handling", "Add per-user rate limiting to the API",
                  "Add a new cache module"):  # no named component, or one that exists (cache.py)
        assert new_module_path(index, ["notes_api/api/middleware.py"], loose) is None, loose


def test_a_new_module_is_named_as_most_of_its_folder_names_files_and_more_kinds_are_components(
        tmp_path: Path) -> None:
    """zod's core/ names files to-json-schema.ts and json-schema.ts: one sibling, compile.ts, made the new helper
    toZod.ts. And "Add a PDF renderer" named no component: gin's six renderers were changed instead of a new one."""
    write(tmp_path, {"core/compile.ts": "export function compile() {}\n",
                     "core/to-json-schema.ts": "export function toJSONSchema() {}\n",
                     "core/json-schema.ts": "export type JSONSchema = {}\n",
                     "core/util.ts": "export const noop = () => {}\n",
                     "render/json.go": "package render\n\ntype JSON struct{}\n",
                     "render/xml.go": "package render\n\ntype XML struct{}\n"})
    index = build_index(tmp_path)
    assert new_module_path(index, ["core/compile.ts"], "Add a new zod schema helper that compiles fast") == \
        "core/zod-schema.ts"
    assert named_component(index, "Add a PDF renderer: a new render.PDF type") == (["pdf"], "renderer")
    assert new_module_path(index, ["render/json.go"], "Add a PDF renderer: a new render.PDF type") == "render/pdf.go"


def test_a_component_placed_in_existing_code_gets_no_module_of_its_own(sample_repo: Path) -> None:
    """sinatra: "Add a redirect_permanent helper that sends a 308 redirect, next to the existing redirect helper"
    planned sinatra-contrib/lib/sinatra/redirect_permanent.rb, which nobody asked for."""
    index = build_index(sample_repo)
    assert named_component(index, "Add a RateLimiter middleware that limits requests") is not None
    assert named_component(index, "Add a rate_limit helper next to the existing token helpers") is None
    # the placement must be said of the component, not elsewhere in the requirement
    assert named_component(index, "Add a RedisSessionInterface backend; keep it working within existing "
                                  "deployments") is not None


def test_a_missing_file_the_requirement_names_is_created_by_that_name(sample_repo: Path) -> None:
    """It was created under a name made up from the requirement's words (rq/exponential_backoff.py for "an
    exponential backoff helper in rq/backoff.py")."""
    index = build_index(sample_repo)
    requirement = "Add an exponential backoff helper in notes_api/storage/backoff.py and use it when saving notes"
    draft = plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])
    created = [(f.path, t.id) for t in draft.tasks for f in t.files if f.action == "create"]
    assert [path for path, _ in created if not path.startswith("tests/")] == ["notes_api/storage/backoff.py"]
    assert any(created[0][1] in t.depends_on for t in draft.tasks)  # used by a change that waits for it
    _, _, tasks = collab_plan(sample_repo, requirement)
    assert any(f.path == "notes_api/storage/backoff.py" and f.action == "create" for t in tasks for f in t.files)
    # Only in a folder the repository has; an existing file is changed, not created; a test file is the test
    # task's to place; a path given as an example is no file to make.
    focus = ["notes_api/server.py"]
    assert new_module_path(index, focus, "Add scripts/tools/x.py for the release") is None
    assert new_module_path(index, focus, "Fix notes_api/server.py") is None
    assert new_module_path(index, focus, "Fix the retry in notes_api/server.py; add a regression test in "
                                         "tests/test_retry.py") is None
    assert new_module_path(index, focus, "Accept config paths like notes_api/settings.py in the server") is None


def test_task_count_follows_complexity(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    fix = "Fix the token expiry check in notes_api/auth/tokens.py"
    small = plan_tasks(index, fix, "s", assess(fix, signals(index, fix), False), [], [])
    assert next(f.path for t in small.tasks for f in t.files) == "notes_api/auth/tokens.py"
    assert len(small.tasks) == 2  # the change and its test
    assert any("test" in f.path for f in small.tasks[-1].files)
    wide = "Refactor the storage layer and authentication into a modular architecture"
    large = plan_tasks(index, wide, "s", assess(wide, signals(index, wide), False), [], [])
    assert len(large.tasks) > len(small.tasks)
    _, analysis, _ = collab_plan(sample_repo, fix)
    assert len(analysis.sub_domains) == 2  # one agent for the change, one for its tests


def test_focus_plans_a_dominant_file_alone() -> None:
    assert focus([("a.py", 9.0), ("b.py", 3.0), ("c.py", 2.9)]) == [("a.py", 9.0)]
    assert [p for p, _ in focus([("a.py", 4.0), ("b.py", 3.5), ("c.py", 1.0)])] == ["a.py", "b.py"]


def test_focus_plans_more_files_when_the_ranking_is_flat() -> None:
    # A best file only a little ahead is no sign the change is that file alone: every file close
    # to it is planned, up to MOST_FILES, and nothing far below it.
    flat = [(f"m{n}.py", 10.0 - n) for n in range(10)]
    assert [p for p, _ in focus(flat)] == [f"m{n}.py" for n in range(MOST_FILES)]
    assert [p for p, _ in focus([("a.py", 5.0), ("b.py", 3.0), ("c.py", 2.0), ("d.py", 1.0)])] == \
        ["a.py", "b.py", "c.py"]  # d.py scores under RELATIVE_CUT of the best
    assert 1.0 < RELATIVE_CUT * 5.0 < 2.0


def test_of_two_files_matching_alike_the_larger_ranks_first(tmp_path: Path) -> None:
    body = "def retry_request(request):\n    '''Retry the request after a timeout.'''\n    return request\n"
    filler = "".join(f"def helper_{n}(value):\n    return value + {n}\n" for n in range(150))
    repo = write(tmp_path, {"net/small.py": body, "net/large.py": body + filler})
    assert [p for p, _ in localize(build_index(repo), "Retry the request after a timeout")] == \
        ["net/large.py", "net/small.py"]


def test_type_stubs_and_tests_outside_test_folders_are_not_the_change() -> None:
    assert [file_role(p) for p in ("src/attr/__init__.pyi", "flask/testsuite/basic.py", "index.test-d.ts",
                                   "typings/commander-tests.ts", "flask/testing.py", "src/attr/_make.py")] == \
        ["types", "test", "test", "test", "source", "source"]
    assert not plannable("src/attr/__init__.pyi", False, "Deprecate hash for unsafe_hash")
    assert plannable("src/attr/__init__.pyi", False, "Fix the type stub of attr.define")
    assert not plannable("flask/testsuite/basic.py", False, "Fix the flask testsuite for Werkzeug 0.8")


def test_titles_say_the_change_and_where_and_criteria_are_commands(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    requirement = "fix(auth): reject expired tokens in `verify_token`"
    draft = plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])
    change = draft.tasks[0]
    # The function the requirement names is not said twice ("... in `verify_token` in verify_token (...)").
    assert change.title == "Reject expired tokens in `verify_token` (verify_token in notes_api/auth/tokens.py)"
    assert task_title("reject expired tokens", "a/tokens.py", "Tokens.verify") == \
        "Reject expired tokens in Tokens.verify (a/tokens.py)"
    assert task_title("make verify() reject expired tokens", "a/tokens.py", "Tokens.verify") == \
        "Make verify() reject expired tokens (Tokens.verify in a/tokens.py)"
    assert task_title("reject unverified tokens", "a/tokens.py", "Tokens.verify") == \
        "Reject unverified tokens in Tokens.verify (a/tokens.py)"  # a word, not a part of one
    # The path the requirement says: once ("Add a created_at field to Model7 in app/schema.py in app/schema.py").
    assert task_title("add a created_at field to Model7 in app/schema.py", "app/schema.py") == \
        "Add a created_at field to Model7 in app/schema.py"
    assert task_title("add a created_at field to Model7", "app/schema.py") == \
        "Add a created_at field to Model7 in app/schema.py"
    assert task_title("fix the copy in old_app/schema.py", "app/schema.py") == \
        "Fix the copy in old_app/schema.py in app/schema.py"  # another file's path
    # A dotted name the requirement says whole (express: "... in res.sendFile in res.sendFile (lib/response.js)").
    assert task_title("disable ETag generation in res.sendFile", "lib/response.js", "res.sendFile") == \
        "Disable ETag generation in res.sendFile (res.sendFile in lib/response.js)"
    _, _, tasks = collab_plan(sample_repo, requirement)
    for task in [*draft.tasks, *tasks]:
        for criterion in task.convergence.criteria:
            command = re.search(r"`([^`]+)`", criterion)
            assert command and shlex.split(command.group(1)), criterion  # every criterion names a command
    # verify_token is in tokens.py and its test already: grep finding it there says nothing about the change
    # (javapoet's `grep -n "newName"` passed before any edit); a test that fails without the change does.
    assert not any("grep" in c for c in change.convergence.criteria), change.convergence.criteria
    # The plan's test task writes the test, and its criterion says so; the change's task, which may change no test,
    # was asked for one in tests it could not touch.
    failing = "runs a test that fails without the change and passes with it"
    assert not any(c.endswith(failing) for c in change.convergence.criteria), change.convergence.criteria
    assert any(c.endswith(failing) for t in draft.tasks if t.type == "testing" for c in t.convergence.criteria)
    new_name = "Add a `purge_expired` function to notes_api/auth/tokens.py"
    added = plan_tasks(index, new_name, "s", assess(new_name, signals(index, new_name), False), [], []).tasks[0]
    assert any('grep -n "purge_expired" notes_api/auth/tokens.py' in c for c in added.convergence.criteria)


def test_lite_plan_md_reads_in_english(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    requirement = "Cache note listings in the storage layer"
    assessment = assess(requirement, signals(index, requirement), False)
    draft = plan_tasks(index, requirement, "s", assessment, [], [])
    text = render_plan("s", requirement, "now", assessment, draft.understanding, draft.tasks, "tasks.jsonl", {})
    assert not re.search(r"[\u4e00-\u9fff]", text)
    assert "## Task Overview" in text and "- **Acceptance criteria**:" in text
    assert "wfqueue execute s --dry-run" in text  # how to carry the plan out, not only how to check it
    # A file changed at several symbols is listed once ("`x.py` (modify), `x.py` (modify)" before).
    several = [t for t in draft.tasks if len(t.files) > len({f.path for f in t.files})]
    assert several, "the plan should change some file at more than one symbol"
    for line in (ln for ln in text.splitlines() if ln.startswith("- **Files**: ")):
        listed = line.removeprefix("- **Files**: ").split(", ")
        assert len(listed) == len(set(listed)), line


def test_pascal_case_names_and_module_names_point_at_their_files(tmp_path: Path) -> None:
    assert named_identifiers("Allow StaticFiles follow symlinks") == ["StaticFiles"]
    assert named_identifiers("Allow custom schemes in validate.URL") == ["validate.URL"]
    # routing.py matches more of the words; files.py defines the class the requirement names.
    repo = write(tmp_path / "web", {
        "web/files.py": ("class StaticFiles:\n    '''Serve a folder.'''\n    def serve(self, path):\n"
                         "        return path\n"),
        "web/routing.py": "def follow(path):\n    '''Follow symlinks.'''\n    return path\n",
        "web/checks.py": "def url(value):\n    '''Check a URL and its schemes.'''\n    return value\n",
        "web/validate.py": "def check(value):\n    '''Check a value.'''\n    return value\n",
    })
    index = build_index(repo)
    assert localize(index, "Allow StaticFiles to follow symlinks")[0][0] == "web/files.py"
    # validate.URL names the module validate.py, not the file that mentions URLs most
    assert localize(index, "Allow custom schemes to be checked by validate.URL")[0][0] == "web/validate.py"


JAVA_ALLOCATOR = """package a;

public final class NameAllocator {
  public NameAllocator() {
    this(new LinkedHashSet<>());
  }

  private NameAllocator(LinkedHashSet<String> names) {
    this.names = names;
  }

  public String newName(String suggestion) {
    return newName(suggestion, UUID.randomUUID());
  }

  public String newName(String suggestion, Object tag) {
    return toJavaIdentifier(suggestion);
  }

  public static String toJavaIdentifier(String suggestion) {
    return suggestion;
  }
}
"""


def test_a_task_changes_the_member_the_requirement_names_once(tmp_path: Path) -> None:
    """javapoet's "Fix NameAllocator.newName ..." planned the class's two constructors (same words, earlier
    lines) and not newName; overloads were listed once per signature."""
    assert named_identifiers("Fix Error::root_cause; test IndifferentHash#dig (see #12, README.md#usage)") == [
        "Error.root_cause", "IndifferentHash.dig"]
    repo = write(tmp_path / "poet", {"src/main/java/a/NameAllocator.java": JAVA_ALLOCATOR,
                                     "src/test/java/a/NameAllocatorTest.java": "class NameAllocatorTest {}\n"})
    index = build_index(repo)
    path = "src/main/java/a/NameAllocator.java"
    requirement = "Fix NameAllocator.newName so a suggestion that is a Java keyword still yields a valid name"
    targets = [s.qualname for s in symbols_to_change(index, path, requirement)]
    assert targets[0] == "NameAllocator.newName"
    assert len(targets) == len(set(targets))  # the constructors and newName's overloads once each
    ranked = [s.qualname for s in rank_symbols(index, path, "name allocator", limit=5)]
    assert ranked[0] == "NameAllocator.NameAllocator" and len(ranked) == len(set(ranked)) == 4
    # a bare class name is the class, not its constructor
    assert symbols_to_change(index, path, "Make NameAllocator thread-safe")[0].qualname == "NameAllocator"


def test_named_identifiers_and_the_best_files_companions_rank_up(tmp_path: Path, sample_repo: Path) -> None:
    index = build_index(sample_repo)
    assert localize(index, "Reject expired tokens in `verify_token`")[0][0] == "notes_api/auth/tokens.py"
    repo = write(tmp_path / "ui", {
        "ui/progress.py": ("from ui.format import pad\n\ndef progress_bar(items):\n"
                           "    '''Progress bar: show the current item.'''\n"),
        "ui/_progress_impl.py": "def render(bar):\n    '''Draw one line of the bar.'''\n    return bar\n",
        "ui/format.py": "def pad(text):\n    '''Pad one line of text for the bar.'''\n    return text\n",
        "ui/colors.py": "def paint(text):\n    '''Colour one line of text for the bar.'''\n    return text\n",
        "a/progress_impl.py": "def render(text):\n    '''Draw one line for the bar.'''\n    return text\n",
    })
    ranked = [p for p, _ in localize(build_index(repo), "Show the current item in the progress bar")]
    assert ranked[0] == "ui/progress.py"
    # the companion and the imported module outrank an equally worded file the best one never uses
    assert ranked.index("ui/_progress_impl.py") < ranked.index("a/progress_impl.py")  # same words, other folder
    assert ranked.index("ui/format.py") < ranked.index("ui/colors.py")


def test_a_class_attribute_the_requirement_writes_out_names_the_file_defining_it(tmp_path: Path) -> None:
    """"Make the JSON provider sort_keys configurable from app.config" planned five files of flask that share its
    words (config.py, app.py, sessions.py...) before json/provider.py, whose DefaultJSONProvider sets
    ``sort_keys = True`` (6th, cut): the index knew its classes and methods, not what its class bodies assign."""
    repo = write(tmp_path / "app", {
        "app/encoding.py": 'class Encoder:\n    """Serialise values."""\n    sort_keys = True\n'
                           "    ensure_ascii: bool = True\n\n    def dumps(self, value):\n        return value\n",
        "app/config.py": 'class Config(dict):\n    """The configuration: values from app.config, configurable."""\n'
                         '    def from_mapping(self, mapping):\n'
                         '        """Configure the app config from a mapping."""\n        return mapping\n',
        "app/core.py": 'class App:\n    """The app: its config, its JSON provider, configurable from app.config."""\n'
                       '    config = None\n\n    def make_config(self):\n'
                       '        """Make the app config, configurable."""\n'
                       '    def json_provider(self):\n        """The JSON provider of the app, from app.config."""\n',
        "app/sessions.py": 'class SessionInterface:\n    """Sessions made configurable from app.config."""\n'
                           "    def open_session(self, app):\n        return app.config\n",
    })
    index = build_index(repo)
    assert index.attributes["app/encoding.py"] == ["sort_keys", "ensure_ascii"]
    assert index.attributes["app/core.py"] == ["config"]
    ranked = [p for p, _ in localize(index, "Make the JSON provider sort_keys configurable from app.config")]
    assert ranked.index("app/encoding.py") < ranked.index("app/config.py"), ranked


def test_effort_is_the_size_of_what_changes_not_of_its_file(tmp_path: Path) -> None:
    """anyhow's and javapoet's one-method fixes were "large": their files are long."""
    filler = "".join(f"def helper_{n}(value):\n    return value + {n}\n\n\n" for n in range(120))
    repo = write(tmp_path / "big", {"pkg/big.py": "def parse_schedule(text):\n    return text\n\n\n" + filler})
    index = build_index(repo)
    assert effort_of(index, "pkg/big.py") == ("large", "High")  # the file: 480 lines
    assert effort_of(index, "pkg/big.py", "Fix parse_schedule for offsets")[0] == "small"
    # nothing in it matches the requirement: the whole file, not two functions picked for the task's targets
    assert effort_of(index, "pkg/big.py", "Make the output prettier")[0] == "large"
    # a method of a large class: the method, not the class holding it
    body = "".join(f"    def helper_{n}(self):\n        return {n}\n\n" for n in range(160))
    flask = build_index(write(tmp_path / "flask", {"app.py": "class Flask:\n    def make_response(self, rv):\n"
                                                               "        return rv\n\n" + body}))
    assert effort_of(flask, "app.py", "Fix Flask.make_response for tuple returns")[0] == "small"


def test_a_task_that_changes_tests_alone_is_typed_testing(sample_repo: Path) -> None:
    """Every task took the requirement's type (`feature`, `fix`): the test task too, which tests."""
    index = build_index(sample_repo)
    requirement = "Add per-user rate limiting to the API"
    draft = plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])
    kinds = {t.type for t in draft.tasks if all(is_test_path(p) for p in t.focus_paths)}
    assert kinds == {"testing"}, [(t.title, t.type) for t in draft.tasks]
    assert all(t.type != "testing" for t in draft.tasks if not all(is_test_path(p) for p in t.focus_paths))
    _, _, tasks = collab_plan(sample_repo, requirement)
    assert {t.type for t in tasks if t.title.startswith("Test: ")} <= {"testing"}
