"""The embedded model's thread count and wait policy (agent/models/local/threads.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agent.config import Settings
from agent.models.local import threads
from agent.models.local.threads import SPIN_COUNT, cores, others_running, set_wait_policy, thread_count


def _loadavg(tmp_path, running: int, total: int = 400):
    path = tmp_path / "loadavg"
    path.write_text(f"1.20 0.80 0.50 {running}/{total} 12345\n")
    return path


@pytest.fixture
def alone(monkeypatch):
    """This process has one runnable thread, whatever else the test run started in it."""
    monkeypatch.setattr(threads, "_own_running", lambda: 1)


def test_others_running_counts_every_runnable_thread_but_the_readers_own(tmp_path, alone):
    assert others_running(samples=1, loadavg=_loadavg(tmp_path, 3)) == 2
    assert others_running(samples=1, loadavg=_loadavg(tmp_path, 1)) == 0


def test_a_kernel_that_does_not_say_gives_no_count(tmp_path):
    assert others_running(samples=1, loadavg=tmp_path / "missing") is None
    (tmp_path / "odd").write_text("not a load average\n")
    assert others_running(samples=1, loadavg=tmp_path / "odd") is None


def test_decoding_leaves_one_of_the_cores_nobody_else_runs_on_free_and_prompts_use_them_all(
    tmp_path, monkeypatch, alone
):
    monkeypatch.setattr(threads, "cores", lambda cpu_max: (4, True))
    for running, decode, batch in ((1, 3, 4), (2, 2, 3), (3, 1, 2), (4, 1, 1), (40, 1, 1)):
        chosen = thread_count(Settings(), _loadavg(tmp_path, running))
        assert chosen == (decode, batch, f"4 cores, {min(running - 1, 4)} busy")
    # where the kernel does not say: decoding on every core but one, prompts on all of them
    assert thread_count(Settings(), tmp_path / "missing") == (3, 4, "4 cores")
    monkeypatch.setattr(threads, "cores", lambda cpu_max: (1, True))
    assert thread_count(Settings(), _loadavg(tmp_path, 1)) == (1, 1, "1 cores, 0 busy")


def test_an_idle_two_core_machine_reads_prompts_on_both_and_decodes_on_one(tmp_path, monkeypatch, alone):
    monkeypatch.setattr(threads, "cores", lambda cpu_max: (2, True))
    assert thread_count(Settings(), _loadavg(tmp_path, 1))[:2] == (1, 2)
    assert thread_count(Settings(), _loadavg(tmp_path, 2))[:2] == (1, 1)  # one other process: one core each


def test_in_a_cpu_set_or_quota_the_machines_load_is_not_counted(tmp_path, monkeypatch, alone):
    # the load average is the whole machine's: in a container it says nothing about its own cores
    monkeypatch.setattr(threads, "cores", lambda cpu_max: (4, False))
    assert thread_count(Settings(), _loadavg(tmp_path, 40)) == (3, 4, "4 cores of a CPU set or quota")


@pytest.mark.parametrize(
    "cpu_max, expected",
    [
        ("150000 100000\n", 2),
        ("100000 100000\n", 1),
        ("50000 100000\n", 1),
        ("max 100000\n", None),
        ("garbage\n", None),
        (None, None),
    ],
)
def test_a_cgroup_cpu_quota_caps_the_cores(tmp_path, cpu_max, expected):
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max)
    assert threads._quota(path) == expected
    usable, _ = cores(path)
    assert usable == min(expected or usable, usable) and usable >= 1


def test_the_setting_wins_over_the_machine():
    assert thread_count(Settings(local_threads=3)) == (3, 3, "local_threads")


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="needs Linux's /proc/loadavg")
def test_with_every_core_kept_busy_the_model_gets_one_thread():
    # one endless loop per core: each is runnable from the moment it prints, so the count is exact
    loops = [
        subprocess.Popen(
            [sys.executable, "-c", "print('ready', flush=True)\nwhile 1: pass"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(cores()[0])
    ]
    try:
        for loop in loops:
            assert loop.stdout.readline() == "ready\n"
        decode, batch, why = thread_count(Settings())
        total, whole_machine = cores()
        # in a container (CPU set or quota) the load is not read: one core is left free all the same
        assert decode == (1 if whole_machine else max(1, total - 1)), why
        assert batch == (1 if whole_machine else total), why
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def test_threads_spin_briefly_unless_the_user_chose_a_policy(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    assert set_wait_policy() == f"GOMP_SPINCOUNT={SPIN_COUNT}" and os.environ["GOMP_SPINCOUNT"] == SPIN_COUNT

    monkeypatch.delenv("GOMP_SPINCOUNT")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert set_wait_policy() == "OMP_WAIT_POLICY=PASSIVE" and "GOMP_SPINCOUNT" not in os.environ

    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "500")
    assert set_wait_policy() == "GOMP_SPINCOUNT=500"
