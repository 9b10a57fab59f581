"""The local embedder with the real bundled all-MiniLM-L6-v2 model on the CPU."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from adapters.embeddings.local import LocalSentenceTransformerEmbedder, bundled_minilm_path


@pytest.fixture(scope="module")
async def embedder() -> LocalSentenceTransformerEmbedder:
    embedder = LocalSentenceTransformerEmbedder(bundled_minilm_path(), batch_size=4)
    await embedder.warm_up()
    return embedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_vectors_are_normalized_with_384_dimensions(embedder):
    vectors = await embedder.embed(["The cat sits on the mat", "Quarterly revenue grew 5%"])

    assert embedder.dimensions == 384
    assert [len(v) for v in vectors] == [384, 384]
    assert all(isinstance(x, float) for x in vectors[0])
    for vector in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-4)


async def test_similar_sentences_are_closer_than_unrelated_ones(embedder):
    cat, cat_again, revenue = await embedder.embed(
        ["The cat sits on the mat", "A cat is sitting on a mat", "Quarterly revenue grew 5%"]
    )

    assert cosine(cat, cat_again) > 0.8
    assert cosine(cat, revenue) < 0.3


async def test_more_texts_than_a_batch_come_back_one_each_in_order(embedder):
    texts = [f"Sentence number {i} is about topic {i % 3}." for i in range(11)]

    together = await embedder.embed(texts)
    alone = [(await embedder.embed([text]))[0] for text in (texts[0], texts[5], texts[10])]

    assert len(together) == 11
    for got, expected in zip((together[0], together[5], together[10]), alone, strict=True):
        assert cosine(got, expected) > 0.9999


async def test_empty_input_gives_no_vectors(embedder):
    assert await embedder.embed([]) == []


async def test_a_very_long_text_is_truncated_not_refused(embedder):
    [vector] = await embedder.embed(["word " * 5000])

    assert len(vector) == 384


async def test_encoding_does_not_block_the_event_loop(embedder):
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.01)
            ticks += 1

    texts = [
        f"A somewhat longer sentence, number {i}, to keep the model busy." * 4 for i in range(48)
    ]
    task = asyncio.create_task(ticker())
    started = time.monotonic()
    vectors = await embedder.embed(texts)
    elapsed = time.monotonic() - started
    done.set()
    await task

    assert len(vectors) == 48
    # A blocked loop would tick once at most; a free one ticks roughly every 10 ms.
    assert elapsed > 0.1
    assert ticks >= elapsed / 0.01 * 0.3


async def test_onnx_runtime_and_torch_give_the_same_vectors(embedder):
    torch_embedder = LocalSentenceTransformerEmbedder(
        bundled_minilm_path(), batch_size=4, runtime="torch"
    )
    await embedder.warm_up(queries=True)  # serve's: exported for queries
    onnx = embedder._onnx_encoder()
    assert onnx is not None
    texts = [
        "What similarity laws must be obeyed by aeroelastic models?",
        "short",
        "The boundary layer over a flat plate thickens downstream. " * 30,  # truncated at 256
        "Ünïcödé, emoji 🚀 and numbers 3.14159",
        "word " * 5000,
    ]

    onnx_vectors = onnx.encode(texts, 4).tolist()
    torch_vectors = await torch_embedder.embed(texts)
    [query] = await embedder.embed([texts[0]])  # a query goes through ONNX Runtime

    assert torch_embedder._onnx_encoder() is None
    for got, expected in zip(onnx_vectors, torch_vectors, strict=True):
        assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < 1e-4
        assert cosine(got, expected) > 0.99999
    assert max(abs(a - b) for a, b in zip(query, onnx_vectors[0], strict=True)) < 1e-6
