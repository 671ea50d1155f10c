"""Moved to agent/store/ and agent/safe_yaml.py; these names stay importable from here until
their importers use the new modules."""

from .safe_yaml import (MAX_ALIAS_EXPANSION, MAX_YAML_DEPTH, YAMLShapeError, _ReadableDumper, _StrictSafeLoader,
                        dump_yaml, load_yaml)
from .store.files import SECRET_DIR_MODE, SECRET_FILE_MODE, append_jsonl, atomic_write, disk_error, read_jsonl
from .store.home import Home, append_index, read_index, remove_stale_temporaries
from .store.ids import new_cycle_id
from .store.lock import BUSY_GRACE_SECONDS, home_lock, is_locked
from .store.state_file import MAX_SCRATCHPAD_BYTES, load_state, read_state_file, write_state

__all__ = [
    "BUSY_GRACE_SECONDS", "MAX_ALIAS_EXPANSION", "MAX_SCRATCHPAD_BYTES", "MAX_YAML_DEPTH", "SECRET_DIR_MODE",
    "SECRET_FILE_MODE", "Home", "YAMLShapeError", "_ReadableDumper", "_StrictSafeLoader", "append_index",
    "append_jsonl", "atomic_write", "disk_error", "dump_yaml", "home_lock", "is_locked", "load_state", "load_yaml",
    "new_cycle_id", "read_index", "read_jsonl", "read_state_file", "remove_stale_temporaries", "write_state",
]
