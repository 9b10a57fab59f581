"""`PgSkillRepository` against the real database: names, versions, locks, soft deletion, file
records, organization isolation, and the skill ids agents are read with."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from adapters.postgres.agents import PgAgentRepository
from adapters.postgres.database import org_connection
from adapters.postgres.skills import PgSkillRepository
from application.ports.skill_catalog import SkillSummary
from application.ports.skill_repository import SkillDocument
from domain.agents import NewAgent
from domain.errors import Conflict, NotFound
from domain.skills import SkillFile, SkillManifest, skill_file_key

pytestmark = pytest.mark.usefixtures("clean")


def document(name: str = "pdf-tools", description: str = "Reads PDFs.", **extra) -> SkillDocument:
    skill_md = f"---\nname: {name}\ndescription: {description}\n---\nUse it.\n"
    return SkillDocument(
        manifest=SkillManifest(name=name, description=description, **extra),
        skill_md=skill_md,
        sha256=hashlib.sha256(skill_md.encode()).hexdigest(),
    )


def a_file(path: str = "scripts/run.py", size: int = 3, sha: str = "a") -> SkillFile:
    return SkillFile(
        path=path,
        size=size,
        content_type="text/x-python",
        sha256=sha * 64,
        updated_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


async def add(app_pool, org: str = "org_a", name: str = "pdf-tools", **extra) -> int:
    async with org_connection(app_pool, org) as db:
        skill = await PgSkillRepository(db).add(org, "u1", document(name, **extra))
        await db.commit()
    return skill.id


async def test_add_get_and_list_by_name(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        zeta = await skills.add(
            "org_a",
            "u1",
            document("zeta", license="MIT", compatibility="Python 3", metadata={"k": "v"}),
        )
        alpha = await skills.add("org_a", "u2", document("alpha", allowed_tools="Bash"))
        await db.commit()
    assert (zeta.version, zeta.file_count, zeta.user_id, zeta.org_id) == (1, 1, "u1", "org_a")
    assert zeta.manifest == SkillManifest(
        name="zeta", description="Reads PDFs.", license="MIT", compatibility="Python 3",
        metadata={"k": "v"},
    )  # fmt: skip
    assert zeta.skill_md == document("zeta").skill_md
    assert zeta.skill_md_sha256 == document("zeta").sha256
    assert zeta.skill_md_updated_at == zeta.created_at == zeta.updated_at
    assert alpha.manifest.allowed_tools == "Bash" and alpha.manifest.metadata == {}
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        assert await skills.get("org_a", zeta.id) == zeta
        assert await skills.get("org_a", zeta.id + 100) is None
        assert [s.id for s in await skills.list_active("org_a")] == [alpha.id, zeta.id]


async def test_a_name_clash_conflicts_and_a_soft_deleted_skill_frees_its_name(app_pool):
    first = await add(app_pool, name="dup")
    other = await add(app_pool, name="other")
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        with pytest.raises(Conflict, match="A skill with this name already exists"):
            await skills.add("org_a", "u1", document("dup"))
        # The insert's clash leaves the transaction usable.
        assert (await skills.get("org_a", first, lock=True)) is not None
    async with org_connection(app_pool, "org_a") as db:
        with pytest.raises(Conflict, match="A skill with this name already exists"):
            await PgSkillRepository(db).replace_document("org_a", other, document("dup"))
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        assert await skills.soft_delete("org_a", first) is True
        again = await skills.add("org_a", "u1", document("dup"))
        renamed = await skills.replace_document("org_a", other, document("free"))
        await db.commit()
    assert again.id != first and renamed.manifest.name == "free"
    assert await add(app_pool, org="org_b", name="dup")


async def test_every_change_raises_the_version_by_one(app_pool):
    skill_id = await add(app_pool)
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        before = await skills.get("org_a", skill_id, lock=True)
        assert before is not None
        replaced = await skills.replace_document("org_a", skill_id, document(description="New."))
        await db.commit()
    assert (replaced.version, replaced.manifest.description) == (2, "New.")
    assert replaced.skill_md_updated_at > before.skill_md_updated_at
    assert replaced.updated_at > before.updated_at and replaced.created_at == before.created_at
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        put = await skills.put_file("org_a", skill_id, a_file())
        assert put.storage_key == skill_file_key("org_a", skill_id, "scripts/run.py")
        await skills.put_file("org_a", skill_id, a_file("README.md"))
        after_puts = await skills.get("org_a", skill_id)
        assert after_puts is not None and (after_puts.version, after_puts.file_count) == (4, 3)
        assert after_puts.skill_md_updated_at == replaced.skill_md_updated_at
        assert await skills.delete_file("org_a", skill_id, "README.md") is True
        assert await skills.delete_file("org_a", skill_id, "README.md") is False
        after = await skills.get("org_a", skill_id)
        assert after is not None and (after.version, after.file_count) == (5, 2)


async def test_putting_a_file_again_replaces_its_record(app_pool):
    skill_id = await add(app_pool)
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        await skills.put_file("org_a", skill_id, a_file("b.txt"))
        await skills.put_file("org_a", skill_id, a_file("a.txt"))
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        replacement = SkillFile(
            path="b.txt", size=9, content_type="text/plain", sha256="b" * 64,
            updated_at=datetime(2026, 1, 1, tzinfo=UTC), storage_key="elsewhere",
        )  # fmt: skip
        stored = await skills.put_file("org_a", skill_id, replacement)
        assert (stored.size, stored.sha256, stored.storage_key) == (9, "b" * 64, "elsewhere")
        assert [f.path for f in await skills.list_files("org_a", skill_id)] == ["a.txt", "b.txt"]
        assert await skills.get_file("org_a", skill_id, "b.txt") == stored
        assert await skills.get_file("org_a", skill_id, "c.txt") is None
        skill = await skills.get("org_a", skill_id)
        assert skill is not None and (skill.version, skill.file_count) == (4, 3)


async def test_a_locked_skill_makes_a_second_locker_wait(app_pool):
    skill_id = await add(app_pool)
    async with org_connection(app_pool, "org_a") as first:
        assert await PgSkillRepository(first).get("org_a", skill_id, lock=True) is not None

        async def second() -> int:
            async with org_connection(app_pool, "org_a") as db:
                skill = await PgSkillRepository(db).get("org_a", skill_id, lock=True)
                assert skill is not None
                return skill.version

        waiting = asyncio.create_task(second())
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await PgSkillRepository(first).replace_document("org_a", skill_id, document())
        await first.commit()
        assert await asyncio.wait_for(waiting, 5) == 2


async def test_a_soft_deleted_skill_is_missing_everywhere_but_keeps_its_files(
    app_pool, owner_engine
):
    skill_id = await add(app_pool)
    kept = await add(app_pool, name="kept")
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        await skills.put_file("org_a", skill_id, a_file())
        assert await skills.soft_delete("org_a", skill_id) is True
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        assert await skills.get("org_a", skill_id) is None
        assert await skills.get("org_a", skill_id, lock=True) is None
        assert [s.id for s in await skills.list_active("org_a")] == [kept]
        assert await skills.missing("org_a", [kept, skill_id]) == [skill_id]
        assert await skills.summaries("org_a", [skill_id, kept]) == [
            SkillSummary(id=kept, name="kept", description="Reads PDFs.")
        ]
        assert await skills.list_files("org_a", skill_id) == []
        assert await skills.get_file("org_a", skill_id, "scripts/run.py") is None
        assert await skills.delete_file("org_a", skill_id, "scripts/run.py") is False
        assert await skills.soft_delete("org_a", skill_id) is False
        with pytest.raises(NotFound):
            await skills.put_file("org_a", skill_id, a_file("other.txt"))
    async with org_connection(app_pool, "org_a") as db:
        with pytest.raises(NotFound):
            await PgSkillRepository(db).replace_document("org_a", skill_id, document("new"))
    async with owner_engine.connect() as connection:
        count = "SELECT count(*) FROM skill_files WHERE skill_id = :s"
        assert await connection.scalar(text(count), {"s": skill_id}) == 1


async def test_missing_and_summaries_keep_the_order_they_are_asked_in(app_pool):
    a = await add(app_pool, name="a-skill")
    b = await add(app_pool, name="b-skill")
    foreign = await add(app_pool, org="org_b", name="theirs")
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        assert await skills.missing("org_a", [b, 999, a, foreign]) == [999, foreign]
        assert await skills.missing("org_a", []) == []
        assert await skills.summaries("org_a", [b, foreign, a, b, 999]) == [
            SkillSummary(id=b, name="b-skill", description="Reads PDFs."),
            SkillSummary(id=a, name="a-skill", description="Reads PDFs."),
        ]
        assert await skills.summaries("org_a", []) == []


async def test_row_level_security_hides_another_organizations_skills(app_pool):
    skill_id = await add(app_pool)
    async with org_connection(app_pool, "org_a") as db:
        await PgSkillRepository(db).put_file("org_a", skill_id, a_file())
        await db.commit()
    for scope in ("org_b", None):
        async with org_connection(app_pool, scope) as db:
            skills = PgSkillRepository(db)
            # Even asked for org_a's rows, the connection scoped elsewhere sees none.
            assert await skills.get("org_a", skill_id) is None
            assert await skills.list_active("org_a") == []
            assert await skills.list_files("org_a", skill_id) == []
            assert await skills.summaries("org_a", [skill_id]) == []
            assert await skills.soft_delete("org_a", skill_id) is False
            for table in ("skills", "skill_files"):
                assert (await db.fetch(f"SELECT count(*) FROM {table}"))[0][0] == 0
    async with org_connection(app_pool, "org_a") as db:
        skill = await PgSkillRepository(db).get("org_a", skill_id)
        assert skill is not None and skill.file_count == 2


async def test_agents_are_read_with_their_active_skills_of_the_organization(app_pool, owner_engine):
    first, second = await add(app_pool, name="first"), await add(app_pool, name="second")
    foreign = await add(app_pool, org="org_b", name="theirs")
    stored = [second, foreign, first, 999]
    async with org_connection(app_pool, "org_a") as db:
        agent = await PgAgentRepository(db).add(
            NewAgent(
                org_id="org_a", user_id="u1", name="Helper", description="", role="",
                model="local:smollm2-135m", skill_ids=stored,
            )
        )  # fmt: skip
        await db.commit()
    assert agent.skill_ids == [second, first]
    async with org_connection(app_pool, "org_a") as db:
        assert await PgSkillRepository(db).soft_delete("org_a", second) is True
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        agents = PgAgentRepository(db)
        reread = await agents.get("org_a", agent.id)
        assert reread is not None and reread.skill_ids == [first]
        assert [a.skill_ids for a in await agents.list_all("org_a")] == [[first]]
    async with owner_engine.connect() as connection:
        row = "SELECT skill_ids FROM agents WHERE id = :a"
        assert await connection.scalar(text(row), {"a": agent.id}) == stored


async def test_an_import_records_its_files_at_version_one(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        skill = await skills.add("org_a", "u1", document())
        files = [a_file("b.txt"), a_file("a.txt"), a_file("b.txt", size=7)]
        await skills.add_files("org_a", skill.id, files)
        await skills.add_files("org_a", skill.id, [])
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        skills = PgSkillRepository(db)
        listed = await skills.list_files("org_a", skill.id)
        assert [(f.path, f.size) for f in listed] == [("a.txt", 3), ("b.txt", 7)]
        assert listed[0].storage_key == skill_file_key("org_a", skill.id, "a.txt")
        reread = await skills.get("org_a", skill.id)
        assert reread is not None and (reread.version, reread.file_count) == (1, 3)
        with pytest.raises(NotFound):
            await skills.add_files("org_a", skill.id + 100, [a_file()])
