"""Decrypting the streams of a PDF encrypted by the standard security handler, as PDFium does
when the document opens without a password (its user password is empty).

Used only to measure what PDFium inflates while it opens a file (see `pdf_opening`); revisions
2 to 6 are covered: RC4 40 to 128-bit, AES-128 and AES-256.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from cryptography.hazmat.decrepit.ciphers.algorithms import ARC4
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from adapters.extraction.pdf_objects import Name, PdfValue

_PADDING = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")
_AES_BLOCK = 16


class StreamDecryptor:
    """Decrypts stream data with the file key; `None` from `for_document` when not possible."""

    def __init__(self, key: bytes, cipher: str) -> None:
        self._key = key
        self._cipher = cipher  # "rc4", "aes", "aes256" or "none"

    @classmethod
    def for_document(cls, encrypt: dict[Name, PdfValue], first_id: bytes) -> StreamDecryptor | None:
        """The decryptor for a document's /Encrypt dictionary, if its user password is empty
        (PDFium opens no other without being given a password)."""
        if encrypt.get(Name(b"Filter")) != b"Standard":
            return None
        version = _integer(encrypt.get(Name(b"V")), 0)
        revision = _integer(encrypt.get(Name(b"R")), 0)
        cipher = _stream_cipher(encrypt, version)
        if cipher is None:
            return None
        owner = _string(encrypt.get(Name(b"O")))
        user = _string(encrypt.get(Name(b"U")))
        if revision >= 5:
            key = _aes256_key(encrypt, user, revision)
        else:
            key = _rc4_era_key(encrypt, owner, user, revision, first_id)
        return None if key is None else cls(key, cipher)

    def decrypt(self, number: int, generation: int, data: bytes) -> bytes:
        """The stream data of object `number` decrypted (unchanged when not encrypted)."""
        if self._cipher == "none":
            return data
        if self._cipher == "aes256":
            return _aes_decrypt(self._key, data)
        salt = b"sAlT" if self._cipher == "aes" else b""
        seed = self._key + number.to_bytes(4, "little")[:3] + generation.to_bytes(4, "little")[:2]
        key = hashlib.md5(seed + salt, usedforsecurity=False).digest()[
            : min(len(self._key) + 5, 16)
        ]
        if self._cipher == "aes":
            return _aes_decrypt(key, data)
        return _rc4(key, data)


def _stream_cipher(encrypt: dict[Name, PdfValue], version: int) -> str | None:
    if version in (1, 2):
        return "rc4"
    if version not in (4, 5):
        return None
    filter_name = encrypt.get(Name(b"StmF"), Name(b"Identity"))
    if not isinstance(filter_name, bytes) or filter_name == b"Identity":
        return "none"
    filters = encrypt.get(Name(b"CF"))
    crypt_filter = filters.get(Name(filter_name)) if isinstance(filters, dict) else None
    method = crypt_filter.get(Name(b"CFM")) if isinstance(crypt_filter, dict) else None
    methods = {b"V2": "rc4", b"AESV2": "aes", b"AESV3": "aes256", b"None": "none"}
    return methods.get(bytes(method)) if isinstance(method, bytes) else None


def _rc4_era_key(
    encrypt: dict[Name, PdfValue], owner: bytes, user: bytes, revision: int, first_id: bytes
) -> bytes | None:
    length = _integer(encrypt.get(Name(b"Length")), 40) // 8 if revision >= 3 else 5
    length = max(5, min(length, 16))
    permissions = _integer(encrypt.get(Name(b"P")), 0) & 0xFFFFFFFF
    encrypt_metadata = encrypt.get(Name(b"EncryptMetadata")) is not False

    def file_key(padded_password: bytes) -> bytes:
        digest = hashlib.md5(usedforsecurity=False)
        for part in (padded_password, owner[:32], permissions.to_bytes(4, "little"), first_id):
            digest.update(part)
        if revision >= 4 and not encrypt_metadata:
            digest.update(b"\xff\xff\xff\xff")
        key = digest.digest()
        if revision >= 3:
            for _ in range(50):
                key = hashlib.md5(key[:length], usedforsecurity=False).digest()
        return key[:length]

    def opens_as_user(key: bytes) -> bool:
        if revision == 2:
            return _rc4(key, _PADDING) == user[:32]
        check = hashlib.md5(_PADDING + first_id, usedforsecurity=False).digest()
        for step in range(20):
            check = _rc4(bytes(byte ^ step for byte in key), check)
        return check == user[:16]

    key = file_key(_PADDING)
    return key if opens_as_user(key) else None


def _aes256_key(encrypt: dict[Name, PdfValue], user: bytes, revision: int) -> bytes | None:
    hash_function: Callable[[bytes, bytes], bytes] = (
        _hash_r6 if revision >= 6 else (lambda salt, extra: hashlib.sha256(salt + extra).digest())
    )
    user_encrypted = _string(encrypt.get(Name(b"UE")))
    if len(user) >= 48 and hash_function(user[32:40], b"") == user[:32]:
        return _aes_raw_decrypt(hash_function(user[40:48], b""), user_encrypted[:32])
    return None


def _hash_r6(salt: bytes, extra: bytes) -> bytes:
    """ISO 32000-2 algorithm 2.B for the empty password."""
    key = hashlib.sha256(salt + extra).digest()
    round_number = 0
    while True:
        block = (key + extra) * 64
        encryptor = Cipher(algorithms.AES(key[:16]), modes.CBC(key[16:32])).encryptor()
        encrypted = encryptor.update(block) + encryptor.finalize()
        choice = int.from_bytes(encrypted[:16], "big") % 3
        key = (hashlib.sha256, hashlib.sha384, hashlib.sha512)[choice](encrypted).digest()
        round_number += 1
        if round_number >= 64 and encrypted[-1] <= round_number - 32:
            return key[:32]


def _aes_raw_decrypt(key: bytes, data: bytes) -> bytes | None:
    if len(data) != 32:
        return None
    decryptor = Cipher(algorithms.AES(key), modes.CBC(bytes(_AES_BLOCK))).decryptor()
    return decryptor.update(data) + decryptor.finalize()


def _aes_decrypt(key: bytes, data: bytes) -> bytes:
    if len(data) < 2 * _AES_BLOCK:
        return b""
    body = data[_AES_BLOCK : len(data) - (len(data) % _AES_BLOCK)]
    decryptor = Cipher(algorithms.AES(key), modes.CBC(data[:_AES_BLOCK])).decryptor()
    plain = decryptor.update(body) + decryptor.finalize()
    padding = plain[-1] if plain else 0
    return plain[:-padding] if 0 < padding <= _AES_BLOCK else plain


def _rc4(key: bytes, data: bytes) -> bytes:
    decryptor = Cipher(ARC4(key), mode=None).decryptor()
    return decryptor.update(data) + decryptor.finalize()


def _integer(value: PdfValue, default: int) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _string(value: PdfValue) -> bytes:
    return bytes(value) if isinstance(value, bytes) and not isinstance(value, Name) else b""
