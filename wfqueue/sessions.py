"""Session ids, where sessions live, and checking what the user typed.

Everything here runs before any file is written, so bad input costs nothing.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import unicodedata
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from wfqueue.errors import (
    InvalidRequirementError,
    InvalidSessionIdError,
    RepositoryNotFoundError,
    SessionNotFoundError,
)

# Dates in session ids follow the workflows' convention: UTC+8.
SESSION_TZ = timezone(timedelta(hours=8))
SESSION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
WORKFLOW_DIR = ".workflow"
PLANNING_DIR = ".planning"
LITE_DIR = ".lite-plan"
QUEUE_DIR = ".queue"


# Latin letters that are not a base letter plus accents (NFKD leaves them whole).
_LATIN_LETTERS = str.maketrans({"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "þ": "th", "ł": "l",
                                "ı": "i"})


def slugify(text: str, max_length: int, fallback: str = "plan") -> str:
    """``"Rate Limits_API"`` -> ``rate-limits-api``: lower-case, accents dropped ("Añadir validación" ->
    "anadir-validacion", not "a-adir-validaci-n"), runs of anything else but [a-z0-9] become '-', at most
    ``max_length`` characters; ``fallback`` when nothing is left (punctuation or non-Latin letters only). Names
    that slugify alike name the same thing (session ids, sub-domains, angles)."""
    plain = unicodedata.normalize("NFKD", text.lower().translate(_LATIN_LETTERS))
    plain = "".join(ch for ch in plain if not unicodedata.combining(ch))
    slug = re.sub(r"[^a-z0-9]+", "-", plain).strip("-")
    return slug[:max_length].strip("-") or fallback


def session_date(now: datetime) -> str:
    return now.astimezone(SESSION_TZ).strftime("%Y-%m-%d")


def unique_id(base: str, existing: set[str]) -> str:
    """``base``, or ``base-2``, ``base-3``... when a session folder of that name exists."""
    candidate, n = base, 1
    while candidate in existing:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


class SessionIds(BaseModel):
    """How a workflow names its sessions: ``{prefix}{slug}`` plus ``-{date}`` when dated,
    ``-2``, ``-3``... when a folder of that name exists (or, passed in ``existing``, a session elsewhere)."""

    model_config = ConfigDict(frozen=True)

    prefix: str = ""
    slug_length: int = Field(ge=1)
    dated: bool

    def new(self, text: str, now: datetime, existing: set[str]) -> str:
        base = f"{self.prefix}{slugify(text, self.slug_length)}"
        return unique_id(f"{base}-{session_date(now)}" if self.dated else base, existing)


def resolve_repo(repo: str | Path | None) -> Path:
    """``--repo``, else the folder the current directory belongs to (``project_of``)."""
    if repo is not None:
        path = Path(repo).expanduser()
        if not path.exists():
            raise RepositoryNotFoundError(
                f"--repo {repo}: no such directory", hint="pass the path of the repository (the folder of its .git)"
            )
        if not path.is_dir():
            raise RepositoryNotFoundError(
                f"--repo {repo}: is a file, not a directory", hint="pass the repository's folder, not a file in it"
            )
        return _named_in_utf8(path.resolve())
    return _named_in_utf8(project_of(Path.cwd().resolve(), _git_top()))


def _named_in_utf8(repo: Path) -> Path:
    """``repo``, whose path is text: one with bytes that are not UTF-8 cannot go into a task's payload, nor into
    the session files that name it (JSON), and failed only once its Redis and workers had started."""
    try:
        str(repo).encode("utf-8")
    except UnicodeEncodeError:
        shown = str(repo).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise RepositoryNotFoundError(f"the repository's path {shown} is not UTF-8 text",
                                      hint="rename the folders whose names hold other bytes, or move the "
                                           "repository to a path that is UTF-8") from None
    return repo


def _git_top() -> Path | None:
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # Bytes, decoded as the file system's names are: a path that is not UTF-8 is for _named_in_utf8 to refuse
    # (decoded as text it was a traceback), and one ending in a space keeps it.
    path = os.fsdecode(top.stdout.removesuffix(b"\n"))
    return Path(path).resolve() if top.returncode == 0 and path else None


def project_of(cwd: Path, git_top: Path | None) -> Path:
    """The repository a command run in ``cwd`` without ``--repo`` works on: the nearest folder from ``cwd`` up
    to its git top level that holds a ``.workflow`` folder (a project planned with ``--repo`` in a subfolder of
    a larger repository finds its sessions from anywhere inside it), else the git top level, else ``cwd``."""
    if git_top is None:
        return cwd
    for folder in (cwd, *cwd.parents):
        if (folder / WORKFLOW_DIR).is_dir():
            return folder
        if folder == git_top:
            break
    return git_top


def continue_command(session_id: str, option: str = "") -> str:
    """The command that goes on with ``session_id`` (``option``: repo_option's), as its own report names it: an
    execution's `execute --continue` (an EXEC- id), any plan's `resume`."""
    verb = "execute --continue" if session_id.startswith("EXEC-") else "resume"
    return f"wfqueue {verb} {session_id}{option}"


def repo_option(repo: Path) -> str:
    """`` --repo PATH`` for a command the user is told to run, unless run here it finds ``repo`` without it."""
    try:
        here = resolve_repo(None)
    except OSError:  # the current folder was deleted
        here = None
    return "" if here == repo.resolve() else f" --repo {shlex.quote(str(repo))}"


def planning_root(repo: Path) -> Path:
    return repo / WORKFLOW_DIR / PLANNING_DIR


def queue_dir(repo: Path) -> Path:
    return repo / WORKFLOW_DIR / QUEUE_DIR


def record_lost(folder: Path, record: str) -> SessionNotFoundError:
    """The error for a session folder whose record file (``record``) is gone: it cannot be read as a session."""
    return SessionNotFoundError(f"{folder} is not a readable session: it holds no {record}",
                                hint=f"put {record} back (from a backup or version control), or move the folder away")


def linked_folder(folder: Path) -> SessionNotFoundError | None:
    """The error for a session folder that is a symbolic link (to another repository's session, most likely),
    None for any other: a command would write into that other session, and the listings left it out or took it
    for the newest as they each saw fit. A session's folder is its repository's own."""
    if not folder.is_symlink():
        return None
    return SessionNotFoundError(f"{folder} is a symbolic link (to {os.readlink(folder)}), not a session folder of "
                                "this repository", hint="work on that session in the repository that holds it "
                                                        "(--repo), or copy the folder here in place of the link")


def check_session_id(session_id: str) -> str:
    if "\x00" in session_id:
        raise InvalidSessionIdError("session id contains a NUL byte", hint="use the id printed by the plan command")
    if not SESSION_ID_PATTERN.match(session_id):
        shown = session_id if len(session_id) <= 60 else session_id[:57] + "..."
        raise InvalidSessionIdError(
            f"invalid session id {shown!r}: use letters, digits, '.', '_' and '-' only, at most 80 characters, "
            "starting with a letter or digit",
            hint="`wfqueue status` lists the collaborative plans, `wfqueue sessions` the workflow sessions",
        )
    return session_id


def has_words(text: str) -> bool:
    """Whether ``text`` holds a word: a letter or digit of any script. Emoji and punctuation alone ("🚀🚀🚀 !!!")
    say nothing to plan from, and were planned into tasks of the planner's own invention."""
    return any(ch.isalnum() for ch in text)


# Byte order marks a requirement file may start with, and the codec that reads it without its mark.
_BYTE_ORDER_MARKS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def _what_is(path: Path) -> str | None:
    """"file", "folder", "other" (a named pipe, a socket, a device: reading may hang) or None: nothing there, or a
    name no file system holds (a sentence past 255 bytes with no space, as Chinese is written), for which pathlib
    raises."""
    try:
        if path.is_file():
            return "file"
        if path.is_dir():
            return "folder"
        return "other" if path.exists() else None
    except OSError:
        return None


def read_requirement(value: str, max_bytes: int) -> str:
    """The requirement as text: the value itself, or the content of a .md/.txt file it names."""
    if "\x00" in value:
        raise InvalidRequirementError("the requirement contains a NUL byte", hint="pass plain text or a .md file")
    candidate = Path(value).expanduser() if len(value) < 4096 and "\n" not in value else None
    # A path is one word ending in .md/.txt (or an existing file): "document X in README.md" is text.
    one_word = not any(ch.isspace() for ch in value.strip())
    kind = _what_is(candidate) if candidate is not None else None
    looks_like_path = candidate is not None and candidate.suffix.lower() in {".md", ".txt", ".markdown"} and (
        one_word or kind == "file")
    if not looks_like_path and candidate is not None and one_word and kind == "file":
        # spec.rst or notes.pdf: its path was planned as the requirement's text, and the session named after it.
        raise InvalidRequirementError(f"requirement {value} is a file, and only .md and .txt files are read as a "
                                      "requirement", hint="save it as .md or .txt (plain text), or pass the "
                                                          "requirement itself, quoted")
    if looks_like_path and candidate is not None:
        if kind == "folder":
            raise InvalidRequirementError(f"requirement file {value} is a folder",
                                          hint="name the .md or .txt file inside it")
        if kind == "other":
            raise InvalidRequirementError(f"requirement file {value} is not a regular file",
                                          hint="save the requirement in a .md or .txt file, and name that")
        if kind is None:
            raise InvalidRequirementError(
                f"requirement file {value} does not exist", hint="check the path, or quote the requirement as text"
            )
        size = candidate.stat().st_size
        if size > max_bytes:
            raise InvalidRequirementError(
                f"requirement file {value} is {size} bytes, above the {max_bytes}-byte limit",
                hint="summarise it, or raise WFQUEUE_REQUIREMENT_MAX_BYTES",
            )
        raw = candidate.read_bytes()
        # A byte order mark says the encoding: UTF-16 (what some Windows editors save) has NUL bytes, and a
        # UTF-8 mark would become the first character of the goal, of TODO_LIST.md's heading and of titles.
        encoding = next((name for mark, name in _BYTE_ORDER_MARKS if raw.startswith(mark)), None)
        if encoding is None and b"\x00" in raw:
            raise InvalidRequirementError(f"requirement file {value} is binary", hint="pass a UTF-8 text file")
        try:
            text = raw.decode(encoding or "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequirementError(
                f"requirement file {value} is not {encoding or 'UTF-8'} (byte {exc.start})", hint="save it as UTF-8"
            ) from None
    else:
        text = value
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # bytes of another encoding, passed on as they came (Latin-1 text)
            raise InvalidRequirementError(
                f"the requirement is not UTF-8 text (character {exc.start + 1} is a byte of another encoding)",
                hint="convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or save it in a UTF-8 .md file and pass "
                     "that") from None
        if len(text.encode("utf-8")) > max_bytes:
            raise InvalidRequirementError(
                f"the requirement is above the {max_bytes}-byte limit", hint="put it in a .md file and summarise it"
            )
    if not text.strip():
        raise InvalidRequirementError("the requirement is empty", hint='describe the change, e.g. "Add OAuth login"')
    if not has_words(text):
        raise InvalidRequirementError(f"the requirement has no words ({text.strip()[:60]!r})",
                                      hint='describe the change in words, e.g. "Add OAuth login"')
    return text.strip()
