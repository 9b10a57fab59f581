from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

import pytest
from polyfactory.factories import DataclassFactory

from domain.errors import Invalid
from domain.files import (
    FILE_VIEW_FIELDS,
    KnowledgeBaseFile,
    ProcessingStatus,
    is_safe_key,
    safe_file_name,
    storage_keys,
    view_values,
)
from domain.ids import parse_positive_id, parse_uuid
from domain.knowledge_bases import KnowledgeBase, KnowledgeBaseStatus, KnowledgeBaseSummary


class KnowledgeBaseFactory(DataclassFactory[KnowledgeBase]):
    pending_embedding_model = None
    reindex_error = None


def test_a_files_view_values_are_its_view_fields_in_order_with_the_status_as_text():
    # A distinct value per field, so that two fields swapped would show.
    values = {name: f"v{i}" for i, name in enumerate(f.name for f in fields(KnowledgeBaseFile))}
    values["processing_status"] = ProcessingStatus.CHUNK_FAILED
    file = KnowledgeBaseFile(**values)
    viewed = view_values(file)
    assert tuple(name for name in values if name != "org_id") == FILE_VIEW_FIELDS
    assert viewed == tuple(
        "chunk_failed" if name == "processing_status" else values[name] for name in FILE_VIEW_FIELDS
    )
    assert type(viewed[FILE_VIEW_FIELDS.index("processing_status")]) is str


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("report.pdf", "report.pdf"),
        ("Q3 résumé (final).pdf", "Q3_resume_final_.pdf"),
        ("../../etc/passwd", "etc_passwd"),
        ("content.md", "original_content.md"),
        ("...", "file"),
        ("日本語.txt", "txt"),
    ],
)
def test_safe_file_name(name, safe):
    assert safe_file_name(name) == safe


def test_storage_keys_cannot_collide_with_the_content_key():
    file_key, content_key = storage_keys("org_a", "f1", "content.md")
    assert file_key != content_key


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("orgs/a/files/b/c.pdf", True),
        ("/orgs/a", False),
        ("orgs/../x", False),
        ("orgs//x", False),
        ("orgs\\x", False),
        ("orgs/a/\n", False),
        ("", False),
    ],
)
def test_is_safe_key(key, ok):
    assert is_safe_key(key) is ok


def test_parse_ids():
    assert parse_positive_id("42", "bad") == 42
    assert parse_positive_id(str(2**63 - 1), "bad") == 2**63 - 1
    assert parse_uuid("5B0D0C8E-3F43-4A52-9D2B-0D8F6F1F9A11", "bad") == (
        "5b0d0c8e-3f43-4a52-9d2b-0d8f6f1f9a11"
    )
    for value in ("٣", "4.0", 2**63, str(2**63), None, " 42 ", "+42", "4_2", "9" * 5000):
        with pytest.raises(Invalid, match=r"^bad$"):
            parse_positive_id(value, "bad")


def test_summary_status_precedence():
    def summary(kb, in_progress=0):
        return KnowledgeBaseSummary.of(
            kb,
            file_count=3,
            total_size=1,
            last_file_uploaded_at=datetime.now(UTC),
            files_in_progress=in_progress,
        )

    kb = KnowledgeBaseFactory.build()
    assert summary(kb).status is KnowledgeBaseStatus.READY
    assert summary(kb, 1).status is KnowledgeBaseStatus.PROCESSING
    failed = KnowledgeBaseFactory.build(reindex_error="boom")
    assert summary(failed).status is KnowledgeBaseStatus.ERROR
    pending = KnowledgeBaseFactory.build(pending_embedding_model="openai:x", reindex_error="old")
    assert summary(pending, 1).status is KnowledgeBaseStatus.REINDEXING
