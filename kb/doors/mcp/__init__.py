"""The MCP door: the knowledge base as an MCP server for coding agents and chat apps.

server.py holds the server (tools `search`, `ask`, `get_entry`, resources `faq://{entry_id}`);
http.py serves it as stateless streamable HTTP on the HTTP host (`kb mcp --http`, `kb serve
--mcp`); `kb mcp` itself (stdio by default) is kb/doors/host/app.py `mcp_command`, beside
`kb serve` and `kb slack`. mcp (the official SDK, 2.x) is imported inside functions.
"""
