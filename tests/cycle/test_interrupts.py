"""Signals during a cycle: routed for a while, raised inside the loop, only noted while saving."""

from __future__ import annotations

import os
import signal

import pytest

from agent.common.outcomes import Interrupted
from agent.cycle import interrupts


def test_a_signal_raises_interrupted_where_the_program_is():
    with pytest.raises(Interrupted, match="interrupted by SIGTERM"), interrupts.raising():
        os.kill(os.getpid(), signal.SIGTERM)


def test_a_deferred_signal_is_only_noted_and_the_old_handlers_come_back():
    before = signal.getsignal(signal.SIGHUP)
    noted = interrupts.Deferred()
    with interrupts.routed(noted):
        os.kill(os.getpid(), signal.SIGHUP)
    assert noted.noted == "interrupted by SIGHUP"
    assert signal.getsignal(signal.SIGHUP) is before
