"""Route handlers, grouped by area."""
