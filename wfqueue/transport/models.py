"""What a task carries when its worker shares no disk with the coordinator, and what a pinned repository is."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RepoPin(BaseModel):
    """The commit every agent of a plan reads: the repository's HEAD, or, when the work tree has uncommitted
    changes, a snapshot commit of them on top of HEAD (made without touching the user's branch, index or
    work tree). A plan records both."""

    model_config = ConfigDict(frozen=True)

    repo: str  # the coordinator's repository path
    head: str  # HEAD when the plan started
    commit: str  # what workers read: ``head``, or the snapshot
    snapshot: bool = False  # ``commit`` is a snapshot of uncommitted changes on top of ``head``
    prefix: str = ""  # ``repo``'s folder inside its git work tree ("" at the top)


class Transport(BaseModel):
    """How a task's worker reaches the repository and the session folder without the coordinator's disk.

    The worker reads a checkout of ``commit`` from its cache (fetched from ``repo_url`` when set, else from
    the bundle the coordinator published in Redis). Paths in the payload under ``session_root`` are mapped
    to the worker's own copy of the session folder, whose writes also go to the session's files in Redis."""

    model_config = ConfigDict(frozen=True)

    commit: str = Field(min_length=7)
    prefix: str = ""  # the repository's folder inside its git work tree ("" at the top)
    repo_url: str | None = None
    session_id: str = Field(min_length=1)  # whose files hash (wfqueue.keys.FILES)
    session_root: str  # the coordinator's session folder
