"""The dishka wiring: one container for the HTTP app, the CLI and the worker, built from one
provider per feature. Long-lived clients live at APP scope; the organization-scoped connection,
the repositories and the use cases at REQUEST scope, whose context gives the `Identity` acting.
Tests and other entrypoints pass extra providers to override any of them."""

from __future__ import annotations

from dishka import AsyncContainer, Provider, make_async_container

from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.wiring.agents import AgentProvider
from entrypoints.wiring.chat import ChatProvider, OrgScopes
from entrypoints.wiring.conversations import ConversationProvider
from entrypoints.wiring.identity import IdentityProvider, RecentlySeen, dev_identity_provider
from entrypoints.wiring.inbound_email import InboundEmailProvider
from entrypoints.wiring.infrastructure import InfrastructureProvider, local_disk_storage
from entrypoints.wiring.knowledge import KnowledgeProvider
from entrypoints.wiring.members import MemberProvider
from entrypoints.wiring.models import ModelProvider
from entrypoints.wiring.operations import OperationsProvider
from entrypoints.wiring.schedules import ScheduleProvider
from entrypoints.wiring.settings import OrgSettingsProvider
from entrypoints.wiring.skills import SkillProvider
from entrypoints.wiring.tools import ToolProvider

__all__ = [
    "OrgScopes",
    "RecentlySeen",
    "dev_identity_provider",
    "local_disk_storage",
    "make_container",
]


def make_container(settings: Settings, database: Database, *providers: Provider) -> AsyncContainer:
    return make_async_container(
        InfrastructureProvider(),
        IdentityProvider(),
        KnowledgeProvider(),
        InboundEmailProvider(),
        ModelProvider(),
        AgentProvider(),
        SkillProvider(),
        ToolProvider(),
        MemberProvider(),
        OrgSettingsProvider(),
        ConversationProvider(),
        ChatProvider(),
        ScheduleProvider(),
        OperationsProvider(),
        *providers,
        context={Settings: settings, Database: database},
    )
