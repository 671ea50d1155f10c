"""Everything a home holds on disk, one module per job:

- home.py          Home (where each file lives), the cycle index, stale temporary files
- ids.py           cycle ids, and the rule that keeps them in time order
- files.py         atomic writes, whole-record JSON-lines appends, disk errors, fault points
- state_file.py    read, validate and write scratchpad files
- lock.py          the home's lock
- retention.py     which old cycles' snapshots and logs to delete
- tail.py          reading growing JSON-lines files from the end, in bounded memory
- totals.py        running totals of the index
- inbox.py         the inbox file of queued operator edits
- recall_index.py  the full-text index over the archive
- cycle_log.py     a cycle's text log
- crash.py         what a killed process left behind
- walk.py          bounded walks of trees the model shaped

Hardened YAML is in agent/common/safe_yaml.py, a leaf, because agent/config.py below this package reads YAML too.
"""
