"""Postgres: models, the organization-scoped session, repositories, the embedded server."""
