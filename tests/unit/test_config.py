from __future__ import annotations

from pathlib import Path

import pytest

from entrypoints.config import ConfigError, Settings


def test_defaults_are_the_embedded_development_set_up():
    settings = Settings.from_env({})
    assert settings.database_url is None
    assert settings.data_dir == Path(".agent-platform")
    assert settings.dev_identity
    assert settings.effective_public_url == "http://127.0.0.1:8000"
    assert settings.storage == "local" and settings.log_format == "console"


def test_values_are_read():
    settings = Settings.from_env(
        {
            "AP_DATABASE_URL": "postgresql://app@db:5432/ap",
            "AP_AUTH_JWKS_URL": "https://idp.example/.well-known/jwks.json",
            "AP_AUTH_ISSUER": "https://idp.example",
            "AP_AUTH_AUDIENCE": "api, web",
            "AP_AUTH_AUTHORIZED_PARTIES": "https://app.example",
            "AP_PUBLIC_URL": "https://api.example/",
            "AP_LOG_FORMAT": "json",
            "AP_PORT": "9000",
        }
    )
    assert settings.auth_audience == ("api", "web")
    assert settings.effective_public_url == "https://api.example"
    assert not settings.dev_identity and settings.port == 9000


def test_every_bad_value_is_named():
    with pytest.raises(ConfigError) as error:
        Settings.from_env(
            {
                "AP_DATABASE_URL": "mysql://x",
                "AP_AUTH_JWKS_URL": "ftp://idp",
                "AP_STORAGE": "floppy",
                "AP_LOG_FORMAT": "xml",
                "AP_PORT": "eighty",
                "AP_AUTH_LEEWAY": "600",
                "AP_DATABASE_APP_ROLE": "Robert'); DROP",
            }
        )
    text = str(error.value)
    for name in (
        "AP_DATABASE_URL",
        "AP_AUTH_JWKS_URL",
        "AP_AUTH_ISSUER is required",
        "AP_STORAGE",
        "AP_LOG_FORMAT",
        "AP_PORT",
        "AP_AUTH_LEEWAY",
        "AP_DATABASE_APP_ROLE",
    ):
        assert name in text


def test_migration_url_is_separate_and_needs_the_app_url():
    settings = Settings.from_env(
        {
            "AP_DATABASE_URL": "postgresql://ap_login@db/ap",
            "AP_DATABASE_MIGRATION_URL": "postgresql://ap_owner@db/ap",
        }
    )
    assert settings.database_migration_url == "postgresql://ap_owner@db/ap"
    with pytest.raises(ConfigError, match="needs AP_DATABASE_URL"):
        Settings.from_env({"AP_DATABASE_MIGRATION_URL": "postgresql://ap_owner@db/ap"})


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({"AP_IDENTITY_WEBHOOK_SECRET": "whsec_abc"}, "at least 24 bytes"),
        ({"AP_IDENTITY_WEBHOOK_SECRET": "short"}, "whsec_ secret"),
        ({"AP_IDENTITY_DIRECTORY": "clerk"}, "AP_CLERK_SECRET_KEY is required"),
    ],
)
def test_identity_settings_are_checked_at_start(environ, problem):
    with pytest.raises(ConfigError, match=problem):
        Settings.from_env(environ)


def test_secrets_stay_out_of_the_settings_repr():
    secret = "whsec_" + "A" * 40
    settings = Settings.from_env(
        {"AP_IDENTITY_WEBHOOK_SECRET": secret, "AP_OPENAI_API_KEY": "sk-secret"}
    )
    assert settings.identity_webhook_secret == secret
    assert secret not in repr(settings) and "sk-secret" not in repr(settings)


def test_inbound_email_settings_are_checked_and_the_secret_kept_out_of_the_repr():
    secret = "0123456789abcdef" * 4
    settings = Settings.from_env(
        {"AP_INBOUND_EMAIL_DOMAIN": "In.Example.COM", "AP_INBOUND_EMAIL_SECRET": secret}
    )
    assert settings.inbound_email_domain == "in.example.com"
    assert settings.inbound_email_secret == secret and secret not in repr(settings)
    assert Settings.from_env({}).inbound_email_domain is None
    for domain in ("in example.com", "-bad.com", "a..b", "x" * 64 + ".com", "kb@in.com"):
        with pytest.raises(ConfigError, match="AP_INBOUND_EMAIL_DOMAIN"):
            Settings.from_env({"AP_INBOUND_EMAIL_DOMAIN": domain})
    with pytest.raises(ConfigError, match="AP_INBOUND_EMAIL_SECRET must be at least 32"):
        Settings.from_env({"AP_INBOUND_EMAIL_SECRET": "short"})


def test_operations_and_worker_limits_are_read():
    settings = Settings.from_env(
        {
            "AP_METRICS_TOKEN": "scrape-secret-0123456789abcdef",
            "AP_WORKER_NICE": "5",
            "AP_EXTRACT_TIMEOUT": "90",
            "AP_JOB_MAX_CUT_SHORT_RUNS": "7",
        }
    )
    assert settings.metrics_token == "scrape-secret-0123456789abcdef"
    assert "scrape-secret" not in repr(settings)
    assert (settings.worker_nice, settings.extract_timeout, settings.job_max_cut_short_runs) == (
        5,
        90,
        7,
    )
    defaults = Settings.from_env({})
    assert defaults.metrics_token is None
    assert (defaults.worker_nice, defaults.extract_timeout, defaults.job_max_cut_short_runs) == (
        10,
        600,
        3,
    )
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(
            {"AP_WORKER_NICE": "20", "AP_EXTRACT_TIMEOUT": "0", "AP_METRICS_TOKEN": "short"}
        )
    for name in ("AP_WORKER_NICE", "AP_EXTRACT_TIMEOUT", "AP_METRICS_TOKEN"):
        assert name in str(refused.value)


def test_vector_index_settings_are_read_and_checked():
    defaults = Settings.from_env({})
    assert (defaults.vector_index_min_passages, defaults.vector_index_memory_mb) == (10_000, 1024)
    settings = Settings.from_env(
        {"AP_VECTOR_INDEX_MIN_PASSAGES": "0", "AP_VECTOR_INDEX_MEMORY_MB": "4096"}
    )
    assert (settings.vector_index_min_passages, settings.vector_index_memory_mb) == (0, 4096)
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"AP_VECTOR_INDEX_MIN_PASSAGES": "-1", "AP_VECTOR_INDEX_MEMORY_MB": "8"})
    for name in ("AP_VECTOR_INDEX_MIN_PASSAGES", "AP_VECTOR_INDEX_MEMORY_MB"):
        assert name in str(refused.value)


def test_console_settings_are_read(tmp_path):
    defaults = Settings.from_env({})
    assert defaults.console_dir is None and defaults.console_oidc_client_id is None
    assert defaults.console_oidc_scope == "openid profile email offline_access"
    assert defaults.console_token_ttl == 3600
    assert defaults.console_dev_sign_in == "loopback"
    anywhere = Settings.from_env({"AP_CONSOLE_DEV_SIGN_IN": "Anywhere"})
    assert anywhere.console_dev_sign_in == "anywhere"
    settings = Settings.from_env(
        {
            "AP_CONSOLE_DIR": str(tmp_path),
            "AP_AUTH_JWKS_URL": "https://idp.example/.well-known/jwks.json",
            "AP_AUTH_ISSUER": "https://idp.example",
            "AP_CONSOLE_OIDC_CLIENT_ID": "agent-console",
            "AP_CONSOLE_OIDC_SCOPE": "openid  email",
            "AP_CONSOLE_TOKEN_TTL": "600",
        }
    )
    assert settings.console_dir == tmp_path
    assert settings.console_oidc_client_id == "agent-console"
    assert settings.console_oidc_scope == "openid email"
    assert settings.console_token_ttl == 600


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({"AP_CONSOLE_DIR": "/nonexistent/console"}, "AP_CONSOLE_DIR"),
        ({"AP_CONSOLE_TOKEN_TTL": "10"}, "AP_CONSOLE_TOKEN_TTL"),
        ({"AP_CONSOLE_DEV_SIGN_IN": "everyone"}, "AP_CONSOLE_DEV_SIGN_IN"),
        ({"AP_CONSOLE_TOKEN_TTL": "a day"}, "AP_CONSOLE_TOKEN_TTL"),
        ({"AP_CONSOLE_OIDC_SCOPE": "profile email"}, "AP_CONSOLE_OIDC_SCOPE"),
        ({"AP_CONSOLE_OIDC_SCOPE": 'openid "x"'}, "AP_CONSOLE_OIDC_SCOPE"),
        ({"AP_CONSOLE_OIDC_CLIENT_ID": "a b"}, "AP_CONSOLE_OIDC_CLIENT_ID"),
        (
            {
                "AP_AUTH_JWKS_URL": "https://idp.example/jwks.json",
                "AP_AUTH_ISSUER": "idp-without-a-url",
                "AP_CONSOLE_OIDC_CLIENT_ID": "console",
            },
            "AP_CONSOLE_OIDC_CLIENT_ID needs AP_AUTH_ISSUER",
        ),
    ],
)
def test_console_settings_are_checked_at_start(environ, problem):
    with pytest.raises(ConfigError) as error:
        Settings.from_env(environ)
    assert any(problem in p for p in error.value.problems), error.value.problems
