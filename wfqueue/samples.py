"""Generated inputs for tests and benchmarks: repositories with many packages, big notes.

Deterministic: the same arguments always produce the same bytes.
"""

from __future__ import annotations

from pathlib import Path

from wfqueue.collab.models import ModificationPoint, NoteTask, area_title, id_range_for
from wfqueue.collab.note import PlanNote, parse_note, render_note, replace_section
from wfqueue.collab.note_blocks import render_task_pool

DOMAINS = [
    "billing", "catalog", "checkout", "search", "profile", "orders", "shipping", "reviews", "inventory", "payments",
    "coupons", "wishlist", "alerts", "reports", "exports", "imports", "audit", "sessions", "tenants", "webhooks",
]


def domain_name(n: int) -> str:
    base = DOMAINS[n % len(DOMAINS)]
    return base if n < len(DOMAINS) else f"{base}{n // len(DOMAINS)}"


def make_service_repo(root: Path, packages: int) -> Path:
    """A Python project with one package per domain; each package has a request
    handler that a per-user rate limit would touch, a store, and a test."""
    (root / "app").mkdir(parents=True, exist_ok=True)
    (root / "tests").mkdir(exist_ok=True)
    (root / "app" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pyproject.toml").write_text('[project]\nname = "services"\nversion = "0.1.0"\n', encoding="utf-8")
    for n in range(packages):
        name = domain_name(n)
        pkg = root / "app" / name
        pkg.mkdir(exist_ok=True)
        (pkg / "__init__.py").write_text("", encoding="utf-8")
        (pkg / "store.py").write_text(
            f'"""Storage of {name} records."""\n\n\nclass {name.capitalize()}Store:\n'
            f'    """Keeps {name} records per user."""\n\n'
            "    def __init__(self) -> None:\n        self.rows: dict[str, list[str]] = {}\n\n"
            "    def add(self, user_id: str, row: str) -> None:\n"
            "        self.rows.setdefault(user_id, []).append(row)\n",
            encoding="utf-8",
        )
        (pkg / "api.py").write_text(
            f'"""HTTP API of the {name} service."""\n\n'
            f"from app.{name}.store import {name.capitalize()}Store\n\n\n"
            f"def handle_{name}_request(store: {name.capitalize()}Store, user_id: str, payload: str) -> dict:\n"
            f'    """Serve one {name} API request for a user."""\n'
            "    store.add(user_id, payload)\n"
            '    return {"user": user_id, "count": len(store.rows[user_id])}\n',
            encoding="utf-8",
        )
        (root / "tests" / f"test_{name}_api.py").write_text(
            f"from app.{name}.api import handle_{name}_request\n"
            f"from app.{name}.store import {name.capitalize()}Store\n\n\n"
            f"def test_{name}_request_counts_per_user():\n"
            f'    assert handle_{name}_request({name.capitalize()}Store(), "u1", "x")["count"] == 1\n',
            encoding="utf-8",
        )
    return root


def synthetic_note(agents: int, tasks_per_agent: int) -> str:
    """A filled plan-note.md with ``agents`` areas of ``tasks_per_agent`` tasks each,
    dependencies inside and across areas, and a few shared files (some conflicts)."""
    areas = [f"area-{n:03d}" for n in range(agents)]
    note = PlanNote(
        front_matter={
            "session_id": "CPLAN-synthetic",
            "original_requirement": "synthetic plan",
            "created_at": "2026-01-01T00:00:00+00:00",
            "contributors": areas,
            "sub_domains": areas,
            "agent_sections": {a: [f"任务池 - {area_title(a)}", f"上下文证据 - {area_title(a)}"] for a in areas},
            "agent_task_id_ranges": {a: list(id_range_for(k)) for k, a in enumerate(areas)},
            "status": "planning",
        },
        preamble="\n",
    )
    for k, area in enumerate(areas):
        first, _ = id_range_for(k)
        tasks = []
        for i in range(tasks_per_agent):
            number = first + i
            deps = [f"TASK-{number - 1:03d}"] if i else ([f"TASK-{first - 100:03d}"] if k else [])
            shared = f"shared/module_{i % 7}.py" if i % 25 == 0 else f"{area}/file_{i}.py"
            tasks.append(
                NoteTask(id=f"TASK-{number:03d}", title=f"step {i} of {area}", area=area, depends_on=deps,
                         scope="synthetic", conflict_risk="high" if i % 25 == 0 else "low",
                         modification_points=[ModificationPoint(file=shared, location=f"fn_{i % 3}", summary="change")])
            )
        note = replace_section(note, f"任务池 - {area_title(area)}", render_task_pool(tasks))
    return render_note(parse_note(render_note(note)))
