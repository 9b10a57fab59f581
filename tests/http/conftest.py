from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from litestar.testing import AsyncTestClient

from adapters.identity.dev_provider import DevIdentityProvider
from domain.skills import SkillLimits
from entrypoints.config import Settings
from entrypoints.http.app import create_app
from entrypoints.wiring import RecentlySeen, dev_identity_provider
from tests.fakes.chat import ScriptedChatModel
from tests.http.chat_support import Holder, ScriptedModels
from tests.http.helpers import running_worker
from tests.http.processing_support import EmbedderOverride


@pytest.fixture(scope="session")
def settings(tmp_root) -> Settings:
    data_dir = tmp_root / "data"
    return Settings(
        data_dir=data_dir,
        public_url="http://testserver.local",
        max_upload_size=4096,
        skill_limits=SkillLimits(max_files=4, max_file_bytes=2048, max_total_bytes=8192),
        # Every scrape reads the database: the tests look at counts they just changed.
        metrics_cache_seconds=0,
    )


@pytest.fixture(scope="session")
def idp(settings) -> DevIdentityProvider:
    return dev_identity_provider(settings)


@pytest.fixture(scope="session")
async def session_client(settings, database) -> AsyncIterator[AsyncTestClient]:
    app = create_app(settings, database)
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        yield client


async def forget_members(client: AsyncTestClient) -> None:
    """The app remembers members it provisioned lately; `clean` has just deleted them."""
    seen = await client.ap_app.app.state.dishka_container.get(RecentlySeen)  # type: ignore[attr-defined]
    seen.forget_all()


@pytest.fixture
async def client(session_client, clean) -> AsyncTestClient:
    await forget_members(session_client)
    return session_client


@dataclass
class Member:
    org: str
    user: str
    headers: dict[str, str]


@pytest.fixture
def member(idp) -> Callable[..., Member]:
    def make(org: str = "org_a", user: str = "user_1", role: str = "member", **kw) -> Member:
        token = idp.issue(user_id=user, org_id=org, role=role, **kw)
        return Member(org, user, {"Authorization": f"Bearer {token}"})

    return make


@pytest.fixture
def alice(member) -> Member:
    return member("org_a", "user_alice", "admin", email="alice@a.test")


@pytest.fixture
def bob(member) -> Member:
    return member("org_b", "user_bob")


@pytest.fixture(scope="session")
def holder() -> Holder:
    return Holder()


@pytest.fixture(scope="session")
async def chat_session(settings, database, holder) -> AsyncIterator[AsyncTestClient]:
    app = create_app(settings, database, ScriptedModels(holder))
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        yield client


@pytest.fixture
async def chat(chat_session, clean, holder) -> AsyncTestClient:
    await forget_members(chat_session)
    holder.model = ScriptedChatModel()
    return chat_session


@pytest.fixture
def worker(settings, database, registry) -> Callable:
    """A worker on the app's container with the test embedder, as `async with worker():`."""
    return lambda attempts=3: running_worker(
        settings, database, EmbedderOverride(registry), attempts=attempts
    )
