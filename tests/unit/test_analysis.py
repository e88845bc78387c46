"""Behavioural tests for wfqueue.analysis, on small repositories built in tmp_path."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from wfqueue.analysis import (
    RepoIndex,
    Symbol,
    bm25_scores,
    build_index,
    fan_in,
    fan_ins,
    importers_of,
    js_imports,
    list_source_files,
    module_index_for,
    python_imports,
    python_symbols,
    rank_files,
    rank_symbols,
    regex_symbols,
    test_command_for,
    tokenize,
)
from wfqueue.analysis.testmap import command_for_tests, where_tests_live
from wfqueue.sandboxed_commands import refusal


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


MIDDLEWARE = '''
"""HTTP request middleware chain."""
from __future__ import annotations

from app.config import Settings
from .limits import RateLimiter


class RequestMiddleware:
    """Wraps each incoming request."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.limiter = RateLimiter(settings.rate)

    def handle(self, request):
        """Apply the middleware to one request."""
        return request


async def log_request(request):
    return request
'''

APP_FILES: dict[str, str | bytes] = {
    "pyproject.toml": "[project]\nname = 'app'\n",
    "README.md": "# App\n\nA small web service.\n",
    "app/__init__.py": "from .config import Settings\n",
    "app/config.py": '''
        """Settings loaded from the environment."""
        DEFAULT_RATE = 10


        class Settings:
            rate: int = DEFAULT_RATE
        ''',
    "app/middleware.py": MIDDLEWARE,
    "app/limits.py": '''
        """Token bucket primitives."""


        class RateLimiter:
            """Fixed-rate token bucket."""

            def __init__(self, rate: int) -> None:
                self.rate = rate

            def acquire(self) -> bool:
                return True
        ''',
    "app/storage/__init__.py": "",
    "app/storage/db.py": '''
        from .. import config
        from ..config import Settings
        from . import missing_name


        def connect(settings: Settings) -> str:
            """Open a database connection."""
            return "sqlite://"
        ''',
    "app/cli.py": '''
        import argparse


        def parse_arguments(argv: list[str]) -> argparse.Namespace:
            """Parse command line arguments for the server."""
            parser = argparse.ArgumentParser()
            parser.add_argument("--port", type=int)
            return parser.parse_args(argv)
        ''',
    "app/broken.py": """
        class Half:
            def ok(self):
                return 1

        def broken(:
            pass
        """,
    "tests/test_middleware.py": """
        from app.middleware import RequestMiddleware


        def test_handle():
            assert RequestMiddleware
        """,
    "tests/test_cli.py": """
        import subprocess


        def test_help():
            assert subprocess
        """,
    "web/client.js": """
        import { get } from './api';
        const util = require('../shared/util');
        import React from 'react';
        export function render() { return get(util); }
        """,
    "web/api.ts": "export function get(x: unknown) { return x; }\n",
    "shared/util/index.js": "module.exports = {};\n",
    "node_modules/left-pad/index.js": "module.exports = function leftPad() {};\n",
    ".venv/lib/site.py": "X = 1\n",
    "app/__pycache__/config.cpython-311.pyc": b"\x00\x01\x02",
    "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "assets/latin1.txt": "caf\xe9 cr\xe8me".encode("latin-1"),
    "assets/nul.dat": b"valid utf-8 \x00 but binary",
    "data/huge.txt": "x" * (512 * 1024 + 1),
}


@pytest.fixture()
def app_repo(tmp_path: Path) -> Path:
    repo = write(tmp_path / "repo", APP_FILES)
    outside = write(tmp_path / "outside", {"secret.py": "TOKEN = 'x'\n"})
    os.symlink(outside / "secret.py", repo / "app" / "leak.py")
    os.symlink(repo / "app" / "config.py", repo / "app" / "alias.py")
    return repo


@pytest.fixture()
def app_index(app_repo: Path) -> RepoIndex:
    return build_index(app_repo)


# --- files -----------------------------------------------------------------


def test_list_source_files_skips_binary_oversized_outside_links_and_ignored_dirs(app_repo: Path) -> None:
    paths = [source.path for source, _ in list_source_files(app_repo)]
    assert paths == sorted(paths)
    for skipped in (
        "assets/logo.png",
        "assets/latin1.txt",
        "assets/nul.dat",
        "data/huge.txt",
        "app/leak.py",
        "node_modules/left-pad/index.js",
        ".venv/lib/site.py",
        "app/__pycache__/config.cpython-311.pyc",
    ):
        assert skipped not in paths
    # A symlink that stays inside the repository is an ordinary file.
    assert "app/alias.py" in paths
    assert {"app/middleware.py", "web/client.js", "README.md", "pyproject.toml"} <= set(paths)


def test_list_source_files_limits(app_repo: Path) -> None:
    small = [s.path for s, _ in list_source_files(app_repo, max_bytes=100)]
    assert "app/middleware.py" not in small and "app/__init__.py" in small
    assert len(list_source_files(app_repo, max_files=3)) == 3


def test_source_file_metadata(app_repo: Path) -> None:
    found = {source.path: (source, text) for source, text in list_source_files(app_repo)}
    middleware, text = found["app/middleware.py"]
    assert middleware.language == "python"
    assert middleware.line_count == text.count("\n") == 21
    assert middleware.size == len(text.encode())
    assert middleware.is_test is False
    assert found["tests/test_cli.py"][0].is_test is True
    assert found["web/api.ts"][0].language == "typescript"
    assert found["web/client.js"][0].language == "javascript"
    assert found["README.md"][0].language == "markdown"
    assert found["pyproject.toml"][0].language == "toml"


# --- symbols ---------------------------------------------------------------


def summary(symbols: list[Symbol]) -> list[tuple[str, str, int, int]]:
    return [(s.qualname, s.kind, s.line, s.end_line) for s in symbols]


def test_python_symbols_lines_kinds_and_docs() -> None:
    symbols = python_symbols(textwrap.dedent(MIDDLEWARE).lstrip("\n"))
    assert summary(symbols) == [
        ("RequestMiddleware", "class", 8, 17),
        ("RequestMiddleware.__init__", "method", 11, 13),
        ("RequestMiddleware.handle", "method", 15, 17),
        ("log_request", "function", 20, 21),
    ]
    assert symbols[0].doc == "Wraps each incoming request."
    assert symbols[2].doc == "Apply the middleware to one request."


def test_python_symbols_constants_and_conditional_definitions() -> None:
    text = (
        "MAX_RATE = 5\nT = 1\nlower = 2\nif True:\n    def maybe():\n        def local():\n            pass\n"
    )
    assert summary(python_symbols(text)) == [("MAX_RATE", "constant", 1, 1), ("maybe", "function", 5, 7)]


def test_python_syntax_error_falls_back_to_regex() -> None:
    text = "class Half:\n    def ok(self):\n        return 1\n\ndef broken(:\n    pass\n"
    assert summary(python_symbols(text)) == [
        ("Half", "class", 1, 3),
        ("Half.ok", "method", 2, 3),
        ("broken", "function", 5, 6),
    ]


JS_SOURCE = """
// function commentedOut() {}
export const MAX_USERS = 10;
export async function handle(req) {
  const inner = () => "function nope() {";
  return inner();
}
export default class RateLimiter extends Base {
  static create(opts) {
    return new RateLimiter(opts);
  }
  acquire = async (n) => {
    if (n) { return 1; }
  };
}
const mw = (req) => req;
"""

GO_SOURCE = """
package limit

type Limiter struct {
\trate int
}

func (l *Limiter) Allow(key string) bool {
\tif key == "}" {
\t\treturn false
\t}
\treturn true
}

func New(rate int) *Limiter {
\treturn &Limiter{rate: rate}
}
"""

RUST_SOURCE = """
pub struct Limiter<'a> {
    name: &'a str,
}

impl<'a> fmt::Display for Limiter<'a> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let brace = '{';
        write!(f, "{}", self.name)
    }
}

pub fn make(n: &str) -> Limiter
where
    T: Clone,
{
    Limiter { name: n }
}
"""

JAVA_SOURCE = """
public class RateLimiter {
    public static final int MAX_RATE = 10;

    public RateLimiter() {
        super();
    }

    public boolean acquire(String key) {
        if (key == null) { return false; }
        return true;
    }
}
"""

RUBY_SOURCE = """
module Api
  class RateLimiter
    def initialize(rate)
      @rate = rate
    end

    def allowed?(key)
      true
    end
  end
end
"""


# express, mocha and koa declare most of their API by assigning functions, not with `function x`: a planner
# blind to it sees a response module with no `json` and a router with no `route`.
COMMONJS_SOURCE = """
var res = module.exports = Object.create(http.ServerResponse.prototype);
res.json = function json(obj) {
  return this.send(JSON.stringify(obj));
};
exports.parse = (text) => {
  return text.trim();
};
Router.prototype.route = function route(path) {
  return new Route(path);
};
exports.VERSION = version;
module.exports.prototype = function () {};
module.exports = function createApplication(options) {
  return new Application(options);
};
module.exports = (options) => new Application(options);
"""

EXPORTED_OBJECT_SOURCE = """
const proto = module.exports = {
  inspect() {
    return this.toJSON();
  },
  get socket() {
    return this.req.socket;
  },
  onerror: function (err) {
    if (err) throw err;
  },
  plugins: [
    compose(a, b),
  ],
  redirect: async (url) => {
    return url;
  },
  isAbsolute: (p) => p[0] === '/',
  join(a, b) {
    return a + b;
  },
};
function helper() {}
"""


@pytest.mark.parametrize(
    ("language", "source", "expected"),
    [
        (
            "javascript",
            JS_SOURCE,
            [
                ("MAX_USERS", "constant", 2, 2),
                ("handle", "function", 3, 6),
                ("RateLimiter", "class", 7, 14),
                ("RateLimiter.create", "method", 8, 10),
                ("RateLimiter.acquire", "method", 11, 13),
                ("mw", "function", 15, 15),
            ],
        ),
        (
            "javascript",
            COMMONJS_SOURCE,
            [
                ("res.json", "method", 2, 4),
                ("parse", "function", 5, 7),
                ("Router.route", "method", 8, 10),
                ("createApplication", "function", 13, 15),
            ],
        ),
        (
            "javascript",
            EXPORTED_OBJECT_SOURCE,
            [
                ("inspect", "function", 2, 4),
                ("socket", "function", 5, 7),
                ("onerror", "function", 8, 10),
                ("redirect", "function", 14, 16),
                # a one-line arrow has no extent the scanner can tell (its comma reads as "goes on"): left out
                ("join", "function", 18, 20),
                ("helper", "function", 22, 22),
            ],
        ),
        (
            "go",
            GO_SOURCE,
            [
                ("Limiter", "class", 3, 5),
                ("Limiter.Allow", "method", 7, 12),
                ("New", "function", 14, 16),
            ],
        ),
        (
            "rust",
            RUST_SOURCE,
            [
                ("Limiter", "class", 1, 3),
                ("Limiter.fmt", "method", 6, 9),
                ("make", "function", 12, 17),
            ],
        ),
        (
            "java",
            JAVA_SOURCE,
            [
                ("RateLimiter", "class", 1, 12),
                ("RateLimiter.MAX_RATE", "constant", 2, 2),
                ("RateLimiter.RateLimiter", "method", 4, 6),
                ("RateLimiter.acquire", "method", 8, 11),
            ],
        ),
        (
            "ruby",
            RUBY_SOURCE,
            [
                ("Api", "class", 1, 11),
                ("Api.RateLimiter", "class", 2, 10),
                ("Api.RateLimiter.initialize", "method", 3, 5),
                ("Api.RateLimiter.allowed?", "method", 7, 9),
            ],
        ),
    ],
)
def test_regex_symbols(language: str, source: str, expected: list[tuple[str, str, int, int]]) -> None:
    assert summary(regex_symbols(source.lstrip("\n"), language)) == expected


def test_index_symbols_cover_broken_python(app_index: RepoIndex) -> None:
    assert [s.qualname for s in app_index.symbols["app/broken.py"]] == ["Half", "Half.ok", "broken"]
    assert app_index.symbols["README.md"] == []


# --- imports ---------------------------------------------------------------


def test_python_import_edges(app_index: RepoIndex) -> None:
    assert app_index.imports["app/middleware.py"] == ["app/config.py", "app/limits.py"]
    assert app_index.imports["app/__init__.py"] == ["app/config.py"]
    # `from .. import config` names a submodule; `from . import missing_name`
    # is an attribute of the package, so the package itself is the target.
    assert app_index.imports["app/storage/db.py"] == ["app/config.py", "app/storage/__init__.py"]
    assert app_index.imports["tests/test_middleware.py"] == ["app/middleware.py"]
    assert app_index.imports["app/cli.py"] == []  # argparse is not in the repo


def test_js_import_edges(app_index: RepoIndex) -> None:
    assert app_index.imports["web/client.js"] == ["shared/util/index.js", "web/api.ts"]


def test_js_imports_resolution_rules() -> None:
    known = {"src/a/c.tsx", "src/a/d.ts", "src/util/index.js", "src/a/lazy.mjs", "top.js"}
    text = (
        "import x from './c';\nexport * from './d.js';\nconst u = require('../util');\n"
        "import('./lazy.mjs');\nimport y from '../../../top';\nimport z from 'react';\n"
    )
    assert js_imports("src/a/b.ts", text, known) == [
        "src/a/c.tsx",
        "src/a/d.ts",
        "src/a/lazy.mjs",
        "src/util/index.js",
    ]


def test_module_index_root_and_src_layouts() -> None:
    index = module_index_for(
        [
            "pkg/__init__.py",
            "pkg.py",
            "pkg/mod.py",
            "src/lib2/__init__.py",
            "src/lib2/x.py",
            "tests/helpers.py",
            "src/ns/a.py",
            "other/ns/a.py",
        ]
    )
    assert index["pkg"] == "pkg/__init__.py"  # a package beats a same-named module
    assert index["pkg.mod"] == "pkg/mod.py"
    assert index["lib2"] == "src/lib2/__init__.py"
    assert index["lib2.x"] == "src/lib2/x.py"
    assert index["src.lib2.x"] == "src/lib2/x.py"
    assert "helpers" not in index  # bare names would shadow stdlib/third-party modules
    # "ns.a" could be src/ns/a.py or other/ns/a.py; the src layout decides.
    assert index["ns.a"] == "src/ns/a.py"


SRC_LAYOUT: dict[str, str | bytes] = {
    "pyproject.toml": "[tool.pytest.ini_options]\n",
    "src/mypkg/__init__.py": "",
    "src/mypkg/core.py": (
        "from mypkg.helpers import text\nfrom .helpers.text import slug\n\n"
        "def run():\n    return slug(text)\n"
    ),
    "src/mypkg/helpers/__init__.py": "",
    "src/mypkg/helpers/text.py": "def slug(value):\n    return value\n",
    "tests/test_core.py": "from mypkg.core import run\nimport mypkg.helpers.text\n",
}


def test_src_layout_imports_and_tests_for(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, SRC_LAYOUT))
    assert index.imports["src/mypkg/core.py"] == ["src/mypkg/helpers/text.py"]
    assert index.imports["tests/test_core.py"] == ["src/mypkg/core.py", "src/mypkg/helpers/text.py"]
    assert index.tests_for == {
        "src/mypkg/core.py": ["tests/test_core.py"],
        "src/mypkg/helpers/text.py": ["tests/test_core.py"],
    }
    assert importers_of(index, "src/mypkg/helpers/text.py") == ["src/mypkg/core.py", "tests/test_core.py"]
    assert fan_in(index, "src/mypkg/helpers/text.py") == 2
    assert fan_in(index, "tests/test_core.py") == 0
    # Counted in one pass for every file (fan_in per file looked at every file's imports: quadratic).
    assert {p: fan_ins(index)[p] for p in index.imports} == {p: fan_in(index, p) for p in index.imports}


def test_python_imports_from_a_script_or_test_directory_see_siblings_first() -> None:
    index = module_index_for(["tests/helpers.py", "tests/test_x.py", "scripts/logging.py", "scripts/run.py"])
    assert python_imports("tests/test_x.py", "import helpers\nimport logging\n", index) == [
        "tests/helpers.py"
    ]
    assert python_imports("scripts/run.py", "import logging\nimport helpers\n", index) == [
        "scripts/logging.py"
    ]
    assert python_imports("scripts/run.py", "from tests.helpers import x\n", index) == ["tests/helpers.py"]


def test_python_imports_beyond_root_and_self_are_dropped() -> None:
    index = module_index_for(["a.py", "pkg/__init__.py"])
    assert python_imports("a.py", "from ... import x\nimport a\nimport pkg.missing\n", index) == [
        "pkg/__init__.py"
    ]


# --- tests_for and test commands -----------------------------------------


def test_tests_for_by_import_and_by_name(app_index: RepoIndex) -> None:
    assert app_index.tests_for["app/middleware.py"] == ["tests/test_middleware.py"]
    assert app_index.tests_for["app/cli.py"] == ["tests/test_cli.py"]  # name only, no import
    assert "app/limits.py" not in app_index.tests_for


def test_tests_for_prefers_closest_same_named_source(tmp_path: Path) -> None:
    repo = write(
        tmp_path,
        {
            "api/utils.py": "",
            "db/utils.py": "",
            "tests/api/test_utils.py": "",
            "web/format.js": "",
            "web/format.test.js": "",
        },
    )
    index = build_index(repo)
    assert index.tests_for == {
        "api/utils.py": ["tests/api/test_utils.py"],
        "web/format.js": ["web/format.test.js"],
    }


def test_tests_for_name_match_defers_to_the_imported_namesake(tmp_path: Path) -> None:
    repo = write(
        tmp_path,
        {
            "pkg_a/__init__.py": "",
            "pkg_a/utils.py": "",
            "pkg_b/__init__.py": "",
            "pkg_b/utils.py": "",
            "tests/test_utils.py": "from pkg_b.utils import thing\n",
        },
    )
    assert build_index(repo).tests_for == {"pkg_b/utils.py": ["tests/test_utils.py"]}


@pytest.mark.parametrize(
    ("files", "command"),
    [
        ({"pkg/a.py": "", "tests/test_a.py": ""}, "python -m pytest -q"),
        ({"package.json": '{"scripts": {"test": "jest"}}', "a.js": ""}, "npm test"),
        # a script of several commands (vite's): npm would pass a test's files to the last one alone
        ({"package.json": '{"scripts": {"test": "pnpm test-unit && pnpm test-serve"}}', "a.js": ""}, "npm run test"),
        ({"package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'}, ""),
        ({"go.mod": "module x\n", "x.go": "package x\n"}, "go test ./..."),
        ({"Cargo.toml": "[package]\n", "src/lib.rs": ""}, "cargo test"),
        ({"pom.xml": "<project/>", "src/main/java/a/A.java": "", "src/test/java/a/ATest.java": ""}, "mvn -q test"),
        ({"pom.xml": "<project/>", "mvnw": "#!/bin/sh\n", "src/test/java/a/ATest.java": ""}, "./mvnw -q test"),
        ({"build.gradle.kts": "", "gradlew": "#!/bin/sh\n", "src/test/kotlin/a/ATest.kt": ""}, "./gradlew test"),
        ({"Gemfile": "", "Rakefile": "", "lib/a.rb": "", "test/a_test.rb": ""}, "bundle exec rake test"),
        ({"Gemfile": "gem 'rspec'\n", "lib/a.rb": "", "spec/a_spec.rb": "", "spec/spec_helper.rb": ""},
         "bundle exec rspec"),
        # specs written for minitest (Sequel's): the Rakefile's task, not RSpec, which the project lacks
        ({"Gemfile": "gem 'minitest'\n", "Rakefile": "", "spec/a_spec.rb": "", "spec/b_spec.rb": ""},
         "bundle exec rake test"),
        ({"lib/a.rb": "", "test/a_test.rb": ""}, ""),  # minitest with no Rakefile: no command that would run
        # a build file alone is no test suite
        ({"Rakefile": "task :deploy\n", "app/main.py": ""}, ""),
        ({"pom.xml": "<project/>", "app/main.py": "", "tests/test_main.py": ""}, "python -m pytest -q"),
        ({"notes.md": "hi"}, ""),
    ],
)
def test_detected_test_command(tmp_path: Path, files: dict[str, str | bytes], command: str) -> None:
    assert build_index(write(tmp_path, files)).test_command == command


def test_the_files_of_a_test_are_passed_to_an_npm_script_only_when_it_is_one_command() -> None:
    """`npm test -- x.spec.ts` on `"test": "pnpm test-unit && pnpm test-serve && pnpm test-build"` ran every suite,
    then the build suite filtered by a file it does not hold (no test found: a gate that could never pass)."""
    assert command_for_tests(["src/a.spec.ts"], "npm test") == "npm test -- src/a.spec.ts"
    assert command_for_tests(["src/a.spec.ts"], "npm run test") == "npm run test"


def test_test_command_for(app_index: RepoIndex) -> None:
    assert app_index.test_command == "python -m pytest -q"
    assert (
        test_command_for(app_index, ["tests/test_middleware.py", "tests/test_cli.py", "tests/test_cli.py"])
        == "python -m pytest -q tests/test_cli.py tests/test_middleware.py"
    )
    assert test_command_for(app_index, []) == "python -m pytest -q"
    assert test_command_for(app_index, ["pkg/limit_test.go"]) == "go test ./pkg"


@pytest.mark.parametrize(
    ("tests", "layout"),
    [
        (["src/test/java/a/ATest.java", "src/test/java/a/b/BTest.java", "build/test/x.java"], "src/test/java/"),
        (["spec/a_spec.rb", "spec/models/b_spec.rb", "test/c_test.rb"], "spec/"),
        (["pkg/a_test.go", "cmd/b_test.go"], "beside the source"),
        (["tests/test_a.py"], "tests/"),
        ([], "none"),
    ],
)
def test_where_tests_live(tests: list[str], layout: str) -> None:
    """The context package tells a planner where this project keeps its tests, not a fixed "tests/"."""
    assert where_tests_live(tests) == layout


@pytest.mark.parametrize(
    ("suite", "tests", "command"),
    [
        ("mvn -q test", ["src/test/java/a/NameAllocatorTest.java", "src/test/java/a/TypeNameTest.java"],
         "mvn -q test -Dtest=NameAllocatorTest,TypeNameTest -Dsurefire.failIfNoSpecifiedTests=false"),
        ("./gradlew test", ["src/test/kotlin/a/ATest.kt"], "./gradlew :test --tests ATest"),
        # a sub-project's tests run in that sub-project: elsewhere the filter matches nothing and fails
        ("./gradlew test", ["core/src/test/java/a/ATest.java"], "./gradlew :core:test --tests ATest"),
        ("bundle exec rake test", ["test/helpers_test.rb"], "bundle exec rake test TEST=test/helpers_test.rb"),
        ("bundle exec rake test", ["test/a_test.rb", "test/b_test.rb"], "bundle exec rake test"),
        ("rspec", ["spec/a_spec.rb", "spec/b_spec.rb"], "rspec spec/a_spec.rb spec/b_spec.rb"),
        ("./gradlew test", ["app/src/androidTest/java/a/ATest.java"], "./gradlew test --tests ATest"),
        # a Rust module's own tests (#[cfg(test)] mod tests) by its path; a member crate's from the workspace root
        ("cargo test", ["src/config.rs"], "cargo test config::"),
        ("cargo test", ["src/cache/mod.rs"], "cargo test cache::"),
        ("cargo test", ["src/cache/lib.rs"], "cargo test cache::lib::"),
        ("cargo test", ["crates/core/src/cache/store.rs"], "cargo test --workspace cache::store::"),
        ("cargo test", ["src/lib.rs"], "cargo test"),
        ("cargo test", ["src/bin/tool.rs"], "cargo test"),
        ("cargo test", ["src/config.rs", "src/util.rs"], "cargo test"),
    ],
)
def test_java_and_ruby_tests_run_alone(suite: str, tests: list[str], command: str) -> None:
    """A Java or Ruby task's verification runs its own tests with the project's runner, and is a command
    execution will run (a known tool), not "manual"."""
    assert command_for_tests(tests, suite) == command
    assert refusal(command) is None


def test_a_ruby_sub_projects_tests_are_run_there_by_hand() -> None:
    """sinatra's rack-protection/spec/ loads its helper from its own folder through its own Gemfile, and the root's
    `rake test` does not run it: from the root no command runs that spec, so the step says where to run it."""
    for suite in ("bundle exec rake test", "bundle exec rspec"):
        assert command_for_tests(["rack-protection/spec/lib/x_spec.rb"], suite) == \
            "manual: cd rack-protection && bundle exec rspec spec/lib/x_spec.rb"
    assert command_for_tests(["contrib/test/x_test.rb"], "bundle exec rake test") == \
        "manual: cd contrib && bundle exec rake test TEST=test/x_test.rb"


# --- ranking ---------------------------------------------------------------


def test_tokenize_splits_stems_and_drops_noise() -> None:
    assert tokenize("RateLimiterMiddleware per_user limiting") == [
        "rat",
        "limit",
        "middlewar",
        "user",
        "limit",
    ]
    assert tokenize("limiting limiter limited users") == ["limit", "limit", "limit", "user"]
    assert tokenize("getHTTPResponse src/app/user-profile.py v404") == [
        "get",
        "http",
        "respons",
        "app",
        "user",
        "profil",
        "404",
    ]
    assert tokenize("def return self None True false import the") == []
    assert tokenize("cache caches caching") == ["cach", "cach", "cach"]


def test_bm25_scores() -> None:
    docs = {"a": ["rate", "limit", "limit"], "b": ["user", "profile"], "c": ["limit", "user"], "d": []}
    scores = bm25_scores(["rate", "limit"], docs)
    assert set(scores) == {"a", "b", "c", "d"}
    assert scores["a"] > scores["c"] > 0 == scores["b"] == scores["d"]
    assert bm25_scores(["rate", "limit"], dict(reversed(list(docs.items())))) == scores
    assert bm25_scores(["x"], {}) == {}
    # Equal length and frequency: only idf separates a rare term from a common one.
    rare = bm25_scores(["rate", "limit"], {"x": ["rate"], "y": ["limit"], "z": ["limit"]})
    assert rare["x"] > rare["y"] == rare["z"] > 0


def test_rank_files_puts_the_relevant_file_first(app_index: RepoIndex) -> None:
    ranked = rank_files(app_index, "add per-user rate limiting to the request middleware")
    assert ranked[0][0] == "app/middleware.py"
    assert "app/limits.py" in [path for path, _ in ranked[:3]]
    assert all(score > 0 for _, score in ranked)
    assert ranked == sorted(ranked, key=lambda item: (-item[1], item[0]))
    assert not any(path.startswith("tests/") for path, _ in ranked)
    with_tests = [path for path, _ in rank_files(app_index, "request middleware", include_tests=True)]
    assert "tests/test_middleware.py" in with_tests
    assert (
        rank_files(app_index, "parse command line arguments", limit=1)
        == rank_files(app_index, "parse command line arguments")[:1]
    )
    assert rank_files(app_index, "parse command line arguments", limit=1)[0][0] == "app/cli.py"
    assert rank_files(app_index, "the and of") == []


def test_rank_symbols(app_index: RepoIndex) -> None:
    found = rank_symbols(
        app_index, "app/middleware.py", "add per-user rate limiting to the request middleware"
    )
    assert [s.qualname for s in found] == [
        "RequestMiddleware",
        "RequestMiddleware.__init__",
        "RequestMiddleware.handle",
    ]
    assert [s.qualname for s in rank_symbols(app_index, "app/middleware.py", "log request", limit=1)] == [
        "log_request"
    ]
    assert rank_symbols(app_index, "app/middleware.py", "database connection") == []
    assert rank_symbols(app_index, "missing.py", "anything") == []


def test_an_error_type_sharing_the_words_of_a_requirement_about_no_error_ranks_after_the_code(
        tmp_path: Path) -> None:
    """`make demo`'s plan changed notes_api/auth/users.py "in UserError" for per-user rate limiting: the
    exception, the store and its method all share "user", and the exception came first in the file."""
    (tmp_path / "users.py").write_text(
        'class UserError(ValueError):\n    """Bad user data."""\n\n\nclass UserStore:\n    """Users."""\n\n'
        "    def create_user(self, name):\n        return name\n", encoding="utf-8")
    index = build_index(tmp_path)
    assert [s.qualname for s in rank_symbols(index, "users.py", "Add per-user rate limiting")] == [
        "UserStore", "UserStore.create_user", "UserError"]
    assert rank_symbols(index, "users.py", "A clear error for bad user names")[0].qualname == \
        "UserError"
    # a function handling errors is code: only error types wait
    (tmp_path / "events.py").write_text("def onUserError(user):\n    return user\n\n\nclass UserLog:\n    pass\n",
                                        encoding="utf-8")
    assert [s.qualname for s in rank_symbols(build_index(tmp_path), "events.py", "Count per-user events")] == [
        "onUserError", "UserLog"]


# --- index as a whole -----------------------------------------------------


def test_index_summary_fields(app_index: RepoIndex, app_repo: Path) -> None:
    assert app_index.root == str(app_repo.resolve())
    assert app_index.languages == {"javascript": 2, "markdown": 1, "python": 11, "toml": 1, "typescript": 1}
    tokens = app_index.doc_tokens["app/middleware.py"]
    assert tokens[:6] == ["app", "middlewar"] * 3  # path tokens come first, three times
    assert tokens.count("request") > tokens.count("limit")


def test_build_index_is_deterministic(app_repo: Path) -> None:
    first, second = build_index(app_repo), build_index(app_repo)
    assert first.model_dump() == second.model_dump()
    assert first.model_dump_json() == second.model_dump_json()
    query = "rate limiting middleware"
    assert rank_files(first, query) == rank_files(second, query)
