"""Text extraction from stored files: PDF, DOCX, HTML, Markdown, text, CSV, JSON and images."""

from adapters.extraction.extractor import FileTextExtractor

__all__ = ["FileTextExtractor"]
