"""A home's files and records (the scratchpad's own files are agent/scratchpad.py), one module per job:

- home.py        Home (where each file lives), stale temporary files
- connection.py  one open connection to logs/agent.db: its transactions and what an SQLite error means
- db.py          logs/agent.db: opening (made whole, migrated, upgraded), the journal (WAL or rollback), probes
- migrations.py  the database's schema: numbered migrations applied in order on open
- rows.py        how a cycle's record and an archived item become rows
- upgrade.py     moving an older release's files (index, journal, archive, approvals, inbox...) into the database
- cycles.py      the cycle index: new ids, records, what they spent, the files on disk
- columns.py     the cycle table's facts as SQL expressions, by name (one place for every query over records)
- task_identity.py  which task a cycle worked on, whatever its wording: the runtime's identity, from the records
- archive.py     the archive and its full-text recall index
- catalog.py     what each table and column holds, in words, and the canned queries (datasette's metadata)
- provenance.py  where each memory entry came from: its cycle, route and what the model had read;
  plain entries' keys by text; the model's own workspace writes
- lock.py        the home's lock
- retention.py   which old cycles' snapshots, logs and transcripts to delete

Hardened YAML is in agent/common/safe_yaml.py, a leaf, because agent/config.py below this package reads YAML too.
"""
