"""Knowing an msa home (sagecontinuum/msa) when a command meets one: its config/config.yaml.

Every command says so in one line (cli/common.py), and none offers a plain `agent init` there;
`agent init --from-msa` (msa_import.py) makes a home from it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from agent.common.safe_yaml import FileRefused, load_yaml, read_text_file
from agent.config import MAX_CONFIG_BYTES, msa_setting

MSA_CONFIG = Path("config/config.yaml")  # msa's layout, not a file of a Home
# Written first by `agent init --from-msa` and removed last: while it is there the import did not finish
# (a kill, a crash), no command uses the folder, and running the import again starts it over.
UNFINISHED_IMPORT = ".msa-import-unfinished"


def msa_config_text(folder: Path) -> str | None:
    """The text of `folder`'s config/config.yaml, None when it has none (or it cannot be read)."""
    try:
        return read_text_file(folder / MSA_CONFIG, "msa config", MAX_CONFIG_BYTES)
    except (FileRefused, OSError):
        return None


def looks_like_msa(folder: Path) -> bool:
    """Whether `folder` holds msa's config/config.yaml: a mapping with a setting only msa has, or msa's
    model mapping (another program's config/config.yaml is no msa home)."""
    if not (folder / MSA_CONFIG).is_file():
        return False
    text = msa_config_text(folder)
    try:
        data = load_yaml(text) if text is not None else None
    except (yaml.YAMLError, RecursionError):
        return False
    return isinstance(data, dict) and msa_setting(data) is not None


def msa_hint(where: str) -> str:
    """The one line every command prints about an msa-shaped folder."""
    return f"this looks like an msa home: `agent init NEW --from-msa {shlex.quote(where)}`"
