"""The fake tool connector in the app: `ToolConnectorOverride` serves a `FakeToolConnector`
as the app's `ToolConnector`, so that HTTP tests reach no network."""

from __future__ import annotations

from dishka import Provider, Scope, provide

from application.ports.tool_connector import ToolConnector
from tests.fakes.tool_servers import FakeToolConnector


class ToolConnectorOverride(Provider):
    """Serves `connector` as the app's `ToolConnector`."""

    def __init__(self, connector: FakeToolConnector) -> None:
        super().__init__()
        self._connector = connector

    @provide(scope=Scope.APP)
    def connector(self) -> ToolConnector:
        return self._connector
