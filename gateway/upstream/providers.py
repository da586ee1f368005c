"""Upstream providers: one ``httpx.AsyncClient`` each, the provider's own auth.

The caller's key never reaches this module: headers sent upstream are built here from the
provider's own key plus the few provider headers a codec chose to forward (``UpstreamCall.headers``).

The client runs over the gateway's transport (``http_transport.GatewayTransport``) unless the
provider says ``transport = "httpx"`` (httpx's own: HTTP/2, SOCKS, proxies from the environment),
or is the demo, whose transport is a stand-in that never opens a socket (gateway/http/demo.py).
What is the same for every request of a provider is built once in ``start``: the static and auth
headers as an ``httpx.Headers``, the timeouts, and each distinct URL as an ``httpx.URL`` (cached by
path, so a request parses none). Requests are built as ``httpx.Request`` directly rather than
through ``client.build_request``, which would merge base URL, headers, cookies and params again on
every call (and ``params=`` would drop a query already in the URL: Azure's ``?api-version=``).

Credentials that change per request (AWS SigV4, Google OAuth, Azure Entra) plug in as an
``httpx.Auth`` on ``Provider.auth`` (set before ``start``): the client runs its flow on every
request, on either transport.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

import httpx
import orjson

from gateway.dialects.base import BuildOptions, Identity, UpstreamCall
from gateway.dialects.carry import Limit
from gateway.dialects.registry import codec_for
from gateway.http import demo
from gateway.http.client import LocalProtocolError, Response
from gateway.http.pool import trust_context
from gateway.http.transport import GatewayTransport, UpstreamClient, open_connections
from gateway.platforms import Platform, platform_for
from gateway.settings import ProviderSettings

log = logging.getLogger("gateway.upstream")
if logging.getLogger("httpx").level == logging.NOTSET:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # else an INFO line for every upstream request

USER_AGENT = "llm-gateway/0.1"

# Headers a codec may set on an UpstreamCall that must not override ours.
_RESERVED = {
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
}
_MAX_CACHED_URLS = 1024
_SPENT = httpx.ByteStream(b"")
# what an httpx without a private ``_event_hooks`` is taken to have: hooks, so the full path runs
_UNKNOWN_HOOKS: dict[str, list[object]] = {"request": [None], "response": [None]}
_NO_AUTH = httpx.Auth()  # given explicitly: else httpx looks for user:password in every request's URL


@dataclass(slots=True)
class ConnectionGauge:
    """How many upstream responses are open right now (tests assert it returns to zero)."""

    open: int = 0


@dataclass(slots=True)
class PoolGauge:
    """Upstream sockets a provider's client holds, busy and idle (the pool metric)."""

    client: httpx.AsyncClient

    @property
    def open_connections(self) -> int:
        return open_connections(self.client)


@dataclass(slots=True)
class Provider:
    settings: ProviderSettings
    client: httpx.AsyncClient | None = None
    auth: httpx.Auth | None = None  # per-request credentials (platform auth), run by the client
    gauge: ConnectionGauge = field(default_factory=ConnectionGauge)
    pool: PoolGauge | None = None  # set once started
    _headers: dict[str, httpx.Headers] = field(default_factory=dict)  # by method kind: "GET" / "POST"
    _extensions: dict[str, object] = field(default_factory=dict)
    _urls: dict[tuple[str, tuple[tuple[str, str], ...]], httpx.URL] = field(default_factory=dict)
    _direct: tuple[httpx.AsyncClient, GatewayTransport] | None = None  # (direct_transport)
    _options: dict[bool, BuildOptions] = field(default_factory=dict)  # (build_options)
    platform: Platform = field(init=False)  # where the dialect is spoken (gateway/platforms/)

    def __post_init__(self) -> None:
        self.platform = platform_for(self.settings)

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def dialect(self) -> str:
        return self.settings.dialect

    @property
    def identity(self) -> Identity:
        return identity_of(self.settings)

    @property
    def forwards_frames(self) -> bool:
        """Whether a same-dialect caller may get this provider's own frames (the fast path). A
        stand-in's frames are not a provider's: its callers get the gateway's own encoding."""
        return self.settings.transport != demo.KIND

    @property
    def limits(self) -> Sequence[Limit]:
        """What this provider cannot carry: its dialect's limits; none for a stand-in, which
        answers anything (the demo's transport, gateway/http/demo.py)."""
        return () if self.settings.transport == demo.KIND else codec_for(self.settings.dialect).limits

    def start(self) -> None:
        s = self.settings
        if self.client is not None:
            return
        headers = {
            "user-agent": USER_AGENT,
            "accept": "text/event-stream, application/json",
            "accept-encoding": "identity",
        }
        for name, value in s.headers.items():
            headers[name.lower()] = value
        headers.update(self.platform.headers(s))
        if self.auth is None:
            self.auth = self.platform.auth(s)
        # Host first, as httpx would put it; every call goes to the base URL's origin.
        host = {"host": httpx.URL(self.platform.base_url(s)).netloc.decode("ascii")}
        self._headers = {
            "GET": httpx.Headers({**host, **headers}),
            "POST": httpx.Headers({**host, **headers, "content-type": "application/json"}),
        }
        self.client = upstream_client(s, self.auth)
        self._direct = direct_transport(self.client, self.auth)
        self._extensions = {"timeout": self.client.timeout.as_dict()}
        self.pool = PoolGauge(self.client)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None
            self.pool = None
            self._direct = None

    def build_options(self, stream: bool) -> BuildOptions:
        """What the codec's request builder reads of these settings, made once per stream mode
        (the settings do not change while the provider runs; built per call it was ~3 µs)."""
        options = self._options.get(stream)
        if options is None:
            s = self.settings
            options = self._options[stream] = BuildOptions(
                default_max_tokens=s.default_max_tokens,
                dropped_betas=tuple(s.dropped_betas),
                gemini_parameters_json_schema=s.gemini_parameters_json_schema,
                stream=stream,
                sampling_exclusive_models=None
                if s.sampling_exclusive_models is None
                else tuple(s.sampling_exclusive_models),
                adaptive_thinking_models=None
                if s.adaptive_thinking_models is None
                else tuple(s.adaptive_thinking_models),
                auto_cache=s.auto_cache,
            )
        return options

    def url(self, call: UpstreamCall) -> str:
        # A query in base_url (Azure's ?api-version=…) stays a query, after the call's path.
        base, _, query = self.platform.base_url(self.settings).partition("?")
        if call.params:
            query = (query + "&" if query else "") + urlencode(call.params)
        return base.rstrip("/") + call.path + ("?" + query if query else "")

    def _url(self, call: UpstreamCall) -> httpx.URL:
        key = (call.path, tuple(call.params.items()) if call.params else ())
        url = self._urls.get(key)
        if url is None:
            try:
                url = httpx.URL(self.url(call))
            except httpx.InvalidURL as exc:
                raise LocalProtocolError(f"cannot build the upstream URL: {exc}") from None
            if len(self._urls) >= _MAX_CACHED_URLS:
                self._urls.clear()
            self._urls[key] = url
        return url

    async def send(self, call: UpstreamCall) -> Response:
        """Send ``call`` and return the response with its body still unread (streamed).

        The caller must ``close_response`` it (which keeps the gauge right).
        """
        client = self.client
        assert client is not None, "provider not started"
        method = call.method
        # Request(stream=…) with the headers complete (host, content-length) skips httpx's
        # header re-normalisation and content encoding: a third of its per-request cost.
        headers = httpx.Headers(self._headers["GET" if method == "GET" else "POST"])
        if method == "GET":
            body = b""
        else:
            # an exact-size copy: orjson's bytes keep its 4 KiB write buffer, and the request (so its
            # body) lives as long as the answer streams: 4 KiB of every open stream (bench/memory.py)
            body = memoryview(orjson.dumps(call.body)).tobytes()
            headers["content-length"] = str(len(body))
        if call.headers:
            for name, value in call.headers.items():
                if name.lower() not in _RESERVED:
                    headers[name] = value
        request = httpx.Request(
            method, self._url(call), headers=headers, stream=httpx.ByteStream(body), extensions=self._extensions
        )
        request.read()  # request.content for the transport and for an auth that signs the body
        direct = self._direct
        hooks = getattr(client, "_event_hooks", _UNKNOWN_HOOKS)  # (one added after start: the full path runs it)
        if direct is not None and direct[0] is client and not hooks["request"] and not hooks["response"]:
            response = await direct[1].handle_async_request(request)
            response.request = request
        else:
            response = await client.send(request, stream=True)
        self.gauge.open += 1
        return response

    async def close_response(self, response: Response) -> None:
        try:
            await response.aclose()
        finally:
            self.gauge.open -= 1
            # httpx 0.28 leaves response ↔ its BoundAsyncStream in a reference cycle (≈26 objects
            # a stream, freed only by the cyclic collector: RSS creeps). The body is done with.
            response.stream = _SPENT


def identity_of(s: ProviderSettings) -> Identity:
    """What the provider is called outside the gateway (telemetry, prices): its codec's names,
    or the demo stand-in's own."""
    return demo.IDENTITY if s.transport == demo.KIND else codec_for(s.dialect).identity


def direct_transport(
    client: httpx.AsyncClient, auth: httpx.Auth | None
) -> tuple[httpx.AsyncClient, GatewayTransport] | None:
    """``client`` and its transport when a request may go straight to the transport.

    ``AsyncClient.send`` walks four layers per request (auth flow, redirects with event hooks,
    the single send with its timer, log line and cookie pass, and a stream wrapper): ~5 % of a
    whole request's CPU (bench/README.md "third pass"). With the gateway's own transport, no auth
    (platforms sign in an ``httpx.Auth``: they keep the full path), no redirects followed, no
    cookie jar, no event hooks and no proxy mounts (our transport tunnels itself), none of them does
    anything for the call, so ``Provider.send`` skips them and sets what they would have set
    (``response.request``)."""
    transport = getattr(client, "_transport", None)
    if auth is not None or not isinstance(transport, GatewayTransport) or client.follow_redirects:
        return None
    if getattr(client, "_mounts", True):  # (httpx keeps no public view of them; hooks are looked at per send)
        return None
    return client, transport


def upstream_client(s: ProviderSettings, auth: httpx.Auth | None = None) -> httpx.AsyncClient:
    """The provider's client: the gateway's transport, or httpx's own (``transport = "httpx"``).

    Timeouts: ``connect_timeout`` for connecting and for a free pool slot; no read timeout here,
    the relay owns first-byte and idle timeouts (``first_byte_timeout``, ``idle_timeout``).
    Redirects are not followed (a redirecting upstream is a wrong ``base_url``: a 502 that says so).
    """
    limits = httpx.Limits(
        max_connections=s.max_connections,
        max_keepalive_connections=s.max_connections,
        keepalive_expiry=s.keepalive_expiry,
    )
    timeout = httpx.Timeout(connect=s.connect_timeout, read=None, write=None, pool=s.connect_timeout)
    proxy = s.proxy.get_secret_value() if s.proxy else None  # a secret: it may hold credentials
    verify = trust_context(s.ca_file)
    auth = auth or _NO_AUTH
    if s.transport == demo.KIND:  # the demo stand-in: no network at all
        return UpstreamClient(
            transport=demo.DemoTransport(), timeout=timeout, auth=auth, follow_redirects=False, trust_env=False
        )
    if s.transport == "gateway":
        transport = GatewayTransport(verify=verify, limits=limits, proxy=proxy)
        return UpstreamClient(transport=transport, timeout=timeout, auth=auth, follow_redirects=False, trust_env=False)
    # httpx's own transport; prior-knowledge HTTP/2 on http://, ALPN-negotiated on https://
    http1 = not (s.http2 and s.base_url.startswith("http://"))
    return UpstreamClient(
        verify=verify,
        http1=http1,
        http2=s.http2,
        limits=limits,
        timeout=timeout,
        proxy=proxy,
        auth=auth,
        trust_env=s.trust_env,
        follow_redirects=False,
    )
