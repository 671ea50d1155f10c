#!/usr/bin/env bash
# Reset the agent's memory from a template. Same as `agent reset`; all flags pass through:
#   bin/reset.sh                      active.yaml from the default (empty) template
#   bin/reset.sh --template demo      from templates/demo.yaml (home) or the packaged one
#   bin/reset.sh --clean --yes        also delete snapshots, cycle logs and the cycle index
#                                     (--clean alone asks on a terminal)
# The replaced state and dropped queued edits go to logs/archive.jsonl, never deleted.
# The home is AGENT_HOME if set, else this repository. Refuses (exit 5) while a cycle runs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export AGENT_HOME="${AGENT_HOME:-$here}"
if command -v agent >/dev/null 2>&1; then
    exec agent reset "$@"
fi
for py in "$here/.venv/bin/python" python3 python; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c "import agent.cli" 2>/dev/null; then
        exec "$py" -m agent reset "$@"
    fi
done
echo "bin/reset.sh: the agent package is not installed; run: pip install -e ." >&2
exit 2
