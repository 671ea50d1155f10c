"""agent: run an LLM agent one cycle at a time, with durable memory in a YAML scratchpad.

The version is the installed distribution's (`agent --version`); it is written once, in pyproject.toml.
The package, from the top layer down (AGENTS.md has the rule):

- cli/               the operator's commands, each loaded only when used; docs.py, text generated for the docs
- cycle/             one cycle: its steps, the model loop, limits, the dispatcher, the prompt
- after/             what a cycle leaves behind: its record, transcript, hook and metrics
- memory/            the built-in sections and the operator's, settled into the archive, the reflect step, queue edits, the inbox
- gates/             what may stop or hold a cycle: approvals, checks, budgets, stalls
- tools/             what the model may call
- models/            the model interface and its providers
- config.py          every setting
- store/             a home's files and records (logs/agent.db); scratchpad.py, the scratchpad's files
- state.py           the scratchpad's fields; secrets.py, redaction; setting_checks.py, settings' constraints
- common/            leaf helpers every layer shares
"""
