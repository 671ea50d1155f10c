"""The core loop of one cycle:

- run.py         the cycle's steps, from the lock to the exit code
- crash.py       before a cycle: what a killed process left (temporary files, a cycle with no record)
- loop.py        the model loop: prompt -> model -> dispatcher; events.py, one event per action
- limits.py      every limit that ends a cycle without `done`
- dispatch.py    one reply to a state change and a tagged note
- prompt.py      the system and user messages; examples.py, the worked examples
- idle.py        idle cycles and `wake_when`
- journal.py     the journal of calls with side effects
- interrupts.py  signals during a cycle
"""
