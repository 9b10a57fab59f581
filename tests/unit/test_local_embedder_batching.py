"""The local embedder's queue: batches shared by concurrent requests, fair turns, failures kept
to the request at fault. The model is replaced by a recorder, so no weights are loaded."""

from __future__ import annotations

import asyncio
import threading

import pytest

from adapters.embeddings.local import LocalSentenceTransformerEmbedder
from application.ports.embedder import EmbeddingFailed


class RecordingEmbedder(LocalSentenceTransformerEmbedder):
    """Vectors are [len(text)]; "hold" blocks the encoder thread until released; "boom" fails."""

    def __init__(self, batch_size: int) -> None:
        super().__init__(dimensions=1, batch_size=batch_size)
        self.batches: list[list[str]] = []
        self.holding = threading.Event()
        self.release = threading.Event()

    def encode_now(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        if "hold" in texts:
            self.holding.set()
            self.release.wait(timeout=10)
        if "boom" in texts:
            raise EmbeddingFailed("The local embedding model failed: boom")
        return [[float(len(text))] for text in texts]


async def hold_encoder(embedder: RecordingEmbedder) -> asyncio.Task[list[list[float]]]:
    holding = asyncio.create_task(embedder.embed(["hold"]))
    await asyncio.to_thread(embedder.holding.wait, 10)
    return holding


async def test_waiting_requests_share_a_batch_and_each_gets_its_vectors_in_order():
    embedder = RecordingEmbedder(batch_size=32)
    holding = await hold_encoder(embedder)

    first = asyncio.create_task(embedder.embed(["a", "ccc", "bb"]))
    second = asyncio.create_task(embedder.embed(["dddd", "e"]))
    await asyncio.sleep(0.02)
    embedder.release.set()

    assert await first == [[1.0], [3.0], [2.0]]
    assert await second == [[4.0], [1.0]]
    await holding
    assert embedder.batches[1:] == [["ccc", "bb", "a", "dddd", "e"]]  # longest first per request


async def test_a_short_request_waits_for_one_batch_per_request_ahead_not_for_all_of_them():
    embedder = RecordingEmbedder(batch_size=4)
    holding = await hold_encoder(embedder)

    document = asyncio.create_task(embedder.embed([f"passage {i:02d}" for i in range(40)]))
    await asyncio.sleep(0.01)
    query = asyncio.create_task(embedder.embed(["query"]))
    await asyncio.sleep(0.01)
    embedder.release.set()

    assert await query == [[5.0]]
    assert len(await document) == 40
    await holding
    # The document had one turn, then the query's batch was topped up with the document's texts.
    assert embedder.batches[1] == [f"passage {i:02d}" for i in range(4)]
    assert embedder.batches[2] == ["query", *(f"passage {i:02d}" for i in range(4, 7))]


async def test_a_failing_text_fails_only_its_own_request():
    embedder = RecordingEmbedder(batch_size=32)
    holding = await hold_encoder(embedder)

    good = asyncio.create_task(embedder.embed(["fine", "also fine"]))
    bad = asyncio.create_task(embedder.embed(["boom", "innocent"]))
    await asyncio.sleep(0.02)
    embedder.release.set()

    assert await good == [[4.0], [9.0]]
    with pytest.raises(EmbeddingFailed, match="boom"):
        await bad
    await holding


async def test_a_cancelled_request_leaves_the_queue_and_the_others_finish():
    embedder = RecordingEmbedder(batch_size=2)
    holding = await hold_encoder(embedder)

    cancelled = asyncio.create_task(embedder.embed([f"gone {i}" for i in range(10)]))
    kept = asyncio.create_task(embedder.embed(["kept"]))
    await asyncio.sleep(0.02)
    cancelled.cancel()
    await asyncio.sleep(0.01)
    embedder.release.set()

    assert await kept == [[4.0]]
    await holding
    assert not any(text.startswith("gone") for batch in embedder.batches for text in batch)
    with pytest.raises(asyncio.CancelledError):
        await cancelled


async def test_no_texts_give_no_vectors_without_a_batch():
    embedder = RecordingEmbedder(batch_size=8)

    assert await embedder.embed([]) == []
    assert embedder.batches == []
