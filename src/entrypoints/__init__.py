"""Entrypoints: the HTTP app, the CLI and the dishka container that both build."""
