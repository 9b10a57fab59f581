"""`FernetSecretBox` (rotation, tampering, the key's forms), the development key file, and the
tool servers' settings."""

from __future__ import annotations

import base64
import os
import stat

import pytest
from cryptography.fernet import Fernet

from adapters.secrets.fernet_box import KEY_PROBLEM, FernetSecretBox, load_or_create_key
from entrypoints.config import ConfigError, Settings
from entrypoints.tools_config import ToolSettings

OLD = Fernet.generate_key().decode()
NEW = Fernet.generate_key().decode()


def test_seal_and_open():
    box = FernetSecretBox(NEW)
    token = box.seal(b'{"Authorization": "Bearer x"}')
    assert b"Bearer" not in token
    assert box.open(token) == b'{"Authorization": "Bearer x"}'
    assert box.seal(b"same") != box.seal(b"same")


def test_a_value_sealed_with_the_old_key_opens_after_rotation():
    token = FernetSecretBox(OLD).seal(b"secret")
    rotated = FernetSecretBox(f"{NEW}, {OLD}")
    assert rotated.open(token) == b"secret"
    resealed = rotated.reseal(token)
    assert FernetSecretBox(NEW).open(resealed) == b"secret"
    with pytest.raises(ValueError):
        FernetSecretBox(NEW).open(token)


def test_a_tampered_token_is_refused():
    box = FernetSecretBox(NEW)
    token = bytearray(base64.urlsafe_b64decode(box.seal(b"secret")))
    token[-40] ^= 1
    with pytest.raises(ValueError):
        box.open(base64.urlsafe_b64encode(bytes(token)))
    with pytest.raises(ValueError):
        box.open(b"not a token")


def test_standard_and_url_safe_base64_are_the_same_key():
    raw = os.urandom(32)
    standard = base64.b64encode(raw).decode()
    url_safe = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert FernetSecretBox(url_safe).open(FernetSecretBox(standard).seal(b"x")) == b"x"
    assert "keys hidden" in repr(FernetSecretBox(standard))


@pytest.mark.parametrize("key", ["", "short", base64.b64encode(b"x" * 16).decode(), "!!!!"])
def test_a_key_that_is_not_32_bytes_of_base64_is_refused(key):
    with pytest.raises(ValueError, match="32 random bytes"):
        FernetSecretBox(key)


def test_the_development_key_is_kept_owner_only(tmp_path):
    path = tmp_path / "data" / "secrets.key"
    key = load_or_create_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path) == key
    FernetSecretBox(key)
    assert [p.name for p in path.parent.iterdir()] == ["secrets.key"]


def test_tool_settings_defaults_and_values():
    problems: list[str] = []
    assert ToolSettings.from_env({}, problems) == ToolSettings()
    settings = ToolSettings.from_env(
        {
            "AP_SECRETS_KEY": f"{NEW},{OLD}",
            "AP_TOOL_ALLOWED_HOSTS": "127.0.0.1, Tools.Internal ,10.0.0.0/8,[::1]",
            "AP_TOOL_TIMEOUT": "5",
            "AP_TOOL_MAX_OFFERED": "8",
            "AP_TOOL_APPROVAL_TTL": "3600",
        },
        problems,
    )
    assert problems == []
    assert settings.allowed_hosts == ("127.0.0.1", "tools.internal", "10.0.0.0/8", "::1")
    assert (settings.timeout, settings.max_offered, settings.approval_ttl) == (5.0, 8, 3600.0)
    assert NEW not in repr(settings)


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("AP_SECRETS_KEY", "abc", KEY_PROBLEM),
        ("AP_TOOL_ALLOWED_HOSTS", "ok.host,bad host!", "AP_TOOL_ALLOWED_HOSTS"),
        ("AP_TOOL_ALLOWED_HOSTS", "10.0.0.0/99", "AP_TOOL_ALLOWED_HOSTS"),
        ("AP_TOOL_TIMEOUT", "0", "AP_TOOL_TIMEOUT"),
        ("AP_TOOL_MAX_OFFERED", "2.5", "AP_TOOL_MAX_OFFERED"),
        ("AP_TOOL_APPROVAL_TTL", "5", "AP_TOOL_APPROVAL_TTL"),
    ],
)
def test_bad_tool_settings_are_named_at_start(name, value, problem):
    with pytest.raises(ConfigError) as error:
        Settings.from_env({name: value})
    assert problem in str(error.value)
    assert value not in str(error.value) or name != "AP_SECRETS_KEY"
