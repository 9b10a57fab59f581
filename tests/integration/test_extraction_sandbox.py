"""The extraction sandbox: files are extracted in a child process, and a file that crashes,
swells or hangs there costs that child and that file only."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from adapters.extraction.sandbox import SandboxedTextExtractor
from application.ports.text_extractor import ExtractorCrashed
from domain.extraction import ExtractionFailed, ExtractionLimits

FAULTY = "tests.fakes.extractors:FaultyExtractor"
TEXT = b"# Holidays\n\nEveryone gets 30 days.\n"


def extract(sandbox: SandboxedTextExtractor, name: str, data: bytes = TEXT):
    return sandbox.extract(
        data, content_type="text/markdown", file_name=name, limits=ExtractionLimits()
    )


@pytest.fixture
def sandbox():
    sandbox = SandboxedTextExtractor(memory_limit=512 * 2**20, timeout=5, target=FAULTY)
    yield sandbox
    sandbox.close()


def test_a_file_is_extracted_in_a_child_that_is_reused(sandbox):
    first = extract(sandbox, "a.md")
    (child,) = sandbox._idle
    second = extract(sandbox, "b.md")

    assert "30 days" in first.markdown
    assert second.markdown == first.markdown
    assert sandbox._idle == [child]
    assert child.process.pid != 0


def test_a_crash_costs_that_file_and_the_next_file_gets_a_new_child(sandbox):
    extract(sandbox, "warm.md")
    (child,) = sandbox._idle

    with pytest.raises(ExtractorCrashed, match="SIGABRT"):
        extract(sandbox, "abort.md")

    assert child.process.returncode is not None
    assert "30 days" in extract(sandbox, "after.md").markdown
    assert sandbox._idle[0] is not child


def test_a_file_that_needs_more_memory_than_allowed_fails_for_good(sandbox):
    started = time.monotonic()
    with pytest.raises(ExtractionFailed, match="needs more memory than allowed"):
        extract(sandbox, "hog.md")

    assert time.monotonic() - started < 20
    assert "30 days" in extract(sandbox, "after.md").markdown


def test_a_file_that_hangs_is_stopped_at_the_timeout(sandbox):
    started = time.monotonic()
    with pytest.raises(ExtractionFailed, match="longer than 5 seconds"):
        extract(sandbox, "hang.md")

    assert 4.5 < time.monotonic() - started < 15
    assert "30 days" in extract(sandbox, "after.md").markdown


def test_a_file_the_extractor_refuses_fails_with_its_message(sandbox):
    with pytest.raises(ExtractionFailed):
        sandbox.extract(
            b"", content_type="text/markdown", file_name="e.md", limits=ExtractionLimits()
        )
    assert sandbox._idle


def test_a_child_is_replaced_after_its_quota_of_files():
    sandbox = SandboxedTextExtractor(memory_limit=512 * 2**20, max_files=2, target=FAULTY)
    try:
        extract(sandbox, "1.md")
        (first,) = sandbox._idle
        extract(sandbox, "2.md")
        assert sandbox._idle == []
        assert first.process.returncode is not None
        extract(sandbox, "3.md")
        assert sandbox._idle and sandbox._idle[0] is not first
    finally:
        sandbox.close()


def test_a_child_at_work_dies_with_the_worker_that_started_it(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(
        "import threading, time\n"
        "from adapters.extraction.sandbox import SandboxedTextExtractor\n"
        "from domain.extraction import ExtractionLimits\n"
        f"sandbox = SandboxedTextExtractor(memory_limit=2**29, target={FAULTY!r})\n"
        "threading.Thread(target=sandbox.extract, args=(b'x',), kwargs=dict(\n"
        "    content_type='text/markdown', file_name='hang.md', limits=ExtractionLimits()),\n"
        "    daemon=True).start()\n"
        "time.sleep(120)\n"
    )
    worker = subprocess.Popen(
        [sys.executable, str(script)], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    )
    try:
        deadline = time.monotonic() + 30
        while not (children := psutil.Process(worker.pid).children()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        (child,) = children
        time.sleep(1)  # the child is past its start, in the hanging parser
        worker.kill()
        worker.wait(10)
        child.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert not child.is_running()
