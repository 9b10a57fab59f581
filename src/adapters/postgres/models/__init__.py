"""The schema's declaration as advanced-alchemy models, one module per feature.

Every tenant table carries `org_id`, which row-level security filters on. The models are what
Alembic's autogenerate compares the database with (`migrations/env.py`): a schema change is
made here first, then written as a migration (see `tests/integration/test_schema_models.py`,
which holds the two equal). The request path reads and writes the tables with SQL on asyncpg
(see `knowledge_bases`), not through these classes.

Importing this package registers every table in `metadata`. Not declared here, because no
model can say them: row-level security, its policies and the grants, the SQL functions
(`ap_*`), the extension, the app role, the per-dimension HNSW indexes on `chunks`, and
pgqueuer's own objects.
"""

from __future__ import annotations

from .agents import AgentKnowledgeBaseModel, AgentModel, AgentTagLinkModel, AgentTagModel
from .base import NAMING_CONVENTION, Base, metadata
from .chat import (
    ChatMessageModel,
    ChatRunChunkModel,
    ChatRunModel,
    ConversationModel,
    UsageEventModel,
)
from .inbound_email import InboundEmailModel
from .knowledge import (
    PROCESSING_STATUSES,
    ChunkModel,
    EmbeddingPartModel,
    KnowledgeBaseFileModel,
    KnowledgeBaseModel,
    KnowledgeBaseStatsModel,
    StagedChunkModel,
)
from .members import (
    INVITATION_STATUSES,
    AuditLogModel,
    InvitationModel,
    MembershipRemovalModel,
    WebhookReceiptModel,
)
from .queue import JobRunModel
from .schedules import RUN_STATUSES, ScheduledRunModel, ScheduledTaskModel
from .skills import SkillFileModel, SkillModel
from .spend import OrgSettingsModel, SpendReservationModel, UsageDailyModel
from .tenancy import MembershipModel, OrganizationModel
from .tools import ToolServerModel
from .uploads import UPLOAD_STATES, IssuedUploadModel

__all__ = [
    "INVITATION_STATUSES",
    "NAMING_CONVENTION",
    "PROCESSING_STATUSES",
    "RUN_STATUSES",
    "UPLOAD_STATES",
    "AgentKnowledgeBaseModel",
    "AgentModel",
    "AgentTagLinkModel",
    "AgentTagModel",
    "AuditLogModel",
    "Base",
    "ChatMessageModel",
    "ChatRunChunkModel",
    "ChatRunModel",
    "ChunkModel",
    "ConversationModel",
    "EmbeddingPartModel",
    "InboundEmailModel",
    "InvitationModel",
    "IssuedUploadModel",
    "JobRunModel",
    "KnowledgeBaseFileModel",
    "KnowledgeBaseModel",
    "KnowledgeBaseStatsModel",
    "MembershipModel",
    "MembershipRemovalModel",
    "OrgSettingsModel",
    "OrganizationModel",
    "ScheduledRunModel",
    "ScheduledTaskModel",
    "SkillFileModel",
    "SkillModel",
    "SpendReservationModel",
    "StagedChunkModel",
    "ToolServerModel",
    "UsageDailyModel",
    "UsageEventModel",
    "WebhookReceiptModel",
    "metadata",
]
