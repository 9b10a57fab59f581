"""`/skills/manage`, `/skills/files` and `/skills/import`: the organization's skills (Agent
Skills bundles), their bundled files, and import from a zip archive."""

from __future__ import annotations

from typing import Annotated, Any

from dishka import FromDishka
from litestar import Controller, Request, Response, Router, delete, get, post, put
from litestar.exceptions import HTTPException
from litestar.params import JSONBody

from adapters.storage.disposition import attachment
from application.use_cases.create_skill import CreateSkill, CreateSkillCommand
from application.use_cases.delete_skill_file import DeleteSkillFile, DeleteSkillFileCommand
from application.use_cases.get_skill import GetSkill, GetSkillQuery
from application.use_cases.get_skill_file import GetSkillFile, GetSkillFileQuery
from application.use_cases.import_skill import ImportSkill, ImportSkillCommand
from application.use_cases.list_skills import ListSkills, ListSkillsQuery
from application.use_cases.put_skill_file import PutSkillFile, PutSkillFileCommand
from application.use_cases.soft_delete_skill import SoftDeleteSkill, SoftDeleteSkillCommand
from application.use_cases.update_skill import UpdateSkill, UpdateSkillCommand
from domain.identity import Caller
from domain.skills import INVALID_PATH, PATH_MAX, SkillLimits, is_skill_path
from entrypoints.http.bodies import read_bounded
from entrypoints.http.injection import inject
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.params import SKILL_ID
from entrypoints.http.rules import ParamRule, RuledQuery
from entrypoints.http.schemas import SuccessMessage, command
from entrypoints.http.skill_schemas import (
    PATH_PATTERN,
    CreateSkillBody,
    PutSkillFileBody,
    SkillDetailOut,
    SkillFileOut,
    SkillFileResponse,
    SkillListResponse,
    SkillOut,
    SkillResponse,
    UpdateSkillBody,
)

ZIP_TYPES = ("application/zip", "application/x-zip-compressed", "application/octet-stream")
PATH = RuledQuery(
    name="path",
    min_length=1,
    max_length=PATH_MAX,
    pattern=PATH_PATTERN,
    description="The file's path in the skill's folder, e.g. `scripts/extract.py`",
    rule=ParamRule(INVALID_PATH, is_skill_path, "invalid path"),
)
# A bundled file is served for reading, never rendered on the service's origin.
FILE_HEADERS = {
    "Cache-Control": "private, no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
}


class SkillController(Controller):
    path = "/skills"
    tags = ["Skills"]

    @post("/manage", status_code=201, responses=body_errors(409), summary="Create a skill")
    @inject
    async def create(
        self,
        data: JSONBody[CreateSkillBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[CreateSkill],
    ) -> SkillResponse:
        view = await use_case.execute(command(CreateSkillCommand.parse, data, caller=caller))
        return SkillResponse(success=True, skill=SkillDetailOut.of_view(view))

    @get(
        "/manage",
        responses=errors(400, 404),
        summary="List the organization's active skills, or get one with skillId",
        description="With `skillId` the body is `{success, skill}` (with `skillMd` and "
        "`files`); otherwise `{success, skills}`, by name.",
    )
    @inject
    async def read(
        self,
        caller: FromDishka[Caller],
        list_skills: FromDishka[ListSkills],
        get_skill: FromDishka[GetSkill],
        skill_id: Annotated[int | None, SKILL_ID] = None,
    ) -> SkillResponse | SkillListResponse:
        if skill_id is not None:
            view = await get_skill.execute(GetSkillQuery.parse(caller=caller, skill_id=skill_id))
            return SkillResponse(success=True, skill=SkillDetailOut.of_view(view))
        skills = await list_skills.execute(ListSkillsQuery(caller=caller))
        return SkillListResponse(success=True, skills=[SkillOut.of(s) for s in skills])

    @put(
        "/manage",
        responses=body_errors(404, 409),
        summary="Replace a skill's SKILL.md",
        description="`expectedVersion`, when given, must be the skill's current version (409 "
        "`Skill was changed by someone else` otherwise, and nothing changes).",
    )
    @inject
    async def update(
        self,
        data: JSONBody[UpdateSkillBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[UpdateSkill],
    ) -> SkillResponse:
        view = await use_case.execute(command(UpdateSkillCommand.parse, data, caller=caller))
        return SkillResponse(success=True, skill=SkillDetailOut.of_view(view))

    @delete(
        "/manage",
        status_code=200,
        responses=errors(400, 404),
        summary="Soft-delete a skill",
        description="The skill leaves every listing and can no longer be read, changed or "
        "loaded by agents; its bundled files stay in storage.",
    )
    @inject
    async def remove(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[SoftDeleteSkill],
        skill_id: Annotated[int, SKILL_ID],
    ) -> SuccessMessage:
        await use_case.execute(SoftDeleteSkillCommand.parse(caller=caller, skill_id=skill_id))
        return SuccessMessage(success=True, message="Skill deleted")

    @post(
        "/files",
        status_code=201,
        responses=body_errors(404, 413),
        summary="Add or replace a bundled file of a skill",
    )
    @inject
    async def put_file(
        self,
        data: JSONBody[PutSkillFileBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[PutSkillFile],
    ) -> SkillFileResponse:
        file = await use_case.execute(command(PutSkillFileCommand.parse, data, caller=caller))
        return SkillFileResponse(success=True, file=SkillFileOut.from_entity(file))

    @get(
        "/files",
        responses=errors(400, 404),
        summary="Read a file of a skill (SKILL.md included)",
        description="The file's bytes, with its content type, as an attachment.",
        media_type="application/octet-stream",
    )
    @inject
    async def read_file(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[GetSkillFile],
        skill_id: Annotated[int, SKILL_ID],
        path: Annotated[str, PATH],
    ) -> Response[bytes]:
        found = await use_case.execute(
            GetSkillFileQuery.parse(caller=caller, skill_id=skill_id, path=path)
        )
        name = found.file.path.rsplit("/", 1)[-1]
        return Response(
            found.data,
            media_type=found.file.content_type,
            headers={
                **FILE_HEADERS,
                "Content-Disposition": attachment(name),
                "ETag": f'"{found.file.sha256}"',
            },
        )

    @delete(
        "/files",
        status_code=200,
        responses=errors(400, 404),
        summary="Delete a bundled file of a skill",
    )
    @inject
    async def remove_file(
        self,
        caller: FromDishka[Caller],
        use_case: FromDishka[DeleteSkillFile],
        skill_id: Annotated[int, SKILL_ID],
        path: Annotated[str, PATH],
    ) -> SuccessMessage:
        await use_case.execute(
            DeleteSkillFileCommand.parse(caller=caller, skill_id=skill_id, path=path)
        )
        return SuccessMessage(success=True, message="File deleted")

    @post(
        "/import",
        status_code=201,
        responses=errors(400, 409, 413, 415),
        summary="Create a skill from a zip archive",
        description="The body is the archive (`Content-Type: application/zip`): SKILL.md at "
        "its root or in its single top-level folder (named as the skill), the other entries "
        "bundled at their relative paths.",
        request_max_body_size=None,
    )
    @inject
    async def import_zip(
        self,
        request: Request[Any, Any, Any],
        caller: FromDishka[Caller],
        limits: FromDishka[SkillLimits],
        use_case: FromDishka[ImportSkill],
    ) -> SkillResponse:
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media not in ZIP_TYPES:
            raise HTTPException(
                status_code=415,
                detail="Send the archive as application/zip or application/octet-stream",
            )
        # An archive is never larger than what it may hold once decompressed.
        archive = await read_bounded(request, limits.max_total_bytes, "A skill archive")
        view = await use_case.execute(ImportSkillCommand(caller=caller, archive=archive))
        return SkillResponse(success=True, skill=SkillDetailOut.of_view(view))


def skill_router(limits: SkillLimits) -> Router:
    """The skill routes, with a JSON body limit that fits the largest file allowed once
    base64-encoded (a third larger) and the import reading its own body against the limits."""
    return Router(
        path="/",
        route_handlers=[SkillController],
        request_max_body_size=limits.max_file_bytes * 4 // 3 + 64 * 1024,
    )
