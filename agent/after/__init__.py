"""What a cycle leaves behind, once its state is saved:

- report.py      its record (`agent run --json`, the cycle's row in logs/agent.db)
- cycle_log.py   logs/cycle_<id>.log, its text trace for people
- transcript.py  every request and reply of the cycle, exactly
- aftercare.py   the record written, retention, then the hook and the metrics
- hooks.py       `on_cycle_end`, the operator's command
- metrics.py     `metrics_file`, for node_exporter's textfile collector
"""
