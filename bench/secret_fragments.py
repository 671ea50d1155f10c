#!/usr/bin/env python3
"""What redacting a 64 KB tool result costs, whole forms only against whole forms plus fragments.

Three secrets (an API key, a secret_env token, a header value) are redacted from a 64 KB result
made of printable ASCII (random, so most 4-character probes miss) and of English-like log text
(repetitive, so probes hit more often), with and without two key fragments inside. "forms" is
the old way (a `str.replace` per form, no fragments); "fragments" is `Secrets.redact_text` today.
Prints the median, min and max milliseconds of each over --runs runs, side by side, and the
machine's load average when it started.

    python bench/secret_fragments.py --runs 51
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.secrets import REDACTED, Secrets  # noqa: E402

SECRETS = ["sk-live-7Hq2ZxP9wLm4Rt8Vb3Nc6Ys1KdJ0Fg5A", "dpl-Qm3Wx8Ez5Rt2Yu7Io4Pa9Sd", "Bearer hdr-abcdef0123456789"]
SIZE = 64 * 1024


def _forms_only(secrets: Secrets, text: str) -> str:
    for form in secrets.forms:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def _texts() -> dict[str, str]:
    rng = random.Random(23)
    noise = "".join(rng.choice(string.printable[:94] + " \n") for _ in range(SIZE))
    words = "the agent read the file and wrote a note about the status of the build while it ran ".split()
    log = " ".join(rng.choice(words) for _ in range(SIZE // 4))[:SIZE]
    key = SECRETS[0]
    with_pieces = lambda t: t[: SIZE // 3] + key[:20] + t[SIZE // 3 : 2 * SIZE // 3] + key[20:] + t[2 * SIZE // 3 :]  # noqa: E731
    return {"random": noise, "random+pieces": with_pieces(noise), "log text": log, "log+pieces": with_pieces(log)}


def _time(fn, text: str, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(text)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=31)
    runs = parser.parse_args().runs
    secrets = Secrets(SECRETS)
    print(
        f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {runs} runs; "
        f"{len(secrets.forms)} forms of {len(SECRETS)} secrets"
    )
    print(f"{'64 KB text':<16}{'forms ms (med/min/max)':>26}{'fragments ms (med/min/max)':>30}")
    for name, text in _texts().items():
        cells = []
        for fn in (lambda t: _forms_only(secrets, t), secrets.redact_text):
            times = _time(fn, text, runs)
            cells.append(f"{statistics.median(times):.2f} / {min(times):.2f} / {max(times):.2f}")
        print(f"{name:<16}{cells[0]:>26}{cells[1]:>30}")


if __name__ == "__main__":
    main()
