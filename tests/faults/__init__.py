"""Faulty adapters for the fault tests: they fail as native code does, for real."""
