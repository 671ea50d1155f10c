"""What a cycle leaves behind, once its state is saved:

- report.py      its record (`agent run --json`, the cycle's row in logs/agent.db)
- cycle_log.py   logs/cycle_<id>.log, its text trace for people
- transcript.py  every request and reply of the cycle, exactly
- aftercare.py   the record written, retention, then the hook and the metrics
- failures.py    a failed cycle's kind, and its note folded with the failures of that kind before it
- incidents.py   what a person is told once: the incident a record is part of, and whether it opened it
- hooks.py       `on_cycle_end`, the operator's command
- metrics.py     `metrics_file`, for node_exporter's textfile collector
- outlets.py     whether the hook and the metrics file worked when last due, for `status`
"""
