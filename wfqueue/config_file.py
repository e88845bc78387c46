"""Where the settings' TOML file is: ``WFQUEUE_CONFIG_FILE``, else ``config/wfqueue.toml`` in the current
directory when there is one.

The standard library only: the ``wfqueue`` entry point looks at the file before the settings are built
(wfqueue.prestart), and wfqueue.settings reads it with the rest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DEFAULT_CONFIG_FILE = Path("config") / "wfqueue.toml"


def config_file(environ: Mapping[str, str] | None = None) -> Path | None:
    explicit = (os.environ if environ is None else environ).get("WFQUEUE_CONFIG_FILE")
    if explicit:
        return Path(explicit)
    # Anything there counts, a folder too: the settings refuse what they cannot read, instead of going on
    # with the defaults as if the file did not exist.
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None


def settings_file_for_workers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment entry that has a worker this command starts read the settings file the command read, by
    its whole path: the one found in the current folder is then named, not found again (its notice is said once,
    by the command, not in every worker's log). Nothing when the file is named already, or there is none."""
    if (os.environ if environ is None else environ).get("WFQUEUE_CONFIG_FILE") or not DEFAULT_CONFIG_FILE.is_file():
        return {}
    return {"WFQUEUE_CONFIG_FILE": str(DEFAULT_CONFIG_FILE.resolve())}
