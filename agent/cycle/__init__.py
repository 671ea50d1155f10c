"""The core loop: one cycle's steps (run), the model loop and its events, its limits, the dispatcher,
the prompt and the worked examples, idle cycles, the journal of calls."""
