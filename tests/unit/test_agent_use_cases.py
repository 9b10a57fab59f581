"""Agent and agent-tag use cases with fakes: validation, permissions, organization scoping."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from application.ports.skill_repository import SkillDocument
from application.use_cases.create_agent import CreateAgent, CreateAgentCommand
from application.use_cases.create_agent_tag import CreateAgentTag, CreateAgentTagCommand
from application.use_cases.delete_agent import DeleteAgent, DeleteAgentCommand
from application.use_cases.delete_agent_tag import DeleteAgentTag, DeleteAgentTagCommand
from application.use_cases.get_agent import GetAgent, GetAgentQuery
from application.use_cases.list_agent_tags import ListAgentTags, ListAgentTagsQuery
from application.use_cases.list_agents import ListAgents, ListAgentsQuery
from application.use_cases.update_agent import UpdateAgent, UpdateAgentCommand
from domain.errors import Conflict, Forbidden, Invalid, NotFound
from domain.identity import ADMIN_ROLE, AGENTS_MANAGE, Caller
from domain.knowledge_bases import NewKnowledgeBase
from domain.skills import SkillManifest
from tests.fakes import FakeKnowledgeBases, FakeUnitOfWork
from tests.fakes.agents import FakeAgents
from tests.fakes.skills import FakeSkillRepository

ADMIN = Caller(user_id="user_1", org_id="org_a", role=ADMIN_ROLE)
MANAGER = Caller(user_id="user_2", org_id="org_a", permissions=frozenset({AGENTS_MANAGE}))
MEMBER = Caller(user_id="user_3", org_id="org_a")
STRANGER = Caller(user_id="user_9", org_id="org_b", role=ADMIN_ROLE)


@dataclass
class Agents:
    agents: FakeAgents
    kbs: FakeKnowledgeBases
    uow: FakeUnitOfWork
    skills: FakeSkillRepository = field(default_factory=FakeSkillRepository)

    def create(self, default: str = "local:smollm2-135m") -> CreateAgent:
        return CreateAgent(self.agents, self.kbs, self.skills, self.uow, default)

    def update(self) -> UpdateAgent:
        return UpdateAgent(self.agents, self.kbs, self.skills, self.uow, "openai:gpt-4o-mini")

    async def kb(self, org: str = "org_a") -> int:
        kb = await self.kbs.add(
            NewKnowledgeBase(
                org_id=org,
                user_id="u",
                name="Docs",
                description="",
                embedding_model="local:all-MiniLM-L6-v2",
                embedding_dimensions=384,
                extraction_model=None,
                extraction_schema=None,
            )
        )
        return kb.id

    async def skill(self, name: str, org: str = "org_a") -> int:
        manifest = SkillManifest(name=name, description="d")
        document = SkillDocument(manifest=manifest, skill_md=f"---\nname: {name}\n", sha256="0")
        return (await self.skills.add(org, "u", document)).id

    async def tag(self, name: str = "support", org_caller: Caller = ADMIN) -> int:
        tag = await CreateAgentTag(self.agents, self.uow).execute(
            CreateAgentTagCommand.parse(caller=org_caller, name=name)
        )
        return tag.id


@pytest.fixture
def w() -> Agents:
    agents, kbs = FakeAgents(), FakeKnowledgeBases()
    return Agents(agents, kbs, FakeUnitOfWork(agents, kbs))


async def test_create_validates_fills_defaults_and_commits(w):
    kb1, kb2 = await w.kb(), await w.kb()
    tag = await w.tag()
    s1, s2 = await w.skill("one"), await w.skill("two")
    agent = await w.create("openai:gpt-4o").execute(
        CreateAgentCommand.parse(
            caller=MANAGER,
            name="  Helper ",
            role="Answer briefly.",
            knowledge_base_ids=[kb2, kb1, kb2],
            skill_ids=[str(s2), s2, s1],
            tag_ids=[tag],
        )
    )
    assert (agent.name, agent.description, agent.role) == ("Helper", "", "Answer briefly.")
    assert agent.model == "openai:gpt-4o" and agent.user_id == "user_2"
    assert agent.knowledge_base_ids == [kb2, kb1] and agent.skill_ids == [s2, s1]
    assert [t.name for t in agent.tags] == ["support"]
    assert w.uow.commits == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": ""}, "Name is required"),
        ({"name": "x" * 201}, "Name must be at most 200 characters"),
        ({"description": 5}, "description must be a string"),
        ({"role": "x" * 20_001}, "role must be at most 20000 characters"),
        ({"model": "acme:big"}, "Unknown provider 'acme'"),
        ({"model": "local:llama-70b"}, "Unknown local chat model 'llama-70b'"),
        ({"model": "nocolon"}, "model must have the form provider:model"),
        ({"knowledge_base_ids": "1"}, "knowledgeBaseIds must be a list of ids"),
        ({"skill_ids": [0]}, "skillIds must hold positive integer ids"),
        ({"tag_ids": list(range(1, 52))}, "tagIds may hold at most 50 ids"),
    ],
)
async def test_create_refuses_bad_fields(w, fields, message):
    with pytest.raises(Invalid, match=message):
        await w.create().execute(CreateAgentCommand.parse(caller=ADMIN, **{"name": "A", **fields}))
    assert w.agents.rows == {} and w.uow.commits == 0


async def test_create_refuses_knowledge_bases_and_tags_of_another_organization(w):
    mine, foreign = await w.kb(), await w.kb("org_b")
    with pytest.raises(Invalid) as error:
        await w.create().execute(
            CreateAgentCommand.parse(caller=ADMIN, name="A", knowledge_base_ids=[mine, foreign, 99])
        )
    assert error.value.message == f"Unknown knowledge base ids: {foreign}, 99"
    assert [d["field"] for d in error.value.details] == ["knowledgeBaseIds"] * 2
    foreign_tag = await w.tag("x", STRANGER)
    with pytest.raises(Invalid, match=f"Unknown tag ids: {foreign_tag}"):
        await w.create().execute(
            CreateAgentCommand.parse(caller=ADMIN, name="A", tag_ids=[foreign_tag])
        )
    assert w.agents.rows == {}


@pytest.mark.parametrize("caller", [MEMBER, Caller(user_id="u", org_id="org_a", role="org:member")])
async def test_a_plain_member_may_not_manage_agents_or_tags(w, caller):
    agent = await w.create().execute(CreateAgentCommand.parse(caller=ADMIN, name="A"))
    tag = await w.tag()
    attempts = [
        lambda: w.create().execute(CreateAgentCommand.parse(caller=caller, name="B")),
        lambda: w.update().execute(
            UpdateAgentCommand.parse(caller=caller, agent_id=agent.id, name="C")
        ),
        lambda: DeleteAgent(w.agents, w.uow).execute(
            DeleteAgentCommand.parse(caller=caller, agent_id=agent.id)
        ),
        lambda: CreateAgentTag(w.agents, w.uow).execute(
            CreateAgentTagCommand.parse(caller=caller, name="t")
        ),
        lambda: DeleteAgentTag(w.agents, w.uow).execute(
            DeleteAgentTagCommand.parse(caller=caller, tag_id=tag)
        ),
    ]
    for attempt in attempts:
        with pytest.raises(Forbidden, match="Agent management permission required"):
            await attempt()
    assert [
        a.name for a in await ListAgents(w.agents).execute(ListAgentsQuery.parse(caller=caller))
    ] == ["A"]
    got = await GetAgent(w.agents).execute(
        GetAgentQuery.parse(caller=caller, agent_id=str(agent.id))
    )
    assert got.id == agent.id
    assert len(await ListAgentTags(w.agents).execute(ListAgentTagsQuery(caller=caller))) == 1


async def test_get_refuses_bad_ids_and_hides_foreign_agents(w):
    agent = await w.create().execute(CreateAgentCommand.parse(caller=ADMIN, name="A"))
    get = GetAgent(w.agents)
    for bad in ("abc", "0", "-1", None, "1.5", True):
        with pytest.raises(Invalid, match="Valid agent ID is required"):
            await get.execute(GetAgentQuery.parse(caller=ADMIN, agent_id=bad))
    with pytest.raises(NotFound, match="Agent not found"):
        await get.execute(GetAgentQuery.parse(caller=STRANGER, agent_id=agent.id))
    with pytest.raises(NotFound, match="Agent not found"):
        await get.execute(GetAgentQuery.parse(caller=ADMIN, agent_id=agent.id + 100))


async def test_list_filters_by_tag_newest_first(w):
    tag = await w.tag()
    first = await w.create().execute(
        CreateAgentCommand.parse(caller=ADMIN, name="First", tag_ids=[tag])
    )
    await w.create().execute(CreateAgentCommand.parse(caller=ADMIN, name="Untagged"))
    third = await w.create().execute(
        CreateAgentCommand.parse(caller=ADMIN, name="Third", tag_ids=[tag])
    )
    await w.create().execute(CreateAgentCommand.parse(caller=STRANGER, name="Theirs"))
    listing = ListAgents(w.agents)
    everything = await listing.execute(ListAgentsQuery.parse(caller=ADMIN))
    assert [a.name for a in everything] == ["Third", "Untagged", "First"]
    tagged = await listing.execute(ListAgentsQuery.parse(caller=ADMIN, tag_id=str(tag)))
    assert [a.id for a in tagged] == [third.id, first.id]
    with pytest.raises(Invalid, match="Valid tag ID is required"):
        await listing.execute(ListAgentsQuery.parse(caller=ADMIN, tag_id="x"))


async def test_update_changes_only_what_was_sent(w):
    kb = await w.kb()
    tag = await w.tag()
    agent = await w.create().execute(
        CreateAgentCommand.parse(caller=ADMIN, name="A", description="d", role="r", tag_ids=[tag])
    )
    updated = await w.update().execute(
        UpdateAgentCommand.parse(
            caller=MANAGER, agent_id=agent.id, name="B", knowledge_base_ids=[kb]
        )
    )
    assert (updated.name, updated.description, updated.role) == ("B", "d", "r")
    assert updated.knowledge_base_ids == [kb] and [t.id for t in updated.tags] == [tag]
    assert updated.updated_at > agent.updated_at
    cleared = await w.update().execute(
        UpdateAgentCommand.parse(
            caller=ADMIN, agent_id=agent.id, description=None, tag_ids=None, model=None
        )
    )
    assert cleared.description == "" and cleared.tags == [] and cleared.name == "B"
    assert cleared.model == "openai:gpt-4o-mini"


async def test_update_refuses_bad_input_without_changing_anything(w):
    agent = await w.create().execute(CreateAgentCommand.parse(caller=ADMIN, name="A"))
    foreign_kb = await w.kb("org_b")
    update = w.update()
    cases = [
        ({"agent_id": "x"}, Invalid, "Valid agent ID is required"),
        ({"agent_id": agent.id, "name": None}, Invalid, "Name"),
        ({"agent_id": agent.id, "model": "local:nope"}, Invalid, "Unknown local chat model"),
        (
            {"agent_id": agent.id, "knowledge_base_ids": [foreign_kb]},
            Invalid,
            "Unknown knowledge base ids",
        ),
    ]
    for fields, error, message in cases:
        with pytest.raises(error, match=message):
            await update.execute(UpdateAgentCommand.parse(caller=ADMIN, **fields))
    with pytest.raises(NotFound, match="Agent"):
        await update.execute(UpdateAgentCommand.parse(caller=STRANGER, agent_id=agent.id, name="B"))
    assert (await w.agents.get("org_a", agent.id)) == agent


async def test_delete_removes_the_agent_of_the_organization_only(w):
    agent = await w.create().execute(CreateAgentCommand.parse(caller=ADMIN, name="A"))
    delete = DeleteAgent(w.agents, w.uow)
    with pytest.raises(NotFound, match="Agent not found"):
        await delete.execute(DeleteAgentCommand.parse(caller=STRANGER, agent_id=agent.id))
    with pytest.raises(Invalid, match="Valid agent ID is required"):
        await delete.execute(DeleteAgentCommand.parse(caller=ADMIN, agent_id=None))
    await delete.execute(DeleteAgentCommand.parse(caller=ADMIN, agent_id=str(agent.id)))
    assert w.agents.rows == {}
    with pytest.raises(NotFound):
        await delete.execute(DeleteAgentCommand.parse(caller=ADMIN, agent_id=agent.id))


async def test_tags_validate_conflict_and_deletion_takes_them_off_agents(w):
    create_tag = CreateAgentTag(w.agents, w.uow)
    tag = await create_tag.execute(
        CreateAgentTagCommand.parse(caller=MANAGER, name=" Sales ", color="#A0B1C2")
    )
    assert (tag.name, tag.color, tag.org_id) == ("Sales", "#a0b1c2", "org_a")
    for bad, message in [({"name": ""}, "Name is required"), ({"color": "red"}, "#RRGGBB")]:
        with pytest.raises(Invalid, match=message):
            await create_tag.execute(
                CreateAgentTagCommand.parse(caller=ADMIN, **{"name": "x", **bad})
            )
    with pytest.raises(Conflict):
        await create_tag.execute(CreateAgentTagCommand.parse(caller=ADMIN, name="Sales"))
    await create_tag.execute(CreateAgentTagCommand.parse(caller=STRANGER, name="Sales"))
    agent = await w.create().execute(
        CreateAgentCommand.parse(caller=ADMIN, name="A", tag_ids=[tag.id])
    )
    delete_tag = DeleteAgentTag(w.agents, w.uow)
    with pytest.raises(NotFound, match="Tag not found"):
        await delete_tag.execute(DeleteAgentTagCommand.parse(caller=STRANGER, tag_id=tag.id))
    with pytest.raises(Invalid, match="Valid tag ID is required"):
        await delete_tag.execute(DeleteAgentTagCommand.parse(caller=ADMIN, tag_id="0"))
    await delete_tag.execute(DeleteAgentTagCommand.parse(caller=ADMIN, tag_id=tag.id))
    assert (await w.agents.get("org_a", agent.id)).tags == []  # type: ignore[union-attr]
    names = await ListAgentTags(w.agents).execute(ListAgentTagsQuery(caller=STRANGER))
    assert [t.name for t in names] == ["Sales"]
