"""Configuration: the TOML file of CONTRACT.md, validated by pydantic-settings, overridable by env.

Precedence, highest first: ``GATEWAY_*`` environment variables (``__`` nests: ``GATEWAY_SERVER__PORT``;
which names count is :class:`SettingsEnv`'s rule), then the TOML file, then the defaults below. Without a file the embedded default runs: the ``demo``
provider plus a real provider for each of ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
``GEMINI_API_KEY`` present in the environment.
"""

from __future__ import annotations

import importlib.util
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

Dialect = str  # a name in gateway/dialects/registry.py (checked by ProviderSettings._known_dialect), or the demo's
# "asked": an OpenAI chat stream carries its usage chunk only with stream_options.include_usage;
# "always": every one ends with it (clients that index choices[0] on every chunk break on it).
StreamUsage = Literal["asked", "always"]


_KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
INSPECTOR_MODES = ("off", "errors", "all")


def check_name(name: object) -> str:
    """``name`` if it is 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit: the rule
    for a named key's name, shared by the config file's validation and the admin API."""
    if not isinstance(name, str) or not _KEY_NAME.match(name):
        raise ValueError("a key name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def parse_mode(value: str) -> tuple[str, float]:
    """An inspector capture mode, ``off | errors | all | sample:F`` → (mode, rate); ValueError names
    what is accepted. Read here (the config's own check) and by the inspector when it starts."""
    value = value.strip().lower()
    if value in INSPECTOR_MODES:
        return value, 1.0
    if value.startswith("sample:"):
        try:
            rate = float(value[7:])
        except ValueError:
            rate = -1.0
        if 0.0 <= rate <= 1.0:
            return "sample", rate
    raise ValueError(f"inspector capture must be off, errors, all or sample:F with 0 <= F <= 1, got {value!r}")


class ServerSettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    allow_open: bool = False  # serve on a non-loopback address without caller keys
    max_body_bytes: int = 32 * 1024 * 1024
    max_json_depth: int = 64
    max_tokens_limit: int = 1_000_000  # larger max_tokens values are refused as absurd
    keepalive_seconds: float = 15.0  # idle gap before a keepalive is sent to the caller
    shutdown_grace_seconds: float = 30.0
    access_log: bool = True
    fast_path: bool = True  # same-dialect streams forward the upstream's frames (gateway/relay/fast_path.py)
    stream_usage: StreamUsage = "asked"  # "always": OpenAI chat streams end with usage unasked (docs/operations.md)
    # Hostile connections (gateway/server/protocol.py): 0 turns a bound off (keep_alive_timeout 0: no keep-alive).
    request_head_timeout: float = 10.0  # a request head must arrive within this, else the connection is closed (408)
    request_body_timeout: float = 60.0  # the body must arrive within this after the head (408)
    keep_alive_timeout: float = 5.0  # an idle kept-alive connection is closed after this
    max_connections: int = 10_000  # per process; a request beyond it is a 503 in the caller's dialect
    max_head_bytes: int = 65_536  # a longer request line + headers is a 431


class WebSocketSettings(BaseModel):
    """Responses over WebSocket on ``/v1/responses`` (gateway/server/websocket.py, docs/websocket.md)."""

    enabled: bool = True  # false: a WebSocket handshake is a 426 and Codex falls back to HTTP
    idle_timeout: float = 1800.0  # a connection that starts no turn for this long (none running) is closed
    max_seconds: float = 3600.0  # a connection's whole life (OpenAI's 60 minutes); then closed after its turn
    max_message_bytes: int = 32 * 1024 * 1024  # a larger client frame closes the connection (1009)
    ping_interval: float = 20.0  # server keepalive pings (0: none)
    ping_timeout: float = 20.0  # a ping unanswered this long closes the connection
    turns_kept: int = 64  # store:false turns each connection keeps in memory to chain on


class AuthSettings(BaseModel):
    keys_env: str = "GATEWAY_KEYS"
    keys: list[SecretStr] = Field(default_factory=list)

    def resolved_keys(self) -> list[str]:
        keys = [k.get_secret_value() for k in self.keys if k.get_secret_value()]
        env = os.environ.get(self.keys_env, "") if self.keys_env else ""
        keys += [k.strip() for k in env.split(",") if k.strip()]
        return keys


class AdminSettings(BaseModel):
    key_env: str | None = None  # the admin API (/admin/...) and the console; unset = both off
    key: SecretStr | None = None

    def resolved_key(self) -> str | None:
        if self.key is not None and self.key.get_secret_value():
            return self.key.get_secret_value()
        return (os.environ.get(self.key_env) or None) if self.key_env else None


BudgetPeriod = Literal["day", "week", "month", "total"]


class KeySettings(BaseModel):
    """One named caller key (CONTRACT.md "Named keys"): an identity with limits."""

    name: str
    key_env: str | None = None  # the env var holding the key
    key_sha256: str | None = None  # or the hex SHA-256 of the key (the secret never in the file)
    models: list[str] | None = None  # route names (globs) this key may call; None = all
    budget_usd: float | None = None
    budget_period: BudgetPeriod = "month"
    rpm: int | None = None
    tpm: int | None = None
    max_parallel: int | None = None
    expires_at: str | None = None  # ISO 8601; a key past it is refused (401)
    refuse_unpriced: bool = False  # refuse (403) models without a known price
    guardrails: list[str] = Field(default_factory=list)  # [[guardrails]] names; with the route's, the union
    mcp_tools: list[str] | None = None  # MCP tools ("<server>_<tool>" globs) this key may list and call; None = none

    @field_validator("name")
    @classmethod
    def _name_is_plain(cls, value: str) -> str:
        return check_name(value)


class PriceSettings(BaseModel):
    """USD per million tokens of one upstream model (glob), each token kind at its own rate."""

    input: float
    output: float | None = None  # None: no output rate (an embedding model); output tokens are then unpriced
    cache_read: float | None = None  # default: the input rate
    cache_write: float | None = None  # default: the input rate
    reasoning: float | None = None  # default: the output rate (reasoning is output)


class SpendSettings(BaseModel):
    reserve_output_tokens: int = 4096  # output reserved per request: max_tokens, at most this (the cap)
    requests_kept: int = 10000  # request records kept for GET /admin/requests (newest first)
    lease_seconds: float = 3900.0  # a reservation of a replica that died is released after this
    price_database: bool = True  # without a [prices] entry, look the model up in genai-prices


class ProviderSettings(BaseModel):
    name: str
    dialect: Dialect
    base_url: str = ""
    api_key_env: str | None = None
    api_key: SecretStr | None = None
    connect_timeout: float = 10.0
    first_byte_timeout: float = 600.0  # long reasoning runs may think for minutes before a byte
    idle_timeout: float = 300.0  # gap between upstream events (pings count as life)
    max_retries: int = 2  # before the first byte only
    retry_backoff: float = 0.5  # base seconds; jittered, doubled per attempt
    max_retry_after: float = 30.0  # a longer Retry-After moves on to the next fallback
    max_connections: int = 1000
    keepalive_expiry: float = 15.0  # idle upstream connections older than this are not reused
    ca_file: str | None = None  # PEM bundle to trust instead of the system's (a private CA in front of the provider)
    proxy: SecretStr | None = (
        None  # http://[user:password@]host:port of an HTTP proxy (socks5:// with transport = "httpx")
    )
    transport: Literal["gateway", "httpx", "demo"] = (
        "gateway"  # "httpx": httpx's own (HTTP/2, SOCKS, env proxies); docs/operations.md; "demo": gateway/http/demo.py
    )
    http2: bool = False  # transport = "httpx" only; needs the h2 package (pip install 'llm-gateway[http2]')
    trust_env: bool = False  # transport = "httpx" only: HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, SSL_CERT_FILE, .netrc
    default_max_tokens: int = 8192  # for Anthropic upstreams when the caller sent no limit
    dropped_betas: list[str] = Field(default_factory=list)  # anthropic-beta values not forwarded
    headers: dict[str, str] = Field(default_factory=dict)  # extra static headers to send
    auto_cache: bool = False  # anthropic: cache_control breakpoints for callers that set none (docs/cache.md)
    gemini_parameters_json_schema: bool = False  # Gemini: tool schemas as JSON Schema, not the OpenAPI subset
    # Request settings this provider's dialect cannot carry that may be dropped instead of refused
    # with a 400 (gateway/dialects/carry.py; the table is in docs/dialects.md).
    drop_unsupported: list[str] = Field(default_factory=list)
    # Hints dropped and reported by default (top_k, tools.strict …) this provider refuses instead.
    refuse_unsupported: list[str] = Field(default_factory=list)
    # Anthropic: upstream-model globs that refuse temperature together with top_p (top_p is then
    # dropped and reported); None = the built-in list of such Claude models, [] = always send both.
    sampling_exclusive_models: list[str] | None = None
    # Anthropic: upstream-model globs asked for thinking as {type: adaptive} + output_config.effort
    # instead of {type: enabled, budget_tokens}; None = the built-in list (Claude 4.6 and later).
    adaptive_thinking_models: list[str] | None = None
    # Cloud platforms (CONTRACT.md "Cloud platforms"; gateway/platforms/): None = the provider's own API.
    platform: Literal["bedrock", "vertex", "azure"] | None = None
    region: str | None = None  # bedrock: the AWS region (bedrock-runtime.{region}.amazonaws.com)
    project: str | None = None  # vertex: the Google Cloud project
    location: str | None = None  # vertex: us-central1 …, "global", or the "us" / "eu" multi-regions
    api_version: str | None = None  # azure: the api-version query parameter
    deployments: dict[str, str] = Field(default_factory=dict)  # azure: upstream model -> deployment name
    endpoint_url: str | None = None  # overrides the platform's host (private endpoint, test double)
    token_url: str | None = None  # vertex: the OAuth token endpoint when the credentials name none

    @model_validator(mode="before")
    @classmethod
    def _demo_is_a_transport(cls, data: Any) -> Any:
        """The demo's dialect name (CONTRACT.md) is the demo stand-in: a provider of the dialect it
        answers in, over its transport (gateway/http/demo.py)."""
        from gateway.http import demo

        if isinstance(data, dict) and data.get("dialect") == demo.KIND:
            data = {"base_url": demo.BASE_URL, **data, "dialect": demo.DIALECT, "transport": demo.KIND}
        return data

    @field_validator("dialect")
    @classmethod
    def _known_dialect(cls, value: str) -> str:
        from gateway.dialects.registry import UPSTREAM_DIALECTS

        if value not in UPSTREAM_DIALECTS:
            raise ValueError(f"unknown dialect {value!r}; known: {', '.join(UPSTREAM_DIALECTS)}, demo")
        return value

    @field_validator("drop_unsupported", "refuse_unsupported")
    @classmethod
    def _known_fields(cls, value: list[str], info: ValidationInfo) -> list[str]:
        from gateway.dialects.carry import USES

        unknown = [v for v in value if v not in USES]
        if unknown:
            raise ValueError(f"{info.field_name}: unknown field(s) {unknown}; known: {sorted(USES)}")
        return value

    @model_validator(mode="after")
    def _transport_can_do_it(self) -> ProviderSettings:
        from urllib.parse import urlsplit

        proxy = self.proxy.get_secret_value() if self.proxy is not None else ""
        parts = urlsplit(proxy)
        if proxy and (not parts.hostname or parts.scheme not in ("http", "https", "socks5", "socks5h")):
            raise ValueError(
                'proxy must be an http://[user:password@]host:port URL (or socks5:// with transport = "httpx")'
            )
        if self.transport == "gateway":
            needs = [
                what
                for what, asked in (
                    ("http2", self.http2),
                    ("trust_env", self.trust_env),
                    ("a SOCKS or https:// proxy", proxy and parts.scheme != "http"),
                )
                if asked
            ]
            if needs:
                raise ValueError(
                    f'{needs[0]} needs transport = "httpx" (the gateway\'s own transport is HTTP/1.1 with http:// proxies)'
                )
        for package, asked, extra in (
            ("h2", self.http2, "http2"),
            ("socksio", parts.scheme.startswith("socks"), "socks"),
        ):
            if asked and importlib.util.find_spec(package) is None:
                raise ValueError(f"{extra} needs the {package} package: pip install 'llm-gateway[{extra}]'")
        return self

    @field_validator("name")
    @classmethod
    def _name_has_no_slash(cls, value: str) -> str:
        if not value or "/" in value or ":" in value:
            raise ValueError("provider name must be non-empty and contain no '/' or ':'")
        return value

    def key(self) -> str | None:
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        return None


Strategy = Literal["weighted", "least_busy", "latency", "ordered"]


class RegexPattern(BaseModel):
    name: str  # the <type> in [REDACTED:<type>] and in the access log
    pattern: str


class GuardrailSettings(BaseModel):
    """One ``[[guardrails]]`` entry (gateway/guardrails/): what to look for, where, and what to do."""

    name: str
    kind: Literal["pii", "regex", "webhook", "presidio"]
    on: list[Literal["request", "response"]] = ["request", "response"]
    action: Literal["redact", "block", "log"] = "redact"
    types: list[str] | None = None  # pii: the recognizers to run (default: all)
    patterns: list[str | RegexPattern] = Field(
        default_factory=list
    )  # regex: a bare string is named after the guardrail
    url: str | None = None  # webhook: the operator's service (POST, docs/guardrails.md); requests and answers
    timeout_ms: int | None = Field(
        default=None, ge=1
    )  # webhook (default 500) / presidio (default 10000): no verdict within this counts as down
    fail: Literal["closed", "open"] = (
        "closed"  # webhook down or presidio too slow: closed refuses the request, open lets it pass
    )
    model: str = "en_core_web_lg"  # presidio: the spaCy model ("blank:en": pattern recognizers only)
    entities: list[str] | None = None  # presidio: the entity types (default: all it knows)


_MCP_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$")


class McpServerSettings(BaseModel):
    """One ``[[mcp_servers]]`` entry (gateway/mcp/, docs/mcp.md): an MCP server whose tools the gateway serves."""

    name: str  # tools are listed as "<name>_<tool>": letters, digits and '-' (no '_', so the split is unambiguous)
    url: str | None = None  # streamable HTTP (or the legacy HTTP+SSE endpoint with transport = "sse")
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    command: list[str] | None = None  # stdio: started by the gateway, restarted when it dies, stopped on shutdown
    env_env: dict[str, str] = Field(default_factory=dict)  # stdio: NAME = env var whose value the child gets
    headers_env: dict[str, str] = Field(default_factory=dict)  # header = env var holding its value (never logged)
    timeout: float = Field(default=30.0, gt=0)  # seconds for one call (and for connecting / listing)
    price_per_call: float | None = Field(default=None, ge=0)  # USD per tools/call, into the key's spend

    @field_validator("name")
    @classmethod
    def _name_is_plain(cls, value: str) -> str:
        if not _MCP_SERVER_NAME.match(value):
            raise ValueError("an MCP server name is 1-32 letters, digits or '-', starting with a letter or digit")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.url is None) == (not self.command):
            raise ValueError(f"mcp server {self.name!r} needs exactly one of url or command")
        return self


class TargetSettings(BaseModel):
    """One deployment serving a route (CONTRACT.md "Routes over several targets")."""

    model_config = {"extra": "forbid"}

    provider: str
    upstream_model: str | None = None  # default: the name the caller sent
    weight: float = Field(default=1.0, ge=0)  # strategy "weighted": share of the traffic
    rpm: int | None = Field(default=None, ge=1)  # requests a minute; at its limit the target is passed over
    tpm: int | None = Field(default=None, ge=1)  # tokens a minute (input + output, counted as answers end)


class RouteSettings(BaseModel):
    model: str  # exact name or a glob (claude-*, *)
    provider: str | None = None  # one target; or ``targets`` for several
    upstream_model: str | None = None  # default: the name the caller sent
    targets: list[TargetSettings] = Field(default_factory=list)
    strategy: Strategy = "weighted"
    fallbacks: list[str] = Field(default_factory=list)  # "provider:model" or "provider"
    affinity: Literal["none", "session"] = "none"
    affinity_ttl_seconds: float = Field(default=3600.0, gt=0)  # an idle session forgets its target after this
    cooldown_seconds: float = Field(default=30.0, ge=0)  # a target failing before the first byte is skipped this long
    # The longest one request waits on upstreams' say-so (Retry-After before a retry, a target cooled
    # before it recovering); a longer wait is the caller's 429/503 with Retry-After at once (docs/routing-failures.md).
    max_wait_seconds: float = Field(default=10.0, ge=0)
    stream_usage: StreamUsage | None = None  # overrides [server] stream_usage for this route
    task_type: str | None = None  # embeddings: the task type when the caller sent none (docs/embeddings.md)
    cache: bool = True  # false: the [cache] never answers nor keeps this route's requests
    guardrails: list[str] = Field(default_factory=list)  # [[guardrails]] names; with a key's, the union

    @field_validator("task_type")
    @classmethod
    def _known_task_type(cls, value: str | None) -> str | None:
        from gateway.dialects.embeddings import TASK_TYPES

        if value is not None and value not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {', '.join(sorted(TASK_TYPES))}, got {value!r}")
        return value


class CacheSettings(BaseModel):
    """The exact response cache (gateway/relay/cache.py; CONTRACT.md "Response cache"). Off unless enabled."""

    model_config = {"extra": "forbid"}

    enabled: bool = False
    ttl_seconds: float = Field(default=3600.0, gt=0)
    scope: Literal["key", "shared"] = "key"  # key: an entry is only served to the key that stored it
    max_entry_bytes: int = Field(default=1 << 20, ge=1024)  # a longer answer is not kept
    max_entries: int = Field(default=10000, ge=1)  # the oldest go first beyond this


class StoreSettings(BaseModel):
    url: str = "sqlite:///gateway-state.db"
    password_env: str | None = None  # Redis / Sentinel / Cluster password from this variable (or in the url)
    ttl_hours: float = 24.0
    max_detached_seconds: float = 3600.0  # a detached (stored/background) generation is cut after this
    # A follower on another replica gives a generation up (in-dialect error) only when its owner's
    # heartbeat (renewed every second) is older than this AND stays unrenewed for a while longer:
    # a replica whose event loop stalls for a few seconds is not declared dead.
    owner_timeout_seconds: float = Field(default=8.0, gt=0)

    def password(self) -> str | None:
        """The Redis password named by ``password_env`` (None when unset or empty)."""
        return os.environ.get(self.password_env) or None if self.password_env else None


class InspectorSettings(BaseModel):
    """Which requests keep their wire for the console's inspector (gateway/telemetry/inspector.py)."""

    capture: str | None = None  # off | errors | all | sample:F; unset = errors with [admin] on loopback, else off
    max_requests: int = Field(200, ge=1)  # kept captures per process, oldest dropped first
    max_bytes: int = Field(1 << 20, ge=1024)  # per side of one capture; the rest is marked truncated

    @field_validator("capture")
    @classmethod
    def _known_mode(cls, value: str | None) -> str | None:
        if value is not None:
            parse_mode(value)
        return value


class TelemetrySettings(BaseModel):
    """OpenTelemetry export (gateway/telemetry/traces.py). Off unless an endpoint is set here or in the
    standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` variables."""

    otlp_endpoint: str | None = (
        None  # OTLP/HTTP base URL, e.g. http://127.0.0.1:4318 (/v1/traces, /v1/metrics appended)
    )
    service_name: str = "llm-gateway"  # OTEL_SERVICE_NAME wins when set
    capture_content: bool = False  # prompts, completions and tool arguments on spans only when true
    shutdown_seconds: float = 5.0  # at most this long flushing spans and metrics on shutdown

    @field_validator("otlp_endpoint")
    @classmethod
    def _endpoint_is_http_url(cls, value: str | None) -> str | None:
        from urllib.parse import urlsplit

        if value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    "otlp_endpoint must be an http(s)://host[:port] URL (the OTLP/HTTP base, e.g. http://127.0.0.1:4318)"
                )
        return value or None


def referenced_env_names(data: Any) -> set[str]:
    """Every variable name a ``*_env`` setting holds in ``data`` (the file's contents, nested tables and
    arrays of tables included): ``keys_env``, ``key_env`` of ``[admin]`` and ``[[keys]]``, ``api_key_env``
    and any such field added later (a ``*_env`` field whose value is a string; ``trust_env`` is a bool)."""
    names: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and key.endswith("_env") and isinstance(value, str) and value:
                names.add(value)
            elif isinstance(key, str) and key.endswith("_env") and isinstance(value, dict):
                # a table of them ([[mcp_servers]] headers_env / env_env: name = variable)
                names |= {v for v in value.values() if isinstance(v, str) and v}
            else:
                names |= referenced_env_names(value)
    elif isinstance(data, list):
        for item in data:
            names |= referenced_env_names(item)
    return names


def _default_env_names(model: type[BaseModel]) -> set[str]:
    """The ``*_env`` defaults of ``model`` and the sections under it (``[auth] keys_env = "GATEWAY_KEYS"``)."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        if name.endswith("_env") and isinstance(field.default, str) and field.default:
            names.add(field.default)
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            names |= _default_env_names(section)
    return names


class SettingsEnv(EnvSettingsSource):
    """The ``GATEWAY_*`` environment as settings, by one rule: a variable is a setting only when it names
    a field inside a section, ``GATEWAY_<SECTION>__<FIELD>[__…]`` (``GATEWAY_SERVER__PORT``,
    ``GATEWAY_STORE__URL``), and never when a ``*_env`` setting names it (in the file, in the
    environment, or by default).

    Why: every top-level setting is a section or a list of tables, so a bare ``GATEWAY_<NAME>`` is never
    meant as one — it is a secret or a pointer that merely shares the prefix: ``GATEWAY_KEYS`` (the
    default ``[auth] keys_env``) would otherwise be parsed as the ``[[keys]]`` list and stop every
    command, ``GATEWAY_ADMIN=…`` would replace ``[admin]``, ``GATEWAY_CONFIG`` and ``GATEWAY_KEY`` /
    ``GATEWAY_ADMIN_KEY`` are read by name elsewhere. And a variable holding a key is read as that key
    only by the setting that names it, even when it looks nested (``key_env = "GATEWAY_ADMIN__KEY"``)."""

    def __init__(self, settings_cls: type[BaseSettings], file_data: dict[str, Any]) -> None:
        self._file_data = file_data
        super().__init__(settings_cls)

    def _load_env_vars(self) -> dict[str, str | None]:
        loaded = super()._load_env_vars()
        prefix = self.env_prefix if self.case_sensitive else self.env_prefix.lower()
        nested = {
            name: value
            for name, value in loaded.items()
            if name.startswith(prefix)
            and self.env_nested_delimiter
            and self.env_nested_delimiter in name[len(prefix) :]
        }
        overridden = {value for name, value in nested.items() if name.endswith("_env") and value}
        referenced = referenced_env_names(self._file_data) | _default_env_names(self.settings_cls) | overridden
        if not self.case_sensitive:
            referenced = {name.lower() for name in referenced}
        return {name: value for name, value in nested.items() if name not in referenced}


class Settings(BaseSettings):
    # hide_input_in_errors: a config error names the field and the rule, never echoes values (an
    # inline api_key is one)
    model_config = SettingsConfigDict(
        env_prefix="GATEWAY_", env_nested_delimiter="__", extra="forbid", hide_input_in_errors=True
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    websocket: WebSocketSettings = Field(default_factory=WebSocketSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    providers: list[ProviderSettings] = Field(default_factory=list)
    routes: list[RouteSettings] = Field(default_factory=list)
    store: StoreSettings = Field(default_factory=StoreSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    inspector: InspectorSettings = Field(default_factory=InspectorSettings)
    keys: list[KeySettings] = Field(default_factory=list)
    guardrails: list[GuardrailSettings] = Field(default_factory=list)
    mcp_servers: list[McpServerSettings] = Field(default_factory=list)
    prices: dict[str, PriceSettings] = Field(default_factory=dict)
    spend: SpendSettings = Field(default_factory=SpendSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment beats the file (init kwargs carry the file's contents); SettingsEnv says which
        # variables are settings.
        file_data = init_settings.init_kwargs if isinstance(init_settings, InitSettingsSource) else {}
        return (SettingsEnv(settings_cls, file_data), init_settings)

    @model_validator(mode="after")
    def _references_resolve(self) -> Settings:
        """The cross-checks (names unique, routes naming known providers …) run here, not in the
        loader: a ``Settings(...)`` built in code is as checked as a loaded file."""
        validate_references(self)
        return self


def embedded_default() -> dict[str, Any]:
    """The configuration used when no file is given: demo, plus the provider's own API of each
    dialect that has one (``Codec.own_api``) whose key is in the environment."""
    from gateway.dialects.registry import UPSTREAM_DIALECTS, codec_for
    from gateway.http import demo

    providers: list[dict[str, Any]] = [dict(demo.PROVIDER)]
    routes: list[dict[str, Any]] = [dict(r) for r in demo.ROUTES]
    for dialect in UPSTREAM_DIALECTS:
        own = codec_for(dialect).own_api
        if own is not None and os.environ.get(own.key_env):
            providers.append(
                {"name": own.provider, "dialect": dialect, "base_url": own.base_url, "api_key_env": own.key_env}
            )
            routes += [{"model": m, "provider": own.provider} for m in own.models]
    return {"providers": providers, "routes": routes}


def config_path(explicit: str | None) -> Path | None:
    """``--config``, else ``$GATEWAY_CONFIG``, else ``config/gateway.toml`` if present."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("GATEWAY_CONFIG")
    if env:
        return Path(env)
    default = Path("config/gateway.toml")
    return default if default.exists() else None


def load_settings(path: str | Path | None = None, *, use_default_search: bool = True) -> Settings:
    """Load the TOML file (or the embedded default) and apply env overrides (the model validates)."""
    resolved = config_path(str(path) if path else None) if use_default_search or path else None
    data = tomllib.loads(Path(resolved).read_text()) if resolved else embedded_default()
    return Settings(**data)


def validate_references(settings: Settings) -> None:
    names = [p.name for p in settings.providers]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"duplicate provider names: {sorted(duplicates)}")
    for route in settings.routes:
        if (route.provider is None) == (not route.targets):
            raise ValueError(f"route {route.model!r} needs either provider or targets (not both)")
        for provider in [route.provider] if route.provider is not None else [t.provider for t in route.targets]:
            if provider not in names:
                raise ValueError(f"route {route.model!r} refers to unknown provider {provider!r}")
        if route.targets and route.strategy == "weighted" and not any(t.weight > 0 for t in route.targets):
            raise ValueError(f"route {route.model!r}: every target has weight 0")
        for fallback in route.fallbacks:
            provider = fallback.split(":", 1)[0]
            if provider not in names:
                raise ValueError(f"route {route.model!r} fallback {fallback!r} refers to unknown provider {provider!r}")
    key_names = [k.name for k in settings.keys]
    if len(set(key_names)) != len(key_names):
        raise ValueError(f"duplicate key names: {sorted({n for n in key_names if key_names.count(n) > 1})}")
    mcp_names = [m.name for m in settings.mcp_servers]
    if len(set(mcp_names)) != len(mcp_names):
        raise ValueError(f"duplicate mcp_servers names: {sorted({n for n in mcp_names if mcp_names.count(n) > 1})}")
    for key in settings.keys:
        if bool(key.key_env) == bool(key.key_sha256):
            raise ValueError(f"key {key.name!r} needs exactly one of key_env or key_sha256")
    for p in settings.providers:
        if p.platform is None and not p.base_url:
            raise ValueError(f"provider {p.name!r} needs a base_url")
