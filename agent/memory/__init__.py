"""The agent's memory beyond the state's own rules (agent/state.py):

- builtin.py        the built-in sections (msa's fields): their specs and rules, settling them at sleep
- specs.py          a home's memory, one path: the built-in sections and the operator's beside them
- reflect.py        the reflect step: one call after the loop, one path over the sections' edit grammar
- one_call.py       one model call outside the loop, offering one tool (reflect's, a consolidation's)
- queue_edits.py    the operator's edits to the queue and the goals, as data
- task_checks.py    the acceptance checks bound to queued tasks, as part of the state
- inbox.py          applying the edits queued while a cycle ran
- sections.py       the operator's sections: their entries and ids, the rules a state's sections keep
- section_edits.py  the model's and the operator's edits of sections (one grammar), the per-cycle bound
- section_settle.py settling sections at wake: keys made, hand-written entries adopted, lowered limits
- section_block.py  the prompt's block of sections; what a person should know (surfaced)
- consolidation.py  checking and applying a consolidation of list sections (the citation invariant)
- section_archive.py  what leaves a section, in the archive; the highest id each section archived
"""
