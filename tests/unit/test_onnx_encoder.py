"""`OnnxEncoder.export` keeps torch (None) for a model of another shape or an export that
fails, never raising."""

from __future__ import annotations

from adapters.embeddings.onnx_encoder import OnnxEncoder


class Transformer:
    tokenizer = None  # no tokenizer: the export fails as it starts


class Pooling:
    def __init__(self, mode: str) -> None:
        self.pooling_mode = mode


def test_another_shape_is_skipped():
    assert OnnxEncoder.export([Transformer(), Pooling("cls")], 1) is None
    assert OnnxEncoder.export([Pooling("mean")], 1) is None


def test_a_failing_export_keeps_torch():
    assert OnnxEncoder.export([Transformer(), Pooling("mean")], 1) is None
