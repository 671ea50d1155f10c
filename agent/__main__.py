from agent.cli import entry

entry()
