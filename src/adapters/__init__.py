"""Adapters: the technology behind each application port."""
