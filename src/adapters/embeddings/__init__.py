"""Embedding providers: the bundled local sentence-transformers model and OpenAI-compatible APIs."""
