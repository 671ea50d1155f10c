"""Which gates a cycle has: `GATES` lists every gate, with when a cycle has it.

Adding a gate is one file (a `Gate` subclass, agent/gates/base.py) and one line here. A gate's
module is imported only when a cycle has the gate, so a plain cycle never loads approvals.py or
budgets.py (`NOT_IMPORTED_BY_A_PLAIN_CYCLE` in tests/cli/test_run.py). The order is the order in
which each hook asks them.
"""

from __future__ import annotations

import datetime as _dt
import importlib
from typing import TYPE_CHECKING, Callable

from agent.gates.base import Gate, GateContext, Gates, Woke

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.models.base import Model
    from agent.secrets import Secrets
    from agent.store.home import Home

When = Callable[["Settings", "Home"], bool]


def always(settings: Settings, home: Home) -> bool:
    return True


def approvals_wanted(settings: Settings, home: Home) -> bool:
    """Gated tools, or calls parked before (an approved one still runs when the setting is gone)."""
    from agent.store.db import any_rows

    return bool(settings.approval_required) or any_rows(home, "approval")


# "module:Class" of each gate, and when a cycle has it (from its settings and its home).
GATES: list[tuple[str, When]] = [
    ("agent.gates.approvals:ApprovalGate", approvals_wanted),
    ("agent.gates.budgets:BudgetGate", lambda s, home: s.budgeted or bool(s.model_budgets)),
    ("agent.gates.checks:CheckGate", always),
    ("agent.gates.stalls:StallGate", always),
    ("agent.gates.holds:HoldGate", always),
]


def _classes(settings: Settings, home: Home) -> list[type[Gate]]:
    chosen = []
    for target, when in GATES:
        if when(settings, home):
            module, _, name = target.partition(":")
            chosen.append(getattr(importlib.import_module(module), name))
    return chosen


def check_gates(settings: Settings, home: Home, model_name: str) -> None:
    """Before the lock: each gate the cycle will have checks the settings (UsageError: exit 2)."""
    for gate in _classes(settings, home):
        gate.check(settings, model_name)


def open_gates(
    home: Home,
    settings: Settings,
    secrets: Secrets,
    model: Model,
    cycle_id: str,
    now: _dt.datetime,
    woke: Woke = Woke(),
) -> Gates:
    """The gates of one cycle, under the lock, once it has its id and is to run."""
    cycle = GateContext(home, settings, secrets, model, cycle_id, now, woke)
    return Gates([gate(cycle) for gate in _classes(settings, home)])
