"""The local cross-encoder reranker on a tiny BERT cross-encoder built here from scratch (random
weights, the bundled all-MiniLM-L6-v2's tokenizer): loading from a folder only, one finite,
deterministic score per passage in the passages' order, truncation, bounded time, and a clear
refusal of folders that hold no cross-encoder."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest

from adapters.embeddings.local import bundled_minilm_path
from adapters.rerank import make_reranker, reranker_problem
from adapters.rerank.cross_encoder import (
    LocalCrossEncoderReranker,
    cross_encoder_problem,
    load_cross_encoder,
)
from application.ports.reranker import RerankFailed

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)
MAX_POSITIONS = 64

QUERY = "where is the eiffel tower"
PASSAGES = [
    "The Eiffel Tower stands in Paris.",
    "Bananas are rich in potassium.",
    "Towers of Hanoi is a puzzle.",
    "",
]


def copy_tokenizer(folder: Path) -> None:
    source = bundled_minilm_path()
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, folder / name)


def build_cross_encoder(folder: Path, *, num_labels: int = 1) -> Path:
    """A one-layer BERT sequence classifier with random (seeded) weights, saved as
    `save_pretrained` saves one, with a real WordPiece tokenizer beside it."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=MAX_POSITIONS,
    )
    config.num_labels = num_labels
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        # Random weights this small score everything near 0.5; larger ones spread the scores.
        model.classifier.weight.mul_(40)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    copy_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cross_encoder(tmp_path_factory.mktemp("reranker") / "tiny-cross-encoder")


@pytest.fixture(scope="module")
def reranker(model_dir: Path) -> LocalCrossEncoderReranker:
    return LocalCrossEncoderReranker(model_dir, timeout=30, batch_size=8)


async def test_one_finite_score_per_passage_in_the_passages_order(
    reranker: LocalCrossEncoderReranker, model_dir: Path
) -> None:
    scores = await reranker.rerank(QUERY, PASSAGES)
    assert len(scores) == len(PASSAGES)
    assert all(isinstance(score, float) for score in scores)
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert len({round(score, 6) for score in scores}) > 1
    backwards = await reranker.rerank(QUERY, list(reversed(PASSAGES)))
    assert list(reversed(backwards)) == pytest.approx(scores, abs=1e-5)
    alone = [(await reranker.rerank(QUERY, [passage]))[0] for passage in PASSAGES]
    assert alone == pytest.approx(scores, abs=1e-5)
    direct = load_cross_encoder(model_dir).predict(
        [(QUERY, passage) for passage in PASSAGES], show_progress_bar=False
    )
    assert scores == pytest.approx(direct.tolist(), abs=1e-5)


async def test_scores_are_deterministic(reranker: LocalCrossEncoderReranker) -> None:
    first = await reranker.rerank(QUERY, PASSAGES)
    second = await reranker.rerank(QUERY, PASSAGES)
    assert first == second


async def test_more_passages_than_a_batch(reranker: LocalCrossEncoderReranker) -> None:
    passages = [f"passage number {i} about towers" for i in range(21)]
    scores = await reranker.rerank(QUERY, passages)
    assert len(scores) == 21
    assert scores[5] == pytest.approx((await reranker.rerank(QUERY, [passages[5]]))[0], abs=1e-5)


async def test_long_passages_are_truncated_to_the_models_window(
    reranker: LocalCrossEncoderReranker,
) -> None:
    head = "the eiffel tower stands in paris " * 20
    long = head + "and then a great deal more text " * 2000
    scores = await reranker.rerank(QUERY, [long, head + "but differently at the end " * 2000])
    assert len(scores) == 2
    # Both are cut inside their shared beginning, so the model sees the same tokens.
    assert scores[0] == pytest.approx(scores[1], abs=1e-6)


async def test_warm_up_loads_once(reranker: LocalCrossEncoderReranker, model_dir: Path) -> None:
    await reranker.warm_up()
    model = load_cross_encoder(model_dir)
    started = time.monotonic()
    await reranker.warm_up()
    assert time.monotonic() - started < 0.5
    assert load_cross_encoder(model_dir) is model


async def test_no_passages_give_no_scores(reranker: LocalCrossEncoderReranker) -> None:
    assert await reranker.rerank(QUERY, []) == []


async def test_the_time_is_bounded_and_abandoned_work_stops(model_dir: Path) -> None:
    hurried = LocalCrossEncoderReranker(model_dir, timeout=0.05, batch_size=4)
    await hurried.warm_up()
    passages = [f"passage {i} " + "words " * 50 for i in range(4000)]
    started = time.monotonic()
    with pytest.raises(RerankFailed) as failure:
        await hurried.rerank(QUERY, passages)
    assert time.monotonic() - started < 0.05 + 0.5
    assert "did not finish within 0.05 s" in failure.value.message
    # The abandoned call stops at its next batch, so the thread is soon free again.
    patient = LocalCrossEncoderReranker(model_dir, timeout=5, batch_size=4)
    started = time.monotonic()
    assert len(await patient.rerank(QUERY, PASSAGES)) == len(PASSAGES)
    assert time.monotonic() - started < 2


async def test_a_cancelled_rerank_leaves_the_reranker_usable(
    reranker: LocalCrossEncoderReranker,
) -> None:
    passages = [f"passage {i} " + "words " * 50 for i in range(2000)]
    task = asyncio.create_task(reranker.rerank(QUERY, passages))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    started = time.monotonic()
    assert len(await reranker.rerank(QUERY, PASSAGES)) == len(PASSAGES)
    assert time.monotonic() - started < 2


async def test_the_factory_builds_a_local_reranker_for_a_folder(model_dir: Path) -> None:
    built = make_reranker(str(model_dir), api_key=None, name=None, timeout=10, batch_size=16)
    assert isinstance(built, LocalCrossEncoderReranker)
    assert built.name == str(model_dir)
    assert len(await built.rerank(QUERY, PASSAGES)) == len(PASSAGES)
    await built.aclose()


def test_a_missing_path_is_refused_clearly(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ValueError, match="does not exist"):
        LocalCrossEncoderReranker(missing)
    with pytest.raises(ValueError, match="does not exist"):
        make_reranker(str(missing), api_key=None, name=None, timeout=10, batch_size=32)
    assert reranker_problem(str(missing)) == f"{missing} does not exist"


def test_a_folder_without_a_model_is_refused_clearly(tmp_path: Path) -> None:
    copy_tokenizer(tmp_path)
    with pytest.raises(ValueError, match=r"has no config\.json"):
        LocalCrossEncoderReranker(tmp_path)


def test_an_embedding_model_is_not_a_cross_encoder() -> None:
    problem = cross_encoder_problem(bundled_minilm_path())
    assert problem is not None
    assert "SentenceTransformer" in problem
    assert "not a cross-encoder" in problem


def test_a_bare_encoder_and_a_classifier_of_several_labels_are_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    assert "holds BertModel, not a cross-encoder" in (cross_encoder_problem(bare) or "")
    nli = build_cross_encoder(tmp_path / "nli", num_labels=3)
    assert "3 labels" in (cross_encoder_problem(nli) or "")


async def test_unreadable_weights_fail_at_warm_up_with_the_reason(
    tmp_path: Path, model_dir: Path
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    built = LocalCrossEncoderReranker(broken)
    with pytest.raises(RerankFailed, match="could not be loaded") as at_start:
        await built.warm_up()
    assert str(broken) in at_start.value.message
    # A search's caller may see a rerank's message: it names neither folder nor loader.
    with pytest.raises(RerankFailed) as in_search:
        await built.rerank(QUERY, PASSAGES)
    assert in_search.value.message == "The local reranker model could not be loaded"
    # The failure is remembered rather than paid for again.
    started = time.monotonic()
    with pytest.raises(RerankFailed, match=str(broken)):
        await built.warm_up()
    assert time.monotonic() - started < 0.2
