"""A sentence-transformers model's forward pass run by ONNX Runtime instead of torch.

On CPU, torch spends most of a short text's forward pass in its small matrix products: a
search's query embeds about twice as fast under ONNX Runtime, with the same vectors (to 1e-6),
while on batches of passages torch is as fast and keeps less memory. So only serve, which embeds
queries, exports the model (`LocalSentenceTransformerEmbedder.warm_up(queries=True)`, as it
starts), and only few short texts go through it. The transformer is exported from the loaded
torch model (about 2 s, into a temporary file read back and removed; nothing is downloaded);
mean pooling and normalization, the only ones sentence-transformers' bundled models use, are
done here. Any other model shape, or an export that fails, keeps torch (`OnnxEncoder.export`
returns None and says why). The process holds about 300 MB more once it has exported.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17


@dataclass(frozen=True, slots=True)
class OnnxEncoder:
    """Normalized mean-pooled sentence vectors from an ONNX Runtime session."""

    session: Any
    tokenizer: Any
    inputs: tuple[str, ...]
    max_length: int

    @classmethod
    def export(cls, model: Any, threads: int) -> OnnxEncoder | None:
        """The encoder for a loaded `SentenceTransformer` of shape Transformer, mean Pooling
        (then, optionally, Normalize); None when it has another shape or cannot be exported."""
        try:
            return cls._export(model, threads)
        except Exception as error:  # torch, its exporter and onnxruntime raise anything
            log.warning("onnx_export_failed", error=f"{type(error).__name__}: {error}"[:500])
            return None

    @classmethod
    def _export(cls, model: Any, threads: int) -> OnnxEncoder | None:
        modules = [type(module).__name__ for module in model]
        if modules[:2] != ["Transformer", "Pooling"] or modules[2:] not in ([], ["Normalize"]):
            log.info("onnx_export_skipped", modules=modules)
            return None
        if getattr(model[1], "pooling_mode", None) != "mean":
            log.info("onnx_export_skipped", pooling=getattr(model[1], "pooling_mode", None))
            return None
        import onnxruntime
        import torch

        tokenizer = model[0].tokenizer
        inputs = tuple(name for name in INPUTS if name in tokenizer.model_input_names)
        sample = tokenizer(["a sample", "a longer sample text"], padding=True, return_tensors="pt")
        transformer = _LastHiddenState(model[0].auto_model, inputs).eval()
        axes = {name: {0: "batch", 1: "tokens"} for name in (*inputs, "last_hidden_state")}
        with (
            tempfile.TemporaryDirectory(prefix="ap-onnx-") as folder,
            warnings.catch_warnings(),
            torch.no_grad(),
        ):
            # The tracer's warnings (shape-dependent branches it records) are expected here.
            warnings.simplefilter("ignore")
            path = Path(folder) / "model.onnx"
            torch.onnx.export(
                transformer,
                tuple(sample[name] for name in inputs),
                path,
                input_names=list(inputs),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
            exported = path.read_bytes()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Its threads would otherwise spin between runs, taking a core from the database.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(
            exported, options, providers=["CPUExecutionProvider"]
        )
        return cls(session, tokenizer, inputs, int(model.max_seq_length))

    def encode(self, texts: Sequence[str], batch_size: int) -> Any:
        """A (len(texts), dimensions) float32 array of unit vectors."""
        import numpy as np

        parts = []
        for start in range(0, len(texts), batch_size):
            batch = self.tokenizer(
                list(texts[start : start + batch_size]),
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="np",
            )
            feed = {name: batch[name].astype(np.int64) for name in self.inputs}
            (hidden,) = self.session.run(["last_hidden_state"], feed)
            mask = feed["attention_mask"][:, :, None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            parts.append(pooled / np.clip(norms, 1e-12, None))
        return np.concatenate(parts).astype(np.float32)


def _LastHiddenState(transformer: Any, inputs: tuple[str, ...]) -> Any:  # noqa: N802 - a class factory
    """The Hugging Face model as a module of positional `inputs` returning its last hidden
    state (the exporter traces positional arguments)."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *tensors: Any) -> Any:
            return self.transformer(**dict(zip(inputs, tensors, strict=True))).last_hidden_state

    return LastHiddenState()
