"""What may stop, hold or refuse what a cycle does: each gate is one `Gate`, the same small interface.

- base.py       the interface (Gate, its hooks, what they are given) and Gates, several as one
- registry.py   GATES: every gate, with when a cycle has it; adding a gate is one file and one line there
- approvals.py  calls to gated tools parked for the operator
- checks.py     acceptance checks before a `done` is accepted
- budgets.py    tokens and money per UTC day and month
- stalls.py     a task that ends cycle after cycle without `done`
- holds.py      after a stall or a parked call, no model until something changes
"""
