"""Leaf helpers every layer shares:

- outcomes.py          exit codes, stop reasons, and the exceptions that carry them
- tags.py              note tags, one definition for every writer and reader
- escape.py            model text made safe to print or log as one line
- reading.py         text as a person reads it, for every rule that asks whether two entries say the same
- plain.py             a loaded value (None, a list, a mapping) as a person reads it, and a refused one named in words (`described`, `kind`): never a repr or a Python type name
- jsonschema.py        the JSON Schema subset the tools and the state use
- safe_yaml.py         hardened YAML
- secret_forms.py      the shapes a secret takes in text; secret_fragments.py, finding any fragment of one
- imports.py           a large module's first import, without the garbage collector
- entry_points.py      what installed packages declare (tool plugins, model providers), read without importing them
- extras.py            how a message says to install an optional part (an extra of pyproject.toml)
- files.py             atomic file writes, disk errors, fault points (for the tests that kill at each step)
- cycle_ids.py         cycle ids, and the rule that keeps them in time order
- times.py             times as a person reads them ("Sat 28 Nov 10:00 UTC", "3d 8h"), a record's start and end
- json_lines.py        the whole records of a JSON-lines file a crash may have torn
- file_systems.py      which file system a folder is on, and which of them are network ones
- schedule.py          when cycles are due: the `schedule` cron expression (cronsim), its slots met and missed
- walk.py              bounded walks, copies and removals of trees the model shaped (the workspace)
"""
