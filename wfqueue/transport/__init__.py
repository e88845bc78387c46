"""How work reaches workers that share no disk with the coordinator, and how their results come back.

Redis is the only thing a coordinator and its workers share. The coordinator
pins the repository at a commit and publishes it (a git bundle in Redis, or a
git URL the workers fetch from); a worker reads a checkout of that commit from
its own cache. Files a worker writes into a session folder are also stored in
Redis, and the coordinator writes them into the real session folder on its own
disk. With a shared disk (embedded mode, or ``WFQUEUE_SHARED_DISK=true``)
nothing travels: workers read and write the coordinator's paths in place.

- ``models``: what a task carries about it (``Transport``) and a pinned repository (``RepoPin``).
- ``repo``: pin and publish commits as bundles in Redis; bring an executed task's commits back.
- ``checkouts``: the worker's cache: one repository holding every commit received, checkouts by commit.
- ``session_files``: a session folder's files in Redis, and the fsio hook that mirrors writes there.
- ``workspace``: the worker's side (local paths for a task's payload) and the coordinator's (pin, pull).
"""
