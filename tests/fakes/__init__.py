"""Hand-written fakes of the application ports, for unit tests of the use cases.

One module per group of ports; each ends with the assignments through which mypy checks its
fakes against the ports they stand in for (`mypy src tests/fakes`). The fakes of the knowledge
base and file-processing ports are importable from here; those of the agent, conversation and
chat ports from `tests.fakes.agents`, `tests.fakes.conversations` and `tests.fakes.chat`."""

from tests.fakes.basics import (
    FakeClock,
    FakeJobQueue,
    FakeMemberDirectory,
    FakeStorage,
    FakeUnitOfWork,
    Restorable,
)
from tests.fakes.embeddings import (
    FakeChunks,
    FakeEmbedderRegistry,
    FakeEmbeddingParts,
    HashingEmbedder,
)
from tests.fakes.files import FakeFiles, FakeIssuedUploads
from tests.fakes.knowledge_bases import FakeKnowledgeBases
from tests.fakes.processing import FakeChunker, FakeExtractor

__all__ = [
    "FakeChunker",
    "FakeChunks",
    "FakeClock",
    "FakeEmbedderRegistry",
    "FakeEmbeddingParts",
    "FakeExtractor",
    "FakeFiles",
    "FakeIssuedUploads",
    "FakeJobQueue",
    "FakeKnowledgeBases",
    "FakeMemberDirectory",
    "FakeStorage",
    "FakeUnitOfWork",
    "HashingEmbedder",
    "Restorable",
]
