"""Operations: the readiness probes and cross-organization counts behind `/health/ready` and
`/metrics`."""

from __future__ import annotations

from dishka import Provider, Scope, provide

from adapters.postgres.operations import PgOperations


class OperationsProvider(Provider):
    """`PgOperations` on the app's pool, for the app's life."""

    scope = Scope.APP
    operations = provide(PgOperations)
