"""memsys as an MCP server (stdio and streamable HTTP)."""
