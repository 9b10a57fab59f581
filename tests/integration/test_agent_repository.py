"""`PgAgentRepository` against the real database: links, tags, ordering, organization isolation."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from adapters.postgres.agents import PgAgentRepository
from adapters.postgres.database import org_connection
from adapters.postgres.knowledge_bases import PgKnowledgeBaseRepository
from adapters.postgres.skills import PgSkillRepository
from application.ports.skill_repository import SkillDocument
from domain.agents import NewAgent
from domain.errors import Conflict
from domain.knowledge_bases import NewKnowledgeBase
from domain.skills import SkillManifest

pytestmark = pytest.mark.usefixtures("clean")


def new_agent(org="org_a", name="Helper", **links):
    return NewAgent(
        org_id=org,
        user_id="u1",
        name=name,
        description="Helps",
        role="Be brief.",
        model="local:smollm2-135m",
        **links,
    )


async def make_skill(db, name: str, org="org_a") -> int:
    skill_md = f"---\nname: {name}\ndescription: d\n---\n"
    document = SkillDocument(
        manifest=SkillManifest(name=name, description="d"), skill_md=skill_md, sha256="0" * 64
    )
    return (await PgSkillRepository(db).add(org, "u1", document)).id


async def make_kb(db, org="org_a", name="Docs") -> int:
    kb = await PgKnowledgeBaseRepository(db).add(
        NewKnowledgeBase(
            org_id=org,
            user_id="u1",
            name=name,
            description="",
            embedding_model="local:all-MiniLM-L6-v2",
            embedding_dimensions=384,
            extraction_model=None,
            extraction_schema=None,
        )
    )
    return kb.id


async def test_round_trip_with_ordered_links_and_tags(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        kb1, kb2, kb3 = [await make_kb(db, name=n) for n in ("A", "B", "C")]
        zeta = await agents.add_tag("org_a", "zeta", "#00ff00")
        alpha = await agents.add_tag("org_a", "alpha", None)
        s1, s2 = await make_skill(db, "one"), await make_skill(db, "two")
        agent = await agents.add(
            new_agent(
                knowledge_base_ids=[kb3, kb1, kb2], skill_ids=[s2, s1], tag_ids=[zeta.id, alpha.id]
            )
        )
        await db.commit()
    assert agent.knowledge_base_ids == [kb3, kb1, kb2]
    assert agent.skill_ids == [s2, s1]
    assert [(t.name, t.color) for t in agent.tags] == [("alpha", None), ("zeta", "#00ff00")]
    assert (agent.name, agent.description, agent.role, agent.user_id) == (
        "Helper",
        "Helps",
        "Be brief.",
        "u1",
    )
    async with org_connection(app_pool, "org_a") as db:
        assert await PgAgentRepository(db).get("org_a", agent.id) == agent


async def test_list_is_newest_first_filters_by_tag_and_reads_in_one_statement(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        tag = await agents.add_tag("org_a", "sales", None)
        first = await agents.add(new_agent(name="First", tag_ids=[tag.id]))
        second = await agents.add(new_agent(name="Second"))
        third = await agents.add(new_agent(name="Third", tag_ids=[tag.id]))
        await db.commit()
        assert [a.id for a in await agents.list_all("org_a")] == [third.id, second.id, first.id]
        tagged = await agents.list_all("org_a", tag_id=tag.id)
        assert [a.id for a in tagged] == [third.id, first.id]
        assert all([t.name for t in a.tags] == ["sales"] for a in tagged)
        assert await agents.list_all("org_a", tag_id=tag.id + 1000) == []
        assert (await agents.get("org_a", second.id)).tags == []  # type: ignore[union-attr]


async def test_update_replaces_links_and_bumps_the_update_time(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        kb1, kb2 = await make_kb(db), await make_kb(db)
        tag = await agents.add_tag("org_a", "t", None)
        agent = await agents.add(new_agent(knowledge_base_ids=[kb1], tag_ids=[tag.id]))
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        updated = await agents.update(
            "org_a",
            agent.id,
            {"name": "Renamed", "model": "openai:gpt-4o", "knowledge_base_ids": [kb2, kb1]},
        )
        await db.commit()
        assert updated is not None
        assert (updated.name, updated.model, updated.description) == (
            "Renamed",
            "openai:gpt-4o",
            "Helps",
        )
        assert updated.knowledge_base_ids == [kb2, kb1] and [t.id for t in updated.tags] == [tag.id]
        assert updated.updated_at > agent.updated_at
        skill = await make_skill(db, "only")
        untagged = await agents.update("org_a", agent.id, {"tag_ids": [], "skill_ids": [skill]})
        assert untagged is not None and untagged.tags == [] and untagged.skill_ids == [skill]
        assert await agents.update("org_a", agent.id + 1000, {"name": "x"}) is None
        with pytest.raises(ValueError):
            await agents.update("org_a", agent.id, {"org_id": "org_b"})


async def test_links_only_reach_the_same_organization(app_pool):
    async with org_connection(app_pool, "org_b") as db:
        foreign_kb = await make_kb(db, org="org_b")
        foreign_tag = await PgAgentRepository(db).add_tag("org_b", "theirs", None)
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        mine = await make_kb(db)
        agent = await agents.add(
            new_agent(knowledge_base_ids=[foreign_kb, mine], tag_ids=[foreign_tag.id])
        )
        assert agent.knowledge_base_ids == [mine] and agent.tags == []
        assert await agents.missing_tags("org_a", [foreign_tag.id, 12345]) == [
            foreign_tag.id,
            12345,
        ]
        assert await agents.missing_tags("org_a", []) == []


async def test_another_organization_sees_and_touches_nothing(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        tag = await agents.add_tag("org_a", "mine", None)
        agent = await agents.add(new_agent(tag_ids=[tag.id]))
        await db.commit()
    async with org_connection(app_pool, "org_b") as db:
        agents = PgAgentRepository(db)
        for org in ("org_b", "org_a"):
            assert await agents.get(org, agent.id) is None
            assert await agents.list_all(org) == []
            assert await agents.list_tags(org) == []
            assert await agents.update(org, agent.id, {"name": "stolen"}) is None
            assert await agents.delete(org, agent.id) is False
            assert await agents.delete_tag(org, tag.id) is False
        # The same name is free in another organization.
        await agents.add_tag("org_b", "mine", None)
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        kept = await PgAgentRepository(db).get("org_a", agent.id)
        assert (
            kept is not None and kept.name == "Helper" and [t.name for t in kept.tags] == ["mine"]
        )


async def test_duplicate_tag_conflicts_and_deleting_a_tag_unlinks_it(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        tag = await agents.add_tag("org_a", "dup", "#aabbcc")
        with pytest.raises(Conflict):
            await agents.add_tag("org_a", "dup", None)
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        tag = await agents.add_tag("org_a", "dup", "#aabbcc")
        other = await agents.add_tag("org_a", "keep", None)
        agent = await agents.add(new_agent(tag_ids=[tag.id, other.id]))
        assert [t.name for t in await agents.list_tags("org_a")] == ["dup", "keep"]
        assert await agents.delete_tag("org_a", tag.id) is True
        assert [t.id for t in (await agents.get("org_a", agent.id)).tags] == [other.id]  # type: ignore[union-attr]
        assert await agents.delete_tag("org_a", tag.id) is False


async def test_deleting_an_agent_keeps_its_conversations(app_pool, owner_engine):
    async with org_connection(app_pool, "org_a") as db:
        agent = await PgAgentRepository(db).add(new_agent())
        await db.commit()
    thread = uuid.uuid4()
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO conversations (thread_id, org_id, user_id, agent_id, title, "
                "title_source) VALUES (:t, 'org_a', 'u1', :a, 'Hi', 'user')"
            ),
            {"t": thread, "a": agent.id},
        )
    async with org_connection(app_pool, "org_a") as db:
        assert await PgAgentRepository(db).delete("org_a", agent.id) is True
        await db.commit()
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT agent_id, title FROM conversations WHERE thread_id = :t"),
                {"t": thread},
            )
        ).one()
    assert tuple(row) == (None, "Hi")
