"""A model that replays fixed replies: from a YAML file (`scripted:FILE`) or from memory.

`ScriptedModel.from_replies([...])` lets the loop be tested without files, click or processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import yaml

from agent.common.outcomes import UsageError
from agent.common.plain import described
from agent.common.safe_yaml import load_yaml, yaml_problem
from agent.models.base import Completion, Log, ModelChoice, Request, ScriptEnded, Usage


def reply_text(item: Any) -> str:
    """A script item as the raw reply it stands for: a string as it is, a mapping or list as its
    JSON (for convenience), any other scalar (a YAML date, a number) as its text."""
    if isinstance(item, str):
        return item
    if isinstance(item, (dict, list)):
        return json.dumps(item, default=str)
    return str(item)


def read_script(path: Path) -> list:
    """The items of a script file; UsageError (exit 2, nothing written) when it cannot be used."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"scripted model file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"scripted model file {path} cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"scripted model file {path}: {yaml_problem(exc)}") from None
    if not isinstance(data, list):
        raise UsageError(f"scripted model file {path} must hold a YAML list of replies, got {described(data)}")
    return data


class ScriptedModel:
    """Replays a list of raw replies, from the first at the start of every cycle.

    Asking past the end raises ScriptEnded.
    """

    def __init__(self, path: Path):
        self._use(f"scripted:{path}", read_script(path))

    @classmethod
    def from_replies(cls, replies: Iterable[Any], name: str = "scripted") -> ScriptedModel:
        """A scripted model whose replies are given here; items as in a script file."""
        model = cls.__new__(cls)
        model._use(name, replies)
        return model

    def _use(self, name: str, items: Iterable[Any]) -> None:
        self.name = name
        self.replies = [reply_text(item) for item in items]
        self.position = 0

    def start(self, log: Log) -> None:
        self.position = 0

    def complete(self, request: Request) -> Completion:
        if self.position >= len(self.replies):
            raise ScriptEnded(
                f"the script has only {len(self.replies)} replies and reply {self.position + 1} was asked for"
            )
        reply = self.replies[self.position]
        self.position += 1
        return Completion(reply, Usage(calls=1))


def provider(choice: ModelChoice) -> ScriptedModel:
    """`scripted:FILE`: replies from a YAML file, the `agent.models` entry point."""
    if not choice.name:
        raise UsageError("scripted: needs a file, e.g. --model scripted:replies.yaml")
    return ScriptedModel(Path(choice.name))


provider.names_a_file = True  # scripted:FILE, a relative one found in the home
