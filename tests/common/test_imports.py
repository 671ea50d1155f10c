"""agent/common/imports.py: a first import runs without the collector and is then frozen; nothing else changes."""

from __future__ import annotations

import gc
import sys

import pytest

from agent.common.imports import import_frozen

MODULE = """\
import gc
collecting_while_imported = gc.isenabled()
"""


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    """The name of a module not imported yet (on sys.path for this test only); unfrozen afterwards."""
    name = f"agent_test_import_{tmp_path.name}".replace("-", "_")
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    gc.unfreeze()  # give the rest of the session its collector back as it was
    gc.enable()


def test_a_first_import_runs_without_the_collector_and_is_then_frozen(fresh_module):
    frozen_before = gc.get_freeze_count()
    module = import_frozen(fresh_module)
    assert module.collecting_while_imported is False
    assert gc.isenabled()  # collecting again afterwards
    assert gc.get_freeze_count() > frozen_before
    assert sys.modules[fresh_module] is module


def test_a_module_already_imported_is_returned_as_it_is(fresh_module):
    module = import_frozen(fresh_module)
    frozen = gc.get_freeze_count()
    assert import_frozen(fresh_module) is module
    assert import_frozen("json") is sys.modules["json"]
    assert gc.isenabled() and gc.get_freeze_count() == frozen  # nothing paused, nothing more frozen


def test_a_caller_that_paused_the_collector_keeps_it_paused(fresh_module):
    gc.disable()
    frozen = gc.get_freeze_count()
    module = import_frozen(fresh_module)
    assert module.collecting_while_imported is False
    assert not gc.isenabled() and gc.get_freeze_count() == frozen  # the caller's choice stands


def test_a_failed_import_leaves_the_collector_running(tmp_path, monkeypatch):
    (tmp_path / "agent_test_import_broken.py").write_text("raise RuntimeError('broken module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="broken module"):
        import_frozen("agent_test_import_broken")
    assert gc.isenabled()
    assert "agent_test_import_broken" not in sys.modules
