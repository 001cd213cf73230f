"""The console's web application: Starlette routes, server-rendered pages, live updates over SSE.

Pages (``GET``): ``/signin``, ``/`` (the overview), ``/sessions/{id}`` (the live view, the
timeline, the latest snapshot), ``/approvals`` and ``/approvals/{id}``. Live streams
(``GET``, server-sent events): ``/events`` (the overview, re-rendered when something
changes), ``/sessions/{id}/live`` (the screen's frames and the ledger timeline, one
stream: browsers keep few connections per host). State
changes (``POST``, each with the session's CSRF token): ``/signin``, ``/signout``,
``/takeover``, ``/handback``, ``/approvals/{id}/approve|deny``, ``/sessions/{id}/input``.
``GET /api/sessions/{id}/locate`` answers where an element is (for scripted operators).

Who gets in: a request that carries an ``Authorization`` header is refused (401): the
console takes no bearer tokens, so no agent or executor token works on any route. Every
route but the sign-in page and the static files needs a signed-in operator (401 with the
sign-in form otherwise). The Host header must be one the console serves (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, select_autoescape
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from handrail._errors import HandrailError
from handrail._vocabulary import ActionKind
from handrail.authz import AuthzError, AuthzRpcError
from handrail.console._backends import Backends
from handrail.console._config import ConsoleConfig
from handrail.console._signin import COOKIE, PRE_COOKIE, SignIn, SignIns, same
from handrail.executor import ExecutorError, ExecutorRpcError, HumanInput

__all__ = ["create_app"]

log = logging.getLogger("handrail.console")

_OPERATOR_ROLES = ("operator", "admin")
_SIGN_IN_AGAIN = "The sidecar no longer knows your token: sign in again."
_RECHECK_S = 2.0  # how often a live stream asks the sidecar whether its operator's token still holds
_Handler = Callable[[Request, SignIn], Awaitable[Response]]


class _Console:
    """The application's state: config, sign-ins, back ends, templates."""

    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        self.signins = SignIns(config.idle_s, config.max_age_s)
        self.backends = Backends(
            config.authz,
            list(config.executors),
            config.authz_root_certificates,
            config.authz_server_name,
            executor_root_certificates=config.executor_root_certificates,
            executor_server_name=config.executor_server_name,
        )
        self.templates = Environment(
            loader=PackageLoader("handrail.console", "templates"), autoescape=select_autoescape(["html"])
        )
        self.templates.filters["when"] = _when
        self.templates.filters["short"] = lambda s, n=80: s if len(s) <= n else s[: n - 1] + "…"

    async def token_ok(self, me: SignIn) -> bool:
        """Whether the sidecar still knows the operator's token; if it refuses it (revoked,
        expired), the sign-in ends here. A sidecar that cannot answer ends nothing: it
        refuses what needs it anyway."""
        try:
            await self.backends.sidecar(me.token).who_am_i()
        except AuthzRpcError as exc:
            if exc.code_name != "UNAUTHENTICATED":
                return True
            if self.signins.get(me.session_id) is not None:
                log.info("console: %s signed out: the sidecar refuses their token (%s)", me.principal, exc.reason)
            self.signins.close(me.session_id)
            return False
        except AuthzError:
            return True
        return True

    async def guard(self, me: SignIn) -> None:
        """For a live stream: return once the sign-in ends (sign-out, expiry, or a token the
        sidecar no longer knows: asked every ``_RECHECK_S``)."""
        asked = asyncio.get_running_loop().time()
        while self.signins.alive(me.session_id):
            await asyncio.sleep(0.5)
            now = asyncio.get_running_loop().time()
            if now - asked >= _RECHECK_S:
                asked = now
                if not await self.token_ok(me):
                    return

    def page(self, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(self.templates.get_template(name).render(**values), status_code=status)

    def cookie(self, response: Response, name: str, value: str, max_age: int | None) -> None:
        response.set_cookie(
            name, value, max_age=max_age, httponly=True, samesite="strict", secure=self.config.tls, path="/"
        )


def _when(ms: int) -> str:
    import datetime

    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S")


def create_app(config: ConsoleConfig) -> Starlette:
    """The console as an ASGI application (serve it with uvicorn: ``run_console``)."""
    console = _Console(config)

    def signed_in(
        handler: _Handler, *, state_changing: bool = False, page: bool = True, ask_sidecar: bool = True
    ) -> Callable[..., Any]:
        """The route's guard: no bearer tokens, a live sign-in, CSRF on a state change, and
        the operator's token still known to the sidecar (asked beside the request's work;
        ``ask_sidecar=False``: the one back end the route calls authenticates the token on
        the same call, and its UNAUTHENTICATED ends the sign-in the same way)."""

        async def endpoint(request: Request) -> Response:
            if "authorization" in request.headers:
                return PlainTextResponse(
                    "the console takes no bearer tokens: an operator signs in with the form at /signin\n", 401
                )
            sign_in = console.signins.get(request.cookies.get(COOKIE))
            if sign_in is None:
                return signin_again(request, page, "")
            if state_changing:
                problem = await _csrf_problem(request, sign_in)
                if problem:
                    return PlainTextResponse(problem + "\n", 403)
            # The token is asked about beside the request's own work (no added latency); the
            # sidecar and the executors refuse a revoked token's calls on their own anyway.
            check = asyncio.ensure_future(console.token_ok(sign_in) if ask_sidecar else _true())
            try:
                response = await handler(request, sign_in)
            except (AuthzError, ExecutorError) as exc:  # a back end refused or failed: one clear answer
                if getattr(exc, "code_name", "") == "UNAUTHENTICATED":
                    check.cancel()
                    console.signins.close(sign_in.session_id)
                    return signin_again(request, page, _SIGN_IN_AGAIN)
                if not await check:
                    return signin_again(request, page, _SIGN_IN_AGAIN)
                return trouble(request, sign_in, page, exc)
            except BaseException:
                check.cancel()
                raise
            if not await check:
                return signin_again(request, page, _SIGN_IN_AGAIN)
            return response

        return endpoint

    def trouble(request: Request, me: SignIn, page: bool, exc: HandrailError) -> Response:
        code = getattr(exc, "code_name", "")
        status = _http_status(code) if code else 503
        message = getattr(exc, "details", None) if isinstance(exc, AuthzRpcError) else str(exc)
        if isinstance(exc, ExecutorRpcError):
            message = exc.details()
        log.info("console: %s %s: %s", request.method, request.url.path, exc)
        if page and request.method == "GET":
            title = "The sidecar or an executor cannot answer" if status >= 500 else "Refused"
            return console.page("trouble.html", status, me=me, title=title, message=message or str(exc), csrf=me.csrf)
        return JSONResponse({"error": message or str(exc)}, status)

    def signin_again(request: Request, page: bool, error: str) -> Response:
        if page and request.method == "GET":
            pre = _new_token()
            form = console.page("signin.html", 401, csrf=pre, next=_safe_next(request.url.path), error=error)
            console.cookie(form, PRE_COOKIE, pre, 600)
            if error:
                form.delete_cookie(COOKIE, path="/")
            return form
        return PlainTextResponse((error or "sign in first (/signin)") + "\n", 401)

    async def signin_page(request: Request) -> Response:
        if "authorization" in request.headers:
            return PlainTextResponse("the console takes no bearer tokens\n", 401)
        pre = _new_token()
        response = console.page("signin.html", csrf=pre, next=_safe_next(request.query_params.get("next")), error="")
        console.cookie(response, PRE_COOKIE, pre, 600)
        return response

    async def signin(request: Request) -> Response:
        if "authorization" in request.headers:
            return PlainTextResponse("the console takes no bearer tokens\n", 401)
        form = await _form(request)
        next_url = _safe_next(form.get("next"))
        if not same(form.get("csrf"), request.cookies.get(PRE_COOKIE)) or not _same_origin(request):
            return console.page(
                "signin.html", 403, csrf="", next=next_url, error="The sign-in form expired; reload it."
            )
        token = form.get("token", "").strip()
        try:
            principal, role = await console.backends.who(token) if token else ("", "")
        except AuthzError as exc:
            unknown = isinstance(exc, AuthzRpcError) and exc.code_name == "UNAUTHENTICATED"
            error = "That token is not known to the sidecar." if unknown else f"The sidecar cannot say: {exc}"
            return console.page("signin.html", 401 if unknown else 503, csrf="", next=next_url, error=error)
        if role not in _OPERATOR_ROLES:
            what = f"{principal} is an {role}" if principal else "no token given"
            error = f"Only operators sign in here ({what})."
            return console.page("signin.html", 403 if principal else 401, csrf="", next=next_url, error=error)
        sign_in = console.signins.open(principal, role, token)
        log.info("console: %s signed in", principal)
        response = RedirectResponse(next_url, status_code=303)
        console.cookie(response, COOKIE, sign_in.session_id, int(console.config.max_age_s))
        response.delete_cookie(PRE_COOKIE, path="/")
        return response

    async def signout(request: Request, me: SignIn) -> Response:
        console.signins.close(me.session_id)
        await console.backends.forget(me.token)
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def overview(request: Request, me: SignIn) -> Response:
        data = await console.backends.overview(me.token)
        return console.page("overview.html", me=me, overview=data, csrf=me.csrf)

    async def overview_fragment(request: Request, me: SignIn) -> Response:
        data = await console.backends.overview(me.token)
        return console.page("_overview.html", me=me, overview=data, csrf=me.csrf)

    async def events(request: Request, me: SignIn) -> Response:
        async def stream() -> AsyncIterator[dict[str, str]]:
            woke = asyncio.Event()

            async def watch() -> None:
                async for _ in console.backends.changes(me.token):
                    woke.set()

            watcher = asyncio.create_task(watch())
            guard = asyncio.create_task(console.guard(me))
            last = ""
            try:
                while console.signins.alive(me.session_id) and not guard.done():
                    data = await console.backends.overview(me.token)
                    digest = data.digest()
                    if digest != last:
                        last = digest
                        html = console.templates.get_template("_overview.html").render(
                            me=me, overview=data, csrf=me.csrf
                        )
                        yield {"event": "overview", "data": html}
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(woke.wait(), 1.0)
                    woke.clear()
            finally:
                watcher.cancel()
                guard.cancel()

        return EventSourceResponse(stream(), ping=15)

    async def session_page(request: Request, me: SignIn) -> Response:
        sid = request.path_params["sid"]
        found = await console.backends.find_session(me.token, sid)
        if found is None:
            return console.page("missing.html", 404, me=me, what=f"session {sid}", csrf=me.csrf)
        address, summary = found
        lease = await console.backends.sidecar(me.token).get_lease(summary.target)
        return console.page("session.html", me=me, s=summary, executor=address, lease=lease, csrf=me.csrf)

    async def live(request: Request, me: SignIn) -> Response:
        """One stream per session page (browsers keep few connections per host): the
        screen's frames (``frame`` events) and the ledger timeline (``entry`` events)."""
        sid = request.path_params["sid"]
        found = await console.backends.find_session(me.token, sid)
        if found is None:
            return PlainTextResponse("no such session\n", 404)
        client = console.backends.executor(found[0])
        width = _int(request.query_params.get("w"), 0, 4096)
        queue: asyncio.Queue[dict[str, str]] = asyncio.Queue(maxsize=64)
        latest_frame: list[dict[str, str] | None] = [None]
        frame_ready = asyncio.Event()

        async def frames() -> None:
            async for f in client.watch_screen(me.token, sid, max_width=width, quality=70):
                meta = {
                    "seq": f.seq,
                    "mime": f.mime_type,
                    "iw": f.image_width,
                    "ih": f.image_height,
                    "sw": f.surface_width,
                    "sh": f.surface_height,
                    "top": f.offset_top,
                    "scale": f.page_scale,
                    "at": f.captured_at_ms,
                    "url": f.url,
                    "data": base64.b64encode(f.image).decode(),
                }
                latest_frame[0] = {"event": "frame", "data": json.dumps(meta)}  # a slow page gets the newest
                frame_ready.set()

        async def entries() -> None:
            async for item in client.watch_timeline(me.token, sid):
                data = {
                    "seq": item.seq,
                    "kind": item.kind,
                    "who": item.principal,
                    "human": item.principal_kind == "human",
                    "outcome": item.outcome,
                    "reason": item.reason,
                    "line": item.line,
                }
                await queue.put({"event": "entry", "data": json.dumps(data)})

        async def stream() -> AsyncIterator[dict[str, str]]:
            guard = asyncio.create_task(console.guard(me))  # ends with the sign-in
            tasks = [asyncio.create_task(frames()), asyncio.create_task(entries()), guard]
            try:
                while console.signins.alive(me.session_id) and not guard.done():
                    while not queue.empty():
                        yield queue.get_nowait()
                    getter = asyncio.ensure_future(queue.get())
                    framed = asyncio.ensure_future(frame_ready.wait())
                    done, _ = await asyncio.wait({getter, framed, guard}, return_when=asyncio.FIRST_COMPLETED)
                    if guard in done:
                        getter.cancel()
                        framed.cancel()
                        break
                    if getter in done:
                        yield getter.result()
                    else:
                        getter.cancel()
                    if framed in done or frame_ready.is_set():
                        frame_ready.clear()
                        event = latest_frame[0]
                        if event is not None:
                            yield event
                    else:
                        framed.cancel()
            finally:
                for task in tasks:
                    task.cancel()

        return EventSourceResponse(stream(), ping=15)

    async def human_input(request: Request, me: SignIn) -> Response:
        sid = request.path_params["sid"]
        try:
            body = json.loads(await request.body() or b"{}")
            spec = HumanInput(
                kind=ActionKind(str(body.get("kind", ""))),
                lease_epoch=int(body.get("epoch", 0)),
                x=float(body.get("x", 0)),
                y=float(body.get("y", 0)),
                text=str(body.get("text", "")),
                key=str(body.get("key", "")),
                delta_x=int(body.get("dx", 0)),
                delta_y=int(body.get("dy", 0)),
                button=str(body.get("button", "")),
                input_id=str(body.get("id", "")),
            )
        except (ValueError, TypeError, AttributeError) as exc:
            return JSONResponse({"error": f"bad input: {exc}"}, 400)
        address = console.backends.where(sid)  # the executor still checks the session and the caller
        if address is None:
            found = await console.backends.find_session(me.token, sid)
            if found is None:
                return JSONResponse({"error": f"no session {sid}"}, 404)
            address = found[0]
        try:
            result = await console.backends.executor(address).human_input(me.token, sid, spec)
        except ExecutorRpcError as exc:
            if exc.code_name == "UNAUTHENTICATED":
                raise  # the sign-in ends (``signed_in``)
            return JSONResponse({"error": str(exc)}, _http_status(exc.code_name))
        return JSONResponse(
            {
                "outcome": result.outcome.value,
                "reason": str(result.reason),
                "message": result.message,
                "action_id": result.action_id,
            }
        )

    async def locate(request: Request, me: SignIn) -> Response:
        sid = request.path_params["sid"]
        role, name = request.query_params.get("role", ""), request.query_params.get("name", "")
        found = await console.backends.find_session(me.token, sid)
        if found is None:
            return JSONResponse({"error": f"no session {sid}"}, 404)
        try:
            box = await console.backends.executor(found[0]).locate(me.token, sid, role, name)
        except ExecutorRpcError as exc:
            return JSONResponse({"error": str(exc)}, _http_status(exc.code_name))
        return JSONResponse({"x": box.x, "y": box.y, "width": box.width, "height": box.height})

    async def takeover(request: Request, me: SignIn) -> Response:
        form = await _form(request)
        target = form.get("target", "")
        try:
            lease = await console.backends.sidecar(me.token).take_over(target, note=form.get("note", "") or "console")
        except AuthzError as exc:
            return _answer(request, {"error": str(exc)}, _http_status(getattr(exc, "code_name", "")))
        log.info("console: %s took over %s (epoch %d)", me.principal, target, lease.epoch)
        return _answer(request, {"target": target, "epoch": lease.epoch, "holder": lease.holder}, 200, form.get("back"))

    async def handback(request: Request, me: SignIn) -> Response:
        form = await _form(request)
        target, to = form.get("target", ""), form.get("to", "")
        sidecar = console.backends.sidecar(me.token)
        try:
            lease = await sidecar.get_lease(target)
            if lease.holder_kind != "human" or lease.holder != me.principal:
                return _answer(request, {"error": f"you do not hold {target}"}, 409)
            lease = await sidecar.hand_back(target, lease.epoch, next_holder=to)
        except AuthzError as exc:
            return _answer(request, {"error": str(exc)}, _http_status(getattr(exc, "code_name", "")))
        log.info("console: %s handed %s back to %s (epoch %d)", me.principal, target, to or "no one", lease.epoch)
        return _answer(request, {"target": target, "epoch": lease.epoch, "next": to}, 200, form.get("back"))

    async def approvals(request: Request, me: SignIn) -> Response:
        sidecar = console.backends.sidecar(me.token)
        pending, recent = await asyncio.gather(
            sidecar.list_approvals(status="PENDING"), sidecar.list_approvals(limit=30)
        )
        decided = [a for a in recent if a.status != "PENDING"]
        return console.page("approvals.html", me=me, pending=pending, decided=decided, csrf=me.csrf)

    async def approval_page(request: Request, me: SignIn) -> Response:
        approval_id = request.path_params["aid"]
        try:
            approval = await console.backends.sidecar(me.token).get_approval(approval_id)
        except AuthzError:
            return console.page("missing.html", 404, me=me, what=f"approval {approval_id}", csrf=me.csrf)
        detail: dict[str, Any] = {}
        session_id = approval.observation_id.partition(":")[0]
        found = await console.backends.find_session(me.token, session_id) if session_id else None
        if found is not None and approval.action_id:
            with contextlib.suppress(ExecutorRpcError):
                executor = console.backends.executor(found[0])
                detail = dict(await executor.describe_action(me.token, session_id, approval.action_id))
                detail["params"] = json.loads(detail.get("params_json") or "{}")
                png = detail.get("screenshot_png") or b""
                detail["screenshot"] = base64.b64encode(png).decode() if png else ""
        return console.page("approval.html", me=me, a=approval, d=detail, csrf=me.csrf, session_id=session_id)

    def decide(approve: bool) -> _Handler:
        async def handler(request: Request, me: SignIn) -> Response:
            form = await _form(request)
            approval_id = request.path_params["aid"]
            sidecar = console.backends.sidecar(me.token)
            try:
                call = sidecar.approve if approve else sidecar.deny
                approval = await call(approval_id, note=form.get("note", ""))
            except AuthzError as exc:
                code = getattr(exc, "code_name", "")
                return _answer(request, {"error": str(exc)}, _http_status(code), None)
            return _answer(
                request, {"approval": approval.approval_id, "status": approval.status}, 200, f"/approvals/{approval_id}"
            )

        return handler

    async def _csrf_problem(request: Request, me: SignIn) -> str:
        if not _same_origin(request):
            return "cross-origin request refused"
        given = request.headers.get("x-csrf-token")
        if given is None and request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            given = (await _form(request)).get("csrf")
        return "" if same(given, me.csrf) else "missing or wrong CSRF token"

    static = resources.files("handrail.console") / "static"
    routes = [
        Route("/signin", signin_page, methods=["GET"]),
        Route("/signin", signin, methods=["POST"]),
        Route("/signout", signed_in(signout, state_changing=True), methods=["POST"]),
        Route("/", signed_in(overview), methods=["GET"]),
        Route("/fragments/overview", signed_in(overview_fragment), methods=["GET"]),
        Route("/events", signed_in(events, page=False), methods=["GET"]),
        Route("/sessions/{sid}", signed_in(session_page), methods=["GET"]),
        Route("/sessions/{sid}/live", signed_in(live, page=False), methods=["GET"]),
        Route(
            "/sessions/{sid}/input",
            signed_in(human_input, state_changing=True, page=False, ask_sidecar=False),
            methods=["POST"],
        ),
        Route("/api/sessions/{sid}/locate", signed_in(locate, page=False), methods=["GET"]),
        Route("/takeover", signed_in(takeover, state_changing=True, page=False), methods=["POST"]),
        Route("/handback", signed_in(handback, state_changing=True, page=False), methods=["POST"]),
        Route("/approvals", signed_in(approvals), methods=["GET"]),
        Route("/approvals/{aid}", signed_in(approval_page), methods=["GET"]),
        Route("/approvals/{aid}/approve", signed_in(decide(True), state_changing=True, page=False), methods=["POST"]),
        Route("/approvals/{aid}/deny", signed_in(decide(False), state_changing=True, page=False), methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await console.backends.close()

    app = Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(config.allowed_hosts))],
        lifespan=lifespan,
    )
    app.state.console = console
    return app


async def _true() -> bool:
    return True


def _new_token() -> str:
    import secrets

    return secrets.token_urlsafe(32)


def _same_origin(request: Request) -> bool:
    """A browser's request says where it comes from: it must be this console."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None  # no Origin: not a browser's cross-site request
    return origin == f"{request.url.scheme}://{request.url.netloc}"


async def _form(request: Request) -> dict[str, str]:
    cached = getattr(request.state, "form", None)
    if cached is not None:
        return dict(cached)
    raw = (await request.body()).decode("utf-8", "replace")
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            data = json.loads(raw or "{}")
        except ValueError:
            data = {}
        form = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    else:
        form = {k: v[-1] for k, v in parse_qs(raw, keep_blank_values=True).items()}
    request.state.form = form
    return dict(form)


def _safe_next(value: str | None) -> str:
    """Only a path of this console (no scheme, no host, no ``//``): no open redirect."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return quote(value, safe="/?=&-_.~%")


def _int(value: str | None, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value or 0)))
    except ValueError:
        return low


def _http_status(code: str) -> int:
    return {
        "INVALID_ARGUMENT": 400,
        "UNAUTHENTICATED": 401,
        "PERMISSION_DENIED": 403,
        "NOT_FOUND": 404,
        "FAILED_PRECONDITION": 409,
        "ALREADY_EXISTS": 409,
    }.get(code, 502)


def _answer(request: Request, data: dict[str, Any], status: int, back: str | None = None) -> Response:
    """JSON for the page's scripts; a redirect back for a plain form post that went well."""
    wants_json = "application/json" in request.headers.get("accept", "") or request.headers.get("x-csrf-token")
    if wants_json or status != 200:
        return JSONResponse(data, status)
    return RedirectResponse(_safe_next(back), status_code=303)
