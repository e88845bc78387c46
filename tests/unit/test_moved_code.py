"""A requirement that moves code into a module of its own plans that module.

On real commits ("Moved templating stuff into a separate module", flask; "Refactored the Async parser interface out
of JsonParser into a new class JsonParserAsync", gson; "Move parse_wheel and its helpers to utils.wheel", pip), the
offline plan only changed the existing files: a new module was planned only for a component kind the requirement
named ("a new retry module"). Also: a module is named without the word of its folder, nor "missing", and never
goes among a project's test helpers."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write
from wfqueue.analysis import build_index
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.providers.offline.new_module import new_module_path


def _project(tmp_path: Path) -> Path:
    return write(tmp_path, {
        "flask/__init__.py": "from flask.app import Flask\n",
        "flask/app.py": "def render_template(name):\n    return name\n\nclass Flask:\n    pass\n",
        "flask/helpers.py": "def url_for(name):\n    return name\n",
        "src/pip/_internal/utils/__init__.py": "",
        "src/pip/_internal/utils/misc.py": "def parse_wheel(name):\n    return name\n",
        "src/pip/_internal/wheel.py": "from pip._internal.utils.misc import parse_wheel\n",
        "spec/lib/jspec.js": "exports.run = function () {}\n",
        "tests/test_app.py": "from flask.app import Flask\n\ndef test_app():\n    assert Flask\n",
    })


def test_code_moved_into_a_module_of_its_own_plans_that_module(tmp_path: Path) -> None:
    index = build_index(_project(tmp_path))
    app = ["flask/app.py", "flask/helpers.py"]
    assert new_module_path(index, app, "Moved templating stuff into a separate module") == "flask/templating.py"
    assert new_module_path(index, app, "Extract the URL building helpers into their own file") \
        == "flask/url_building.py"
    assert new_module_path(index, app, "Refactored rendering out of Flask into a new class TemplateRenderer") \
        == "flask/template_renderer.py"
    assert new_module_path(index, ["src/pip/_internal/utils/misc.py", "src/pip/_internal/wheel.py"],
                           "Move parse_wheel and its helpers to utils.wheel") == "src/pip/_internal/utils/wheel.py"
    # Named by the sentence: the name given, not a word of it ("called", "for"), nor a file it comes from.
    assert new_module_path(index, app, "Extract the template loader into a new module called loaders") \
        == "flask/loaders.py"
    assert new_module_path(index, app, "Move the URL helpers into a new file named urls.py") == "flask/urls.py"
    # Whatever the words before the name ("a separate module called", "its own file named").
    assert new_module_path(index, app, "Move render_template out of app.py into a separate module called rendering") \
        == "flask/rendering.py"
    assert new_module_path(index, app, "Move url_for into its own file named routing.py") == "flask/routing.py"
    assert new_module_path(index, app, "Moved templating stuff out of app.py into a separate module") \
        == "flask/templating.py"
    # Code moved within what exists, to a file named ("config.py" is no package config), tests moved, or a change
    # that moves nothing: no new module.
    for kept in ("Move the defaults to config.py", "Move tests into a separate file"):
        assert new_module_path(index, app, kept) is None, kept
    for kept in ("Move render_template into flask/helpers.py", "Moved the check to the start of the function",
                 "Add per-user rate limiting to the API", "Fix the template cache"):
        assert new_module_path(index, app, kept) is None, kept


def test_a_lite_plan_creates_the_module_code_moves_into(tmp_path: Path) -> None:
    index = build_index(_project(tmp_path))
    requirement = "Moved templating stuff into a separate module"
    draft = plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])
    created = [f.path for t in draft.tasks for f in t.files if f.action == "create" and not f.path.startswith("tests/")]
    assert created == ["flask/templating.py"], [(t.id, [(f.path, f.action) for f in t.files]) for t in draft.tasks]


def test_a_new_module_is_named_without_its_folders_word_and_never_among_test_helpers(tmp_path: Path) -> None:
    index = build_index(_project(tmp_path))
    # "flask run": in flask/, flask/run.py (it was flask/flask_run.py); "missing sessions": flask/sessions.py.
    assert new_module_path(index, ["flask/app.py"], "Add a new flask run command") == "flask/run.py"
    assert new_module_path(index, ["flask/app.py"], "Add the missing sessions module") == "flask/sessions.py"
    # Only a spec helper to go beside: no module among the tests' support code.
    assert new_module_path(index, ["spec/lib/jspec.js"], "Add a new reporter module") is None
