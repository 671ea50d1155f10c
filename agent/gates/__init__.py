"""What may stop or hold a cycle:

- approvals.py  calls to gated tools parked for the operator
- checks.py     acceptance checks before a `done` is accepted
- budgets.py    tokens and money per UTC day and month
- stalls.py     a task that ends cycle after cycle without `done`
"""
