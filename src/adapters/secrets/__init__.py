"""Secrets at rest: the `SecretBox` port with authenticated encryption."""
