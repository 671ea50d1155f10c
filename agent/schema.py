"""Compatibility re-exports while the package moves to agent.state and agent.jsonschema."""

from .jsonschema import check, describe, schema_for, type_name  # noqa: F401
from .state import (FIELD_SCHEMAS, FIELDS, RUNTIME_FIELDS, InvariantViolation, field_problem, fresh_state,  # noqa: F401
                    invariant_problems, normalize, now_iso, problems)
