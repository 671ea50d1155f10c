"""The seccomp filter's rules are built whole or not at all (agent/tools/sandbox_seccomp.py)."""

from __future__ import annotations

import errno

import pytest

from agent.tools import sandbox_seccomp
from agent.tools.sandbox_seccomp import SeccompUnavailable, filter_program, rules


@pytest.fixture
def fresh_filter():
    """filter_program is built once per process: build it again for this test, and after it."""
    filter_program.cache_clear()
    yield
    filter_program.cache_clear()


def test_a_system_call_libseccomp_cannot_name_stops_the_filter_instead_of_dropping_its_rule(monkeypatch, fresh_filter):
    """An older libseccomp (openat2 is unknown before 2.5.0) answers -1 for a name it does not know;
    skipping that rule left the call open, so an openat2 with mode 06755 made a setuid file."""
    refused = (*sandbox_seccomp.REFUSED, ("not_a_system_call", errno.EPERM))
    monkeypatch.setattr(sandbox_seccomp, "REFUSED", refused)
    with pytest.raises(SeccompUnavailable, match="does not know the system call not_a_system_call"):
        filter_program()


def test_the_calls_newer_than_some_libseccomp_are_named_by_number(fresh_filter):
    named = {name for name, _error, _compared in rules() if isinstance(name, str)}
    assert not named & {"openat2", "fchmodat2", "io_uring_setup", "io_uring_enter", "io_uring_register"}
    assert filter_program()  # and every name left is one this libseccomp knows
