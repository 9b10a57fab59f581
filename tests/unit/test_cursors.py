import base64
import json

import pytest

from domain.cursors import decode_cursor, encode_cursor
from domain.errors import Invalid


@pytest.mark.parametrize(
    "parts",
    [
        ["2026-11-24T04:35:19.123456+00:00", 5500],
        ["a", 1],
        ['quote " back \\ slash', -3, 0],
        ["ünïcödé ✓ \n tab\t", 2**70],
        [True, False, None, 1.5, {"k": [1, "v"]}],
        [],
    ],
)
def test_a_cursor_is_the_compact_json_of_its_parts_in_base64url(parts):
    cursor = encode_cursor(parts)
    raw = json.dumps(parts, separators=(",", ":")).encode()
    assert cursor == base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert "=" not in cursor
    assert decode_cursor(cursor) == parts


@pytest.mark.parametrize("bad", [None, 7, "", "not base64 !", "x" * 201, "eyJhIjoxfQ"])
def test_anything_but_a_list_the_service_encoded_is_refused(bad):
    with pytest.raises(Invalid):
        decode_cursor(bad)
