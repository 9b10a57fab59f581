"""HTML adapters."""
