"""Google OAuth access tokens for Vertex AI, from Application Default Credentials (google-auth).

``google.auth.default`` finds the credentials as Google's own libraries do: the JSON file named by
``GOOGLE_APPLICATION_CREDENTIALS`` (a service account key, a workload identity federation
config, an impersonation config), gcloud's application-default login, or the metadata server
(GCE, GKE workload identity, Cloud Run). The scope is ``cloud-platform``. ``token_url`` sets the
token endpoint of a service-account file that names none (a private endpoint, a test double).

google-auth is imported here only, when a Vertex provider starts (the ``[vertex]`` extra). Its
refresh is blocking I/O: ``TokenAuth`` runs it in a worker thread, one at a time.
"""

from __future__ import annotations

import json
import os
from datetime import UTC
from pathlib import Path
from typing import Any

from gateway.errors import GatewayError
from gateway.platforms.token_auth import TokenAuth

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_GCLOUD_ADC = Path("~/.config/gcloud/application_default_credentials.json")


class GoogleTokens:
    """The blocking side: load the credentials once, refresh them on demand (``TokenAuth.fetch``)."""

    def __init__(self, provider: str, token_url: str | None) -> None:
        self._provider = provider
        self._token_url = token_url
        self._credentials: Any = None

    def _load(self) -> Any:
        import google.auth
        from google.oauth2 import service_account

        path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        if path and self._token_url:
            info = _read_json(path)
            if info.get("type") == "service_account" and not info.get("token_uri"):
                return service_account.Credentials.from_service_account_info(
                    {**info, "token_uri": self._token_url}, scopes=[SCOPE]
                )
        credentials, _project = google.auth.default(scopes=[SCOPE])
        return credentials

    def fetch(self, fresh: bool) -> tuple[str, float]:
        """A new access token and its expiry (epoch seconds). ``fresh`` changes nothing here:
        google-auth's ``refresh`` always asks the token endpoint."""
        import google.auth.exceptions
        from google.auth.transport.requests import Request

        try:
            if self._credentials is None:
                self._credentials = self._load()
            self._credentials.refresh(Request())
        except (google.auth.exceptions.GoogleAuthError, OSError, ValueError) as exc:
            raise GatewayError(
                "bad_gateway",
                f"provider {self._provider}: no Google access token ({type(exc).__name__}: {_first_line(exc)})",
                502,
            ) from None
        token = self._credentials.token
        if not isinstance(token, str) or not token:
            raise GatewayError(
                "bad_gateway", f"provider {self._provider}: the Google credentials gave no access token", 502
            )
        expiry = self._credentials.expiry  # naive UTC (google-auth), or None: assume an hour
        expires_at = expiry.replace(tzinfo=UTC).timestamp() if expiry is not None else _now() + 3600
        return token, expires_at

    def extra_headers(self) -> dict[str, str]:
        """``x-goog-user-project`` for user credentials with a quota project (as google-auth's ``apply``)."""
        quota = getattr(self._credentials, "quota_project_id", None)
        return {"x-goog-user-project": quota} if isinstance(quota, str) and quota else {}


def google_auth(provider: str, token_url: str | None) -> TokenAuth:
    tokens = GoogleTokens(provider, token_url)
    return TokenAuth(tokens.fetch, tokens.extra_headers)


def credential_source() -> str:
    """Which Application Default Credentials will be used (a kind and a path, never a key)."""
    path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if path:
        try:
            kind = str(_read_json(path).get("type") or "unknown type")
        except (OSError, ValueError):
            return f"$GOOGLE_APPLICATION_CREDENTIALS {path} (NOT READABLE)"
        label = {
            "service_account": "service account key",
            "external_account": "workload identity federation",
            "authorized_user": "user credentials",
            "impersonated_service_account": "service account impersonation",
        }.get(kind, kind)
        return f"{label} file $GOOGLE_APPLICATION_CREDENTIALS ({path})"
    gcloud = _GCLOUD_ADC.expanduser()
    if gcloud.exists():
        return f"gcloud application-default credentials ({gcloud})"
    return "the metadata server (GCE, GKE workload identity, Cloud Run), else none"


def _read_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _first_line(exc: BaseException) -> str:
    """The library's message, first argument only (google-auth appends the raw token response)."""
    first = exc.args[0] if exc.args else exc
    return str(first).splitlines()[0][:300] if str(first) else type(exc).__name__


def _now() -> float:
    import time

    return time.time()
