from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """Work to do outside the request: a kind naming the handler and a JSON-able payload.
    Jobs of higher `priority` are taken first, then in the order they were queued; a job with
    a `delay` is taken no sooner than that long after its unit of work commits."""

    kind: str
    payload: dict[str, object] = field(default_factory=dict)
    dedupe_key: str | None = None
    priority: int = 0
    delay: timedelta | None = None


PART_PRIORITY = 1
"""The parts of a file under way go before files not yet started: a file is finished soon
after it starts (its staged vectors do not linger), and the queue's tail is small jobs that
spread evenly over the workers."""


PROCESS_FILE = "file.process"
EMBED_FILE_PART = "file.embed"
REEMBED_KNOWLEDGE_BASE = "kb.reembed"
GENERATE_TITLE = "chat.title"
RUN_SCHEDULED_TASK = "task.run"
PURGE_DELETED_UPLOAD = "upload.purge"


def process_file_job(org_id: str, file_record_id: int) -> Job:
    """The job that processes one file; at most one waits per file."""
    return Job(
        kind=PROCESS_FILE,
        payload={"orgId": org_id, "fileRecordId": file_record_id},
        dedupe_key=f"{PROCESS_FILE}:{file_record_id}",
    )


def embed_file_part_job(org_id: str, file_record_id: int, part_id: int) -> Job:
    """The job that embeds one staged part of a large file's passages."""
    return Job(
        kind=EMBED_FILE_PART,
        payload={"orgId": org_id, "fileRecordId": file_record_id, "partId": part_id},
        dedupe_key=f"{EMBED_FILE_PART}:{file_record_id}:{part_id}",
        priority=PART_PRIORITY,
    )


def generate_title_job(org_id: str, thread_id: str, title_version: int) -> Job:
    """The job that names a new conversation; at most one waits per conversation."""
    return Job(
        kind=GENERATE_TITLE,
        payload={"orgId": org_id, "threadId": thread_id, "titleVersion": title_version},
        dedupe_key=f"{GENERATE_TITLE}:{thread_id}",
    )


def scheduled_run_job(org_id: str, run_id: str) -> Job:
    """The job that carries out one queued run of a scheduled task."""
    return Job(
        kind=RUN_SCHEDULED_TASK,
        payload={"orgId": org_id, "runId": run_id},
        dedupe_key=f"{RUN_SCHEDULED_TASK}:{run_id}",
    )


def purge_deleted_upload_job(org_id: str, file_id: str, delay: timedelta) -> Job:
    """The job that empties a deleted file's folder once its upload address can no longer
    store anything (`delay` from now)."""
    return Job(
        kind=PURGE_DELETED_UPLOAD,
        payload={"orgId": org_id, "fileId": file_id},
        dedupe_key=f"{PURGE_DELETED_UPLOAD}:{file_id}",
        delay=delay,
    )


class JobQueue(Protocol):
    """A durable queue of jobs, written in the caller's transaction.

    A job enqueued by a use case becomes visible to workers only when that use case commits,
    and disappears with it when it rolls back. Two jobs with the same `dedupe_key` are not
    queued at once: the second enqueue is a no-op while the first is waiting.
    """

    async def enqueue(self, job: Job) -> None:
        """Queue `job` inside the current unit of work."""
        ...
