"""`/agents` and `/agents/tags`: manage the organization's agents and their tags."""

from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar import Controller, delete, get, patch, post
from litestar.params import JSONBody

from application.use_cases.create_agent import CreateAgent, CreateAgentCommand
from application.use_cases.create_agent_tag import CreateAgentTag, CreateAgentTagCommand
from application.use_cases.delete_agent import DeleteAgent, DeleteAgentCommand
from application.use_cases.delete_agent_tag import DeleteAgentTag, DeleteAgentTagCommand
from application.use_cases.get_agent import GetAgent, GetAgentQuery
from application.use_cases.list_agent_tags import ListAgentTags, ListAgentTagsQuery
from application.use_cases.list_agents import ListAgents, ListAgentsQuery
from application.use_cases.update_agent import UpdateAgent, UpdateAgentCommand
from domain.agents import require_agent_manager
from domain.identity import Caller
from entrypoints.http.agent_schemas import (
    AgentListResponse,
    AgentOut,
    AgentResponse,
    AgentTagListResponse,
    AgentTagOut,
    AgentTagResponse,
    CreateAgentBody,
    CreateAgentTagBody,
    UpdateAgentBody,
)
from entrypoints.http.injection import inject
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.params import AGENT_ID, TAG_ID
from entrypoints.http.rules import access
from entrypoints.http.schemas import SuccessMessage, command


class AgentController(Controller):
    path = "/agents"
    tags = ["Agents"]

    @post(
        status_code=201,
        responses=body_errors(403),
        summary="Create an agent",
        opt=access(require_agent_manager),
    )
    @inject
    async def create(
        self,
        data: JSONBody[CreateAgentBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[CreateAgent],
    ) -> AgentResponse:
        agent = await use_case.execute(command(CreateAgentCommand.parse, data, caller=caller))
        return AgentResponse(success=True, agent=AgentOut.of(agent))

    @get(
        responses=errors(400, 403, 404),
        summary="List the organization's agents, or get one with agentId",
        description="With `agentId` the body is `{success, agent}`; otherwise "
        "`{success, agents}`, newest first, optionally only those tagged `tagId`.",
    )
    @inject
    async def read(
        self,
        caller: FromDishka[Caller],
        list_agents: FromDishka[ListAgents],
        get_agent: FromDishka[GetAgent],
        agent_id: Annotated[int | None, AGENT_ID] = None,
        tag_id: Annotated[int | None, TAG_ID] = None,
    ) -> AgentResponse | AgentListResponse:
        if agent_id is not None:
            agent = await get_agent.execute(GetAgentQuery.parse(caller=caller, agent_id=agent_id))
            return AgentResponse(success=True, agent=AgentOut.of(agent))
        agents = await list_agents.execute(ListAgentsQuery.parse(caller=caller, tag_id=tag_id))
        return AgentListResponse(success=True, agents=[AgentOut.of(a) for a in agents])

    @patch(
        responses=body_errors(403, 404),
        summary="Change an agent",
        opt=access(require_agent_manager),
    )
    @inject
    async def update(
        self,
        data: JSONBody[UpdateAgentBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[UpdateAgent],
    ) -> AgentResponse:
        agent = await use_case.execute(command(UpdateAgentCommand.parse, data, caller=caller))
        return AgentResponse(success=True, agent=AgentOut.of(agent))

    @delete(
        status_code=200,
        responses=errors(400, 403, 404),
        summary="Delete an agent",
        opt=access(require_agent_manager),
    )
    @inject
    async def remove(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteAgent],
        agent_id: Annotated[int, AGENT_ID],
    ) -> SuccessMessage:
        await use_case.execute(DeleteAgentCommand.parse(caller=caller, agent_id=agent_id))
        return SuccessMessage(success=True, message="Agent deleted")

    @post(
        "/tags",
        status_code=201,
        responses=body_errors(403, 409),
        summary="Create an agent tag",
        opt=access(require_agent_manager),
    )
    @inject
    async def create_tag(
        self,
        data: JSONBody[CreateAgentTagBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[CreateAgentTag],
    ) -> AgentTagResponse:
        tag = await use_case.execute(command(CreateAgentTagCommand.parse, data, caller=caller))
        return AgentTagResponse(success=True, tag=AgentTagOut.from_entity(tag))

    @get("/tags", responses=errors(403), summary="List the organization's agent tags")
    @inject
    async def list_tags(
        self, caller: FromDishka[Caller], use_case: FromDishka[ListAgentTags]
    ) -> AgentTagListResponse:
        tags = await use_case.execute(ListAgentTagsQuery(caller=caller))
        return AgentTagListResponse(success=True, tags=AgentTagOut.from_entities(tags))

    @delete(
        "/tags",
        status_code=200,
        responses=errors(400, 403, 404),
        summary="Delete an agent tag and take it off every agent",
        opt=access(require_agent_manager),
    )
    @inject
    async def remove_tag(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteAgentTag],
        tag_id: Annotated[int, TAG_ID],
    ) -> SuccessMessage:
        await use_case.execute(DeleteAgentTagCommand.parse(caller=caller, tag_id=tag_id))
        return SuccessMessage(success=True, message="Tag deleted")
