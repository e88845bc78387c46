"""Repair of the understanding step's split: alike names merged, slugs, the repair round, one agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from wfqueue.collab.models import ProposedArea, Understanding, UnderstandingDraft
from wfqueue.collab.split import repair_split, settle_split, split_feedback
from wfqueue.collab.steps import run_understanding
from wfqueue.collab.summary import PlanSummaryInput, render_plan_md
from wfqueue.errors import ProviderError, TransientProviderError
from wfqueue.providers.anthropic.prompts import build_prompt
from wfqueue.providers.base import PlanAreaStep, Step, UnderstandStep
from wfqueue.sessions import slugify
from wfqueue.state import SessionState, redis_client


def area(name: str, paths: list[str] | None = None, deps: list[str] | None = None, effort: str = "medium",
         description: str | None = None) -> ProposedArea:
    return ProposedArea(focus_area=name, description=description or f"the {name} part", focus_paths=paths or [],
                        dependencies=deps or [], estimated_effort=effort)  # type: ignore[arg-type]


def draft(*areas: ProposedArea) -> UnderstandingDraft:
    return UnderstandingDraft(complexity="Medium",
                              understanding=Understanding(objectives=["Add rate limiting"], split_strategy="by layer"),
                              sub_domains=list(areas))


# -- pure rules ---------------------------------------------------------------------------------------


def test_names_alike_after_case_folding_are_merged_with_their_paths_united() -> None:
    split = repair_split(draft(area("api", ["api/routes.py"], effort="small", description="HTTP routes"),
                               area("API", ["api/limits.py", "api/routes.py"], deps=["storage"], effort="large",
                                    description="limit headers"),
                               area("storage", ["store/db.py"], deps=["Api"])), max_agents=4)
    assert [a.focus_area for a in split.areas] == ["api", "storage"]
    merged = split.areas[0]
    assert merged.focus_paths == ["api/routes.py", "api/limits.py"]
    assert merged.description == "HTTP routes; limit headers"
    assert merged.estimated_effort == "large"
    assert merged.dependencies == ["storage"]
    assert split.areas[1].dependencies == ["api"]  # "Api" names the merged area
    assert [r.kind for r in split.repairs] == ["renamed_sub_domain", "merged_sub_domain"]
    assert split.usable


def test_names_breaking_the_slug_rule_are_slugified() -> None:
    assert slugify("Rate Limits_API", 40, "x") == "rate-limits-api"
    assert slugify("Überprüfung der Eingaben!", 40, "x") == "uberprufung-der-eingaben"
    assert slugify("日本語", 40, "area-2") == "area-2"
    assert len(slugify("a" * 60, 40, "x")) == 40
    split = repair_split(draft(area("Rate Limits"), area("storage/backends"), area("日本語")), max_agents=5)
    assert [a.focus_area for a in split.areas] == ["rate-limits", "storage-backends", "area-3"]
    assert [r.detail.split(" -> ")[0] for r in split.repairs] == ["'Rate Limits'", "'storage/backends'", "'日本語'"]
    # An empty name as the model may give it: it failed the answer's schema, a repair round, and the plan.
    answered = UnderstandingDraft.model_validate_json(draft(area("api"), area("x")).model_dump_json().replace(
        '"focus_area":"x"', '"focus_area":""'))
    assert [a.focus_area for a in repair_split(answered, max_agents=5).areas] == ["api", "area-2"]


def test_areas_past_the_agent_limit_are_merged_into_the_last_kept() -> None:
    split = repair_split(draft(area("a", ["a/"]), area("b", ["b/"]), area("c", ["c/"], deps=["a"])), max_agents=2)
    assert [a.focus_area for a in split.areas] == ["a", "b"]
    assert split.areas[1].focus_paths == ["b/", "c/"]
    assert split.areas[1].dependencies == ["a"]
    assert any(r.kind == "merged_sub_domain" and "at most 2" in r.detail for r in split.repairs)


def test_one_area_is_not_usable_and_the_feedback_names_the_problem() -> None:
    alike = repair_split(draft(area("auth"), area("Auth")), max_agents=3)
    assert not alike.usable
    assert "2 sub-domains have 1 distinct focus_area" in split_feedback(alike, 3)[0]
    single = repair_split(draft(area("auth")), max_agents=3)
    assert split_feedback(single, 3)[0] == "You proposed 1 sub-domain (auth)."
    assert "at least 2 and at most 3" in split_feedback(single, 3)[1]


def test_settle_split_keeps_one_agent_and_says_why() -> None:
    first = repair_split(draft(area("auth")), max_agents=3)
    settled = settle_split(first, ["one area"], repair_split(draft(area("auth-flow")), max_agents=3))
    assert [a.focus_area for a in settled.areas] == ["auth-flow"]
    assert [r.kind for r in settled.repairs] == ["asked_again", "single_sub_domain"]
    assert "still proposed one" in settled.repairs[-1].detail
    good = settle_split(first, ["one area"], repair_split(draft(area("a"), area("b")), max_agents=3))
    assert [r.kind for r in good.repairs] == ["asked_again"] and good.usable


# -- the step and its prompt --------------------------------------------------------------------------


def test_a_re_asked_step_has_its_own_label_and_the_prompt_names_the_problems(tmp_path: Path) -> None:
    step = UnderstandStep(session_id="s", repo=str(tmp_path), requirement="r", max_agents=3)
    again = step.model_copy(update={"feedback": ["You proposed 1 sub-domain (auth)."], "attempt": 2})
    assert (step.label, again.label) == ("understand", "understand#2")
    assert UnderstandStep(session_id="s", repo="r", requirement="r", max_agents=3, feedback=["x"]).attempt == 2
    first_prompt, second_prompt = build_prompt(step, "files", tools=False), build_prompt(again, "files", tools=False)
    assert first_prompt.system == second_prompt.system  # the cached prefix is the same for both attempts
    text = second_prompt.messages[0]["content"][0]["text"]
    assert "<previous_answer_problems>" in text and "- You proposed 1 sub-domain (auth)." in text
    assert "previous_answer" not in first_prompt.messages[0]["content"][0]["text"]


def test_labels_of_area_steps_keep_their_subject() -> None:
    from wfqueue.collab.assemble import allocate

    analysis = allocate(draft(area("a"), area("b")), "s", "r", 3)
    step = PlanAreaStep(session_id="s", repo="r", requirement="r", analysis=analysis, focus_area="b")
    assert step.label == "plan_area:b"
    assert step.model_copy(update={"attempt": 2}).label == "plan_area:b#2"


# -- run_understanding with Redis ----------------------------------------------------------------------


class Answers:
    """A provider answering each understand attempt from a list (or raising), recording every step."""

    name = "answers"
    model = None

    def __init__(self, *answers: UnderstandingDraft | Exception) -> None:
        self.answers = list(answers)
        self.steps: list[Step] = []

    def run(self, step: Step) -> BaseModel:
        self.steps.append(step)
        answer = self.answers[min(len(self.steps), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def state(redis_url: str, request: pytest.FixtureRequest) -> SessionState:
    session = SessionState(redis_client(redis_url, 2.0), f"S-{request.node.name[:40]}", ttl_s=600)
    session.reset()
    return session


def understand(state: SessionState, provider: Answers, folder: Path):
    return run_understanding(state, provider, folder, str(folder), "Add rate limiting", 3)  # type: ignore[arg-type]


def test_two_alike_names_get_a_repair_round_that_splits_the_plan(state: SessionState, tmp_path: Path) -> None:
    provider = Answers(draft(area("api", ["api/"]), area("API", ["lib/"])),
                       draft(area("api", ["api/"]), area("limits", ["lib/"])))
    analysis = understand(state, provider, tmp_path)
    assert [s.focus_area for s in analysis.sub_domains] == ["api", "limits"]
    assert [s.label for s in provider.steps] == ["understand", "understand#2"]
    assert "distinct focus_area" in provider.steps[1].feedback[0]
    recorded = json.loads((tmp_path / "requirement-analysis.json").read_text(encoding="utf-8"))
    assert [r["kind"] for r in recorded["repairs"]] == ["renamed_sub_domain", "merged_sub_domain", "asked_again"]
    # A redelivered task pays for neither call again.
    again = understand(state, provider, tmp_path)
    assert again == analysis and len(provider.steps) == 2


def test_a_single_area_twice_runs_with_one_agent_and_plan_md_says_why(state: SessionState, tmp_path: Path) -> None:
    provider = Answers(draft(area("auth", ["auth/"])), draft(area("Auth Flow", ["auth/"])))
    analysis = understand(state, provider, tmp_path)
    assert [s.focus_area for s in analysis.sub_domains] == ["auth-flow"]
    assert analysis.total_agents == 1
    assert [r.kind for r in analysis.repairs] == ["asked_again", "renamed_sub_domain", "single_sub_domain"]
    plan_md = render_plan_md(PlanSummaryInput(analysis=analysis, created_at="t", requirement_body="", tasks=[],
                                              conflicts=[], outcomes=[], status="completed"), str(tmp_path))
    assert "**One agent**: the understanding step proposed a single sub-domain" in plan_md
    assert "## Repairs of the Understanding Answer" in plan_md and "asked_again" in plan_md


def test_a_failed_repair_round_keeps_the_first_answer_with_one_agent(state: SessionState, tmp_path: Path) -> None:
    provider = Answers(draft(area("auth")), ProviderError("understand#2: the answer does not validate"))
    analysis = understand(state, provider, tmp_path)
    assert [s.focus_area for s in analysis.sub_domains] == ["auth"]
    assert "the repair round failed (understand#2: the answer does not validate)" in analysis.repairs[-1].detail


def test_a_transient_failure_of_the_repair_round_is_retried_not_settled(state: SessionState, tmp_path: Path) -> None:
    provider = Answers(draft(area("auth")), TransientProviderError("429"), draft(area("auth"), area("tokens")))
    with pytest.raises(TransientProviderError):
        understand(state, provider, tmp_path)
    analysis = understand(state, provider, tmp_path)  # the task's retry
    assert [s.focus_area for s in analysis.sub_domains] == ["auth", "tokens"]
    assert [s.label for s in provider.steps] == ["understand", "understand#2", "understand#2"]
