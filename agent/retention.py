"""Moved to agent/store/retention.py (and cycle ids to agent/store/ids.py); these names stay
importable from here until their importers use the new modules."""

from .store.ids import CYCLE_ID, SNAPSHOT_LABELS, cycle_started, cycles_on_disk
from .store.retention import (PrunePlan, apply_retention, cycle_files, delete_cycles, parse_duration, plan_prune,
                              select_expired)

__all__ = [
    "CYCLE_ID", "SNAPSHOT_LABELS", "PrunePlan", "apply_retention", "cycle_files", "cycle_started", "cycles_on_disk",
    "delete_cycles", "parse_duration", "plan_prune", "select_expired",
]
