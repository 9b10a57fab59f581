"""The Litestar HTTP app."""
