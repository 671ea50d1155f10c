"""Any OpenAI-compatible endpoint: the client, the format ladder, native tool calls, the client's log."""
