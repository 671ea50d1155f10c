"""An example tool plugin: plain typed functions with docstrings, nothing else to write."""

# The agent's own path check, so the plugin is confined like the built-in file tools.
from agent.tools.files import confined_path


def shout(text: str) -> str:
    """Return the text in capital letters.

    Args:
        text: what to shout
    """
    return text.upper()


def count_words(ctx, path: str) -> str:
    """Count the words in a file inside the agent's workspace.

    Args:
        path: a file relative to the workspace
    """
    # A first parameter named `ctx` receives the agent's ToolContext (home, settings, workspace).
    target = confined_path(ctx, path)
    return f"{len(target.read_text(encoding='utf-8').split())} words in {path}"


def repeat(text: str, times: int = 2) -> str:
    """Repeat a text several times, separated by spaces.

    Args:
        text: the text to repeat
        times: how many times (1 to 10)
    """
    if not 1 <= times <= 10:
        raise ValueError("times must be between 1 and 10")
    return " ".join([text] * times)


TOOLS = [count_words, repeat]
