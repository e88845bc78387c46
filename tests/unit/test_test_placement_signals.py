"""Which existing test a change's tests go in, when the first planned module is not the change's subject.

On 83 real commits of 11 projects (each changing one or two source files and an existing test file), the
offline plan named the commit's test file in 28: it looked only at the tests of the first planned module
(gin.go for a debug warning whose test is debug_test.go), created a new test_app.py where flask's tests
`import flask`, ignored the test the history changes with the module (ripgrep's tests/feature.rs runs the
binary and imports nothing), and put a new pip test in a vendored package's tests folder."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import commit_in, git_in, write
from wfqueue.analysis import build_index
from wfqueue.providers.offline.tests_placement import where_tests_go


def test_the_test_of_a_later_planned_module_the_requirement_names_is_taken(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "go.mod": "module example.com/web\n",
        "gin.go": "package gin\n\nfunc New() *Engine { debugPrintWARNINGNew(); return &Engine{} }\n",
        "debug.go": "package gin\n\nfunc debugPrintWARNINGNew() { debugPrint(\"warning\") }\n",
        "gin_test.go": "package gin\n\nimport \"testing\"\n\nfunc TestNew(t *testing.T) { New() }\n",
        "debug_test.go": "package gin\n\nimport \"testing\"\n\nfunc TestDebugPrint(t *testing.T) {}\n",
    }))
    # The localizer ranks gin.go first; the warning is debug.go's, and tested in debug_test.go.
    assert where_tests_go(index, ["gin.go", "debug.go"], "Print the debug warning only in debug mode") \
        == ("debug_test.go", True)


def test_a_python_test_reaching_the_module_through_the_package_and_named_by_the_requirement_is_taken(
        tmp_path: Path) -> None:
    files = {
        "web/__init__.py": "from web.app import App\n",
        "web/app.py": "class App:\n    def handle_user_exception(self, error):\n        return self.handler(error)\n",
        "tests/test_basic.py": "import web\n\ndef test_app():\n    assert web.App()\n",
        "tests/test_user_error_handler.py": "import web\n\ndef test_handler():\n    assert web.App()\n",
    }
    index = build_index(write(tmp_path, files))
    requirement = "Call the user error handler for subclasses of HTTPException"
    assert where_tests_go(index, ["web/app.py"], requirement) == ("tests/test_user_error_handler.py", True)
    # A test named by nothing the requirement says is no reason to extend it: a new test file, as Python
    # projects name them.
    assert where_tests_go(index, ["web/app.py"], "Log the time each request takes") == ("tests/test_app.py", False)


def test_the_test_the_history_changes_with_the_module_is_taken(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git_in(repo, "init", "-q")
    runs = "import subprocess\n\ndef test_runs():\n    subprocess.run(['tool', '--help'], check=True)\n"
    commit_in(repo, "Start", {"tool/__init__.py": "", "tool/cli.py": "def main():\n    return 0\n",
                            "tests/test_features.py": runs, "tests/test_other.py": "def test_x():\n    pass\n"})
    for n in range(3):
        commit_in(repo, f"Add option {n}", {"tool/cli.py": f"def main():\n    return {n}\n",
                                          "tests/test_features.py": runs + f"# option {n}\n"})
    commit_in(repo, "Tidy", {"tests/test_other.py": "def test_x():\n    assert True\n"})
    index = build_index(repo)
    # tests/test_features.py runs the program and imports nothing: only the history ties it to cli.py.
    assert where_tests_go(index, ["tool/cli.py"], "Exit with status 2 on an unknown option") \
        == ("tests/test_features.py", True)


def test_a_new_test_never_goes_into_a_vendored_packages_tests(tmp_path: Path) -> None:
    index = build_index(write(tmp_path, {
        "src/tool/__init__.py": "",
        "src/tool/resolution/__init__.py": "",
        "src/tool/resolution/candidates.py": "def best(found):\n    return found[0]\n",
        "src/tool/_vendor/__init__.py": "",
        "src/tool/_vendor/colors/__init__.py": "",
        "src/tool/_vendor/colors/tests/__init__.py": "",
        "src/tool/_vendor/colors/tests/test_ansi.py": "def test_ansi():\n    assert True\n",
        "tests/unit/test_index.py": "def test_index():\n    assert True\n",
    }))
    assert where_tests_go(index, ["src/tool/resolution/candidates.py"], "Prefer the newest candidate") \
        == ("tests/unit/test_candidates.py", False)


def test_only_the_tests_of_planned_code_in_the_changes_language_are_weighed(tmp_path: Path) -> None:
    """With a TypeScript module planned second, a Python change's tests went into its .test.ts."""
    index = build_index(write(tmp_path, {
        "pyproject.toml": "[project]\nname='app'\n",
        "api/__init__.py": "",
        "api/quota.py": "def user_quota(user):\n    return 10\n",
        "tests/__init__.py": "",
        "tests/test_health.py": "def test_ok():\n    assert True\n",
        "web/package.json": '{"name": "web"}\n',
        "web/src/dashboard.ts": "export function showQuota(n: number) { return `${n}`; }\n",
        "web/src/dashboard.test.ts": "import { showQuota } from './dashboard';\n"
                                     "test('quota', () => { expect(showQuota(1)).toBe('1'); });\n",
    }))
    assert where_tests_go(index, ["api/quota.py", "web/src/dashboard.ts"], "Show the user quota on the dashboard") \
        == ("tests/test_quota.py", False)


def test_a_go_change_is_tested_in_its_own_package(tmp_path: Path) -> None:
    """Render helpers moved out of context.go (package gin): the test went to render/render_test.go, package render,
    named by the requirement and changed with context.go before, which cannot reach them."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git_in(repo, "init", "-q")
    commit_in(repo, "Start", {
        "go.mod": "module example.com/gin\n",
        "context.go": "package gin\n\nfunc (c *Context) renderJSON() {}\n",
        "context_test.go": "package gin\n\nimport \"testing\"\n\nfunc TestContext(t *testing.T) {}\n",
        "render/render.go": "package render\n\ntype Render interface{}\n",
        "render/render_test.go": "package render\n\nimport \"testing\"\n\nfunc TestRender(t *testing.T) {}\n",
    })
    for n in range(3):
        commit_in(repo, f"Render change {n}", {
            "context.go": f"package gin\n\nfunc (c *Context) renderJSON() {{}} // {n}\n",
            "render/render_test.go": f"package render\n\n// {n}\n"})
    index = build_index(repo)
    requirement = "Move the render helpers from context.go into their own file"
    assert where_tests_go(index, ["render.go", "context.go"], requirement, "render.go") == ("context_test.go", True)
