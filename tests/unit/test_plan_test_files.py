"""Which test file an offline plan's test task writes in, and when it runs.

On real projects plans created `tests/test__decoders.py` beside the `tests/test_decoders.py` that already
tested `_decoders.py`, put "tests" in `tests/fixtures.py` or a test package's `__init__.py`, picked the
alphabetically first of twenty tests importing a CLI module, and let a collab plan's test area change every
one of them; the test task ran beside the change it tests, in a worktree without it."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write
from wfqueue.analysis import build_index
from wfqueue.collab.assemble import allocate
from wfqueue.lite.models import LitePlanDraft
from wfqueue.providers.offline.area import plan_area
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.providers.offline.new_module import new_module_path
from wfqueue.providers.offline.tests_placement import where_tests_go
from wfqueue.providers.offline.understand import understand

DECODER = ("class LineDecoder:\n    '''Split decoded text into lines.'''\n\n"
           "    def decode(self, text):\n        '''Lines of a chunk; a carriage return ends a line.'''\n"
           "        return text.splitlines()\n")
# A package whose tests import only the package (`import web`), as httpx's do, plus test support files.
PACKAGE = {
    "web/__init__.py": "from web._decoders import LineDecoder\nfrom web._client import Client\n",
    "web/_decoders.py": DECODER,
    "web/_client.py": "from web._decoders import LineDecoder\n\nclass Client:\n    def get(self, url):\n"
                      "        return LineDecoder().decode(url)\n",
    "tests/__init__.py": "",
    "tests/fixtures.py": "from web._decoders import LineDecoder\n\nDECODER = LineDecoder()\n",
    "tests/test_client.py": "import web\n\ndef test_get():\n    assert web.Client().get('a')\n",
    "tests/test_decoders.py": "import web\n\ndef test_lines():\n    assert web.LineDecoder().decode('a\\nb')\n",
}
FIX = ("Fix LineDecoder.decode in web/_decoders.py: a chunk that ends with a lone carriage return followed by "
       "a chunk starting with a newline yields an extra empty line")


def lite(repo: Path, requirement: str) -> LitePlanDraft:
    index = build_index(repo)
    return plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])


def test_a_private_modules_existing_test_file_is_extended_not_a_new_one_created(tmp_path: Path) -> None:
    draft = lite(write(tmp_path, PACKAGE), FIX)
    *changes, test = draft.tasks
    assert {f.path for t in changes for f in t.files} == {"web/_decoders.py"}
    assert [(f.path, f.action) for f in test.files] == [("tests/test_decoders.py", "modify")]
    assert test.depends_on == [t.id for t in changes]  # written once the change is there


def test_a_test_folders_support_files_are_never_the_test_file(tmp_path: Path) -> None:
    files = {k: v for k, v in PACKAGE.items() if k != "tests/test_decoders.py"}
    index = build_index(write(tmp_path, files))
    # fixtures.py imports the module: set-up, not a test of it (it was the plan's "test file", and "Existing
    # tests that must keep passing" listed it with conftest.py and __init__.py).
    assert "tests/fixtures.py" not in index.tests_for.get("web/_decoders.py", [])
    assert where_tests_go(index, ["web/_decoders.py"], FIX) == ("tests/test_decoders.py", False)


def test_of_many_tests_importing_a_module_the_one_about_the_change_is_chosen(tmp_path: Path) -> None:
    cli = ("def _human_readable_size(size):\n    return f'{size:.2f}MB'\n\n"
           "def logs_list(rows):\n    return [_human_readable_size(r) for r in rows]\n\n"
           "def aliases_list(names):\n    return sorted(names)\n")
    files = {"tool/__init__.py": "", "tool/cli.py": cli}
    for name in ("aliases", "embed", "keys", "plugins"):
        files[f"tests/test_{name}.py"] = f"from tool.cli import aliases_list\n\ndef test_{name}():\n    assert 1\n"
    files["tests/test_logs.py"] = ("from tool.cli import logs_list\n\ndef test_size():\n"
                                  "    # the human readable size of each logged response\n"
                                  "    assert logs_list([1.5]) == ['1.50MB']\n")
    repo = write(tmp_path, files)
    requirement = 'Change _human_readable_size in tool/cli.py to print one decimal and a space, e.g. "1.5 MB"'
    *_, test = lite(repo, requirement).tasks
    assert [f.path for f in test.files] == ["tests/test_logs.py"]
    # A collab plan's test area is that one file, waiting for the change: not every test importing cli.py.
    index = build_index(repo)
    analysis = allocate(understand(index, requirement, 4), "CPLAN-t", requirement, 4)
    code, tests = analysis.sub_domains
    assert code.focus_paths == ["tool/cli.py"] and tests.focus_paths == ["tests/test_logs.py"]
    [test_task] = plan_area(index, analysis, tests.focus_area).tasks
    [change_task] = plan_area(index, analysis, code.focus_area).tasks
    assert test_task.depends_on == [change_task.id]


def test_a_new_test_file_is_named_after_the_module_in_its_nearest_test_folder(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "proj/__init__.py": "",
        "proj/bin/__init__.py": "",
        "proj/bin/purge.py": "def purge(queues):\n    '''Purge every message of the queues.'''\n    return 0\n",
        "proj/bin/_parse.py": "def parse(argv):\n    return argv\n",
        "proj/app.py": "def app():\n    return 1\n",
        "t/unit/bin/test_base.py": "def test_base():\n    assert 1\n",
        "t/unit/test_app.py": "from proj.app import app\n\ndef test_app():\n    assert app()\n",
    }))
    assert where_tests_go(index, ["proj/bin/purge.py"], "Add a --dry-run option to the purge command") == \
        ("t/unit/bin/test_purge.py", False)
    # A private module's new test drops the underscore, as the existing ones do.
    assert where_tests_go(index, ["proj/bin/_parse.py"], "Parse --queues") == ("t/unit/bin/test_parse.py", False)


def test_the_test_already_using_the_named_function_beats_the_one_named_after_its_module(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "tool/__init__.py": "",
        "tool/helpers.py": "def parse_schedule(value):\n    return value\n\ndef read_config(path):\n    return {}\n",
        "tests/test_helpers.py": ("from tool.helpers import read_config\n\ndef test_read():\n"
                                  "    assert read_config('x') == {}\n"),
        "tests/test_cli.py": "from tool.helpers import parse_schedule\n\ndef test_schedule_at():\n"
                             "    assert parse_schedule('2025-01-01T10:00:00')\n",
    }))
    requirement = "Fix parse_schedule in tool/helpers.py: values with a timezone offset are rejected"
    assert where_tests_go(index, ["tool/helpers.py"], requirement) == ("tests/test_cli.py", True)
    assert where_tests_go(index, ["tool/helpers.py"], "Read the config from TOML") == ("tests/test_helpers.py", True)


def test_another_apps_or_languages_test_of_the_same_name_is_not_taken(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "polls/__init__.py": "", "polls/models.py": "class Question:\n    votes = 0\n",
        "polls/tests/__init__.py": "",
        "polls/tests/test_views.py": "from polls.models import Question\n\ndef test_vote():\n    assert Question\n",
        "blog/__init__.py": "", "blog/tests/__init__.py": "",
        "blog/tests/test_models.py": "def test_post():\n    assert True\n",
        "web/__init__.py": "", "web/client.py": "def fetch(url):\n    return url\n",
        "tests/test_api.py": "from web.client import fetch\n\ndef test_fetch():\n    assert fetch('x')\n",
        "frontend/__tests__/client.test.ts": "import { fetch } from '../client'\n",
        "frontend/client.ts": "export function fetch(url: string) { return url }\n",
    }))
    assert where_tests_go(index, ["polls/models.py"], "Count votes per question") == \
        ("polls/tests/test_views.py", True)
    assert where_tests_go(index, ["web/client.py"], "Retry fetch on errors") == ("tests/test_api.py", True)


def test_new_test_files_are_named_as_their_language_names_them(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "pkg/foo/bar.go": "package foo\n\nfunc Bar() int { return 1 }\n",
        "src/components/UserCard.tsx": "export function UserCard() { return null }\n",
        "src/__tests__/App.test.tsx": "import { App } from '../App'\n",
        "src/App.tsx": "export function App() { return null }\n",
        "test/helpers/setup.js": "module.exports = {}\n",
        "lib/format.js": "module.exports = function format(x) { return x }\n",
    }))
    assert where_tests_go(index, ["pkg/foo/bar.go"], "Bar returns two") == ("pkg/foo/bar_test.go", False)
    assert where_tests_go(index, ["src/components/UserCard.tsx"], "Show the user's avatar") == \
        ("src/__tests__/UserCard.test.tsx", False)
    # A test tree's set-up file is neither a test to extend nor where new tests go.
    assert where_tests_go(index, ["lib/format.js"], "Format dates") == ("test/format.test.js", False)


def test_a_collab_plans_new_test_file_waits_for_the_change(tmp_path: Path) -> None:
    repo = write(tmp_path, {"tool/__init__.py": "", "tool/cli.py": "def main(argv):\n    return 0\n",
                            "tests/test_other.py": "def test_other():\n    assert True\n"})
    index = build_index(repo)
    requirement = "Add a --verbose option to main in tool/cli.py"
    analysis = allocate(understand(index, requirement, 4), "CPLAN-n", requirement, 4)
    code, tests = analysis.sub_domains
    assert tests.focus_paths == ["tests/test_cli.py"]
    [test_task] = plan_area(index, analysis, tests.focus_area).tasks
    [change_task] = plan_area(index, analysis, code.focus_area).tasks
    assert test_task.files[0].action == "create" and test_task.depends_on == [change_task.id]
    # Planned as tests, not as a new module "used by" itself.
    assert test_task.title.startswith("Test: ") and test_task.type == "testing"
    assert test_task.convergence.verification == "python -m pytest -q tests/test_cli.py"
    assert not any("grep" in c for c in test_task.convergence.criteria)


def test_a_test_file_the_requirement_names_is_the_test_tasks_file(tmp_path: Path) -> None:
    files = {"lib/response.js": "function sendStatus(code) { return code }\nmodule.exports = { sendStatus }\n",
             "test/res.sendStatus.js": "const app = require('..')\n",
             "go.mod": "module example.com/cli\n", "command.go": "package cli\n\nfunc Run() {}\n",
             "command_test.go": "package cli\n"}
    index = build_index(write(tmp_path, files))
    named = "Add tests in test/res.sendStatus.js checking that sendStatus(204) sends no body"
    assert where_tests_go(index, ["lib/response.js"], named) == ("test/res.sendStatus.js", True)
    new = "Cover Run's flag ordering in a new `ordering_test.go`"
    assert where_tests_go(index, ["command.go"], new) == ("ordering_test.go", False)


def test_a_new_file_at_the_root_is_created_when_the_requirement_says_it_is_a_file(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {"go.mod": "module example.com/cli\n",
                                         "completions.go": "package cli\n\nfunc GenBashCompletion() {}\n",
                                         "index.js": "module.exports = {}\n"}))
    assert new_module_path(index, ["completions.go"], "Add nushell support in a new file nushell_completions.go "
                                                      "beside the bash completions") == "nushell_completions.go"
    # A bare name in prose is no file to make, even after "add" or "create".
    for prose in ("Make the exports work in every node.js version", "Add Next.js support to the router",
                  "Create Vue.js bindings"):
        assert new_module_path(index, ["index.js"], prose) is None, prose


def test_bare_names_are_found_where_they_are_or_placed_where_they_belong(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "setup.py": "from setuptools import setup\n", "rq/__init__.py": "",
        "rq/worker.py": "class Worker:\n    def retry(self, delay):\n        return delay\n",
        "tests/__init__.py": "", "tests/conftest.py": "import pytest\n",
        "tests/test_worker.py": "from rq.worker import Worker\n\ndef test_retry():\n    assert Worker()\n",
        "pkg/__init__.py": "", "pkg/client.py": "def fetch(url, timeout=None):\n    return url\n",
    }))
    # An existing test named without its folder is that file, not a second one at the root.
    fix = "Fix Worker.retry for a zero delay; extend test_worker.py with a case for it"
    assert where_tests_go(index, ["rq/worker.py"], fix) == ("tests/test_worker.py", True)
    # A new bare module goes beside the code it belongs to, not at the root.
    assert new_module_path(index, ["rq/worker.py"], "Create a module called backoff.py for Worker.retry") == \
        "rq/backoff.py"
    # A named set-up file is no place for the tests.
    conftest = "Fix fetch in pkg/client.py: it ignores the timeout the client fixture in tests/conftest.py sets"
    assert where_tests_go(index, ["pkg/client.py"], conftest)[0] != "tests/conftest.py"


def test_a_created_test_name_that_exists_is_changed_not_created(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "source/index.ts": "export * from './utils/merge'\n",
        "source/utils/merge.ts": "export function mergeHeaders(a: object) { return a }\n",
        "test/merge.ts": "import test from 'ava'\nimport ky from 'ky'\n",  # the package by name: not resolved
        "test/retry.ts": "import test from 'ava'\n",
    }))
    path, exists = where_tests_go(index, ["source/utils/merge.ts"], "Fix mergeHeaders dropping undefined values")
    assert path == "test/merge.ts" and exists


def test_a_helper_named_util_is_no_test_but_a_modules_own_utils_test_is(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "lib/server.js": "exports.listen = function listen(host) { return host }\n",
        "test/util.js": "var server = require('../lib/server')\nexports.start = function () { return server }\n",
        "test/listen.test.js": "var util = require('./util')\ndescribe('listen', function () {})\n",
    }))
    assert where_tests_go(index, ["lib/server.js"], "Fix listen() ignoring the host option")[0] != "test/util.js"


def test_a_new_js_test_is_marked_as_its_folders_tests_are_and_a_utils_test_is_a_test(tmp_path: Path) -> None:
    ky = build_index(write(tmp_path / "ky", {
        "source/merge.ts": "export function mergeHeaders(a: object, b: object) { return a }\n",
        "test/retry.ts": "import test from 'ava'\n", "test/headers.ts": "import test from 'ava'\n",
    }))
    # ky names its tests by topic, without a mark: not test/merge.test.ts.
    assert where_tests_go(ky, ["source/merge.ts"], "Fix mergeHeaders") == ("test/merge.ts", False)
    express = build_index(write(tmp_path / "express", {
        "lib/utils.js": "exports.compileETag = function compileETag(v) { return v }\n",
        "test/utils.js": "var utils = require('../lib/utils')\ndescribe('utils.compileETag()', function () {})\n",
        "test/support/utils.js": "module.exports = {}\n",
    }))
    # express's test/utils.js tests lib/utils.js; a support folder's utils.js is set-up.
    assert where_tests_go(express, ["lib/utils.js"], "Fix compileETag for weak tags") == ("test/utils.js", True)


def test_where_tests_load_only_the_entry_point_the_one_about_the_change_is_extended(tmp_path: Path) -> None:
    """express's tests `require('..')`: no test imports lib/response.js, and a new test/response.test.js was
    created beside the forty test/res.*.js files."""
    index = build_index(write(tmp_path, {
        "index.js": "module.exports = require('./lib/express')\n",
        "lib/express.js": "var res = require('./response')\nmodule.exports = function () { return res }\n",
        "lib/response.js": "function json(obj) { return JSON.stringify(obj) }\nmodule.exports = { json }\n",
        "test/res.json.js": "var express = require('..')\ndescribe('res.json(obj)', function () {\n"
                            "  it('should respond with json and escape unicode', function () {})\n})\n",
        "test/app.listen.js": "var express = require('..')\ndescribe('app.listen()', function () {})\n",
    }))
    assert index.tests_for.get("lib/response.js") is None  # nothing imports it directly
    assert where_tests_go(index, ["lib/response.js"], "Escape unicode in res.json output") == \
        ("test/res.json.js", True)


def test_rust_and_ruby_tests_are_named_and_placed_as_the_project_does(tmp_path: Path) -> None:
    """anyhow's plans created tests/error.rs beside tests/test_context.rs; sinatra's named tests after
    lib/sinatra/test_helpers.rb, a library module whose name starts with "test_"."""
    anyhow = build_index(write(tmp_path / "anyhow", {
        "src/error.rs": "pub struct Error;\n\nimpl Error {\n    pub fn root_cause(&self) -> &Error { self }\n}\n",
        "tests/test_context.rs": "#[test]\nfn context() {}\n", "tests/test_fmt.rs": "#[test]\nfn fmt() {}\n",
    }))
    assert where_tests_go(anyhow, ["src/error.rs"], "Make errors print nicer") == ("tests/test_error.rs", False)
    contrib = build_index(write(tmp_path / "contrib", {
        "lib/sinatra/cookies.rb": "module Sinatra\n  module Cookies\n  end\nend\n",
        "lib/sinatra/test_helpers.rb": "module Sinatra\n  module TestHelpers\n  end\nend\n",
        "spec/cookies_spec.rb": "describe Sinatra::Cookies do\nend\n",
        "spec/spec_helper.rb": "require 'rspec'\n",
    }))
    assert where_tests_go(contrib, ["lib/sinatra/cookies.rb"], "Add a thing",
                          new_module="lib/sinatra/request_id.rb") == ("spec/request_id_spec.rb", False)


def test_a_ruby_test_using_the_named_helper_beats_the_one_named_after_its_file(tmp_path: Path) -> None:
    """sinatra tests content_type in test/helpers_test.rb; base_test.rb is only named after base.rb."""
    index = build_index(write(tmp_path, {
        "lib/sinatra/base.rb": "module Sinatra\n  module Helpers\n    def content_type(type)\n      type\n"
                               "    end\n  end\nend\n",
        "test/base_test.rb": "require_relative 'test_helper'\nclass BaseTest < Minitest::Test\n"
                             "  it('sets Content-Type') { assert_equal 'text/html', response['Content-Type'] }\nend\n",
        "test/helpers_test.rb": "require_relative 'test_helper'\nclass HelpersTest < Minitest::Test\n"
                                "  it 'sets the content_type' do\n    content_type :json\n"
                                "    content_type 'text/plain'\n  end\nend\n",
        "Rakefile": "task :test\n", "Gemfile": "gem 'rake'\n",
    }))
    requirement = "Fix the content_type helper so it does not append a second charset"
    assert where_tests_go(index, ["lib/sinatra/base.rb"], requirement) == ("test/helpers_test.rb", True)
    assert index.test_command == "bundle exec rake test"


def test_a_new_module_gets_its_own_test_unless_code_moves_into_it(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "rq/job.py": "def retry(job):\n    '''Retry a job after a delay.'''\n    return job\n",
        "tests/test_job.py": "from rq.job import retry\n\ndef test_retry():\n    assert retry(1)\n",
    }))
    add = "Add an exponential backoff helper in rq/backoff.py and use it when a job is retried"
    assert new_module_path(index, ["rq/job.py"], add) == "rq/backoff.py"
    assert where_tests_go(index, ["rq/job.py"], add, new_module="rq/backoff.py") == ("tests/test_backoff.py", False)
    move = "Move the retry delay computation out of rq/job.py into a new file rq/backoff.py"
    assert where_tests_go(index, ["rq/job.py"], move, new_module="rq/backoff.py") == ("tests/test_job.py", True)
    command = "Add an extract command that retries jobs, in rq/backoff.py"  # "extract" is not the change here
    assert where_tests_go(index, ["rq/job.py"], command, new_module="rq/backoff.py") == ("tests/test_backoff.py", False)
    for moving in ("refactor: extract the delay into rq/backoff.py", "GOAL: Move the delay into rq/backoff.py",
                   "Refactor rq/job.py: move the delay computation into rq/backoff.py"):
        assert where_tests_go(index, ["rq/job.py"], moving, new_module="rq/backoff.py") == ("tests/test_job.py", True)


def test_a_path_in_a_named_sub_project_is_created_there(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "lib/sinatra/base.rb": "module Sinatra\nend\n",
        "sinatra-contrib/lib/sinatra/cookies.rb": "module Sinatra\nend\n",
    }))
    for requirement in ("Add a Sinatra::RequestId extension to sinatra-contrib in lib/sinatra/request_id.rb",
                        "Add lib/sinatra/request_id.rb to sinatra-contrib",
                        "In sinatra-contrib, add an extension that tags every request with an id, in "
                        "lib/sinatra/request_id.rb"):
        assert new_module_path(index, ["lib/sinatra/base.rb"], requirement) == \
            "sinatra-contrib/lib/sinatra/request_id.rb", requirement
    # named in another sentence, the sub-project does not move the path
    elsewhere = "Document it in sinatra-contrib. Add lib/sinatra/request_id.rb for request ids"
    assert new_module_path(index, ["lib/sinatra/base.rb"], elsewhere) == "lib/sinatra/request_id.rb"
    # a crate without tests gets them in tests/, where cargo finds them
    crate = build_index(write(tmp_path / "crate", {"src/lib.rs": "pub fn a() {}\n"}))
    assert where_tests_go(crate, ["src/lib.rs"], "Fix a") == ("tests/lib.rs", False)


def test_tests_kept_beside_the_source_stay_there_and_a_fitting_path_is_not_moved(tmp_path: Path) -> None:
    """Review of the first version: a lone e2e/tests/ folder drew every new component test away from the
    `.test.tsx` files beside the components; a named path whose folder exists was moved into a top folder the
    requirement merely mentions."""
    index = build_index(write(tmp_path / "web", {
        "src/components/Button.tsx": "export function Button() { return null }\n",
        "src/components/Button.test.tsx": "import { Button } from './Button'\n",
        "src/components/Card.test.tsx": "import { Card } from './Card'\n",
        "src/components/UserCard.tsx": "export function UserCard() { return null }\n",
        "e2e/tests/login.spec.ts": "test('login', () => {})\n",
    }))
    assert where_tests_go(index, ["src/components/UserCard.tsx"], "Show the avatar") == \
        ("src/components/UserCard.test.tsx", False)
    repo = build_index(write(tmp_path / "pkg", {
        "mypkg/job.py": "def run():\n    return 1\n",
        "tests/mypkg/test_job.py": "from mypkg.job import run\n",
    }))
    requirement = "Add an exponential backoff helper in mypkg/backoff.py and cover it with tests"
    assert new_module_path(repo, ["mypkg/job.py"], requirement) == "mypkg/backoff.py"


RUST_CRATE = {
    "Cargo.toml": "[package]\nname = \"cfgtool\"\nversion = \"0.1.0\"\n",
    "src/lib.rs": "pub mod config;\npub mod render;\n",
    "src/config.rs": "pub struct Config;\n\nfn parse_line(line: &str) -> Option<(String, String)> {\n"
                     "    let (k, v) = line.split_once('=')?;\n    Some((k.into(), v.into()))\n}\n\n"
                     "pub fn parse_config(text: &str) -> Config {\n    Config\n}\n\n#[cfg(test)]\nmod tests {\n"
                     "    use super::*;\n\n    #[test]\n    fn parses_one_line() {\n"
                     "        assert!(parse_line(\"a = b\").is_some());\n    }\n}\n",
    "src/render/mod.rs": "pub fn render() -> String {\n    String::new()\n}\n\n#[cfg(test)]\nmod tests {\n"
                         "    #[test]\n    fn renders() {}\n}\n",
    "src/util.rs": "pub fn trim_comment(line: &str) -> &str {\n    line\n}\n\n#[cfg(test)]\nmod tests {\n"
                   "    #[test]\n    fn trims() {}\n}\n",
}


def test_a_rust_module_holding_its_own_tests_is_tested_there(tmp_path: Path) -> None:
    """A crate that keeps each module's tests in its `#[cfg(test)] mod tests` got tests/config.rs created beside
    them (an integration test, which reaches no private function), a test task of its own for a change, and
    `tests.parses_one_line` as a symbol to change."""
    index = build_index(write(tmp_path, RUST_CRATE))
    assert index.tests_for["src/config.rs"] == ["src/config.rs"]
    assert where_tests_go(index, ["src/config.rs"], "Skip comment lines") == ("src/config.rs", True)

    change = lite(tmp_path, "Make parse_config skip comment lines starting with #")
    (task,) = change.tasks  # the change and its tests: one task, one file
    assert [(f.path, f.target) for f in task.files] == [("src/config.rs", "parse_config"),
                                                         ("src/config.rs", "parse_line"), ("src/config.rs", "Config")]
    assert task.convergence.verification == "cargo test config::"  # its module's tests: config::tests::...
    assert "`cargo test config::` runs a test that fails without the change and passes with it" in \
        task.convergence.criteria
    assert "src/config.rs's own test module" in task.description
    areas = understand(index, "Make parse_config skip comment lines starting with #", 4).sub_domains
    assert [a.focus_paths for a in areas] == [["src/config.rs"]]

    (tests,) = lite(tmp_path, "Add tests for parse_config").tasks
    assert [(f.path, f.action) for f in tests.files] == [("src/config.rs", "modify")]
    assert tests.focus_paths == ["src/config.rs"]
    assert "`git diff -- src/config.rs` changes only its test module: the code under test in it is unchanged" in \
        tests.convergence.criteria
    assert not any("lists nothing" in c for c in tests.convergence.criteria)
    (render,) = lite(tmp_path, "Add tests for render").tasks
    assert render.convergence.verification == "cargo test render::"  # src/render/mod.rs is the module render
    # a module named like a test helper (util) holding its own tests is tested there too
    (util,) = lite(tmp_path, "Make trim_comment skip blank lines").tasks
    assert util.convergence.verification == "cargo test util::" and util.test.unit == ["src/util.rs"]

