"""Leaf helpers every layer shares: outcomes and exit codes, note tags, escaping, JSON schema, YAML, secret forms,
importing a large module (imports.py)."""
