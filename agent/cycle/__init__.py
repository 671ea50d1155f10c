"""The core loop: one cycle's steps, its limits, the dispatcher, the prompt, idle cycles, the journal of calls."""
