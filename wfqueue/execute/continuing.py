"""What ``wfqueue execute --continue`` checks and redoes before it goes on with an execution.

The integration branch must still be there and not be checked out anywhere else (git lets a branch be checked
out in one place only; a person fixing a red gate may have checked it out). The plan may have changed since the
last run (the stop hints say to fix it): its waves are made again from its current dependencies and files, so a
task never runs before a dependency added since.
"""

from __future__ import annotations

from pathlib import Path

from wfqueue.errors import BadInputError, WfqueueError
from wfqueue.execute.decisions import BranchGone, merge_commits, reopened
from wfqueue.execute.merge import branch_exists, checked_out_elsewhere, checkouts, task_branch
from wfqueue.execute.model import ExecutablePlan
from wfqueue.execute.records import Execution
from wfqueue.execute.schedule import build_schedule
from wfqueue.execute.worktree import git, made_by_wfqueue


def check_same_repository(execution: Execution, root: Path) -> None:
    """Refuse (exit 2, nothing changed) to go on with an execution found in ``root`` whose record names another
    repository: a copy (its worktrees are registered at the original's paths, and going on moved the original's
    branch and rewrote its plan) or a moved one (git could no longer run where the record points)."""
    recorded = Path(execution.repo)
    if recorded.resolve() == root.resolve():
        return
    there = recorded.is_dir()
    raise BadInputError(
        f"{execution.exec_id} ran in {recorded}, and this repository is {root}: it was "
        f"{'copied' if there else 'moved'} since",
        hint=(f"go on with it there: `wfqueue execute --continue {execution.exec_id} --repo {recorded}`" if there else
              f"move the repository back to {recorded} to go on with it, or execute the plan anew here (what it "
              f"merged is on {execution.branch})"))


def check_continuable(execution: Execution, cache: Path) -> None:
    """Refuse (exit 2, nothing changed) an execution whose integration branch is gone or checked out elsewhere,
    or one a task of which would run again on a branch checked out elsewhere (than this host's worktrees of the
    execution, in the wfqueue cache ``cache``)."""
    repo = Path(execution.repo)
    if not branch_exists(repo, execution.branch):
        raise BadInputError(f"{execution.exec_id} cannot go on: its integration branch {execution.branch} is gone",
                            hint=f"execute the plan again: `wfqueue execute {execution.source}`")
    elsewhere = checked_out_elsewhere(repo, cache, execution.exec_id)
    if elsewhere is not None:
        raise BadInputError(f"{execution.exec_id} cannot go on: its integration branch {execution.branch} is "
                            f"checked out in {elsewhere}",
                            hint="switch that checkout to another branch (`git switch -`), then continue")
    # A task run again takes its branch back into a worktree of its own: checked out by a person looking at a
    # failed attempt, the retry failed on git's refusal and spent the attempt.
    held = checkouts(repo)
    for task_id in reopened(execution):
        where = held.get(task_branch(execution.exec_id, task_id))
        if where is None or made_by_wfqueue(repo, where, exec_id=execution.exec_id, here=True):
            continue
        if made_by_wfqueue(repo, where, exec_id=execution.exec_id):  # another host's, sharing the repository
            raise BadInputError(
                f"{execution.exec_id} cannot go on: the branch of {task_id} is checked out in a worktree another "
                f"host made for it, {where}", hint="go on from that host; or, once no worker there runs the task, "
                f"remove that worktree (`git worktree remove --force {where}` there, or `git worktree prune` here "
                "once its folder is gone), then continue")
        raise BadInputError(f"{execution.exec_id} cannot go on: the branch of {task_id}, "
                            f"{task_branch(execution.exec_id, task_id)}, is checked out in {where}",
                            hint="switch that checkout to another branch (`git switch -`), then continue")


def reschedule(execution: Execution, plan: ExecutablePlan) -> bool:
    """Make the execution's waves again from ``plan`` when they differ from the recorded ones; True if they did.
    Completed tasks keep their merges wherever their new wave is."""
    schedule = build_schedule(plan.tasks, execution.parallel)
    waves = [wave.task_ids for wave in schedule.waves]
    if waves == execution.waves:
        return False
    execution.waves = waves
    execution.gated_waves = []  # numbers of the old waves; a gate runs again only on a head not yet gated green
    for task_id, record in execution.tasks.items():
        record.wave = schedule.wave_of(task_id)
    return True


def branch_gone(execution: Execution) -> BranchGone | None:
    """None while an execution's integration branch is there (or git cannot say: the repository moved);
    otherwise its last merge and whether the checked-out branch has it (merged, then deleted)."""
    repo = Path(execution.repo)
    try:
        if (not repo.is_dir() or git(repo, "rev-parse", "--git-dir", check=False).returncode != 0
                or branch_exists(repo, execution.branch)):
            return None
        merges = merge_commits(execution)
        # The tips among the merges: one, as each merge builds on the ones before it.
        tips = git(repo, "merge-base", "--independent", *merges, check=False).stdout.split() if merges else []
        tip = tips[0] if len(tips) == 1 else None
        in_head = tip is not None and git(repo, "merge-base", "--is-ancestor", tip, "HEAD",
                                          check=False).returncode == 0
    except WfqueueError:  # git is missing, or the folder is no repository any more: the hint stays as it was
        return None
    return BranchGone(tip=tip, in_head=in_head)
