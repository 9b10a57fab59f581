"""Configuration from `AP_*` environment variables, validated at start with one clear message
per bad value."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from urllib.parse import urlsplit

from adapters.postgres.vector_indexes import DEFAULT_MIN_PASSAGES
from domain.agents import DEFAULT_CHAT_MODEL
from domain.errors import Invalid
from domain.models import (
    CHAT_PROVIDERS,
    DEFAULT_EMBEDDING_MODEL,
    EMBEDDING_PROVIDERS,
    parse_model_ref,
    validate_chat_model,
)
from domain.skills import SkillLimits
from domain.usage import ModelPrice
from entrypoints.search_config import SearchSettings
from entrypoints.tools_config import ToolSettings

LOG_FORMATS = ("console", "json")
DEFAULT_CONSOLE_OIDC_SCOPE = "openid profile email offline_access"
# RFC 6749 §3.3: a scope is space-separated tokens of printable ASCII but `"` and `\`.
_SCOPE_TOKEN = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")
_CLIENT_ID = re.compile(r"^[\x21-\x7e]{1,256}$")
STORAGES = ("local", "s3")
DEFAULT_EMBEDDING_PART_SIZE = 64
"""Passages per `file.embed` job for a file with more than that."""


class ConfigError(Exception):
    """One or more settings are invalid; `problems` names each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))
        self.problems = problems


def default_worker_memory_mb() -> int:
    """A quarter of this machine's memory, between 1 GiB and 8 GiB: what one file's extraction
    may hold resident (a worker is killed past twice that)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):
        return 4096
    return max(1024, min(8192, total // 4))


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    database_url: str | None = None
    database_migration_url: str | None = None
    database_app_role: str = "agent_platform_app"
    database_pool_size: int = 20
    data_dir: Path = Path(".agent-platform")
    host: str = "127.0.0.1"
    port: int = 8000
    public_url: str = ""
    auth_jwks_url: str | None = None
    auth_issuer: str | None = None
    auth_audience: tuple[str, ...] = ()
    auth_authorized_parties: tuple[str, ...] = ()
    auth_leeway: int = 5
    storage: str = "local"
    s3_bucket: str | None = None
    s3_endpoint_url: str | None = None
    s3_region: str = "us-east-1"
    s3_prefix: str = ""
    s3_path_style: bool = False
    max_upload_size: int = 100 * 1024 * 1024
    upload_url_ttl: timedelta = field(default_factory=lambda: timedelta(minutes=15))
    skill_limits: SkillLimits = field(default_factory=SkillLimits)
    default_embedding_model: str = DEFAULT_EMBEDDING_MODEL
    log_format: str = "console"
    log_level: str = "info"
    worker_in_process: bool = True
    worker_concurrency: int = 2
    worker_heartbeat_timeout: int = 30
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str | None = field(default=None, repr=False)
    identity_directory: str = "local"
    clerk_secret_key: str | None = field(default=None, repr=False)
    clerk_api_url: str = "https://api.clerk.com"
    identity_webhook_secret: str | None = field(default=None, repr=False)
    inbound_email_domain: str | None = None
    inbound_email_secret: str | None = field(default=None, repr=False)
    # `GET /metrics` requires `Authorization: Bearer <metrics_token>` when set; public otherwise.
    metrics_token: str | None = field(default=None, repr=False)
    metrics_cache_seconds: int = 10
    extract_max_pages: int = 1000
    # OCR of scanned pages and images: at most this many pages a file (0: off), in this time.
    ocr_max_pages: int = 100
    ocr_max_seconds: int = 300
    embedding_part_size: int = DEFAULT_EMBEDDING_PART_SIZE
    torch_threads: int = 2
    # The local embedding models' forward pass: ONNX Runtime (exported as they load) or torch.
    embedding_runtime: str = "onnx"
    default_chat_model: str = DEFAULT_CHAT_MODEL
    model_prices: dict[str, ModelPrice] = field(default_factory=dict)
    chat_timeout: int = 120
    # `serve` on SIGTERM: how long running answers and jobs in hand may go on.
    shutdown_grace: int = 20
    # A connection whose request head is not complete this long after it began is closed.
    header_timeout: int = 10
    max_connections: int = 1000
    chat_max_output_tokens: int = 1024
    local_llm_threads: int = 2
    local_model_preload: bool = False
    local_model_stall_timeout: int = 60
    local_model_memory_mb: int = 4096
    worker_memory_mb: int = field(default_factory=default_worker_memory_mb)
    worker_nice: int = 10
    extract_timeout: int = 600
    job_max_cut_short_runs: int = 3
    # Knowledge bases of at least this many passages get an HNSW index of their own, built by
    # the worker as the schema owner (0: none); its build may use this much memory.
    vector_index_min_passages: int = DEFAULT_MIN_PASSAGES
    vector_index_memory_mb: int = 1024
    # The web console (`/console/`): the folder of its build (None: the packaged copy, else the
    # repository's console/dist), the OpenID client it signs in with, and the lifetime of the
    # tokens its development sign-in issues.
    console_dir: Path | None = None
    console_oidc_client_id: str | None = None
    console_oidc_scope: str = DEFAULT_CONSOLE_OIDC_SCOPE
    console_token_ttl: int = 3600
    # Who may use the development sign-in: clients on this machine only, or any client.
    console_dev_sign_in: str = "loopback"
    search: SearchSettings = field(default_factory=SearchSettings)
    tools: ToolSettings = field(default_factory=ToolSettings)

    @property
    def effective_public_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    @property
    def dev_identity(self) -> bool:
        """No external identity provider configured: the service issues its own tokens."""
        return self.auth_jwks_url is None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        problems: list[str] = []

        def text(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        def integer(name: str, default: int, low: int, high: int) -> int:
            raw = text(name)
            if raw is None:
                return default
            try:
                value = int(raw)
            except ValueError:
                problems.append(f"{name}={raw!r} is not an integer")
                return default
            if not low <= value <= high:
                problems.append(f"{name}={value} must be between {low} and {high}")
            return value

        def choice(name: str, default: str, options: tuple[str, ...]) -> str:
            value = (text(name) or default).lower()
            if value not in options:
                problems.append(f"{name}={value!r} must be one of: {', '.join(options)}")
            return value

        def url(name: str, *, schemes: tuple[str, ...]) -> str | None:
            raw = text(name)
            if raw is None:
                return None
            parts = urlsplit(raw)
            if parts.scheme not in schemes or not (parts.netloc or parts.query):
                problems.append(f"{name}={raw!r} must be a {'/'.join(schemes)} URL")
            return raw

        def flag(name: str) -> bool:
            raw = (text(name) or "false").lower()
            if raw not in ("true", "false", "1", "0", "yes", "no"):
                problems.append(f"{name}={raw!r} must be true or false")
            return raw in ("true", "1", "yes")

        def csv(name: str) -> tuple[str, ...]:
            return tuple(p.strip() for p in (text(name) or "").split(",") if p.strip())

        database_url = url(
            "AP_DATABASE_URL",
            schemes=("postgres", "postgresql", "postgresql+asyncpg"),
        )
        migration_url = url(
            "AP_DATABASE_MIGRATION_URL",
            schemes=("postgres", "postgresql", "postgresql+asyncpg"),
        )
        if migration_url and not database_url:
            problems.append("AP_DATABASE_MIGRATION_URL needs AP_DATABASE_URL as well")
        jwks_url = url("AP_AUTH_JWKS_URL", schemes=("http", "https"))
        issuer = text("AP_AUTH_ISSUER")
        if jwks_url and not issuer:
            problems.append("AP_AUTH_ISSUER is required when AP_AUTH_JWKS_URL is set")
        public_url = url("AP_PUBLIC_URL", schemes=("http", "https")) or ""
        role = text("AP_DATABASE_APP_ROLE") or "agent_platform_app"
        if not role.replace("_", "").isalnum() or not role.islower() or role[0].isdigit():
            problems.append(f"AP_DATABASE_APP_ROLE={role!r} must be a lower-case SQL identifier")
        storage = choice("AP_STORAGE", "local", STORAGES)
        bucket = text("AP_S3_BUCKET")
        if storage == "s3" and not bucket:
            problems.append("AP_S3_BUCKET is required when AP_STORAGE=s3")
        settings = cls(
            database_url=database_url,
            database_migration_url=migration_url,
            database_app_role=role,
            database_pool_size=integer("AP_DATABASE_POOL_SIZE", 20, 1, 500),
            data_dir=Path(text("AP_DATA_DIR") or ".agent-platform").expanduser(),
            host=text("AP_HOST") or "127.0.0.1",
            port=integer("AP_PORT", 8000, 1, 65535),
            public_url=public_url,
            auth_jwks_url=jwks_url,
            auth_issuer=issuer,
            auth_audience=csv("AP_AUTH_AUDIENCE"),
            auth_authorized_parties=csv("AP_AUTH_AUTHORIZED_PARTIES"),
            auth_leeway=integer("AP_AUTH_LEEWAY", 5, 0, 60),
            storage=storage,
            s3_bucket=bucket,
            s3_endpoint_url=url("AP_S3_ENDPOINT_URL", schemes=("http", "https")),
            s3_region=text("AP_S3_REGION") or "us-east-1",
            s3_prefix=text("AP_S3_PREFIX") or "",
            s3_path_style=flag("AP_S3_PATH_STYLE"),
            max_upload_size=integer("AP_MAX_UPLOAD_SIZE", 100 * 1024 * 1024, 1, 2**40),
            upload_url_ttl=timedelta(seconds=integer("AP_UPLOAD_URL_TTL", 900, 10, 7 * 86400)),
            skill_limits=SkillLimits(
                max_files=integer("AP_SKILL_MAX_FILES", 500, 1, 100_000),
                max_file_bytes=integer("AP_SKILL_MAX_FILE_BYTES", 10 * 1024 * 1024, 1, 2**32),
                max_total_bytes=integer("AP_SKILL_MAX_TOTAL_BYTES", 50 * 1024 * 1024, 1, 2**34),
            ),
            default_embedding_model=text("AP_DEFAULT_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_MODEL,
            log_format=choice("AP_LOG_FORMAT", "console", LOG_FORMATS),
            log_level=choice("AP_LOG_LEVEL", "info", ("debug", "info", "warning", "error")),
            worker_in_process=(
                flag("AP_WORKER_IN_PROCESS")
                if text("AP_WORKER_IN_PROCESS")
                else database_url is None
            ),
            worker_concurrency=integer("AP_WORKER_CONCURRENCY", 2, 1, 64),
            worker_heartbeat_timeout=integer("AP_WORKER_HEARTBEAT_TIMEOUT", 30, 2, 3600),
            openai_base_url=url("AP_OPENAI_BASE_URL", schemes=("http", "https"))
            or "https://api.openai.com/v1",
            openai_api_key=text("AP_OPENAI_API_KEY"),
            identity_directory=choice("AP_IDENTITY_DIRECTORY", "local", ("local", "clerk")),
            clerk_secret_key=text("AP_CLERK_SECRET_KEY"),
            clerk_api_url=url("AP_CLERK_API_URL", schemes=("http", "https"))
            or "https://api.clerk.com",
            identity_webhook_secret=text("AP_IDENTITY_WEBHOOK_SECRET"),
            inbound_email_domain=(text("AP_INBOUND_EMAIL_DOMAIN") or "").lower() or None,
            inbound_email_secret=text("AP_INBOUND_EMAIL_SECRET"),
            metrics_token=text("AP_METRICS_TOKEN"),
            metrics_cache_seconds=integer("AP_METRICS_CACHE_SECONDS", 10, 0, 300),
            extract_max_pages=integer("AP_EXTRACT_MAX_PAGES", 1000, 1, 100_000),
            ocr_max_pages=integer("AP_OCR_MAX_PAGES", 100, 0, 100_000),
            ocr_max_seconds=integer("AP_OCR_MAX_SECONDS", 300, 1, 86_400),
            embedding_part_size=integer(
                "AP_EMBEDDING_PART_SIZE", DEFAULT_EMBEDDING_PART_SIZE, 1, 100_000
            ),
            torch_threads=integer("AP_TORCH_THREADS", 2, 1, 256),
            embedding_runtime=choice("AP_EMBEDDING_RUNTIME", "onnx", ("onnx", "torch")),
            default_chat_model=_chat_model(
                "AP_DEFAULT_CHAT_MODEL", text("AP_DEFAULT_CHAT_MODEL"), problems
            ),
            model_prices=_prices("AP_MODEL_PRICES", text("AP_MODEL_PRICES"), problems),
            chat_timeout=integer("AP_CHAT_TIMEOUT", 120, 5, 3600),
            shutdown_grace=integer("AP_SHUTDOWN_GRACE", 20, 0, 3600),
            header_timeout=integer("AP_HEADER_TIMEOUT", 10, 1, 3600),
            max_connections=integer("AP_MAX_CONNECTIONS", 1000, 1, 1_000_000),
            chat_max_output_tokens=integer("AP_CHAT_MAX_OUTPUT_TOKENS", 1024, 16, 65536),
            local_llm_threads=integer("AP_LOCAL_LLM_THREADS", 2, 1, 256),
            local_model_preload=(
                flag("AP_LOCAL_MODEL_PRELOAD") if text("AP_LOCAL_MODEL_PRELOAD") else True
            ),
            local_model_stall_timeout=integer("AP_LOCAL_MODEL_STALL_TIMEOUT", 60, 1, 3600),
            local_model_memory_mb=integer("AP_LOCAL_MODEL_MEMORY_MB", 4096, 0, 2**20),
            worker_memory_mb=integer("AP_WORKER_MEMORY_MB", default_worker_memory_mb(), 256, 2**20),
            worker_nice=integer("AP_WORKER_NICE", 10, 0, 19),
            extract_timeout=integer("AP_EXTRACT_TIMEOUT", 600, 1, 86_400),
            job_max_cut_short_runs=integer("AP_JOB_MAX_CUT_SHORT_RUNS", 3, 1, 100),
            vector_index_min_passages=integer(
                "AP_VECTOR_INDEX_MIN_PASSAGES", DEFAULT_MIN_PASSAGES, 0, 2_000_000_000
            ),
            vector_index_memory_mb=integer("AP_VECTOR_INDEX_MEMORY_MB", 1024, 64, 2**20),
            console_dir=_folder("AP_CONSOLE_DIR", text("AP_CONSOLE_DIR"), problems),
            console_oidc_client_id=text("AP_CONSOLE_OIDC_CLIENT_ID"),
            console_oidc_scope=" ".join((text("AP_CONSOLE_OIDC_SCOPE") or "").split())
            or DEFAULT_CONSOLE_OIDC_SCOPE,
            console_token_ttl=integer("AP_CONSOLE_TOKEN_TTL", 3600, 60, 86_400),
            console_dev_sign_in=choice(
                "AP_CONSOLE_DEV_SIGN_IN", "loopback", ("loopback", "anywhere")
            ),
            search=SearchSettings.from_env(env, problems),
            tools=ToolSettings.from_env(env, problems),
        )
        for check in (
            _identity_problems,
            _inbound_email_problems,
            _metrics_problems,
            _console_problems,
        ):
            problems.extend(check(settings))
        if problems:
            raise ConfigError(problems)
        return settings


def _identity_problems(settings: Settings) -> list[str]:
    problems = []
    secret = settings.identity_webhook_secret
    if secret and not _strong_webhook_secret(secret):
        problems.append("AP_IDENTITY_WEBHOOK_SECRET must be a whsec_ secret of at least 24 bytes")
    if settings.identity_directory == "clerk" and not settings.clerk_secret_key:
        problems.append("AP_CLERK_SECRET_KEY is required when AP_IDENTITY_DIRECTORY=clerk")
    return problems


def _folder(name: str, value: str | None, problems: list[str]) -> Path | None:
    if value is None:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        problems.append(f"{name}={value!r} must be an existing folder")
    return path


def _console_problems(settings: Settings) -> list[str]:
    problems = []
    client_id = settings.console_oidc_client_id
    if client_id is not None and not _CLIENT_ID.fullmatch(client_id):
        problems.append("AP_CONSOLE_OIDC_CLIENT_ID must be 1 to 256 printable ASCII characters")
    scope = settings.console_oidc_scope.split(" ")
    if not all(_SCOPE_TOKEN.fullmatch(token) for token in scope) or "openid" not in scope:
        problems.append(
            "AP_CONSOLE_OIDC_SCOPE must be space-separated OAuth scopes, openid among them"
        )
    issuer = urlsplit(settings.auth_issuer or "")
    if (
        client_id
        and not settings.dev_identity
        and not (issuer.scheme in ("http", "https") and issuer.netloc)
    ):
        problems.append(
            "AP_CONSOLE_OIDC_CLIENT_ID needs AP_AUTH_ISSUER to be the provider's http(s) URL"
        )
    return problems


MIN_INBOUND_SECRET = 32
MIN_METRICS_TOKEN = 24
_DOMAIN_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def _metrics_problems(settings: Settings) -> list[str]:
    token = settings.metrics_token
    if token is not None and (len(token) < MIN_METRICS_TOKEN or not token.isprintable()):
        return [
            f"AP_METRICS_TOKEN must be at least {MIN_METRICS_TOKEN} printable characters"
            " (openssl rand -hex 32)"
        ]
    return []


def _inbound_email_problems(settings: Settings) -> list[str]:
    problems = []
    domain = settings.inbound_email_domain
    if domain is not None and (
        len(domain) > 253 or not all(_DOMAIN_LABEL.match(label) for label in domain.split("."))
    ):
        problems.append(
            f"AP_INBOUND_EMAIL_DOMAIN={domain!r} must be a domain name such as in.example.com"
        )
    secret = settings.inbound_email_secret
    if secret is not None and (len(secret) < MIN_INBOUND_SECRET or not secret.isprintable()):
        problems.append(
            f"AP_INBOUND_EMAIL_SECRET must be at least {MIN_INBOUND_SECRET} printable characters "
            "(e.g. openssl rand -hex 32)"
        )
    return problems


def _strong_webhook_secret(secret: str) -> bool:
    """A Svix signing secret: `whsec_` and base64 of at least 24 bytes (Svix issues 24 or 32)."""
    if not secret.startswith("whsec_"):
        return False
    try:
        key = base64.b64decode(secret.removeprefix("whsec_") + "==", validate=False)
    except (binascii.Error, ValueError):
        return False
    return len(key) >= 24


def _chat_model(name: str, value: str | None, problems: list[str]) -> str:
    if value is None:
        return DEFAULT_CHAT_MODEL
    try:
        return validate_chat_model(value, field=name)
    except Invalid as error:
        problems.append(f"{name}: {error.message}")
        return DEFAULT_CHAT_MODEL


PRICED_PROVIDERS = tuple(dict.fromkeys(CHAT_PROVIDERS + EMBEDDING_PROVIDERS))


def _prices(name: str, value: str | None, problems: list[str]) -> dict[str, ModelPrice]:
    """`{"provider:model": {"input": usd, "output": usd}}`, per million tokens."""
    if value is None:
        return {}
    try:
        raw = json.loads(value)
        prices = {}
        for model, price in raw.items():
            ref = parse_model_ref(model, field=name, providers=PRICED_PROVIDERS)
            amounts = [price["input"], price["output"]]
            if any(isinstance(a, bool) or not isinstance(a, int | float) for a in amounts):
                raise ValueError(model)
            figures = [Decimal(str(amount)) for amount in amounts]
            if any(not figure.is_finite() or figure < 0 for figure in figures):
                raise ValueError(model)
            prices[str(ref)] = ModelPrice(*figures)
        return prices
    except (ValueError, TypeError, KeyError, AttributeError, InvalidOperation, Invalid):
        problems.append(
            f"{name} must be JSON such as "
            '{"openai:gpt-4o-mini": {"input": 0.15, "output": 0.6}} '
            "(US dollars per million tokens, numbers of at least 0; any chat or embedding "
            "model, local: ones included)"
        )
        return {}
