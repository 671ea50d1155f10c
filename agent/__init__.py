"""agent: run an LLM agent one cycle at a time, with durable memory in a YAML scratchpad."""

__version__ = "0.1.0"
