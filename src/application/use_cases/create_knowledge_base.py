from __future__ import annotations

from dataclasses import dataclass

from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.unit_of_work import UnitOfWork
from domain.identity import Caller
from domain.inbound_email import NO_INBOUND_EMAIL, InboundEmailDomain
from domain.knowledge_bases import (
    EMAIL_SOURCE,
    KnowledgeBaseFields,
    KnowledgeBaseSummary,
    NewKnowledgeBase,
)
from domain.models import DEFAULT_EMBEDDING_MODEL, embedding_dimensions


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateKnowledgeBaseCommand:
    caller: Caller
    fields: KnowledgeBaseFields

    @classmethod
    def parse(cls, *, caller: Caller, **fields: object) -> CreateKnowledgeBaseCommand:
        """The request's fields parsed by `KnowledgeBaseFields.parse`."""
        return cls(caller=caller, fields=KnowledgeBaseFields.parse(**fields))


class CreateKnowledgeBase:
    """Create a knowledge base in the caller's organization.

    Rules: the fields follow `domain.knowledge_bases.KNOWLEDGE_BASE_FIELDS`. The embedding model
    defaults to the deployment's default; its dimension count is filled in for known models and
    must match them, and an unlisted OpenAI-compatible model needs its dimension count (400).
    `source: "email"` gives the knowledge base an address of its own
    (`kb-<random>@<AP_INBOUND_EMAIL_DOMAIN>`; 400 naming the setting when it is unset). The
    search language (english by default) is stored: its passages' full text is stemmed in it.
    The creator is recorded.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        uow: UnitOfWork,
        default_embedding_model: str = DEFAULT_EMBEDDING_MODEL,
        inbound: InboundEmailDomain = NO_INBOUND_EMAIL,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._uow = uow
        self._default_embedding_model = default_embedding_model
        self._inbound = inbound

    async def execute(self, command: CreateKnowledgeBaseCommand) -> KnowledgeBaseSummary:
        fields = command.fields
        model = fields.embedding_model or self._default_embedding_model
        embedding = (model, embedding_dimensions(model, fields.embedding_dimensions))
        address = self._inbound.new_address() if fields.source == EMAIL_SOURCE else None
        kb = await self._knowledge_bases.add(
            NewKnowledgeBase.of(
                fields,
                org_id=command.caller.org_id,
                user_id=command.caller.user_id,
                embedding=embedding,
                inbound_email_address=address,
            )
        )
        await self._uow.commit()
        return KnowledgeBaseSummary.of(kb)
