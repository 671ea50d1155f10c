"""The agent's memory beyond the state's own rules (agent/state.py): bounding and reflection, queue edits, the inbox."""
