"""The OpenAPI document covers every endpoint with its request and response shapes."""

from __future__ import annotations

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


async def test_interactive_page(session_client):
    response = await session_client.get("/schema")
    assert response.status_code == 200 and "text/html" in response.headers["content-type"]
