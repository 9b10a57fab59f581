"""What the console's file server answers for a path (`entrypoints.http.console.ConsoleSite`),
without an app: only files inside its folder, client-side routes, revalidation and rebuilds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from entrypoints.config import Settings
from entrypoints.http.console import (
    PACKAGED,
    SOURCE,
    ConsoleSite,
    accepts_gzip,
    console_config,
    content_security_policy,
    default_folder,
)

INDEX = "<!doctype html><title>console</title>"


@pytest.fixture
def site(tmp_path) -> ConsoleSite:
    folder = tmp_path / "dist"
    (folder / "assets").mkdir(parents=True)
    (folder / "index.html").write_text(INDEX)
    (folder / "assets" / "app-1a2b3c.js").write_text("let x = 1;\n" * 100)
    (tmp_path / "secret.txt").write_text("secret")
    return ConsoleSite(folder=folder, csp="default-src 'self'", config=b"{}")


def get(site: ConsoleSite, path: bytes, **headers: str):
    return site.answer("GET", path, b"", [(k.encode(), v.encode()) for k, v in headers.items()])


@pytest.mark.parametrize(
    "path",
    [
        b"/console/../secret.txt",
        b"/console/assets/../../secret.txt",
        b"/console/%2e%2e/secret.txt",
        b"/console/%2E%2E%2Fsecret.txt",
        b"/console/..%5csecret.txt",
        b"/console/a%00b",
        b"/console/%ff%fe",
        b"/console/%C0%AE%C0%AE/secret.txt",
        b"/console//secret.txt",
        b"/console/.env",
        b"/console/.git/config",
        b"/consolesecret.txt",
    ],
)
def test_nothing_outside_the_folder(site, path):
    reply = get(site, path)
    assert reply.status == 404, path
    assert b"secret" not in reply.body


def test_a_symbolic_link_out_of_the_folder_is_not_followed(site, tmp_path):
    (site.folder / "out.txt").symlink_to(tmp_path / "secret.txt")
    (site.folder / "inside.js").symlink_to(site.folder / "assets" / "app-1a2b3c.js")
    assert get(site, b"/console/out.txt").status == 404
    assert get(site, b"/console/inside.js").status == 200


def test_routes_and_files(site):
    assert get(site, b"/console/").body == INDEX.encode()
    assert get(site, b"/console/chat/3f8e9a4c-1d2b-4c3d-8e9f-0a1b2c3d4e5f").body == INDEX.encode()
    assert get(site, b"/console/knowledge/3").body == INDEX.encode()
    assert get(site, b"/console/index.html").headers["Cache-Control"] == "no-cache"
    asset = get(site, b"/console/assets/app-1a2b3c.js")
    assert asset.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert get(site, b"/console/assets/app-000000.js").status == 404
    assert get(site, b"/console/assets").status == 404
    assert get(site, b"/console/robots.txt").status == 404
    redirect = site.answer("GET", b"/console", b"a=1", [])
    assert (redirect.status, redirect.headers["Location"]) == (308, "/console/?a=1")


def test_revalidation_and_compression(site):
    plain = get(site, b"/console/assets/app-1a2b3c.js", **{"accept-encoding": "identity"})
    packed = get(site, b"/console/assets/app-1a2b3c.js", **{"accept-encoding": "gzip, br"})
    assert "Content-Encoding" not in plain.headers
    assert packed.headers["Content-Encoding"] == "gzip" and len(packed.body) < len(plain.body)
    assert plain.headers["ETag"] != packed.headers["ETag"]
    again = get(
        site,
        b"/console/assets/app-1a2b3c.js",
        **{"accept-encoding": "gzip", "if-none-match": packed.headers["ETag"]},
    )
    assert again.status == 304 and again.body == b""
    assert get(site, b"/console/", **{"accept-encoding": "gzip"}).headers.get("Vary") is None


def test_a_rebuild_is_seen_at_the_next_request(site):
    first = get(site, b"/console/")
    (site.folder / "index.html").write_text(INDEX + "<!-- rebuilt -->")
    os.utime(site.folder / "index.html", ns=(1, 1))  # even within the same clock tick
    second = get(site, b"/console/")
    assert second.body.endswith(b"<!-- rebuilt -->")
    assert first.headers["ETag"] != second.headers["ETag"]


def test_not_built(tmp_path):
    site = ConsoleSite(folder=tmp_path / "missing", csp="x", config=b"{}")
    assert not site.built
    reply = get(site, b"/console/chat/1")
    assert reply.status == 503 and b"make console" in reply.body
    assert get(site, b"/console/config.json").status == 200


@pytest.mark.parametrize(
    ("header", "gzip"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("br;q=1.0, gzip;q=0.8", True),
        ("*", True),
        ("identity", False),
        ("", False),
        ("gzip;q=0", False),
        ("gzip;q=0, *", False),
        ("*;q=0", False),
        ("gzip;q=nonsense", False),
    ],
)
def test_accept_encoding(header, gzip):
    assert accepts_gzip(header) is gzip


def test_the_folder_defaults_to_the_packaged_build_else_the_repository():
    assert Path(__file__).resolve().parents[2] / "console" / "dist" == SOURCE
    assert default_folder() == (PACKAGED if PACKAGED.is_dir() else SOURCE)


def test_policy_and_config_follow_the_identity_provider():
    development = Settings(auth_issuer="agent-platform-dev")
    assert "agent-platform-dev" not in content_security_policy(development)
    assert console_config(development)["identityProvider"] == "development"
    oidc = Settings(
        auth_jwks_url="https://login.example/jwks",
        auth_issuer="https://login.example/realms/acme",
        console_oidc_client_id="console",
    )
    policy = content_security_policy(oidc)
    assert "connect-src 'self' https://login.example;" in policy
    assert "form-action 'self' https://login.example;" in policy
    assert "unsafe" not in policy
    assert console_config(oidc)["oidc"]["authority"] == "https://login.example/realms/acme"


@pytest.mark.parametrize(
    ("changes", "origin"),
    [
        ({"s3_endpoint_url": "http://minio:9000", "s3_path_style": True}, "http://minio:9000"),
        ({"s3_region": "eu-west-1", "s3_path_style": True}, "https://s3.eu-west-1.amazonaws.com"),
        ({"s3_region": "eu-west-1"}, "https://uploads-bucket.s3.amazonaws.com"),
    ],
)
def test_policy_names_where_uploads_go_on_s3(changes, origin):
    settings = Settings(storage="s3", s3_bucket="uploads-bucket", **changes)
    assert f"connect-src 'self' {origin};" in content_security_policy(settings)
