"""The OpenAPI document covers every endpoint with its request and response shapes."""

from __future__ import annotations

import re

ROUTES = {
    ("/kb/manage", "post"),
    ("/kb/manage", "get"),
    ("/kb/manage", "patch"),
    ("/kb/manage", "delete"),
    ("/kb/files", "get"),
    ("/kb/files", "post"),
    ("/kb/files", "delete"),
    ("/upload/presigned", "post"),
    ("/storage/{key}", "put"),
}


async def test_openapi_document(session_client):
    response = await session_client.get("/schema/openapi.json")
    assert response.status_code == 200
    document = response.json()
    paths = document["paths"]
    present = {(path, method) for path, ops in paths.items() for method in ops}
    assert present >= ROUTES
    schemas = document["components"]["schemas"]
    for name in (
        "AssociateFileBody",
        "FileResponse",
        "KnowledgeBaseListResponse",
        "PresignBody",
        "PresignResponse",
        "ErrorBody",
    ):
        assert any(key.endswith(name) for key in schemas), name
    post_files = paths["/kb/files"]["post"]
    assert "requestBody" in post_files
    assert {"201", "400", "401", "404"} <= set(post_files["responses"])
    assert "BearerToken" in document["components"]["securitySchemes"]
    props = next(v for k, v in schemas.items() if k.endswith("AssociateFileBody"))["properties"]
    assert {"kbId", "fileId", "fileName", "fileKey", "contentKey", "contentType"} <= set(props)


SPEC_4_3_REQUIRED = {"kbId", "fileId", "fileName", "fileKey", "contentKey", "contentType"}


async def document(client) -> dict:
    response = await client.get("/schema/openapi.json")
    assert response.status_code == 200
    return response.json()


def resolve(doc: dict, schema: dict) -> dict:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    return doc["components"]["schemas"][ref.rsplit("/", 1)[1]]


async def test_associate_file_declares_spec_types_and_required_fields(session_client):
    doc = await document(session_client)
    body = doc["paths"]["/kb/files"]["post"]["requestBody"]
    assert body["required"] is True
    schema = resolve(doc, body["content"]["application/json"]["schema"])
    assert set(schema["required"]) == SPEC_4_3_REQUIRED
    props = schema["properties"]
    assert props["kbId"]["type"] == "integer"
    assert props["kbId"]["minimum"] == 1 and props["kbId"]["maximum"] == 2**63 - 1
    assert (props["fileId"]["type"], props["fileId"]["format"]) == ("string", "uuid")
    for field in ("fileName", "fileKey", "contentKey", "contentType"):
        assert props[field]["type"] == "string" and props[field]["minLength"] == 1
    assert "fileSize" in props and "userMetadata" in props


async def test_query_ids_are_typed_and_required(session_client):
    doc = await document(session_client)

    def parameter(path: str, method: str, name: str) -> dict:
        params = doc["paths"][path][method]["parameters"]
        return next(p for p in params if p["name"] == name)

    for path, method, name, required in (
        ("/kb/files", "get", "kbId", True),
        ("/kb/manage", "delete", "kbId", True),
        ("/agents", "delete", "agentId", True),
        ("/agents", "get", "agentId", False),
        ("/agents/tags", "delete", "tagId", True),
    ):
        found = parameter(path, method, name)
        assert found["required"] is required, (path, method, name)
        assert (found["schema"]["type"], found["schema"]["minimum"]) == ("integer", 1)
    thread = parameter("/getConversation", "get", "threadId")
    assert thread["required"] and thread["schema"]["format"] == "uuid"


async def test_every_operation_documents_its_answers(session_client):
    doc = await document(session_client)
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            # A download's success is its redirect to the signed address.
            assert any(code[0] in "23" for code in codes), (path, method)
            assert "500" in codes, (path, method)
            public = operation.get("security") == []
            assert public or "401" in codes, (path, method)
            if "requestBody" in operation and not path.startswith("/storage/"):
                assert {"400", "415"} <= codes, (path, method)


async def test_public_operations_need_no_token(session_client):
    doc = await document(session_client)
    assert doc["security"] == [{"BearerToken": []}]
    for path, method in (
        ("/health", "get"),
        ("/.well-known/jwks.json", "get"),
        ("/storage/{key}", "put"),
    ):
        assert doc["paths"][path][method]["security"] == [], path
    assert "security" not in doc["paths"]["/kb/files"]["get"]


async def test_signed_upload_documents_its_query(session_client):
    doc = await document(session_client)
    put = doc["paths"]["/storage/{key}"]["put"]
    query = {p["name"]: p for p in put["parameters"] if p["in"] == "query"}
    assert set(query) == {"ct", "size", "exp", "sig"}
    assert all(p["required"] for p in query.values())
    assert put["requestBody"]["required"] is True


async def test_chat_documents_the_stream_and_the_polling_mode(session_client):
    doc = await document(session_client)
    post = doc["paths"]["/chat"]["post"]
    streamed = post["responses"]["200"]
    assert set(streamed["content"]) == {"text/event-stream"}
    assert "X-Thread-ID" in streamed["headers"]
    accepted = resolve(doc, post["responses"]["202"]["content"]["application/json"]["schema"])
    assert set(accepted["properties"]) == {"threadId", "status"}
    header = next(p for p in post["parameters"] if p["name"] == "X-Stream-Response")
    assert header["in"] == "header" and not header["required"]
    resume = doc["paths"]["/chat/{thread_id}/stream"]["get"]["responses"]
    assert "text/event-stream" in resume["200"]["content"] and "204" in resume


async def test_interactive_page(session_client):
    response = await session_client.get("/schema")
    assert response.status_code == 200 and "text/html" in response.headers["content-type"]


async def test_interactive_page_works_offline(session_client):
    """The page's script and styles come from the service (the pinned swagger-ui-bundle-v2
    package), not from a CDN."""
    page = (await session_client.get("/schema")).text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)
    assert assets, page
    assert not [a for a in assets if "//" in a], assets
    assert "cdn." not in page and "unpkg" not in page
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    for asset in assets:
        response = await session_client.get(asset)
        assert response.status_code == 200, asset
        assert len(response.content) > 500, asset
