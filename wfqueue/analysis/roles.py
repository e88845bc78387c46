"""What a file is for: product source, or support files a feature change leaves alone. Pure.

Release scripts, build and CI configuration, type declarations (``.d.ts``
bundles, ``.pyi`` stubs), vendored copies, examples and benchmarks all mention
the product's words (a ``index.d.ts`` repeats every exported name), so ranking
alone keeps offering them. A change touches them only when the requirement
says so. Tests the file scan's naming rules miss (a ``testsuite/`` package,
``index.test-d.ts`` type tests, ``commander-tests.ts``) are tests here too: a
plan covers them in its test task, not as the change.
"""

from __future__ import annotations

import posixpath
import re
from typing import Literal

Role = Literal["source", "test", "script", "build", "ci", "types", "vendored", "example", "docs"]

_SCRIPT_DIRS = frozenset({"bin", "scripts", "script", "tools", "benchmarks", "bench", "benchmark"})
# Where a monorepo keeps its packages (npm, pnpm and yarn workspaces, Cargo, Go): one level below them is a package.
_WORKSPACE_DIRS = frozenset({"packages", "apps", "libs", "crates", "modules", "services"})
_VENDORED_DIRS = frozenset({"vendor", "vendored", "third_party", "thirdparty", "_vendor", "external"})
_EXAMPLE_DIRS = frozenset({"examples", "example", "sandbox", "demo", "samples", "playground"})
_DOC_DIRS = frozenset({"docs", "doc", "documentation", "website"})
_CI_DIRS = frozenset({".github", ".circleci", ".gitlab", ".husky"})
# Build entry points at the repository root, and tool configuration anywhere.
_ROOT_BUILD = re.compile(r"^(setup|noxfile|fabfile|gulpfile|gruntfile|dodo|pavement)\.(py|c?m?[jt]s)$"
                         r"|^Package\.swift$|^(build|settings)\.gradle\.kts$", re.IGNORECASE)
_TOOL_CONFIG = re.compile(
    r"^\.?(webpack|rollup|vite|karma|jest|babel|eslint|eslintrc|prettier|prettierrc|tsup|esbuild|vitest|commitlint|"
    r"lint-staged|mocha|nyc|postcss|tailwind|playwright|cypress|gulp|grunt)([.-][\w-]+)*\.(c?m?[jt]s|json)$"
    r"|\.config\.(c?m?[jt]s)$|\.conf\.(c?m?js)$",
    re.IGNORECASE,
)
_DECLARATION = re.compile(r"\.d\.(c|m)?ts$|\.pyi$")
_TEST_DIRS = frozenset({"testsuite", "testsuites", "test_suite"})
# Type tests (tsd's ``index.test-d.ts``) and kebab-case test names (``commander-tests.ts``).
_TEST_NAME = re.compile(r"\.test-d\.|-(tests?|spec)\.[^.]+$", re.IGNORECASE)
_MINIFIED = re.compile(r"[.-]min\.js$|\.bundle\.js$")


def file_role(path: str, is_test: bool = False) -> Role:
    """The role of ``path`` (POSIX, relative to the repository root)."""
    parts = path.split("/")
    directories, name = [p.lower() for p in parts[:-1]], parts[-1]
    if is_test or any(d in _TEST_DIRS for d in directories) or _TEST_NAME.search(name):
        return "test"
    if any(d in _CI_DIRS for d in directories):
        return "ci"
    if any(d in _VENDORED_DIRS for d in directories) or _MINIFIED.search(name):
        return "vendored"
    if _DECLARATION.search(name):
        return "types"
    if (_ROOT_BUILD.match(name) and not directories) or _TOOL_CONFIG.search(name):
        return "build"
    if directories and (directories[0] in _SCRIPT_DIRS or (
            len(directories) > 1 and directories[0] in _WORKSPACE_DIRS and directories[1] in _SCRIPT_DIRS)):
        return "script"  # a monorepo's packages/bench/ too (its benchmarks were planned as product code)
    if any(d in _EXAMPLE_DIRS for d in directories):
        return "example"
    if any(d in _DOC_DIRS for d in directories):
        return "docs"
    return "source"


def beside_the_product(path: str) -> bool:
    """Under an examples or vendored folder (``examples/tutorial/tests/test_auth.py``): a project of its own beside
    the product, whose tests run with its own configuration, not the product's test command."""
    directories = [p.lower() for p in path.split("/")[:-1]]
    return any(d in _EXAMPLE_DIRS or d in _VENDORED_DIRS for d in directories)


def named_in(path: str, requirement: str) -> bool:
    """The requirement names this file: its path, its file name, or its stem in backticks."""
    text = requirement.lower()
    name = posixpath.basename(path).lower()
    return path.lower() in text or name in text or f"`{name.split('.', 1)[0]}`" in text


def plannable(path: str, is_test: bool, requirement: str) -> bool:
    """Product source, or a support file the requirement names."""
    role = file_role(path, is_test)
    if role == "source":
        return True
    if role == "test":
        return False
    return named_in(path, requirement) or _role_named(role, requirement)


# Words that name a kind of support file; deliberately specific ("build" or "script" alone are
# everyday words of requirements, and "script" hides in "TypeScript").
_ROLE_WORDS: dict[str, tuple[str, ...]] = {
    "script": ("release script", "build script", "bin/"),
    "build": ("setup.py", "packaging", "rollup", "webpack", "karma", "gulp", "grunt", "eslint", "babel config",
              "jest config", "build config", "bundler"),
    "ci": ("continuous integration", "github action", "ci workflow", "ci pipeline", "ci config"),
    "types": ("typescript definition", "type definition", "typings", "d.ts", "type declaration", "type stub", ".pyi"),
    "vendored": ("vendored", "vendor/"),
    "example": ("examples/", "the example"),
    "docs": ("docs/", "sphinx"),
}


def _role_named(role: Role, requirement: str) -> bool:
    text = requirement.lower()
    return any(word in text for word in _ROLE_WORDS.get(role, ()))
