"""Semantic repair of an assessment's exploration angles. Pure.

Each angle names an exploration task, a Redis key and a file
(``exploration-{angle}.md``), so an assessment that validates can still not be
explored as it is. The rules:

- an angle is a kebab-case slug (``integration-points``): a name breaking the
  rule is slugified (``renamed_angle``; "Integration_Points" and
  "integration points" both become ``integration-points``);
- names alike (equal once slugified) are one angle: later ones are dropped
  (``merged_angle``);
- 1 to 4 angles: past the fourth are dropped (``dropped_angle``); none (or none
  left) gets the preset angles for the requirement, sliced by complexity, as
  the offline assessment would pick them (``default_angles``);
- an assessment asked with exploration forced explores (``forced_exploration``).

An angle without its own vocabulary is kept: exploring it needs no vocabulary
(an LLM reads the name; the offline explorer uses its generic one).
"""

from __future__ import annotations

from wfqueue.lite.models import MAX_ANGLES, Assessment
from wfqueue.providers.offline.assess import ANGLES_BY_COMPLEXITY, select_preset
from wfqueue.repair import Repair
from wfqueue.sessions import slugify

__all__ = ["repair_assessment"]


def repair_assessment(assessment: Assessment, requirement: str, force_explore: bool) -> tuple[Assessment, list[Repair]]:
    """The assessment with 1..4 distinct slug angles (and exploration when forced), and what changed."""
    repairs: list[Repair] = []
    angles: list[str] = []
    for name in assessment.angles:
        slug = slugify(name, 40, "")
        if not slug:
            repairs.append(Repair(kind="dropped_angle", task_id=name or "(empty)",
                                  detail=f"{name!r} has no letters or digits to name an angle"))
            continue
        if slug != name:
            repairs.append(Repair(kind="renamed_angle", task_id=slug, detail=f"{name!r} -> {slug} (angles are "
                                                                             "kebab-case slugs)"))
        if slug in angles:
            repairs.append(Repair(kind="merged_angle", task_id=slug, detail=f"{name!r} repeats the angle {slug}"))
            continue
        angles.append(slug)
    if len(angles) > MAX_ANGLES:
        for extra in angles[MAX_ANGLES:]:
            repairs.append(Repair(kind="dropped_angle", task_id=extra,
                                  detail=f"{extra}: at most {MAX_ANGLES} angles are explored"))
        angles = angles[:MAX_ANGLES]
    if not angles:
        _, preset = select_preset(requirement)
        angles = preset[: ANGLES_BY_COMPLEXITY[assessment.complexity]]
        repairs.append(Repair(kind="default_angles", task_id=", ".join(angles),
                              detail="the assessment named no usable angle: the preset angles for the "
                                     f"requirement were taken ({', '.join(angles)})"))
    needs = assessment.needs_exploration
    reasons = list(assessment.exploration_reasons)
    if force_explore and not needs:
        needs = True
        reasons.append("--explore given")
        repairs.append(Repair(kind="forced_exploration", task_id="assess",
                              detail="exploration was forced (--explore) but the assessment skipped it"))
    if not repairs:
        return assessment, []
    return assessment.model_copy(update={"angles": angles, "needs_exploration": needs,
                                         "exploration_reasons": reasons}), repairs
