"""Semantic repair of the understanding step's split into sub-domains. Pure.

An answer that validates can still not be planned as it is. The rules:

- a ``focus_area`` must be a kebab-case slug of at most 40 characters (it names a
  folder, Redis keys and note sections): a name breaking the rule is slugified
  (``renamed_sub_domain``);
- names are alike when their slugs are equal (case, spaces, underscores and
  punctuation do not count): alike sub-domains are merged into the first, their
  focus paths and dependencies united, descriptions joined, the larger effort
  kept (``merged_sub_domain``);
- at most ``max_agents`` sub-domains: the ones past the limit are merged into the
  last one kept, so no proposed area is lost (``merged_sub_domain``);
- dependencies name kept sub-domains only (mapped through renames and merges;
  unknown names and self-dependencies are left out);
- at least 2 sub-domains: fewer get one repair round that names the problem
  (``asked_again``); a second answer that still has one runs with one agent
  (``single_sub_domain``), and plan.md says why.
"""

from __future__ import annotations

from pydantic import BaseModel

from wfqueue.collab.models import FOCUS_AREA_MAX, ProposedArea, UnderstandingDraft
from wfqueue.repair import Repair
from wfqueue.sessions import slugify

__all__ = ["MIN_SUB_DOMAINS", "Split", "repair_split", "settle_split", "split_feedback"]

MIN_SUB_DOMAINS = 2
_EFFORT_ORDER = ["small", "medium", "large"]


class Split(BaseModel):
    """The sub-domains to plan, after repair, and what was repaired."""

    areas: list[ProposedArea]
    repairs: list[Repair]
    proposed: int  # how many sub-domains the answer listed

    @property
    def usable(self) -> bool:
        return len(self.areas) >= MIN_SUB_DOMAINS


def _united(first: list[str], second: list[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


def _merge(into: ProposedArea, other: ProposedArea) -> ProposedArea:
    description = into.description
    if other.description.strip() and other.description.strip() not in description:
        extra = other.description.strip()
        description = f"{description.rstrip()}; {extra}" if description.strip() else other.description
    effort = max(into.estimated_effort, other.estimated_effort, key=_EFFORT_ORDER.index)
    return into.model_copy(update={
        "description": description,
        "focus_paths": _united(into.focus_paths, other.focus_paths),
        "dependencies": _united(into.dependencies, other.dependencies),
        "estimated_effort": effort,
    })


def repair_split(draft: UnderstandingDraft, max_agents: int) -> Split:
    """Slug names, alike names merged, at most ``max_agents`` areas, dependencies on kept areas only."""
    repairs: list[Repair] = []
    areas: dict[str, ProposedArea] = {}
    final_name: dict[str, str] = {}  # a slug as proposed -> the area it ended up in
    for position, area in enumerate(draft.sub_domains, start=1):
        slug = slugify(area.focus_area, FOCUS_AREA_MAX, f"area-{position}")
        if slug != area.focus_area:
            repairs.append(Repair(kind="renamed_sub_domain", task_id=slug,
                                  detail=f"{area.focus_area!r} -> {slug} (a focus area is a kebab-case slug of "
                                         f"at most {FOCUS_AREA_MAX} characters)"))
        renamed = area.model_copy(update={"focus_area": slug})
        if slug in areas:
            areas[slug] = _merge(areas[slug], renamed)
            repairs.append(Repair(kind="merged_sub_domain", task_id=slug,
                                  detail=f"sub-domain {position} ({area.focus_area!r}) has the same name as an "
                                         f"earlier one: merged into {slug}, focus paths united"))
        else:
            areas[slug] = renamed
        final_name[slug] = slug
    kept = list(areas.values())
    if len(kept) > max_agents:
        last = kept[max_agents - 1]
        for extra in kept[max_agents:]:
            last = _merge(last, extra)
            final_name[extra.focus_area] = last.focus_area
            repairs.append(Repair(kind="merged_sub_domain", task_id=last.focus_area,
                                  detail=f"{extra.focus_area} merged into {last.focus_area}: at most {max_agents} "
                                         "agents plan in parallel"))
        kept = [*kept[: max_agents - 1], last]
    fixed = []
    for area in kept:
        deps = [final_name.get(slugify(d, FOCUS_AREA_MAX, ""), "") for d in area.dependencies]
        deps = [d for d in dict.fromkeys(deps) if d and d != area.focus_area]
        fixed.append(area.model_copy(update={"dependencies": deps}))
    return Split(areas=fixed, repairs=repairs, proposed=len(draft.sub_domains))


def split_feedback(split: Split, max_agents: int) -> list[str]:
    """The problem of an unusable split, worded for the repair round."""
    names = ", ".join(a.focus_area for a in split.areas)
    if split.proposed > len(split.areas):
        head = (f"Your {split.proposed} sub-domains have {len(split.areas)} distinct focus_area name(s) ({names}): "
                "sub-domains whose names are alike (equal once lowercased and hyphenated) are one sub-domain.")
    else:
        head = f"You proposed {len(split.areas)} sub-domain ({names})."
    return [head, f"Split the requirement into at least {MIN_SUB_DOMAINS} and at most {max_agents} sub-domains, "
                  "each with its own focus_area slug and, where the code allows, its own focus_paths."]


def settle_split(first: Split, feedback: list[str], second: Split | None, failure: str | None = None) -> Split:
    """The split after the repair round: the second answer's (with every repair of both answers
    listed); when it still has one area, or the round failed (``second`` None), that one area."""
    asked = Repair(kind="asked_again", task_id="understand",
                   detail="the first answer was asked again: " + " ".join(feedback))
    chosen = second if second is not None else first
    repairs = [*first.repairs, asked, *(second.repairs if second is not None else [])]
    if not chosen.usable:
        why = (f"the repair round failed ({failure})" if failure is not None
               else "the answer to the repair round still proposed one")
        repairs.append(Repair(
            kind="single_sub_domain", task_id=chosen.areas[0].focus_area,
            detail=f"the understanding step proposed a single sub-domain and {why}: the plan runs with one agent"))
    return chosen.model_copy(update={"repairs": repairs})
