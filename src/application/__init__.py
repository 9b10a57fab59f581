"""Use cases and the ports they need. Imports only the domain."""
