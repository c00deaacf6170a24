"""HTTP route of the OpenAI-compatible memory proxy: ``POST /v1/chat/completions``.

An unmodified OpenAI client reaches it with ``base_url=http://<memsys>/v1`` and its memsys key as ``api_key``.
Errors keep memsys's envelope (``status``, ``code``, ``message``, ``timestamp``, ``path``: memsys's clients read
``code``) and add OpenAI's ``error`` object (``message``, ``type``, ``param``, ``code``), which OpenAI's SDKs
read to build their exceptions: one body both kinds of client parse. ``x-should-retry`` tells those SDKs
whether a retry can help.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency, Provide
from litestar.params import HeaderParameter, JSONBody
from litestar.response import Stream

from app.http.dependencies import provide_runtime
from app.http.errors import EXCEPTION_HANDLERS
from app.proxy import service
from app.proxy.schemas import ChatCompletionRequest
from app.runtime import Runtime

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "timeout",
}
_FIELD = re.compile(r"(?:Invalid field|Missing required field:|Unknown field:|^Field) ([\w.\[\]-]+)")


def _openai_shaped(handler: Callable[[Request, Any], Response]) -> Callable[[Request, Any], Response]:
    def handle(request: Request, exc: Exception) -> Response:
        response = handler(request, exc)
        body = response.content
        if isinstance(body, dict) and body.get("status") == "failed":
            field = _FIELD.search(body["message"])
            body["error"] = {
                "message": body["message"],
                "type": _ERROR_TYPES.get(response.status_code, "server_error"),
                "param": field.group(1).rstrip(":") if field else None,
                "code": body["code"],
            }
            retry = getattr(exc, "retry", None)
            if retry is not None:
                response.headers["x-should-retry"] = "true" if retry else "false"
        return response

    return handle


class ProxyController(Controller):
    path = "/v1"
    tags = ["proxy"]
    dependencies = {"runtime": Provide(provide_runtime)}
    exception_handlers = {kind: _openai_shaped(handler) for kind, handler in EXCEPTION_HANDLERS.items()}

    @post(
        "/chat/completions",
        status_code=200,
        operation_id="proxyChatCompletion",
        summary="OpenAI-compatible chat completion with memory: memsys context added, the upstream LLM's answer "
        "returned as it sent it (streaming too), the user's message and the answer memorized",
    )
    async def chat_completions(
        self,
        data: JSONBody[ChatCompletionRequest],
        runtime: NamedDependency[Runtime],
        memsys_user: Annotated[str | None, HeaderParameter(name=service.USER_HEADER)] = None,
        memsys_group: Annotated[str | None, HeaderParameter(name=service.GROUP_HEADER)] = None,
    ) -> Response[bytes] | Stream:
        answer = await service.chat_completion(runtime, data, header_user=memsys_user, header_group=memsys_group)
        if answer.events is not None:
            return Stream(answer.events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        return Response(answer.body, media_type="application/json")
