"""`TextExtractor`s that crash, swell or hang on files whose name says so, and otherwise
extract as the real one does. They run inside the extraction sandbox's child process."""

from __future__ import annotations

import os
import time

from adapters.extraction.extractor import FileTextExtractor
from domain.extraction import ExtractedDocument, ExtractionLimits


class FaultyExtractor:
    """`abort*` files call `os.abort()`, `hog*` files hold 1.5 GB, `hang*` files sleep."""

    def __init__(self) -> None:
        self._real = FileTextExtractor()

    def extract(
        self, data: bytes, *, content_type: str, file_name: str, limits: ExtractionLimits
    ) -> ExtractedDocument:
        if file_name.startswith("abort"):
            os.abort()
        if file_name.startswith("hog"):
            hog = bytearray(1536 * 2**20)
            for index in range(0, len(hog), 4096):
                hog[index] = 1
            time.sleep(30)
        if file_name.startswith("hang"):
            time.sleep(3600)
        return self._real.extract(
            data, content_type=content_type, file_name=file_name, limits=limits
        )
