"""An example model provider: a callable that takes a ModelChoice and returns a Model."""

import json

from agent.common.outcomes import UsageError
from agent.models.base import Completion, ModelChoice, Request, Usage


class Parrot:
    """A model that echoes its word once, then calls done: the smallest thing a cycle can run."""

    def __init__(self, word: str, greeting: str):
        self.name = f"parrot:{word}"
        self.word, self.greeting = word, greeting

    def start(self, log) -> None:
        log(f"parrot {self.word} ready")

    def complete(self, request: Request) -> Completion:
        if request.previous is None:  # the cycle's first step
            action = {"tool": "echo", "args": {"message": f"{self.greeting} {self.word}"}}
        else:
            action = {"tool": "done", "args": {"summary": f"said {self.word}"}}
        return Completion(json.dumps(action), Usage(prompt_tokens=len(request.user) // 4, completion_tokens=8, calls=1))


def provider(choice: ModelChoice) -> Parrot:
    """`parrot:WORD`: a model that says WORD (the greeting from the environment's PARROT_GREETING)."""
    if not choice.name:
        raise UsageError("parrot: needs a word, e.g. --model parrot:hello")
    return Parrot(choice.name, choice.env.get("PARROT_GREETING", "squawk"))
