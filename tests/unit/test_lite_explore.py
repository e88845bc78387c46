"""The offline explorer reports only what is in the code, and verification proves it."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from wfqueue.analysis import build_index
from wfqueue.lite.finding_checks import verify_findings
from wfqueue.lite.models import (
    AngleFindings,
    Dependency,
    IntegrationPoint,
    Pattern,
    RelevantFile,
)
from wfqueue.providers.offline.explore import angle_names, explore_angle, lacks_tests

REQUIREMENT = "Add per-user rate limiting to the API"
PRESET_ANGLES = [
    "architecture", "dependencies", "modularity", "integration-points",
    "security", "auth-patterns", "dataflow", "validation",
    "performance", "bottlenecks", "caching", "data-access",
    "error-handling", "state-management", "edge-cases",
    "patterns", "testing",
]


def reader(repo: Path):
    return lambda path: (repo / path).read_text(encoding="utf-8")


def explore(repo: Path, angle: str, requirement: str = REQUIREMENT) -> AngleFindings:
    return explore_angle(build_index(repo), requirement, angle, reader(repo))


def lines_of(repo: Path, path: str) -> list[str]:
    return (repo / path).read_text(encoding="utf-8").splitlines()


def planted(**fields) -> AngleFindings:
    """Findings holding nothing but the given lists (so checks line up with them)."""
    return AngleFindings(angle="planted", **fields)


# ---------------------------------------------------------------- exploration


def test_every_preset_angle_has_its_own_vocabulary() -> None:
    assert set(PRESET_ANGLES) <= set(angle_names())


def test_angles_give_different_findings_naming_real_files(sample_repo: Path) -> None:
    angles = ["security", "caching", "testing", "integration-points"]
    results = {angle: explore(sample_repo, angle) for angle in angles}
    for angle, findings in results.items():
        assert findings.angle == angle
        assert findings.relevant_files, angle
        for item in findings.relevant_files:
            assert (sample_repo / item.path).is_file(), (angle, item.path)
    top = {angle: results[angle].relevant_files[0].path for angle in angles}
    assert top["security"] in {"notes_api/auth/users.py", "notes_api/auth/tokens.py"}
    assert top["caching"] == "notes_api/storage/cache.py"
    assert top["testing"].startswith("tests/")
    assert top["integration-points"] == "notes_api/server.py"
    assert len(set(top.values())) == len(angles), top
    # Not the same lists under another title: patterns and integration points differ too.
    patterns = {angle: frozenset(p.search for p in results[angle].patterns) for angle in angles}
    points = {angle: frozenset((p.file, p.line) for p in results[angle].integration_points) for angle in angles}
    for i, a in enumerate(angles):
        for b in angles[i + 1 :]:
            assert patterns[a] != patterns[b], (a, b)
            assert points[a] != points[b], (a, b)
            assert not (patterns[a] & patterns[b]), (a, b, patterns[a] & patterns[b])


def test_angle_specific_findings_on_the_sample(sample_repo: Path) -> None:
    security = explore(sample_repo, "security")
    assert any("hmac.compare_digest" in p.example for p in security.patterns)
    caching = explore(sample_repo, "caching")
    assert any("OrderedDict" in p.description for p in caching.patterns)
    cache_file = next(f for f in caching.relevant_files if f.path == "notes_api/storage/cache.py")
    assert cache_file.relevance == "high"
    assert "cache" in cache_file.rationale and "TTLCache" in cache_file.rationale
    testing = explore(sample_repo, "testing")
    assert any(p.search and "pytest" in p.search for p in testing.patterns)
    assert any(f.path.startswith("notes_api/") for f in testing.relevant_files), "the code under test is named too"
    assert any(d.source.startswith("tests/") and d.target.startswith("notes_api/") for d in testing.dependencies)
    errors = explore(sample_repo, "error-handling")
    assert any(p.example.startswith("except Exception") for p in errors.patterns)


def test_angle_names_are_normalised(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    dashed = explore_angle(index, REQUIREMENT, "integration-points", reader(sample_repo))
    spaced = explore_angle(index, REQUIREMENT, "Integration_Points", reader(sample_repo))
    assert dashed.relevant_files == spaced.relevant_files
    assert dashed.patterns == spaced.patterns


@pytest.mark.parametrize("angle", [*PRESET_ANGLES, "made-up-angle"])
def test_every_offline_finding_verifies(sample_repo: Path, angle: str) -> None:
    findings = explore(sample_repo, angle)
    checks = verify_findings(sample_repo, findings)
    expected = (
        [("file", f.path) for f in findings.relevant_files]
        + [("pattern", p.search) for p in findings.patterns]
        + [("integration_point", f"{p.file}:{p.line}") for p in findings.integration_points]
        + [("dependency", f"{d.source} -> {d.target}") for d in findings.dependencies]
    )
    assert [(c.kind, c.subject) for c in checks] == expected
    assert findings.patterns and findings.integration_points, "an angle must find something on the sample"
    unverified = [c for c in checks if not c.verified]
    assert not unverified, unverified


@pytest.mark.parametrize("angle", ["architecture", "security", "testing", "edge-cases", "made-up-angle"])
def test_findings_are_bounded_and_literal(sample_repo: Path, angle: str) -> None:
    findings = explore(sample_repo, angle)
    index = build_index(sample_repo)
    assert len(findings.relevant_files) <= 8
    assert len(findings.patterns) <= 6
    assert len(findings.integration_points) <= 8
    assert 1 <= len(findings.structure) <= 6
    ranks = {"high": 0, "medium": 1, "low": 2}
    relevance = [ranks[f.relevance] for f in findings.relevant_files]
    assert relevance == sorted(relevance) and relevance[0] == 0, "best first, best is high"
    for pattern in findings.patterns:
        # The example is a real line of the repository, and the regex matches it.
        assert re.search(pattern.search, pattern.example), pattern
        where = re.search(r"e\.g\. (\S+):(\d+)\)", pattern.description)
        assert where, pattern.description
        assert lines_of(sample_repo, where.group(1))[int(where.group(2)) - 1].strip() == pattern.example
    for point in findings.integration_points:
        assert lines_of(sample_repo, point.file)[point.line - 1].strip() == point.snippet, point
    for dep in findings.dependencies:
        assert dep.target in index.imports[dep.source], dep
    if angle != "testing":
        assert not any(p.file.startswith("tests/") for p in findings.integration_points), "tests are not plug-in points"
    for need in findings.clarification_needs:
        assert 2 <= len(need.options) <= 3, need


def test_structural_angles_look_beyond_the_relevant_files(sample_repo: Path) -> None:
    security = explore(sample_repo, "security")
    relevant = {f.path for f in security.relevant_files}
    assert security.dependencies
    assert all(d.source in relevant and d.target in relevant for d in security.dependencies)
    deps = explore(sample_repo, "dependencies")
    relevant = {f.path for f in deps.relevant_files}
    assert any(d.target not in relevant or d.source not in relevant for d in deps.dependencies)
    assert "pyproject.toml" in relevant, "the manifest declaring external dependencies"


def test_constraints_and_clarifications_come_from_the_analysis(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    findings = explore(sample_repo, "architecture")
    assert "notes_api/server.py" not in index.tests_for
    assert any(c.startswith("No test covers") and "notes_api/server.py" in c for c in findings.constraints)
    router_users = len([p for p, targets in index.imports.items() if "notes_api/api/router.py" in targets])
    assert f"notes_api/api/router.py is imported by {router_users} modules" in " ".join(findings.constraints)
    questions = [c.question for c in findings.clarification_needs]
    # "rate" occurs nowhere in the sample; "user" and "limit" do.
    assert any("'rate'" in q for q in questions), questions
    assert not any("'user'" in q or "'limiting'" in q for q in questions)
    assert any(q.startswith("notes_api/server.py has no tests") for q in questions), questions


def test_close_scores_ask_which_module_owns_the_change(sample_repo: Path) -> None:
    (sample_repo / "notes_api" / "quota.py").write_text(
        '"""Quota bookkeeping."""\n\n\ndef quota_window(seconds: int) -> int:\n    return seconds\n', encoding="utf-8"
    )
    (sample_repo / "notes_api" / "quotas.py").write_text(
        '"""Quota bookkeeping."""\n\n\ndef quota_window(seconds: int) -> int:\n    return seconds\n', encoding="utf-8"
    )
    findings = explore(sample_repo, "made-up-angle", "Change the quota window")
    owner = [c for c in findings.clarification_needs if c.question.startswith("Which module should own")]
    assert owner, findings.clarification_needs
    assert set(owner[0].options[:2]) == {"notes_api/quota.py", "notes_api/quotas.py"}
    # A clear winner raises no such question.
    clear = explore(sample_repo, "caching")
    assert not any(c.question.startswith("Which module should own") for c in clear.clarification_needs)


def test_an_examples_folder_is_read_but_never_taken_for_the_code_to_change(sample_repo: Path) -> None:
    """Express's examples/ matched its requirement's words as well as lib/: the exploration asked which of
    examples/error/index.js and another module should own the change, and whether the example needs tests."""
    (sample_repo / "notes_api" / "quota.py").write_text(
        '"""Quota bookkeeping."""\n\n\ndef quota_window(seconds: int) -> int:\n    return seconds\n', encoding="utf-8"
    )
    (sample_repo / "examples" / "quota").mkdir(parents=True)
    (sample_repo / "examples" / "quota" / "quota_demo.py").write_text(
        '"""Quota bookkeeping."""\n\n\ndef quota_window(seconds: int) -> int:\n    return seconds\n', encoding="utf-8"
    )
    findings = explore(sample_repo, "made-up-angle", "Change the quota window")
    said = " ".join([c.question for c in findings.clarification_needs] + findings.constraints)
    assert "examples/" not in said, said
    assert not any(c.question.startswith("Which module should own") for c in findings.clarification_needs)


def test_a_vendored_copy_is_not_explored_unless_the_requirement_names_it(sample_repo: Path) -> None:
    """pip's _vendor/ (rich, packaging, resolvelib) matched the angles' vocabulary: 5 of the 8 relevant files of a
    change to `pip list` were vendored, all marked verified, and commands/list.py was not among them."""
    (sample_repo / "notes_api" / "quota.py").write_text(
        '"""Quota bookkeeping."""\n\n\ndef quota_window(seconds: int) -> int:\n    return seconds\n', encoding="utf-8")
    vendored = sample_repo / "notes_api" / "_vendor" / "quotalib"
    vendored.mkdir(parents=True)
    for n in range(12):
        (vendored / f"quota_{n}.py").write_text(
            '"""Quota window bookkeeping, quota limits and quota windows."""\n\n\n'
            f'def quota_window_{n}(quota: int, window: int) -> int:\n    return quota * window\n', encoding="utf-8")
    for angle in ("patterns", "architecture", "made-up-angle"):
        files = [f.path for f in explore(sample_repo, angle, "Change the quota window").relevant_files]
        assert files and not any("_vendor/" in f for f in files), (angle, files)
        assert angle != "made-up-angle" or files[0] == "notes_api/quota.py", files
    named = explore(sample_repo, "patterns", "Change the quota window of the vendored quotalib in _vendor/")
    assert any("_vendor/" in f.path for f in named.relevant_files)


def test_unknown_angle_explores_the_requirement_terms_only(sample_repo: Path) -> None:
    findings = explore(sample_repo, "made-up-angle")
    descriptions = [p.description for p in findings.patterns]
    assert descriptions and all(d.startswith("existing code using '") for d in descriptions)
    assert any("'user'" in d for d in descriptions)
    assert not any("'rate'" in d for d in descriptions), "no code uses 'rate', so no pattern for it"
    index = build_index(sample_repo)
    by_requirement_only = explore_angle(index, REQUIREMENT, "another-unknown", reader(sample_repo))
    assert [f.path for f in findings.relevant_files] == [f.path for f in by_requirement_only.relevant_files]


def test_exploration_is_deterministic(sample_repo: Path, tmp_path: Path) -> None:
    first = explore(sample_repo, "security")
    second = explore(sample_repo, "security")
    assert first.model_dump() == second.model_dump()
    # A copy elsewhere gives the same findings: nothing depends on absolute paths.
    copy = tmp_path / "elsewhere"
    shutil.copytree(sample_repo, copy)
    assert explore(copy, "security").model_dump() == first.model_dump()


def test_read_is_the_only_io(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    texts = {f.path: (sample_repo / f.path).read_text(encoding="utf-8") for f in index.files}
    expected = explore_angle(index, REQUIREMENT, "dataflow", reader(sample_repo))
    shutil.rmtree(sample_repo)
    asked: list[str] = []

    def from_memory(path: str) -> str:
        asked.append(path)
        return texts[path]

    assert explore_angle(index, REQUIREMENT, "dataflow", from_memory) == expected
    assert asked and set(asked) <= set(texts)


def test_unreadable_files_yield_no_invented_lines(sample_repo: Path) -> None:
    def failing(path: str) -> str:
        raise OSError("gone")

    findings = explore_angle(build_index(sample_repo), REQUIREMENT, "security", failing)
    assert findings.relevant_files, "ranking needs only the index"
    assert findings.patterns == [] and findings.integration_points == []


# ---------------------------------------------------------------- verification


def test_nonexistent_and_escaping_files_are_unverified(sample_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.py"
    outside.write_text("TOKEN = 1\n", encoding="utf-8")
    os.symlink(outside, sample_repo / "notes_api" / "link.py")
    findings = planted(
        relevant_files=[
            RelevantFile(path="notes_api/auth/users.py", relevance="high", rationale="real"),
            RelevantFile(path="notes_api/auth/ratelimit.py", relevance="high", rationale="planted"),
            RelevantFile(path="../secret.py", relevance="low", rationale="escapes"),
            RelevantFile(path="notes_api/../../secret.py", relevance="low", rationale="escapes later"),
            RelevantFile(path=str(outside), relevance="low", rationale="absolute"),
            RelevantFile(path="notes_api/link.py", relevance="low", rationale="symlink out"),
            RelevantFile(path="notes_api/auth/../config.py", relevance="low", rationale="stays inside"),
        ],
    )
    checks = verify_findings(sample_repo, findings)
    assert [c.verified for c in checks] == [True, False, False, False, False, False, True]
    assert checks[0].evidence == "exists (122 lines)"
    assert checks[1].evidence == "not found"
    assert [c.evidence for c in checks[2:6]] == ["outside the repository"] * 4


def test_patterns_are_grepped_over_the_repository(sample_repo: Path) -> None:
    findings = planted(
        patterns=[
            Pattern(description="cache class", search=r"^class TTLCache\b"),
            Pattern(description="user ids", search=r"\buser_id\b"),
            Pattern(description="planted", search=r"\bRateLimiter\b"),
            Pattern(description="broken", search=r"(unclosed"),
            Pattern(description="empty", search=""),
        ],
    )
    checks = verify_findings(sample_repo, findings)
    assert [c.subject for c in checks] == [p.search for p in findings.patterns]
    assert checks[0].verified and checks[0].evidence == "1 matches, first at notes_api/storage/cache.py:14"
    user_lines = sum(
        1
        for path in sorted(sample_repo.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
        for line in path.read_text(encoding="utf-8").splitlines()
        if re.search(r"\buser_id\b", line)
    )
    assert checks[1].verified and checks[1].evidence.startswith(f"{user_lines} matches, first at ")
    assert not checks[2].verified and re.fullmatch(r"no match in \d+ files scanned", checks[2].evidence)
    assert not checks[3].verified and checks[3].evidence.startswith("invalid pattern: ")
    assert not checks[4].verified and checks[4].evidence == "empty pattern"


def test_integration_points_are_checked_line_by_line(sample_repo: Path) -> None:
    line = "def verify_token(token: str, secret: str, now: float | None = None) -> TokenClaims:"
    findings = planted(
        integration_points=[
            IntegrationPoint(file="notes_api/auth/tokens.py", line=56, description="exact", snippet=line),
            IntegrationPoint(file="notes_api/auth/tokens.py", line=57, description="squashed",
                             snippet="def  verify_token(token:str"),
            IntegrationPoint(file="notes_api/auth/tokens.py", line=58, description="off by two",
                             snippet="def verify_token("),
            IntegrationPoint(file="notes_api/auth/tokens.py", line=20, description="wrong line",
                             snippet="def verify_token("),
            IntegrationPoint(file="notes_api/auth/tokens.py", line=500, description="beyond the end"),
            IntegrationPoint(file="notes_api/auth/tokens.py", line=19, description="no snippet"),
            IntegrationPoint(file="notes_api/auth/missing.py", line=1, description="no file"),
            IntegrationPoint(file="../outside.py", line=1, description="escapes"),
        ],
    )
    checks = verify_findings(sample_repo, findings)
    assert [c.subject for c in checks][:2] == ["notes_api/auth/tokens.py:56", "notes_api/auth/tokens.py:57"]
    assert [c.verified for c in checks] == [True, False, True, False, False, True, False, False]
    assert checks[0].evidence == f"snippet found at line 56: `{line}`"
    # Whitespace is normalised, but "token:str" is not "token: str".
    assert "line 57 is `" in checks[1].evidence
    assert checks[2].evidence.startswith("snippet found at line 56 (claimed 58)")
    assert checks[3].evidence.startswith("snippet not within ±2 lines of line 20")
    assert "class TokenError(Exception):" not in checks[3].evidence
    assert "line 20 is `\"\"\"Raised when a token is malformed, forged or expired.\"\"\"`" in checks[3].evidence
    assert checks[4].evidence == "line 500 is beyond the end of the file (75 lines)"
    assert checks[5].evidence == "line 19 exists: `class TokenError(Exception):`"
    assert checks[6].evidence == "file not found"
    assert checks[7].evidence == "outside the repository"


def test_dependencies_are_checked_against_real_imports(sample_repo: Path) -> None:
    findings = planted(
        dependencies=[
            Dependency(source="notes_api/api/middleware.py", target="notes_api/auth/tokens.py"),
            Dependency(source="notes_api/api/middleware.py", target="notes_api.auth.users"),
            Dependency(source="notes_api/auth/users.py", target="hashlib"),
            Dependency(source="notes_api/storage/cache.py", target="notes_api/auth/users.py"),
            Dependency(source="notes_api/auth/users.py", target="requests"),
            Dependency(source="notes_api/ratelimit.py", target="notes_api/config.py"),
            Dependency(source="../elsewhere.py", target="notes_api/config.py"),
            Dependency(source="notes_api/server.py", target="../../etc/passwd"),
            Dependency(source="notes_api/server.py", target="notes_api/auth"),
            Dependency(source="notes_api/server.py", target="notes_api/ratelimit.py"),
        ],
    )
    checks = verify_findings(sample_repo, findings)
    assert checks[0].subject == "notes_api/api/middleware.py -> notes_api/auth/tokens.py"
    assert [c.verified for c in checks] == [True, True, True, False, False, False, False, False, True, False]
    assert checks[0].evidence == (
        "imports notes_api/auth/tokens.py at line 15: `from notes_api.auth.tokens import TokenError, verify_token`"
    )
    assert checks[1].evidence.startswith("imports notes_api/auth/users.py at line 16")
    assert checks[2].evidence == "imports external module hashlib at line 5: `import hashlib`"
    assert checks[3].evidence == (
        "notes_api/storage/cache.py does not import notes_api/auth/users.py (its in-repo imports: none)"
    )
    assert "does not import requests" in checks[4].evidence
    assert checks[5].evidence == "source not found"
    assert checks[6].evidence == "source is outside the repository"
    assert checks[7].evidence == "target is outside the repository"
    assert checks[8].evidence == (  # a module of the package
        "imports notes_api/auth/tokens.py from package notes_api/auth at line 19: "
        "`from notes_api.auth.tokens import issue_token`"
    )
    assert checks[9].evidence == "target notes_api/ratelimit.py not found"


def test_javascript_and_other_language_dependencies(tmp_path: Path) -> None:
    repo = tmp_path / "web"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "api.js").write_text("export function get() { return 1 }\n", encoding="utf-8")
    (repo / "src" / "app.js").write_text("import { get } from './api'\nconsole.log(get())\n", encoding="utf-8")
    (repo / "src" / "util.js").write_text("export const x = 1\n", encoding="utf-8")
    (repo / "src" / "helper.rb").write_text("def helper = 1\n", encoding="utf-8")
    (repo / "src" / "other.rb").write_text("def other = 2\n", encoding="utf-8")
    (repo / "main.rb").write_text("require_relative 'src/helper'\nputs helper\n", encoding="utf-8")
    findings = planted(
        dependencies=[
            Dependency(source="src/app.js", target="src/api.js"),
            Dependency(source="src/app.js", target="src/util.js"),
            Dependency(source="main.rb", target="src/helper.rb"),
            Dependency(source="main.rb", target="src/other.rb"),
            Dependency(source="src/app.js", target="src/missing.js"),
            Dependency(source="src/app.js", target="lodash/fp"),
        ],
    )
    checks = verify_findings(repo, findings)
    assert [c.verified for c in checks] == [True, False, True, False, False, False]
    assert checks[0].evidence == "imports src/api.js at line 1: `import { get } from './api'`"
    assert "does not import src/util.js" in checks[1].evidence
    assert "no import resolution for ruby" in checks[2].evidence
    assert checks[3].evidence == "main.rb never mentions other"
    assert checks[4].evidence == "target src/missing.js not found"
    assert "does not import lodash/fp" in checks[5].evidence


def test_verification_catches_code_that_moved(sample_repo: Path) -> None:
    findings = explore(sample_repo, "caching")
    cache_points = [p for p in findings.integration_points if p.file == "notes_api/storage/cache.py"]
    assert cache_points
    cache = sample_repo / "notes_api" / "storage" / "cache.py"
    original = cache.read_text(encoding="utf-8")
    # Two lines of drift are tolerated ...
    cache.write_text("# one\n# two\n" + original, encoding="utf-8")
    assert all(c.verified for c in verify_findings(sample_repo, findings))
    # ... five are not, and the file disappearing is reported for every finding naming it.
    cache.write_text("# moved\n" * 5 + original, encoding="utf-8")
    moved = {c.subject: c for c in verify_findings(sample_repo, findings) if c.kind == "integration_point"}
    for point in cache_points:
        assert not moved[f"{point.file}:{point.line}"].verified
    cache.unlink()
    gone = verify_findings(sample_repo, findings)
    assert any(c.kind == "file" and c.subject == "notes_api/storage/cache.py" and not c.verified for c in gone)
    assert any(c.kind == "dependency" and c.subject.endswith("-> notes_api/storage/cache.py") and not c.verified
               for c in gone)


def test_a_requirement_the_code_never_mentions(sample_repo: Path) -> None:
    findings = explore(sample_repo, "made-up-angle", "Frobnicate the zzqx")
    index = build_index(sample_repo)
    assert findings.relevant_files and all(f.relevance == "low" for f in findings.relevant_files)
    assert all("no word of the query occurs in the code" in f.rationale for f in findings.relevant_files)
    most_imported = max(
        (f.path for f in index.files if not f.is_test and index.symbols[f.path]),
        key=lambda p: sum(p in targets for targets in index.imports.values()),
    )
    assert findings.relevant_files[0].path == most_imported
    assert findings.patterns == [], "no requirement word occurs, so no pattern can be claimed"
    questions = [c.question for c in findings.clarification_needs]
    assert any("'frobnicate', 'zzqx'" in q for q in questions), questions
    assert any(q.startswith("No file matches the requirement from the made-up-angle angle") for q in questions)
    assert all(c.verified for c in verify_findings(sample_repo, findings))


def test_a_repository_without_code(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Notes\n", encoding="utf-8")
    findings = explore(tmp_path, "caching")
    assert findings.relevant_files == [] and findings.patterns == [] and findings.integration_points == []
    assert findings.clarification_needs[-1].options == ["please name the modules", "start a new module"]
    assert verify_findings(tmp_path, findings) == []


def test_no_tests_is_said_only_of_code_the_index_can_tell_about(tmp_path: Path) -> None:
    """anyhow, javapoet and sinatra plans asked "src/lib.rs has no tests", "Rakefile has no tests" and
    "spec/okjson.rb has no tests" (a test helper): a crate's tests use the crate, not a file the index maps."""
    files = {
        "Cargo.toml": "[package]\n", "src/lib.rs": "pub fn root_cause() {}\n",
        "tests/test_chain.rs": "#[test]\nfn a() {}\n",
        "lib/app.rb": "def app\nend\n", "spec/okjson.rb": "def okjson\nend\n", "Rakefile": "task :test\n",
        "spec/app_spec.rb": "require 'app'\ndescribe 'app' do\nend\n",
        "pkg/used.py": "def used():\n    return 1\n", "pkg/lonely.py": "def lonely():\n    return 2\n",
        "tests/test_used.py": "from pkg.used import used\n\ndef test_used():\n    assert used()\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    index = build_index(tmp_path)
    assert index.tests_for.get("pkg/used.py") == ["tests/test_used.py"]
    assert lacks_tests(index, "pkg/lonely.py")  # Python's tests map to modules: this one has none
    for path in ("src/lib.rs", "Rakefile", "spec/okjson.rb", "pkg/used.py"):
        assert not lacks_tests(index, path), path
    (tmp_path / "tool.go").write_text("package tool\n\nfunc Run() {}\n", encoding="utf-8")
    assert lacks_tests(build_index(tmp_path), "tool.go")  # no Go test at all: nothing covers it
    crate = tmp_path / "crate"
    (crate / "src").mkdir(parents=True)
    (crate / "src" / "lib.rs").write_text("pub fn a() {}\n\n#[cfg(test)]\nmod tests {\n}\n", encoding="utf-8")
    assert not lacks_tests(build_index(crate), "src/lib.rs")  # Rust keeps tests in the source too
