"""Whether a session's own files still read back, before a command goes on with the session.

Every JSON and JSON Lines file wfqueue wrote into a session folder is read by the step that comes next, or by
``execute``, ``verify`` and ``validate`` after it. One left unreadable (cut short by an editor, or a disk that
filled) made ``resume`` report the session completed while the plan was broken, or fail with a traceback half
way. Such a file is refused by name before anything starts: it may hold hand edits, so it is neither
rewritten nor skipped. Replan backups (``.process/backup/``) and hidden temporary files are not read: nothing
goes on from them.
"""

from __future__ import annotations

import json
from pathlib import Path

from wfqueue.errors import BadInputError

_READ = (".json", ".jsonl")
_NOT_READ = ("backup",)  # folder names whose files no command continues from


def unreadable_files(folder: Path) -> list[tuple[Path, str]]:
    """The session's JSON (Lines) files that do not parse, each with why (its line and column)."""
    found: list[tuple[Path, str]] = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).parts
        if (path.suffix not in _READ or path.name.startswith(".") or any(p in _NOT_READ for p in relative[:-1])
                or not path.is_file()):
            continue
        try:
            text = path.read_text(encoding="utf-8-sig")  # a BOM an editor added is no damage: the readers drop it
        except (OSError, UnicodeDecodeError) as exc:
            found.append((path, str(exc)))
            continue
        # Lines end at "\n" only: U+2028 and its kin are legal, unescaped, inside a JSON string.
        lines = text.split("\n") if path.suffix == ".jsonl" else [text]
        for number, line in enumerate(lines, start=1):
            if path.suffix == ".jsonl" and not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError as exc:
                where = f"line {number}: " if path.suffix == ".jsonl" else ""
                found.append((path, f"{where}{exc}"))
                break
    return found


def check_session_files(folder: Path) -> None:
    """Raise BadInputError naming the first unreadable file of the session in ``folder`` (and how many more)."""
    found = unreadable_files(folder)
    if not found:
        return
    path, why = found[0]
    more = f" (and {len(found) - 1} more file(s))" if len(found) > 1 else ""
    # Only a workflow session's replans keep backups: elsewhere the hint would send the user to a folder that
    # is not there.
    backups = " (a replan's backups are under .process/backup/)" if (folder / ".process" / "backup").is_dir() else ""
    raise BadInputError(f"{folder.name}: {path.relative_to(folder)} is not valid JSON: {why}{more}",
                        hint=f"mend {path}, or restore it from a copy{backups}; nothing was changed")
