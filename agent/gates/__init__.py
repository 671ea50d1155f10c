"""What may stop or hold a cycle: approvals, acceptance checks, budgets, stalls."""
