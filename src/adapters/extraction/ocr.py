"""Reading the text of scanned pages and images by OCR, on this machine, with RapidOCR.

The models (PP-OCRv6 small text detection and recognition, and PP-OCR's mobile text-direction
classifier) ship inside the `rapidocr` wheel and run on ONNX Runtime's CPU provider. RapidOCR
downloads a model only when it is given no path for it (`OrtInferSession`, and `download_models`
which nothing here calls): `RapidOcrReader` gives it the path of each shipped file, so nothing is
fetched at run time; the recognition model carries its own character list, so no dictionary is
fetched either. The reader loads the models on the first page it reads, once per process: the
sandbox's child, reused from file to file, pays for them once.

`OcrRun` is one file's OCR within its bounds (`ExtractionLimits.max_ocr_pages` and
`max_ocr_seconds`): pages past them keep no text, and a picture OCR fails on is read as empty;
neither fails the file.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from PIL import Image

from adapters.extraction.pictures import WIDE_MODES, eight_bit
from domain.extraction import ExtractionLimits

MODEL_FILES = {
    "Det": "PP-OCRv6_det_small.onnx",
    "Cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
    "Rec": "PP-OCRv6_rec_small.onnx",
}
"""The shipped model file of each of RapidOCR's three stages, in `rapidocr/models/`."""
MAX_SIDE = 2000
"""The longest side of a picture OCR reads: RapidOCR scales larger ones down to it anyway
(`Global.max_side_len`), so a larger picture would only cost memory; 2000 pixels is an A4 page
at about 170 dpi."""
# Detection runs on the picture scaled so that its longest side is this (RapidOCR's default
# scales the shortest side up to 736, 2.4 times the work on an A4 page for the same text
# found); recognition still reads each line from the picture at full size.
_DETECTION_SIDE = 1280
_ALPHA_MODES = frozenset({"P", "PA", "LA", "La", "RGBA", "RGBa"})


class OcrReader(Protocol):
    """Reads the text a picture shows, line by line; "" when it shows none."""

    def read(self, picture: Image.Image, *, threads: int) -> str:
        """The text of `picture`, read with at most `threads` CPU threads."""
        ...


def rapidocr_installed() -> bool:
    """Whether RapidOCR, ONNX Runtime and OpenCV are installed, without loading any."""
    return all(importlib.util.find_spec(name) for name in ("rapidocr", "onnxruntime", "cv2"))


def shipped_models() -> dict[str, Path]:
    """The path of each stage's model file inside the installed `rapidocr` package."""
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("rapidocr is not installed")
    folder = Path(spec.origin).parent / "models"
    return {stage: folder / name for stage, name in MODEL_FILES.items()}


def engine_params(threads: int) -> dict[str, Any]:
    """RapidOCR's settings: the shipped models by path, detection bounded, ONNX Runtime on at
    most `threads` threads (the machines have two cores, shared by the worker's jobs)."""
    params: dict[str, Any] = {
        f"{stage}.model_path": str(path) for stage, path in shipped_models().items()
    }
    params.update(
        {
            "Global.log_level": "error",
            "Global.max_side_len": MAX_SIDE,
            "Det.limit_type": "max",
            "Det.limit_side_len": _DETECTION_SIDE,
            # A line at a time: batches of six long lines cost 300 MB more at their peak
            # (padded to the widest), and no less CPU.
            "Rec.rec_batch_num": 1,
            "EngineConfig.onnxruntime.intra_op_num_threads": max(1, threads),
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
    )
    return params


class RapidOcrReader:
    """`OcrReader` on RapidOCR with the models its wheel ships (see the module)."""

    def __init__(self) -> None:
        self._engine: Any = None
        self._threads = 0
        self._lock = threading.Lock()

    def read(self, picture: Image.Image, *, threads: int) -> str:
        """The text of `picture`, its lines top to bottom, each line's words left to right."""
        with self._lock:
            engine = self._load(threads)
            result = engine(_pixels(picture))
        boxes, texts = getattr(result, "boxes", None), getattr(result, "txts", None)
        if boxes is None or not texts:
            return ""
        return join_lines(boxes.tolist(), list(texts))

    def _load(self, threads: int) -> Any:
        if self._engine is None or threads != self._threads:
            import cv2
            from rapidocr import RapidOCR

            # OpenCV's own thread pool would otherwise take every core for each resize.
            cv2.setNumThreads(max(1, threads))
            self._engine = RapidOCR(params=engine_params(threads))
            self._threads = threads
        return self._engine


def _pixels(picture: Image.Image) -> Any:
    """`picture` as the array RapidOCR reads: 8-bit grey, or colour in BGR order."""
    import numpy as np

    if picture.mode == "L":
        return np.asarray(picture)
    return np.ascontiguousarray(np.asarray(picture.convert("RGB"))[:, :, ::-1])


def ocr_picture(picture: Image.Image) -> Image.Image:
    """`picture` ready to be read (itself when it already is; the caller's is never changed):
    8-bit grey or RGB, transparency laid on white (paper, not black), and scaled down to at
    most `MAX_SIDE` pixels a side."""
    if picture.mode in WIDE_MODES:
        picture = eight_bit(picture)
    elif picture.mode == "1":
        picture = picture.convert("L")
    elif picture.mode in _ALPHA_MODES or "transparency" in picture.info:
        converted = picture.convert("RGBA")
        background = Image.new("RGBA", converted.size, "white")
        picture = Image.alpha_composite(background, converted).convert("RGB")
    elif picture.mode not in ("L", "RGB"):
        picture = picture.convert("RGB")
    width, height = picture.size
    if max(width, height) > MAX_SIDE:
        scale = MAX_SIDE / max(width, height)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        picture = picture.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)
    return picture


def join_lines(boxes: Sequence[Sequence[Sequence[float]]], texts: Sequence[str]) -> str:
    """The texts of the boxes found on a page as lines: boxes whose middles lie at one height
    make one line, read left to right; lines go top to bottom."""
    found = sorted(
        (
            (min(y for _, y in box), max(y for _, y in box), min(x for x, _ in box), text.strip())
            for box, text in zip(boxes, texts, strict=False)
            if text.strip()
        ),
        key=lambda item: (item[0], item[2]),
    )
    lines: list[tuple[float, float, list[tuple[float, str]]]] = []
    for top, bottom, left, text in found:
        middle = (top + bottom) / 2
        if lines and lines[-1][0] <= middle <= lines[-1][1]:
            lines[-1][2].append((left, text))
        else:
            lines.append((top, bottom, [(left, text)]))
    return "\n".join(" ".join(text for _, text in sorted(words)) for _, _, words in lines)


class OcrRun:
    """One file's OCR: reads pages while `max_ocr_pages` and `max_ocr_seconds` allow, and
    counts those it read (`pages`)."""

    def __init__(
        self,
        reader: OcrReader | None,
        limits: ExtractionLimits,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._limits = limits
        self._clock = clock
        self._deadline = clock() + limits.max_ocr_seconds
        self.pages = 0

    @property
    def wanted(self) -> bool:
        """Whether another page may still be read (checked before rendering one to read)."""
        return (
            self._reader is not None
            and self.pages < self._limits.max_ocr_pages
            and self._clock() < self._deadline
        )

    def read(self, picture: Image.Image) -> str | None:
        """The text of `picture` ("" when it shows none); None when it was not read: past the
        bounds, or OCR failed on it (the page keeps no text, the file goes on)."""
        if not self.wanted:
            return None
        assert self._reader is not None
        try:
            text = self._reader.read(ocr_picture(picture), threads=self._limits.ocr_threads)
        except MemoryError:
            raise
        except Exception as error:
            # A picture the models cannot take is a page without text, not a failed file.
            print(f"OCR could not read a page: {type(error).__name__}", file=sys.stderr)
            return None
        self.pages += 1
        return text
