"""A Model Context Protocol server on stdio, in the standard library alone, that misuses its
stdout in one of three ways (tests/tools/test_mcp_output.py, bench/mcp_memory.py):

    python3 hostile_mcp_server.py noise N      N lines of noise on stdout before each answer
    python3 hostile_mcp_server.py big BYTES    its tool `big` answers with a result of BYTES characters
    python3 hostile_mcp_server.py tools N      it lists N tools, in one message
    python3 hostile_mcp_server.py wide N       the same, each tool 5 KB (a schema of 40 properties)
    python3 hostile_mcp_server.py env FILE     it writes its whole environment to FILE (JSON) as it starts

Every server also offers `small`, which answers "ok" (the normal call beside the hostile one).
"""

import json
import os
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def reply(message_id, result):
    send({"jsonrpc": "2.0", "id": message_id, "result": result})


def text(value):
    return {"content": [{"type": "text", "text": value}], "isError": False}


def tool(name, wide=False):
    fields = {f"field_{j:02}_" + "x" * 90: {"type": "string"} for j in range(40)} if wide else {}
    return {"name": name, "description": f"Tool {name}.", "inputSchema": {"type": "object", "properties": fields}}


def main():
    mode = sys.argv[1]
    if mode == "env":
        with open(sys.argv[2], "w") as out:
            json.dump(dict(os.environ), out)
    amount = int(sys.argv[2]) if mode != "env" else 0
    for line in sys.stdin:
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if mode == "noise" and message_id is not None:
            sys.stdout.write("".join(f"noise line {n}: \x1b[31mnot json\x1b[0m\n" for n in range(amount)))
        if method == "initialize":
            info = {"name": "hostile", "version": "1"}
            version = message["params"].get("protocolVersion")
            reply(message_id, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
        elif method == "tools/list":
            names = [f"t{n}" for n in range(amount)] if mode in ("tools", "wide") else [mode]
            reply(message_id, {"tools": [tool(name, mode == "wide") for name in names] + [tool("small")]})
        elif method == "tools/call":
            name = message["params"]["name"]
            if name == "big":
                reply(message_id, text("x" * amount))
            else:
                reply(message_id, text("ok"))
        elif message_id is not None:
            send({"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": "no such method"}})


main()
