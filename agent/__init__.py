"""agent: run an LLM agent one cycle at a time, with durable memory in a YAML scratchpad.

The version is the installed distribution's (`agent --version`); it is written once, in pyproject.toml.
"""
