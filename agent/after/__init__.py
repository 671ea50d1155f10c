"""What a cycle leaves behind, once its state is saved:

- report.py      its record (`agent run --json`, the cycle's row in logs/agent.db)
- cycle_log.py   logs/cycle_<id>.log, its text trace for people
- transcript.py  every request and reply of the cycle, exactly
- aftercare.py   the record written, retention, then the hook and the metrics
- failures.py    a failed cycle's kind, and its note folded with the failures of that kind before it
- incidents.py   what a person is told once: the incident a record is part of, whether it opened it or ended one
- hooks.py       `on_cycle_end`, the operator's command
- metrics.py     `metrics_file`, for node_exporter's textfile collector
- health.py      how a home is doing: its state, what needs a person, its schedule (every view's one judge)
- outlets.py     whether the hook, the metrics file and the traces worked when last due, for `status`
- traces.py      `otel`: the cycle as one OpenTelemetry trace, sent once the home is released
"""
