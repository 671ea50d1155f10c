"""A Model Context Protocol server on stdio, in the standard library alone, that offers one tool,
`flood`: called, it writes NOISE_BYTES of stderr (its last line LAST_WORDS) and dies mid-call.

    python3 noisy_mcp_server.py NOISE_BYTES
"""

import json
import os
import sys

LAST_WORDS = "the-noisy-server-last-words"


def reply(message_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def flood(total):
    chunk = b"x" * 65535 + b"\n"
    written = 0
    while written < total:
        written += os.write(2, chunk[: total - written])
    os.write(2, f"\n{LAST_WORDS}\n".encode())
    os._exit(3)


def main():
    noise = int(sys.argv[1])
    for line in sys.stdin:
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if method == "initialize":
            version = message["params"].get("protocolVersion")
            reply(
                message_id,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "noisy", "version": "1"},
                },
            )
        elif method == "tools/list":
            schema = {"type": "object", "properties": {}}
            reply(
                message_id,
                {"tools": [{"name": "flood", "description": "Floods stderr, then dies.", "inputSchema": schema}]},
            )
        elif method == "tools/call":
            flood(noise)
        elif message_id is not None:
            reply(message_id, {})


if __name__ == "__main__":
    main()
