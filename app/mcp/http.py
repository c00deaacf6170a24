"""``/mcp``: memsys's MCP tools over streamable HTTP on the running server, behind the same keys.

The auth guard (app.http.auth) has already turned the request's bearer key into its tenant when the mount
is called; the tenant's runtime travels to the tools in the ASGI scope. Stateless mode with JSON answers:
each POST is one exchange, so any server process can answer any request.
"""

from __future__ import annotations

from litestar import Request, asgi
from litestar.types import Receive, Scope, Send
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from app.mcp.server import build_server
from app.runtime import Runtime

SCOPE_KEY = "memsys.runtime"


def runtime_of(ctx: Context) -> Runtime:
    return ctx.request_context.request.scope[SCOPE_KEY]


def build_http(host: str) -> tuple[MCPServer, StreamableHTTPSessionManager]:
    """The server and its session manager; run ``session_manager.run()`` for the app's lifetime."""
    server = build_server(runtime_of)
    # Called for its side effect: it creates the session manager (with DNS-rebinding protection when the
    # service listens on a loopback address, where anonymous access may be open).
    server.streamable_http_app(stateless_http=True, json_response=True, host=host)
    return server, server.session_manager


@asgi("/mcp", is_mount=True, copy_scope=True)
async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    request: Request = Request(scope)
    app_state = request.app.state
    scope[SCOPE_KEY] = app_state.runtime.for_tenant(request.state.tenant)  # type: ignore[literal-required]
    await app_state.mcp_sessions.handle_request(scope, receive, send)
