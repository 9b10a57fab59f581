"""The rerankers' rules that need no server or model: reading a `/rerank` answer, checking the
configured URL or folder, choosing the adapter, the HTTP reranker's dialect and batch-size
choices over a mock transport, and importing without the `local` extra."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.rerank import (
    HttpReranker,
    LocalCrossEncoderReranker,
    is_http_model,
    make_reranker,
    reranker_problem,
)
from adapters.rerank.cross_encoder import cross_encoder_problem
from adapters.rerank.http import parse_scores, public_address, url_problem
from application.ports.reranker import Reranker, RerankFailed


def test_both_answer_shapes_give_scores_in_the_passages_order() -> None:
    cohere = {
        "results": [
            {"index": 2, "relevance_score": 0.9},
            {"index": 0, "relevance_score": 0.5},
            {"index": 1, "relevance_score": 0.1, "document": {"text": "x"}},
        ]
    }
    tei = [{"index": 1, "score": 3}, {"index": 0, "score": -1.5}]
    assert parse_scores(cohere, 3) == [0.5, 0.1, 0.9]
    assert parse_scores(tei, 2) == [-1.5, 3.0]
    assert parse_scores({"results": []}, 0) == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"data": []}, "no list of results"),
        ("nope", "no list of results"),
        ({"results": [{"index": 0, "relevance_score": 1}]}, "1 results for 2 passages"),
        ({"results": [1, 2]}, "not an object"),
        ({"results": [{"index": 0, "score": 1}, {"index": 0, "score": 2}]}, "same index twice"),
        ({"results": [{"index": 0, "score": 1}, {"index": 2, "score": 2}]}, "out of range"),
        ({"results": [{"index": 0, "score": 1}, {"index": -1, "score": 2}]}, "out of range"),
        ({"results": [{"index": 0, "score": 1}, {"index": True, "score": 2}]}, "out of range"),
        ({"results": [{"index": 0, "score": 1}, {"index": "1", "score": 2}]}, "out of range"),
        ({"results": [{"index": 0, "score": 1}, {"index": 1}]}, "not a finite number"),
        ({"results": [{"index": 0, "score": 1}, {"index": 1, "score": None}]}, "finite"),
        ({"results": [{"index": 0, "score": 1}, {"index": 1, "score": True}]}, "finite"),
        ({"results": [{"index": 0, "score": 1}, {"index": 1, "score": "2"}]}, "finite"),
        ({"results": [{"index": 0, "score": 1}, {"index": 1, "score": float("nan")}]}, "finite"),
        ({"results": [{"index": 0, "score": 1}, {"index": 1, "score": float("-inf")}]}, "finite"),
        ({"results": [{"index": 0, "score": 1}, {"index": 1, "score": 10**400}]}, "finite"),
    ],
)
def test_an_answer_without_one_finite_score_per_passage_is_refused(body: Any, words: str) -> None:
    with pytest.raises(RerankFailed, match=words):
        parse_scores(body, 2)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:8080/rerank", None),
        ("https://api.cohere.com/v2/rerank", None),
        ("HTTPS://[::1]:9000/v1/rerank?api-version=1", None),
        ("ftp://host/rerank", "is not an http:// or https:// URL"),
        ("http:///rerank", "is not an http:// or https:// URL"),
        ("http://host:99999/rerank", "is not a valid URL"),
        ("http://host:abc/rerank", "is not a valid URL"),
        ("https://user:secret@host/rerank", "must not carry credentials"),
    ],
)
def test_the_url_must_be_a_plain_http_address(url: str, problem: str | None) -> None:
    found = url_problem(url)
    assert found == problem or (problem is not None and found is not None and problem in found)
    if found is not None:
        assert "secret" not in found


def test_the_public_address_drops_credentials_query_and_fragment() -> None:
    assert public_address("https://u:p@api.example:8443/v1/rerank?key=k#x") == (
        "https://api.example:8443/v1/rerank"
    )


def test_urls_and_folders_are_told_apart() -> None:
    assert is_http_model(" https://api.example/v1/rerank")
    assert is_http_model("HTTP://127.0.0.1/rerank")
    assert not is_http_model("/models/bge-reranker")
    assert not is_http_model("models/http-reranker")


def write_model(folder: Path, config: dict[str, Any] | None, *files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    for name in files:
        (folder / name).write_bytes(b"{}")
    return folder


CLASSIFIER = {"architectures": ["XLMRobertaForSequenceClassification"], "id2label": {"0": "L"}}


@pytest.mark.parametrize(
    ("config", "files", "words"),
    [
        (CLASSIFIER, ("model.safetensors",), None),
        (CLASSIFIER, ("pytorch_model.bin",), None),
        (CLASSIFIER, ("model.safetensors.index.json",), None),
        ({"architectures": ["Qwen3ForCausalLM"]}, ("model.safetensors",), None),
        (CLASSIFIER, (), "has no model weights"),
        (None, ("model.safetensors",), "has no config.json"),
        ({"architectures": ["BertModel"]}, ("model.safetensors",), "holds BertModel, not a"),
        ({}, ("model.safetensors",), "holds a model of no declared architecture"),
        ({"architectures": ["BertForSequenceClassification"]}, ("model.safetensors",), "2 labels"),
        (
            {"architectures": ["BertForSequenceClassification"], "num_labels": 1},
            ("model.safetensors",),
            None,
        ),
    ],
)
def test_a_folder_is_checked_for_a_cross_encoder(
    tmp_path: Path, config: dict[str, Any] | None, files: tuple[str, ...], words: str | None
) -> None:
    folder = write_model(tmp_path / "model", config, *files)
    problem = cross_encoder_problem(folder)
    if words is None:
        assert problem is None
    else:
        assert problem is not None and words in problem


def test_a_sentence_transformers_folder_must_be_a_cross_encoder(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "st", CLASSIFIER, "modules.json", "model.safetensors")
    assert "SentenceTransformer (an embedding model)" in (cross_encoder_problem(folder) or "")
    (folder / "config_sentence_transformers.json").write_text('{"model_type": "SparseEncoder"}')
    assert "SparseEncoder" in (cross_encoder_problem(folder) or "")
    (folder / "config_sentence_transformers.json").write_text('{"model_type": "CrossEncoder"}')
    assert cross_encoder_problem(folder) is None


def test_a_file_and_an_unreadable_config_are_refused(tmp_path: Path) -> None:
    file = tmp_path / "model.bin"
    file.write_bytes(b"")
    assert cross_encoder_problem(file) == f"{file} is not a folder"
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "config.json").write_text("[1, 2")
    assert "is not a JSON object" in (cross_encoder_problem(folder) or "")


def test_the_configuration_is_checked_before_anything_is_built(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "m", CLASSIFIER, "model.safetensors")
    assert reranker_problem(str(folder)) is None
    assert reranker_problem("  ") == "names no URL or folder"
    assert reranker_problem("http://host:abc/rerank") == "the URL is not a valid URL"
    assert "not a local folder" in (reranker_problem(str(folder), api_key="k") or "")
    assert "not a local folder" in (reranker_problem(str(folder), name="m") or "")
    assert reranker_problem("https://api.example/rerank", api_key="k", name="m") is None
    with pytest.raises(ValueError, match="does not exist"):
        make_reranker(str(tmp_path / "nope"), api_key=None, name=None, timeout=5, batch_size=8)
    with pytest.raises(ValueError, match="credentials"):
        make_reranker("http://a:b@h/rerank", api_key=None, name=None, timeout=5, batch_size=8)


async def test_the_factory_picks_the_adapter(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "m", CLASSIFIER, "model.safetensors")
    local: Reranker = make_reranker(
        f"{folder}/", api_key=None, name=None, timeout=5, batch_size=8, torch_threads=2
    )
    assert isinstance(local, LocalCrossEncoderReranker)
    assert local.name == str(folder)
    remote: Reranker = make_reranker(
        "https://api.example/v1/rerank", api_key="k", name="m", timeout=5, batch_size=8
    )
    assert isinstance(remote, HttpReranker)
    assert remote.name == "https://api.example/v1/rerank"
    await remote.aclose()


@pytest.mark.parametrize("options", [{"timeout": 0}, {"batch_size": 0}, {"max_concurrency": 0}])
def test_the_http_reranker_refuses_nonsense_bounds(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        HttpReranker("http://127.0.0.1/rerank", **options)


def mock(
    answer: Callable[[dict[str, Any]], httpx.Response],
) -> tuple[HttpReranker, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        return answer(body)

    client = HttpReranker(
        "http://127.0.0.1/rerank", batch_size=8, transport=httpx.MockTransport(handle)
    )
    return client, sent


async def test_tei_refusing_the_batch_size_is_recognised_and_split() -> None:
    def tei(body: dict[str, Any]) -> httpx.Response:
        if "texts" not in body:
            return httpx.Response(422, text="missing field `texts`")
        if len(body["texts"]) > 2:
            return httpx.Response(
                422, json={"error": "batch size 8 > maximum allowed batch size 2"}
            )
        return httpx.Response(
            200, json=[{"index": i, "score": i} for i in range(len(body["texts"]))]
        )

    client, sent = mock(tei)
    scores = await client.rerank("q", ["a", "b", "c", "d"])
    await client.aclose()
    assert scores == [0.0, 1.0, 0.0, 1.0]
    assert client.batch_size == 2
    assert "texts" not in sent[0]
    assert all("texts" in body for body in sent[1:])


async def test_a_timeout_in_transport_is_a_rerank_failure() -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    client = HttpReranker("http://127.0.0.1/rerank", transport=httpx.MockTransport(hang))
    with pytest.raises(RerankFailed, match="timed out"):
        await client.rerank("q", ["a"])
    await client.aclose()


async def test_a_broken_connection_is_a_rerank_failure() -> None:
    def drop(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("peer closed", request=request)

    client = HttpReranker("http://127.0.0.1/rerank", transport=httpx.MockTransport(drop))
    with pytest.raises(RerankFailed, match=r"connection failed \(RemoteProtocolError\)"):
        await client.rerank("q", ["a"])
    await client.aclose()


async def test_a_single_passage_too_large_is_a_rerank_failure() -> None:
    client, _ = mock(lambda body: httpx.Response(413))
    with pytest.raises(RerankFailed, match="single passage as too large"):
        await client.rerank("q", ["a", "b", "c"])
    await client.aclose()


async def test_non_strings_are_a_programming_error() -> None:
    client, _ = mock(lambda body: httpx.Response(500))
    with pytest.raises(TypeError):
        await client.rerank("q", ["a", 1])  # type: ignore[list-item]
    await client.aclose()


LOCAL_PACKAGES = ("torch", "sentence_transformers", "transformers")

WITHOUT_LOCAL = textwrap.dedent(
    """
    import asyncio, json, pathlib, sys, tempfile

    for name in sys.argv[1:]:
        sys.modules[name] = None

    from adapters.rerank import make_reranker
    from application.ports.reranker import RerankFailed

    async def main():
        folder = pathlib.Path(tempfile.mkdtemp())
        (folder / "config.json").write_text(json.dumps(
            {"architectures": ["BertForSequenceClassification"], "id2label": {"0": "L"}}))
        (folder / "model.safetensors").write_bytes(b"")
        local = make_reranker(str(folder), api_key=None, name=None, timeout=5, batch_size=8)
        try:
            await local.warm_up()
        except RerankFailed as failure:
            print(json.dumps({"message": failure.message}))

    asyncio.run(main())
    """
)


def test_without_the_local_extra_a_local_model_names_the_extra() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_LOCAL, *LOCAL_PACKAGES],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "agent-platform[local]" in json.loads(result.stdout)["message"]


def test_importing_the_rerankers_loads_no_torch() -> None:
    probe = "import sys, adapters.rerank; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"
