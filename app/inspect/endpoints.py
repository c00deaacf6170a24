"""The inspector's pages (GET /inspect…): server-rendered HTML, no JavaScript, behind the API keys.

A browser cannot send ``Authorization``, so the login form opens a server-side session for the key and puts its id
in an HttpOnly, SameSite=Strict cookie sent only to /inspect pages (app.http.auth finds the session there; the
cookie never holds the key, and PostgreSQL keeps the sessions for every replica: app.inspect.browser). Login and
logout are same-origin POSTs, logout with the page's CSRF token; every response carries the CSP, frame and nosniff
headers. A page asked for without a valid key redirects to the form; every other route keeps its JSON 401. Not in
the OpenAPI document: pages for people.
"""

from __future__ import annotations

import logging
from typing import Any, get_args

from litestar import Controller, Request, get, post
from litestar.background_tasks import BackgroundTask
from litestar.datastructures import Cookie
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect, Response, Template
from pydantic import ValidationError

from app.errors import MemsysError, Unauthorized
from app.http.auth import INSPECTOR_PATH, INSPECTOR_SESSION_COOKIE, actor_of, bearer_token
from app.http.dependencies import provide_runtime
from app.http.errors import describe_validation_error
from app.inspect import service
from app.inspect.browser import InspectorSessions, csrf_token_matches, same_origin
from app.inspect.schemas import LoginForm, LogoutForm, MemoryForm
from app.memories import service as memory_life
from app.memories.schemas import MemoryPatch
from app.retrieval.schemas import DataSource, RetrievalMode
from app.runtime import Runtime
from app.validation import check_path_identifier

log = logging.getLogger(__name__)

LOGIN_PATH = f"{INSPECTOR_PATH}/login"


def page(request: Request, template: str, *, status_code: int = 200, **context: Any) -> Template:
    """A page in the layout: the tenant, whether a key opened it, and the search box (prefilled)."""
    search = {"q": "", "group_id": "", "user_id": "", "data_source": "episode", "mode": "rrf"}
    search.update(context.pop("search", {}))
    session = request.state.get("inspector_session")
    return Template(
        template_name=template,
        status_code=status_code,
        context={
            "tenant": request.state.get("tenant"),
            # The guard let a request without any key through: anonymous access (no key exists).
            "anonymous": bearer_token(request) is None and session is None,
            "signed_in": session is not None,
            "csrf_token": session.csrf_token if session else "",
            "search": search,
            "data_sources": get_args(DataSource),
            "modes": get_args(RetrievalMode),
            **context,
        },
    )


def _sessions(request: Request) -> InspectorSessions:
    return request.app.state.inspector_sessions


def _to_login_without_cookie() -> Response:
    response = Redirect(LOGIN_PATH, status_code=303)
    response.delete_cookie(INSPECTOR_SESSION_COOKIE, path=INSPECTOR_PATH)
    return response


def _to_login(request: Request, exc: Unauthorized) -> Response:
    """No valid key for a page: to the login form, ending a session whose key no longer works (its row once the
    response is sent: an exception handler cannot wait)."""
    response = _to_login_without_cookie()
    if cookie := request.cookies.get(INSPECTOR_SESSION_COOKIE):
        response.background = BackgroundTask(_sessions(request).close, cookie)
    return response


def _cross_origin(request: Request) -> Template:
    return page(request, "error.html", status_code=403, message="This form must be sent from the inspector's own page")


def _error_page(request: Request, exc: MemsysError | ValidationError) -> Response:
    if isinstance(exc, ValidationError):
        status_code, message = 400, describe_validation_error(exc)
    else:
        status_code, message = exc.status_code, str(exc)
    if status_code >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
    return page(request, "error.html", status_code=status_code, message=message)


class InspectorController(Controller):
    path = INSPECTOR_PATH
    include_in_schema = False
    dependencies = {"runtime": Provide(provide_runtime)}
    exception_handlers = {Unauthorized: _to_login, MemsysError: _error_page, ValidationError: _error_page}

    @get("", operation_id="inspectOverview")
    async def overview(self, request: Request, runtime: NamedDependency[Runtime]) -> Template:
        return page(request, "overview.html", **await service.overview(runtime))

    @get("/groups/{group_id:str}", operation_id="inspectGroup")
    async def group(self, request: Request, runtime: NamedDependency[Runtime], group_id: FromPath[str]) -> Template:
        raw_path = request.scope.get("raw_path")
        group_id = check_path_identifier("group_id", group_id, raw_path, f"{INSPECTOR_PATH}/group?group_id=…")
        return page(request, "group.html", search={"group_id": group_id}, **await service.group(runtime, group_id))

    @get("/group", operation_id="inspectGroupByQuery")
    async def group_by_query(
        self, request: Request, runtime: NamedDependency[Runtime], group_id: FromQuery[str]
    ) -> Template:
        """Any group, ``/`` in its id included (the pages link here for an id a path cannot carry)."""
        return page(request, "group.html", search={"group_id": group_id}, **await service.group(runtime, group_id))

    @get("/search", operation_id="inspectSearch")
    async def search(
        self,
        request: Request,
        runtime: NamedDependency[Runtime],
        q: FromQuery[str] = "",
        group_id: FromQuery[str] = "",
        user_id: FromQuery[str] = "",
        data_source: FromQuery[str] = "episode",
        mode: FromQuery[str] = "rrf",
    ) -> Template:
        form = {"q": q, "group_id": group_id, "user_id": user_id, "data_source": data_source, "mode": mode}
        result = await service.search(
            runtime, query=q, group_id=group_id, user_id=user_id, data_source=data_source, mode=mode
        )
        return page(request, "search.html", search=form, result=result)

    @get("/memories/{memory_id:str}", operation_id="inspectMemory")
    async def memory(self, request: Request, runtime: NamedDependency[Runtime], memory_id: FromPath[str]) -> Template:
        """One memory: its status, what superseded it, its history, and the forms that correct, delete, restore it."""
        detail = await memory_life.get_memory(runtime, memory_id)
        history = await memory_life.memory_history(runtime, memory_id)
        return page(request, "memory.html", detail=detail, events=history.events)

    @post("/memories/{memory_id:str}/{action:str}", operation_id="inspectMemoryAction", status_code=303)
    async def memory_action(
        self,
        request: Request,
        runtime: NamedDependency[Runtime],
        memory_id: FromPath[str],
        action: FromPath[str],
        data: URLEncodedBody[MemoryForm],
    ) -> Response:
        """``edit`` (with ``content``), ``delete`` or ``restore``: a same-origin POST with the session's CSRF token, as
        logout; then the memory's page again."""
        session = request.state.get("inspector_session")
        forged = session is not None and not csrf_token_matches(session, data.csrf_token)
        if forged or not same_origin(request.headers):
            return _cross_origin(request)
        actor = actor_of(request)
        if action == "edit":
            await memory_life.edit_memory(runtime, memory_id, MemoryPatch(content=data.content or ""), actor)
        elif action == "delete":
            await memory_life.delete_memory(runtime, memory_id, actor)
        elif action == "restore":
            await memory_life.restore_memory(runtime, memory_id, actor)
        else:
            return page(request, "error.html", status_code=404, message=f"No action {action!r}: edit, delete, restore")
        return Redirect(f"{INSPECTOR_PATH}/memories/{memory_life.memory_uuid(memory_id)}", status_code=303)

    @get("/login", operation_id="inspectLoginForm", opt={"public": True})
    async def login_form(self, request: Request) -> Template:
        return page(request, "login.html", error=None)

    @post("/login", operation_id="inspectLogin", opt={"public": True}, status_code=303)
    async def login(self, request: Request, data: URLEncodedBody[LoginForm]) -> Response:
        """A valid key opens a session, whose id goes into the cookie; the overview follows. A wrong one: the form
        again, with a 401. From another origin: a 403."""
        if not same_origin(request.headers):
            return _cross_origin(request)
        try:
            tenant = await service.key_tenant(request.app.state.runtime, data.key)
        except Unauthorized as exc:
            return page(request, "login.html", status_code=401, error=str(exc))
        redirect = Redirect(INSPECTOR_PATH, status_code=303)
        if tenant is not None:
            redirect.set_cookie(
                Cookie(
                    key=INSPECTOR_SESSION_COOKIE,
                    value=await _sessions(request).open(data.key.strip()),
                    path=INSPECTOR_PATH,
                    httponly=True,
                    samesite="strict",
                    secure=request.url.scheme == "https",
                )
            )
        return redirect

    @post("/logout", operation_id="inspectLogout", opt={"public": True}, status_code=303)
    async def logout(self, request: Request, data: URLEncodedBody[LogoutForm]) -> Response:
        """Ends the session: a same-origin POST with the session's CSRF token (a 403 otherwise)."""
        cookie = request.cookies.get(INSPECTOR_SESSION_COOKIE)
        session = await _sessions(request).get(cookie)
        forged = session is not None and not csrf_token_matches(session, data.csrf_token)
        if forged or not same_origin(request.headers):
            return _cross_origin(request)
        await _sessions(request).close(cookie)  # before the answer: the cookie opens nothing once it is read
        return _to_login_without_cookie()
