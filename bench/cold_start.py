"""Cold start: whole-process times of a cycle against the least any such process could cost.

Five commands run in turn, round after round, in one session (so machine noise hits all alike):

    floor      python -c "import yaml, click"          the two libraries the CLI cannot do without
    scripted   agent run, scripted model, 5 iterations  what cron pays for a cycle, minus the model
    bare       one chat request with the openai client  the least an openai: cycle could cost
    frozen     the same, openai imported as a cycle     bare, like for like (agent/common/imports.py)
               imports it
    openai     agent run, openai: model, 1 iteration    against the same loopback server

The medians of wall time and of CPU time (user + system, from the kernel's child accounting) and
three ratios of each are printed: scripted / floor (target: at most 2.0x), openai / bare (target:
at most 1.1x), and openai / frozen. A cycle imports the openai client (and its own command) with
the garbage collector paused and then frozen, which `bare`, written as a user would, does not: so
openai / bare is what a cycle costs against the plain request, and openai / frozen is this
package's own overhead on top of the client, everything else being equal.

The server is tests/models/openai_server.py on 127.0.0.1, answering every request at once with
the same `done` (a native tool call when the request offers tools, as OpenAI's own endpoint would,
else as text), so the openai commands measure start-up and the request's round trip, not a model.
The openai home names the model and the server in its config.yaml, as an operator's would; the
untimed first round lets it remember that the endpoint takes tool calls, so the timed cycles send
what a steady-state cron cycle sends. Before each of its runs, each home's state is written afresh
with one current task (untimed), so every cycle does the same work instead of going idle, and the
last cycle of each is checked to have ended with done. Byte-code is written and used
(PYTHONDONTWRITEBYTECODE is dropped, and the untimed first round compiles it), as in any installed
copy. The load average is printed before and after: on a shared machine read the ratios, and the
CPU ones first (the wall ratio also carries the waits: fsync, the run queue).

    python bench/cold_start.py --runs 21
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.models.openai_server import OpenAIServer, Reply, Request  # noqa: E402

KEY = "sk-bench-0123456789abcdef"
DONE = json.dumps({"tool": "done", "args": {"summary": "done"}})
STATE = """\
goals: [Measure a cold start]
current_task: Say hello
pending_actions: []
completed_tasks: []
notes: ''
last_updated: null
"""
BARE_CLIENT = """\
import sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": "hi"}])
"""
# The same request, openai imported the way a cycle imports it (agent/common/imports.py).
FROZEN_CLIENT = "import gc\ngc.disable()\nimport openai\ngc.freeze()\ngc.enable()\n" + BARE_CLIENT


def newest_record(home: Path) -> dict:
    """The newest cycle's record, from the home's logs/agent.db."""
    from agent.store.cycles import newest_first
    from agent.store.db import close_all
    from agent.store.home import Home

    try:
        return next(newest_first(Home.at(home)))
    finally:
        close_all()


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one run of `argv` to its end."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - began
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (now.ru_utime - used.ru_utime) + (now.ru_stime - used.ru_stime)


def answer(request: Request) -> Reply:
    """`done`: a native call when the request offers tools, else as text."""
    return Reply.calls(("done", {"summary": "done"})) if request.tools else Reply.chat(DONE)


def with_task(home: Path) -> Path:
    """`home`, its state reset to one current task (so the cycle works rather than idles)."""
    (home / "scratchpad" / "active.yaml").write_text(STATE)
    return home


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AGENT_MODEL", "AGENT_HOME", "OPENAI_BASE_URL", "OPENAI_API_KEY", "PYTHONDONTWRITEBYTECODE")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(default=answer) as server:
        scripted_home, openai_home = Path(tmp) / "scripted", Path(tmp) / "openai"
        for home in (scripted_home, openai_home):
            subprocess.run(
                [sys.executable, "-m", "agent", "init", str(home)], check=True, env=env, stdout=subprocess.DEVNULL
            )
        with (openai_home / "config.yaml").open("a") as config:
            config.write(f"model: openai:test-model\nbase_url: {server.base_url}\n")
        script = Path(tmp) / "script.yaml"
        replies = [json.dumps({"tool": "echo", "args": {"message": f"step {i}"}}) for i in range(4)] + [DONE]
        script.write_text("\n".join(f"- {json.dumps(r)}" for r in replies) + "\n")
        agent = [sys.executable, "-m", "agent", "run", "-q", "--max-iterations", "5"]
        commands = {  # name: (argv, environment, home to give a task first)
            "floor": ([sys.executable, "-c", "import yaml, click"], env, None),
            "scripted": ([*agent, "--home", str(scripted_home), "--model", f"scripted:{script}"], env, scripted_home),
            "bare": ([sys.executable, "-c", BARE_CLIENT, server.base_url, KEY], env, None),
            "frozen": ([sys.executable, "-c", FROZEN_CLIENT, server.base_url, KEY], env, None),
            "openai": ([*agent, "--home", str(openai_home)], dict(env, OPENAI_API_KEY=KEY), openai_home),
        }
        for argv, command_env, home in commands.values():  # compile byte-code, warm the file cache,
            home and with_task(home)  # and let the openai home remember that the endpoint takes tools
            timed(argv, command_env)
        started_load = load()
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, command_env, home) in commands.items():
                home and with_task(home)
                runs[name].append(timed(argv, command_env))
        for home, iterations in ((scripted_home, 5), (openai_home, 1)):  # the cycles did work, not idle
            last = newest_record(home)
            if (last.get("stop_reason"), last.get("iterations")) != ("done", iterations):
                raise SystemExit(f"{home.name}: the last cycle was not a {iterations}-iteration done: {last}")
    wall = {name: statistics.median(w for w, _ in values) * 1000 for name, values in runs.items()}
    cpu = {name: statistics.median(c for _, c in values) * 1000 for name, values in runs.items()}
    print(
        f"runs: {args.runs} rounds of the five commands in turn; load average {started_load} before, "
        f"{load()} after, on {os.cpu_count()} cores"
    )
    print("medians                                          wall ms   ratio |   CPU ms   ratio")
    rows = (
        ("python -c 'import yaml, click'", "floor", None),
        ("agent run, scripted, 5 iterations", "scripted", "floor"),
        ("one request with the openai client", "bare", None),
        ("the same, openai imported as a cycle does", "frozen", None),
        ("agent run, openai: (loopback), 1 iteration", "openai", "bare"),
        ("  the same, against the frozen request", "openai", "frozen"),
    )
    for label, name, against in rows:
        ratios = ("", "")
        if against is not None:
            ratios = (f"{wall[name] / wall[against]:.2f}x", f"{cpu[name] / cpu[against]:.2f}x")
        print(f"{label:<46} {wall[name]:9.1f} {ratios[0]:>7} | {cpu[name]:8.1f} {ratios[1]:>7}")
    print(
        "targets: scripted <= 2.0x the floor, openai: <= 1.1x the bare request. The last row is the package's own "
        "overhead over the client. On a loaded machine the wall ratio also carries the waits (fsync, run queue); "
        "the CPU ratio does not."
    )


if __name__ == "__main__":
    main()
