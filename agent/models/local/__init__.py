"""The embedded model (run in a child process) and all of its small-model help."""
