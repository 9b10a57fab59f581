from __future__ import annotations

from dataclasses import dataclass

from application.metering import SpendMeter
from application.ports.chunk_repository import ChunkRepository, EmbeddedChunk
from application.ports.embedder import EmbedderRegistry, EmbeddingFailed
from application.ports.file_repository import FileRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.unit_of_work import UnitOfWork
from domain.files import ProcessingStatus
from domain.spend import SpendCapReached

INTERRUPTED = (
    "Re-embedding was interrupted too many times (the worker running it stopped); "
    "choose the model again to retry."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReembedKnowledgeBaseCommand:
    org_id: str
    kb_id: int
    last_attempt: bool = False


class ReembedKnowledgeBase:
    """Move a knowledge base to its pending embedding model, then swap indexes.

    Rules: every completed file's passages are embedded with the pending model and stored
    beside the current ones (files still processing are embedded with both models by their
    own job); search answers from the current model throughout. Then, in one transaction with
    the knowledge base locked, and only if the pending model is still the one embedded (a newer
    change has its own job), the pending model becomes the current one and the old passages
    are deleted. If the new model cannot embed, the change is abandoned: the old index stays,
    and the knowledge base shows status `error` with `reindex_error` until changed again.
    Unexpected errors are raised for the queue to retry; on the last attempt they abandon the
    change the same way. `give_up` abandons it so too, for a job whose runs keep being cut
    short.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        files: FileRepository,
        chunks: ChunkRepository,
        embedders: EmbedderRegistry,
        uow: UnitOfWork,
        meter: SpendMeter,
    ) -> None:
        self._meter = meter
        self._kbs = knowledge_bases
        self._files = files
        self._chunks = chunks
        self._embedders = embedders
        self._uow = uow

    async def execute(self, command: ReembedKnowledgeBaseCommand) -> bool:
        """True when the knowledge base now answers from the new model."""
        org_id = command.org_id
        kb = await self._kbs.get(org_id, command.kb_id)
        if kb is None or not kb.pending_embedding_model or not kb.pending_embedding_dimensions:
            return False
        model, dimensions = kb.pending_embedding_model, kb.pending_embedding_dimensions
        try:
            embedder = self._meter.embedders(self._embedders, org_id).get(model, dimensions)
            for file in await self._files.list_for_knowledge_base(org_id, kb.id):
                if file.processing_status is not ProcessingStatus.COMPLETED:
                    continue
                passages = await self._chunks.passages_for_file(org_id, file.id, kb.embedding_model)
                vectors = await embedder.embed([p.text for p in passages]) if passages else []
                await self._chunks.replace_for_file(
                    org_id,
                    knowledge_base_id=kb.id,
                    file_record_id=file.id,
                    embedding_model=model,
                    dimensions=dimensions,
                    chunks=[
                        EmbeddedChunk(chunk=p, vector=v)
                        for p, v in zip(passages, vectors, strict=True)
                    ],
                )
                await self._uow.commit()
        except EmbeddingFailed as failure:
            return await self._abandon(org_id, kb.id, model, failure.message)
        except SpendCapReached as refused:
            return await self._abandon(org_id, kb.id, model, refused.explanation)
        except Exception as error:
            if not command.last_attempt:
                raise
            message = f"Re-embedding failed after several attempts ({type(error).__name__})."
            return await self._abandon(org_id, kb.id, model, message)
        current = await self._kbs.get(org_id, kb.id, for_update=True)
        if current is None or current.pending_embedding_model != model:
            await self._uow.rollback()
            return False
        await self._kbs.update(
            org_id,
            kb.id,
            {
                "embedding_model": model,
                "embedding_dimensions": dimensions,
                "pending_embedding_model": None,
                "pending_embedding_dimensions": None,
                "reindex_error": None,
            },
        )
        await self._chunks.delete_for_knowledge_base(org_id, kb.id, except_model=model)
        await self._uow.commit()
        return True

    async def give_up(self, command: ReembedKnowledgeBaseCommand) -> None:
        """Abandon the pending model without trying it again, as a failed re-embedding is."""
        kb = await self._kbs.get(command.org_id, command.kb_id)
        if kb is not None and kb.pending_embedding_model:
            await self._abandon(command.org_id, kb.id, kb.pending_embedding_model, INTERRUPTED)

    async def _abandon(self, org_id: str, kb_id: int, model: str, message: str) -> bool:
        await self._uow.rollback()
        current = await self._kbs.get(org_id, kb_id, for_update=True)
        if current is not None and current.pending_embedding_model == model:
            await self._kbs.update(
                org_id,
                kb_id,
                {
                    "pending_embedding_model": None,
                    "pending_embedding_dimensions": None,
                    "reindex_error": message,
                },
            )
            await self._chunks.delete_for_knowledge_base(
                org_id, kb_id, except_model=current.embedding_model
            )
        await self._uow.commit()
        return False
