"""`serve` bounds what a request's head may hold (issue 12): an 8 MB Authorization header is
refused with 431 by the HTTP protocol before the app runs, a 20 KiB token is 401 unread, and
the process's memory does not grow with what the clients send."""

from __future__ import annotations

import socket

import httpx
import psutil

from tests.e2e.serving import Server


def raw_request(port: int, head: bytes) -> bytes:
    """Send `head` at once and read the whole answer (the server closes after a 431)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_serve_refuses_oversized_heads_and_keeps_its_memory(tmp_path):
    server = Server(tmp_path)
    server.start(timeout=60)
    try:
        assert server.process is not None
        process = psutil.Process(server.process.pid)
        headers = server.headers(org="org_e2e")
        assert httpx.get(f"{server.base}/agents", headers=headers).status_code == 200
        before = process.memory_info().rss

        huge = b"GET /agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"a" * (8 << 20)
        for _ in range(16):
            answer = raw_request(server.port, huge + b"\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
            assert answer.endswith(b'{"error": "Request Header Fields Too Large"}')
        assert process.memory_info().rss - before < 64 << 20

        token = {"Authorization": "Bearer " + "a" * (20 << 10)}
        refused = httpx.get(f"{server.base}/agents", headers=token)
        assert (refused.status_code, refused.json()) == (401, {"error": "Unauthorized"})
        assert httpx.get(f"{server.base}/agents", headers=headers).status_code == 200
    finally:
        server.stop()
