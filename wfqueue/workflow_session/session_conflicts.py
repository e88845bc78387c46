"""Phase 3 of a workflow plan: conflicts between the change and the code, and how to resolve them. Pure.

Each conflict (CON-NNN) comes from a risk factor the context package found and
carries 2-4 strategies; the first is the recommended one (what ``-y`` takes).
A chosen strategy's ``modifications`` become planning constraints.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from wfqueue.workflow_session.models import (
    ConflictResolution,
    ContextPackage,
    ResolvedConflict,
    SessionConflict,
    Strategy,
)


class ConflictList(BaseModel):
    """What the conflict-detection step answers."""

    conflicts: list[SessionConflict] = Field(default_factory=list)


def _strategy(name: str, approach: str, complexity: str, risk: str, pros: list[str], cons: list[str],
              modifications: list[str]) -> Strategy:
    return Strategy(name=name, approach=approach, complexity=complexity, risk=risk,
                    pros=pros, cons=cons, modifications=modifications)


def detect_session_conflicts(context: ContextPackage) -> list[SessionConflict]:
    factors = context.conflict_detection.risk_factors
    files = [a["path"] for a in context.assets.get("source_code", []) if isinstance(a, dict)]
    found: list[dict[str, object]] = []
    if factors.existing_implementations:
        existing = [e.split(":", 1)[0] for e in factors.existing_implementations]
        found.append({
            "category": "ModuleOverlap", "severity": "High", "title": "The change overlaps existing implementations",
            "description": "Code that already does part of this exists: "
            + "; ".join(factors.existing_implementations[:4]),
            "affected_files": existing,
            "strategies": [
                _strategy("Extend the existing code", "add to the existing modules and reuse their types", "Low", "Low",
                          ["one implementation", "existing tests keep guarding it"], ["the modules grow"],
                          # Not "instead of adding modules": a module the requirement asks for is created all the
                          # same, and every task carries this constraint, its creation included.
                          [f"reuse and extend {', '.join(existing[:3])}; do not reimplement what they already do"]),
                _strategy("New module, migrate callers", "write a new module and move callers over", "High", "Medium",
                          ["clean design"], ["two implementations until migration ends"],
                          ["create a new module and migrate every caller in the same plan"]),
            ],
        })
    if factors.api_changes:
        found.append({
            "category": "API", "severity": "High", "title": "Public interfaces change",
            "description": "The requirement changes an API that other code or clients call",
            "affected_files": files[:6],
            "strategies": [
                _strategy("Backward-compatible addition", "add optional parameters / new endpoints; keep old ones",
                          "Low", "Low", ["no caller breaks"], ["old paths stay around"],
                          ["keep every existing function signature and endpoint working"]),
                _strategy("Versioned API", "introduce a new version next to the old one", "Medium", "Low",
                          ["explicit contract"], ["two versions to maintain"], ["add the new API under a new version"]),
                _strategy("Breaking change with migration", "change the API and update all callers at once", "Medium",
                          "High", ["simplest end state"], ["every caller must change in the same release"],
                          ["update every caller of a changed interface in the task that changes it"]),
            ],
        })
    if factors.architecture_changes:
        found.append({
            "category": "Architecture", "severity": "Medium", "title": "Structure of the code changes",
            "description": "Modules are restructured: " + ", ".join(context.conflict_detection.affected_modules[:5]),
            "affected_files": files[:6],
            "strategies": [
                _strategy("Incremental refactor", "move one module at a time behind the current interface", "Medium",
                          "Low", ["always shippable"], ["takes more steps"],
                          ["refactor one module per task; the suite passes after each"]),
                _strategy("Restructure at once", "move everything in one change", "High", "High",
                          ["done quickly"], ["large risky diff"], ["plan the restructure as one phase"]),
            ],
        })
    if factors.data_model_changes:
        found.append({
            "category": "Data", "severity": "Medium", "title": "Stored data changes shape",
            "description": "The change touches models or storage",
            "affected_files": [f for f in files if "stor" in f or "model" in f or "db" in f][:6] or files[:3],
            "strategies": [
                _strategy("Additive change with defaults", "add fields with defaults; never drop or rename", "Low",
                          "Low", ["old data stays valid"], ["some redundancy"],
                          ["only add data fields, with defaults; no renames or drops"]),
                _strategy("Migration", "write and test a migration of existing data", "Medium", "Medium",
                          ["clean schema"], ["migration must be run and tested"],
                          ["include a tested migration for existing data"]),
            ],
        })
    if factors.breaking_changes:
        found.append({
            "category": "Dependency", "severity": "High", "title": "Widely imported modules change",
            "description": "; ".join(factors.breaking_changes[:4]),
            "affected_files": [b.split(" is imported", 1)[0] for b in factors.breaking_changes],
            "strategies": [
                _strategy("Keep signatures stable", "add new functions; leave existing ones as they are", "Low", "Low",
                          ["importers unaffected"], ["API surface grows"],
                          ["do not change signatures of functions imported by other modules"]),
                _strategy("Change and update importers", "change signatures and fix every importer in the same task",
                          "Medium", "Medium", ["no legacy API"], ["larger tasks"],
                          ["a task changing a shared signature also updates its importers"]),
            ],
        })
    return [SessionConflict(id=f"CON-{n:03d}", **c) for n, c in enumerate(found, start=1)]


def resolve(session_id: str, timestamp: str, conflicts: list[SessionConflict],
            choices: dict[str, int]) -> ConflictResolution:
    """Apply the chosen strategy of each conflict (the recommended one when not chosen)."""
    resolved = []
    constraints: list[str] = []
    for conflict in conflicts:
        index = choices.get(conflict.id, conflict.recommended)
        strategy = conflict.strategies[min(max(index, 0), len(conflict.strategies) - 1)]
        resolved.append(ResolvedConflict(conflict_id=conflict.id, strategy_name=strategy.name,
                                         strategy_approach=strategy.approach,
                                         modifications_applied=strategy.modifications))
        constraints += [m for m in strategy.modifications if m not in constraints]
    return ConflictResolution(
        session_id=session_id,
        resolved_at=timestamp,
        summary={"total_conflicts": len(conflicts), "resolved_with_strategy": len(resolved), "custom_handling": 0,
                 "fallback_constraints": 0},
        resolved_conflicts=resolved,
        planning_constraints=constraints,
    )
