"""Inbound e-mail: reading raw messages and checking their webhook's signature."""
