"""The rules the HTTP edge answers with are declared where their fields are: each request
struct's `rules` name its own fields, and every route's parameter that shares a name with
another route's carries the same rule (no route can forget one, no rule can name a field that
does not exist)."""

from __future__ import annotations

import inspect
from typing import Any

import msgspec
import pytest
from litestar import Litestar

from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.http import params
from entrypoints.http.app import create_litestar
from entrypoints.http.rules import RuledPath, RuledQuery
from entrypoints.http.schemas import Camel
from entrypoints.http.validation import _edge, param_error

SHARED = {
    kwarg.name or "": kwarg
    for kwarg in vars(params).values()
    if isinstance(kwarg, RuledQuery) and kwarg.rule is not None
}


@pytest.fixture(scope="module")
def app() -> Litestar:
    # Nothing listens there: building the app opens no connection.
    return create_litestar(Settings.from_env({}), Database("postgresql://nobody@127.0.0.1:9/x"))


def _handlers(app: Litestar) -> list[Any]:
    return [h for route in app.routes for h in getattr(route, "route_handlers", [])]


def _bodies() -> list[type[Camel]]:
    found: list[type[Camel]] = []
    pending: list[type[Camel]] = [Camel]
    while pending:
        struct = pending.pop()
        found.append(struct)
        pending.extend(struct.__subclasses__())
    return [s for s in found if s.rules]


def test_every_body_rule_names_a_field_of_its_struct(app):
    bodies = _bodies()
    assert len(bodies) >= 15
    for struct in bodies:
        wire = {f.encode_name for f in msgspec.structs.fields(struct)}
        strays = {rule.field for rule in struct.rules} - wire
        assert not strays, f"{struct.__name__} has rules for {strays}, which it does not have"


def test_every_shared_parameter_carries_its_rule_on_every_route(app):
    checked = 0
    for handler in _handlers(app):
        for wire, _source, _required, rule in _edge(handler).params:
            if wire in SHARED:
                checked += 1
                assert rule is SHARED[wire].rule, (handler.handler_name, wire)
    assert checked >= 15


def test_every_ruled_parameter_of_the_app_is_found_by_the_edge(app):
    ruled = 0
    for handler in _handlers(app):
        declared = {
            name: definition.kwarg_definition
            for name, definition in handler.parsed_fn_signature.parameters.items()
            if isinstance(definition.kwarg_definition, RuledQuery | RuledPath)
            and definition.kwarg_definition.rule is not None
        }
        seen = {rule for *_, rule in _edge(handler).params if rule is not None}
        for kwarg in declared.values():
            ruled += 1
            assert kwarg.rule in seen, handler.handler_name
            wire = kwarg.name or next(n for n, k in declared.items() if k is kwarg)
            error = param_error(handler, wire, "")
            assert error is not None and error.message == kwarg.rule.message
    assert ruled >= 20


def test_the_route_specific_rules_keep_their_messages(app):
    by_name = {h.handler_name: h for h in _handlers(app)}
    limit = "limit must be an integer from 1 to 100"
    part = "part must be one of original, content, image"
    page = "page must be a positive integer, and only with part=image"
    cases = [
        ("list_conversations", "limit", "101", "100", limit),
        ("audit_log", "limit", "0", "1", limit),
        ("download_file", "part", "thumbnail", "image", part),
        ("download_file", "page", "x", "3", page),
        ("read_file", "path", "../x", "scripts/a.py", "Invalid file path"),
    ]
    for handler, wire, bad, good, message in cases:
        error = param_error(by_name[handler], wire, bad)
        assert error is not None and error.message == message, (handler, wire)
        assert param_error(by_name[handler], wire, good) is None


def test_the_rules_are_declared_beside_their_structs_not_in_the_mechanism():
    from entrypoints.http import validation

    source = inspect.getsource(validation)
    for feature in ("agent_schemas", "knowledge_base_schemas", "skill_schemas", "KB_ID_REQUIRED"):
        assert feature not in source


def test_every_request_struct_fits_the_parse_of_its_command():
    """`command(X.parse, data, caller=...)` passes a struct's fields by name: each must be one
    its command's `parse` takes (a field the domain does not know is a programming error)."""
    from application.use_cases import (
        associate_file,
        create_agent,
        create_agent_tag,
        create_invitation,
        create_knowledge_base,
        create_scheduled_task,
        create_skill,
        create_upload,
        put_skill_file,
        remove_members,
        rename_conversation,
        reprocess_file,
        run_scheduled_task_now,
        send_chat_message,
        update_agent,
        update_knowledge_base,
        update_scheduled_task,
        update_skill,
    )
    from domain.agents import AGENT_FIELDS
    from domain.files import NewFile
    from domain.knowledge_bases import KNOWLEDGE_BASE_CHANGES, KNOWLEDGE_BASE_FIELDS
    from domain.schedules import task_fields
    from entrypoints.http import (
        agent_schemas,
        chat_schemas,
        conversation_schemas,
        member_schemas,
        schedule_schemas,
        skill_schemas,
    )
    from entrypoints.http import knowledge_base_schemas as kb

    pairs = [
        (agent_schemas.CreateAgentBody, create_agent.CreateAgentCommand),
        (agent_schemas.UpdateAgentBody, update_agent.UpdateAgentCommand),
        (agent_schemas.CreateAgentTagBody, create_agent_tag.CreateAgentTagCommand),
        (kb.CreateKnowledgeBaseBody, create_knowledge_base.CreateKnowledgeBaseCommand),
        (kb.UpdateKnowledgeBaseBody, update_knowledge_base.UpdateKnowledgeBaseCommand),
        (kb.AssociateFileBody, associate_file.AssociateFileCommand),
        (kb.ReprocessBody, reprocess_file.ReprocessFileCommand),
        (kb.PresignBody, create_upload.CreateUploadCommand),
        (chat_schemas.ChatBody, send_chat_message.SendChatMessageCommand),
        (
            conversation_schemas.RenameConversationBody,
            rename_conversation.RenameConversationCommand,
        ),
        (skill_schemas.CreateSkillBody, create_skill.CreateSkillCommand),
        (skill_schemas.UpdateSkillBody, update_skill.UpdateSkillCommand),
        (skill_schemas.PutSkillFileBody, put_skill_file.PutSkillFileCommand),
        (member_schemas.CreateInvitationBody, create_invitation.CreateInvitationCommand),
        (member_schemas.BulkRemoveBody, remove_members.RemoveMembersCommand),
        (member_schemas.DeleteUsersBody, remove_members.RemoveMembersCommand),
        (
            schedule_schemas.CreateTaskBody,
            create_scheduled_task.CreateScheduledTaskCommand,
        ),
        (
            schedule_schemas.UpdateTaskBody,
            update_scheduled_task.UpdateScheduledTaskCommand,
        ),
        (
            schedule_schemas.RunTaskBody,
            run_scheduled_task_now.RunScheduledTaskNowCommand,
        ),
    ]
    # The parses that take a resource's fields as **fields hand them to its field table (or to
    # `NewFile.parse`): those are the names they accept.
    tables = {
        create_agent.CreateAgentCommand: AGENT_FIELDS,
        update_agent.UpdateAgentCommand: AGENT_FIELDS,
        create_knowledge_base.CreateKnowledgeBaseCommand: KNOWLEDGE_BASE_FIELDS,
        update_knowledge_base.UpdateKnowledgeBaseCommand: KNOWLEDGE_BASE_CHANGES,
        associate_file.AssociateFileCommand: inspect.signature(NewFile.parse).parameters,
        create_scheduled_task.CreateScheduledTaskCommand: task_fields(str),
        update_scheduled_task.UpdateScheduledTaskCommand: task_fields(str),
    }
    for struct, kind in pairs:
        signature = inspect.signature(kind.parse)
        named = {n for n, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY}
        accepted = named | set(tables.get(kind, ()))
        strays = set(struct.__struct_fields__) - accepted
        assert not strays, f"{struct.__name__} sends {strays}, which {kind.__name__} does not take"
        if kind not in tables:
            assert not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()), kind
