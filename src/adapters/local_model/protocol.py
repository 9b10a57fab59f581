"""What the server and its local-model runner say to each other over the runner's pipes.

Each frame is a 4-byte big-endian length and a MessagePack body (msgspec, tagged by `kind`).
The parent sends `Generate` and `Cancel`; the runner answers `Ready` once its model is loaded,
then for each `Generate` some `Delta`s and exactly one `Done` or `Failed`.
"""

from __future__ import annotations

import struct
from typing import Any

import msgspec

HEADER = struct.Struct(">I")
# A frame is a token or a prompt; nothing legitimate comes near this.
MAX_FRAME = 64 * 1024 * 1024


class Turn(msgspec.Struct, frozen=True, array_like=True):
    role: str
    content: str


class Generate(msgspec.Struct, frozen=True, tag="generate", array_like=True):
    id: int
    turns: list[Turn]
    max_tokens: int
    temperature: float | None = None
    json_schema: dict[str, Any] | None = None


class Cancel(msgspec.Struct, frozen=True, tag="cancel", array_like=True):
    id: int


class Ready(msgspec.Struct, frozen=True, tag="ready", array_like=True):
    pid: int
    n_ctx: int
    system_info: str


class Delta(msgspec.Struct, frozen=True, tag="delta", array_like=True):
    id: int
    text: str


class Done(msgspec.Struct, frozen=True, tag="done", array_like=True):
    id: int
    reason: str
    input_tokens: int
    output_tokens: int


class Failed(msgspec.Struct, frozen=True, tag="failed", array_like=True):
    id: int
    message: str


ToRunner = Generate | Cancel
FromRunner = Ready | Delta | Done | Failed

_encoder = msgspec.msgpack.Encoder()
to_runner = msgspec.msgpack.Decoder(ToRunner)
from_runner = msgspec.msgpack.Decoder(FromRunner)


def frame(message: ToRunner | FromRunner) -> bytes:
    body = _encoder.encode(message)
    return HEADER.pack(len(body)) + body
