"""Compatibility re-exports while importers move to the agent.tools package (the lead removes this)."""

from .tools.builtin import TOOLS, echo  # noqa: F401
from .tools.files import MAX_LIST_ENTRIES, append_file, confined_path, list_dir, read_file, write_file  # noqa: F401
from .tools.http import (METADATA_ADDRESSES, TLS_VERIFY, address_problem, checked_target, fetch,  # noqa: F401
                         http_get, resolve_host)
from .tools.shell import shell  # noqa: F401
