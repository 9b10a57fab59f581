from __future__ import annotations

from typing import Protocol

from domain.inbound_email import ParsedEmail


class EmailParser(Protocol):
    """Reads a raw RFC 822 message as the service uses it.

    Never trusts a label: header texts come decoded (encoded words, 8-bit bytes, unknown or
    wrong charsets fall back rather than fail), display names with commas or encoded words keep
    their address, and the body comes as text (the plain part preferred, else the HTML part as
    text). Attachments are the parts `iter_attachments` yields, those of nested multiparts and
    attached messages included; parts inline in a `multipart/related` body are not.
    """

    async def parse(self, raw: bytes) -> ParsedEmail:
        """The message; `Invalid(MALFORMED_MESSAGE)` when the bytes are not one (no header
        fields before the body, or nothing the email package can read)."""
        ...
