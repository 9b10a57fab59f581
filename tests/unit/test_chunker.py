from __future__ import annotations

from adapters.chunking.llama_index_chunker import LlamaIndexChunker
from domain.extraction import ExtractedDocument, ExtractedPage


def page_text(n: int) -> str:
    return f"Page {n}. " + " ".join(
        f"On page {n}, paragraph {i} discusses item {i * 7 % 13} of the report." for i in range(60)
    )


def test_chunks_keep_their_page_and_span_and_never_straddle_pages():
    pages = [ExtractedPage(number=n, text=page_text(n)) for n in (1, 2, 3)]
    markdown = "\n\n".join(f"<!-- page {p.number} -->\n\n{p.text}" for p in pages)
    chunks = LlamaIndexChunker().split(
        ExtractedDocument(markdown=markdown, pages=pages), size=128, overlap=16
    )
    assert len(chunks) > 6
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert {c.page_number for c in chunks} == {1, 2, 3}
    assert [c.page_number for c in chunks] == sorted(c.page_number for c in chunks)
    for chunk in chunks:
        assert "<!--" not in chunk.text
        assert markdown[chunk.start_char : chunk.end_char].strip() == chunk.text
        assert f"On page {chunk.page_number}," in chunk.text
    first_of_page_two = next(c for c in chunks if c.page_number == 2)
    assert first_of_page_two.text.startswith("Page 2.")


def test_markdown_sections_start_new_chunks_when_they_do_not_fit_together():
    markdown = "# Holidays\n\nEveryone gets 30 days.\n\n# Expenses\n\nKeep every receipt.\n"
    chunks = LlamaIndexChunker().split(ExtractedDocument(markdown=markdown), size=12, overlap=0)
    assert [c.text for c in chunks] == [
        "# Holidays\n\nEveryone gets 30 days.",
        "# Expenses\n\nKeep every receipt.",
    ]
    assert all(c.page_number is None for c in chunks)
    for chunk in chunks:
        assert markdown[chunk.start_char : chunk.end_char].strip() == chunk.text


def test_small_adjacent_sections_share_a_chunk_whole():
    markdown = (
        "# Handbook\n\n## Holidays\n\nEveryone gets 30 days.\n\n"
        "## Expenses\n\nKeep every receipt.\n\n## Travel\n\nBook trips early.\n"
    )
    chunks = LlamaIndexChunker().split(ExtractedDocument(markdown=markdown), size=256, overlap=0)
    assert [c.text for c in chunks] == [markdown.strip()]
    assert (chunks[0].start_char, chunks[0].end_char) == (0, len(markdown.strip()))


def test_a_section_never_shares_a_chunk_with_part_of_a_large_one():
    large = " ".join(f"Rule {i} says receipts older than {i} days are void." for i in range(60))
    markdown = (
        "## Short\n\nOne line.\n\n"
        f"## Long\n\n{large}\n\n"
        "## After\n\nAnother line.\n\n## Last\n\nThe end.\n"
    )
    chunks = LlamaIndexChunker().split(ExtractedDocument(markdown=markdown), size=64, overlap=8)
    texts = [c.text for c in chunks]
    assert texts[0] == "## Short\n\nOne line."
    assert texts[1].startswith("## Long") and all("Rule" in t for t in texts[1:-1])
    assert texts[-1] == "## After\n\nAnother line.\n\n## Last\n\nThe end."
    for chunk in chunks:
        assert markdown[chunk.start_char : chunk.end_char].strip() == chunk.text


def test_overlap_repeats_text_between_neighbours():
    markdown = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(200))
    chunks = LlamaIndexChunker().split(ExtractedDocument(markdown=markdown), size=64, overlap=24)
    assert len(chunks) > 3
    assert any(chunks[i].text[-20:] in chunks[i + 1].text for i in range(len(chunks) - 1))


def test_a_document_without_text_has_no_chunks():
    empty = ExtractedDocument(
        markdown="<!-- page 1 -->\n\n", pages=[ExtractedPage(number=1, text="")]
    )
    assert LlamaIndexChunker().split(empty, size=128, overlap=0) == []


def test_a_title_alone_joins_the_section_below_it():
    markdown = "# Travel policy\n\n## Requests\n\nBook trips two weeks ahead.\n"
    chunks = LlamaIndexChunker().split(ExtractedDocument(markdown=markdown), size=256, overlap=0)
    assert [c.text for c in chunks] == [
        "# Travel policy\n\n## Requests\n\nBook trips two weeks ahead."
    ]
    assert chunks[0].start_char == 0
