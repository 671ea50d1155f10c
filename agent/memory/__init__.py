"""The agent's memory beyond the state's own rules (agent/state.py):

- bounding.py       the notes budget and the completed window, into the archive
- reflect.py        the reflect step: one call after the loop, one path over the sections' edit grammar
- one_call.py       one model call outside the loop, offering one tool (reflect's, a consolidation's)
- queue_edits.py    the operator's edits to the queue and the goals, as data
- task_checks.py    the acceptance checks bound to queued tasks, as part of the state
- inbox.py          applying the edits queued while a cycle ran
- sections.py       the operator's sections: entries, edits, eviction, wake, the prompt's block
- consolidation.py  checking and applying a consolidation of list sections (the citation invariant)
- section_archive.py  what leaves a section, in the archive; the highest id each section archived
"""
