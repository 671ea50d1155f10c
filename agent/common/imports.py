"""A process's first import of a large module, made without the cyclic garbage collector.

An import makes objects that live as long as the process: classes, functions, and the schemas a
library such as pydantic builds for each of its models. Collected as usual, they are walked again
and again for nothing: by the collections their own allocation sets off (each one walks all made
so far), and, were the collector only paused, by the first ones after it (which walk them all at
once, and then again a generation up). So the collector is paused while the module is imported for
the first time, and what exists then is frozen (`gc.freeze`): later collections leave it out.

What this changes is only when memory held in reference cycles is freed: a cycle that exists at
the freeze, or is made by the import, stays until the process exits (objects without cycles are
freed by their reference counts as always). That is once per process, with what one import and
the start-up before it made; a module already imported is returned as it is, and nothing changes.
bench/cold_start.py measures what it saves (`agent run` imports its command, and an openai: cycle
the openai client, this way).
"""

from __future__ import annotations

import gc
import importlib
import sys
from types import ModuleType


def import_frozen(name: str) -> ModuleType:
    """`importlib.import_module(name)`; a first import is made with the collector paused, then frozen."""
    if name in sys.modules or not gc.isenabled():  # imported already, or the caller manages the collector
        return importlib.import_module(name)
    gc.disable()
    try:
        module = importlib.import_module(name)
        gc.freeze()
        return module
    finally:
        gc.enable()
