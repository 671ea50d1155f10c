"""The core loop of one cycle:

- run.py         the cycle's steps, from the lock to the exit code, in three phases:
- wake.py        under the lock, before the model: the home made ready, the state read, the cycle named,
                 the inbox applied, the memory sections settled
- work.py        the model's part: the loop built over the tools, the gates and the preamble, then run
- sleep.py       saving: the built-in sections settled, what left memory archived, the after snapshot, active.yaml
- crash.py       before a cycle: what a killed process left (temporary files, a cycle with no record)
- loop.py        the model loop: prompt -> model -> dispatcher; events.py, one event per action
- limits.py      every limit of the cycle's own that ends it without `done`
- dispatch.py    one reply to a state change and a tagged note
- prompt.py      the system and user messages; examples.py, the worked examples
- idle.py        idle cycles and `wake_when`
- journal.py     the journal of calls with side effects
- interrupts.py  signals during a cycle
- consolidate.py `agent consolidate`: a cycle whose one model call rewrites the memory sections
"""
