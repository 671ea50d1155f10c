"""Any OpenAI-compatible endpoint:

- compat.py         the client and the request
- format_ladder.py  the response formats an endpoint takes, remembered per home
- tool_calls.py     native tool calls
- client_log.py     the client's retries and timeouts, in the cycle log
"""
