"""Everything a home holds on disk, one module per job:

- home.py        Home (where each file lives), the cycle index, stale temporary files
- ids.py         cycle ids, and the rule that keeps them in time order
- files.py       atomic writes, whole-record JSON-lines appends, disk errors, fault points
- state_file.py  read, validate and write scratchpad files
- lock.py        the home's lock
- retention.py   which old cycles' snapshots and logs to delete

Hardened YAML is in agent/common/safe_yaml.py, a leaf, because config.py below this package reads YAML too.
"""
