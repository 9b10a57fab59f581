"""Tool servers: the MCP servers and OpenAPI-described APIs agents call (`HttpToolConnector`)."""
