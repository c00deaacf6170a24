"""The API docs, offline: Swagger UI at /docs (and /docs/swagger), its files served by memsys itself from the
``swagger-ui-bundle-v2`` package (no CDN: the page works on a machine without internet), the ``msk_`` bearer
keys declared in the OpenAPI document so that "Authorize" works, and ``GET /`` pointing to the docs and the
inspector. Scalar, the former /docs, went: the Python packages that carry its script are Flask plugins, and it
fetches fonts from its own CDN unless told not to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from litestar import Request, get
from litestar.enums import MediaType
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, Operation, Schema, SecurityScheme
from litestar.params import FromPath
from litestar.plugins import ReceiveRoutePlugin
from litestar.plugins.pydantic import PydanticSchemaPlugin
from litestar.plugins.pydantic.utils import is_pydantic_model_class
from litestar.response import File, Response
from litestar.routes import BaseRoute, HTTPRoute
from litestar.typing import FieldDefinition
from swagger_ui_bundle import swagger_ui_path

from app.errors import NotFound
from app.http.auth import DOCS_PATHS, INSPECTOR_PATH
from app.http.envelope import ok

if TYPE_CHECKING:
    from litestar._openapi.schema_generation import SchemaCreator

DOCS_PATH = DOCS_PATHS[0]
ASSETS_PATH = f"{DOCS_PATH}/assets"
SECURITY_SCHEME = "memsys_key"
# The files the page loads, and only those: the package's own index.html would load a demo API from the internet.
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}
FAVICON = f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>"
LINKS = {
    "docs": DOCS_PATH,
    "openapi": f"{DOCS_PATH}/openapi.json",
    "inspector": INSPECTOR_PATH,
    "health": "/health",
}
KEYS = (
    "An API key `msk_…` made by `memsys keys create --tenant NAME` (the key is its tenant), sent as "
    "`Authorization: Bearer msk_…`. Every route needs one but /, /health, /health/live, /metrics and these docs; "
    "only while no key exists, a server on a loopback address (or with MEMSYS_ALLOW_ANONYMOUS=true) answers without "
    "one, in tenant `default`."
)


def openapi_config() -> OpenAPIConfig:
    """The OpenAPI document at /docs/openapi.json, with the bearer scheme required by every operation (the public
    ones override it: ``PublicOperations``), rendered by Swagger UI from local files at /docs and /docs/swagger."""
    swagger_ui = SwaggerRenderPlugin(
        path=["/", "/swagger"],
        js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        css_url=f"{ASSETS_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
        favicon=FAVICON,
    )
    scheme = SecurityScheme(type="http", scheme="bearer", bearer_format="msk_…", description=KEYS)
    return OpenAPIConfig(
        title="memsys",
        version="0.1.0",
        description="Long-term memory for LLM agents on one PostgreSQL (Agentic v3 API).",
        path=DOCS_PATH,
        render_plugins=[swagger_ui],
        components=Components(security_schemes={SECURITY_SCHEME: scheme}),
        security=[{SECURITY_SCHEME: []}],
    )


@dataclass
class PublicOperation(Operation):
    """An operation that needs no key: ``security: []`` overrides the document's bearer requirement."""

    def __post_init__(self) -> None:
        self.security = []


class PublicOperations(ReceiveRoutePlugin):
    """The routes the guard lets in without a key (``opt={"public": True}``, app.http.auth) say so in the OpenAPI
    document too: one marker for both."""

    def receive_route(self, route: BaseRoute) -> None:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                if isinstance(handler, HTTPRouteHandler) and handler.opt.get("public"):
                    handler.operation_class = PublicOperation


class ClosedModelSchemas(PydanticSchemaPlugin):
    """Pydantic models in the OpenAPI document, each model that refuses unknown fields (every v3 request:
    ``app.validation.RequestModel``) with ``additionalProperties: false``, so that the document says what the
    server does (Litestar leaves it out) to a generated client, and to schemathesis."""

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: SchemaCreator) -> Schema:
        schema = super().to_openapi_schema(field_definition, schema_creator)
        model = field_definition.annotation
        if is_pydantic_model_class(model) and model.model_config.get("extra") == "forbid":
            schema.additional_properties = False
        return schema


@get(f"{ASSETS_PATH}/{{name:str}}", opt={"public": True}, include_in_schema=False, sync_to_thread=False)
def docs_asset(name: FromPath[str]) -> File:
    """A file of Swagger UI from the installed package."""
    media_type = ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"No docs asset {name!r}")
    return File(swagger_ui_path / name, media_type=media_type, content_disposition_type="inline")


@get("/", operation_id="index", opt={"public": True}, include_in_schema=False)
async def index(request: Request) -> Response:
    """Where to go from the server's root: a page of links for a browser, the same links as JSON for a client
    that asks for ``application/json``. No key needed."""
    if request.accept.best_match([MediaType.HTML, MediaType.JSON], default=MediaType.HTML) == MediaType.JSON:
        return Response(ok("memsys", LINKS), media_type=MediaType.JSON)
    return Response(INDEX_PAGE, media_type=MediaType.HTML)


INDEX_PAGE = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>memsys</title>
{FAVICON}
<style>body {{ font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; line-height: 1.5 }}</style>
</head>
<body>
<h1>memsys</h1>
<p>Long-term memory for LLM agents on one PostgreSQL.</p>
<ul>
<li><a href="{LINKS["docs"]}">API docs</a> (Swagger UI): every route, tried from the page after
"Authorize" with an <code>msk_</code> key from <code>memsys keys create --tenant NAME</code></li>
<li><a href="{LINKS["inspector"]}">Inspector</a>: a tenant's groups, memories and searches</li>
<li><a href="{LINKS["openapi"]}">OpenAPI document</a> (JSON)</li>
<li><a href="{LINKS["health"]}">Health</a></li>
</ul>
</body>
</html>
"""
