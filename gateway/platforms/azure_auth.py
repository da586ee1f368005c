"""Microsoft Entra ID tokens for Azure OpenAI, from azure-identity's ``DefaultAzureCredential``.

``DefaultAzureCredential`` tries what Azure's own SDKs try: the ``AZURE_CLIENT_ID`` /
``AZURE_TENANT_ID`` / ``AZURE_CLIENT_SECRET`` (or certificate) environment, workload identity
(AKS), managed identity (App Service, VMs, Container Apps), then developer logins (Azure CLI …).
The scope is ``https://cognitiveservices.azure.com/.default``.

The sync credential, run in a worker thread by ``TokenAuth``: azure-identity's async credentials
need aiohttp, which the gateway does not depend on. After a 401 the credential is built anew, so
its own token cache cannot hand back the refused token.

azure-identity is imported here only, when an Azure provider without an api-key starts.
"""

from __future__ import annotations

import os
from typing import Any

from gateway.errors import GatewayError
from gateway.platforms.token_auth import TokenAuth

SCOPE = "https://cognitiveservices.azure.com/.default"


class EntraTokens:
    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._credential: Any = None

    def fetch(self, fresh: bool) -> tuple[str, float]:
        from azure.core.exceptions import AzureError
        from azure.identity import DefaultAzureCredential

        try:
            if self._credential is None or fresh:
                if self._credential is not None:
                    self._credential.close()
                self._credential = DefaultAzureCredential()
            token = self._credential.get_token(SCOPE)
        except (AzureError, OSError, ValueError) as exc:
            raise GatewayError(
                "bad_gateway",
                f"provider {self._provider}: no Microsoft Entra ID token ({type(exc).__name__}: {_first_line(exc)})",
                502,
            ) from None
        return token.token, float(token.expires_on)


def entra_auth(provider: str) -> TokenAuth:
    return TokenAuth(EntraTokens(provider).fetch)


def credential_source() -> str:
    """Which of DefaultAzureCredential's sources the environment points at (names, never values)."""
    if os.environ.get("AZURE_CLIENT_ID") and os.environ.get("AZURE_TENANT_ID"):
        if os.environ.get("AZURE_CLIENT_SECRET"):
            return "Microsoft Entra ID: service principal secret ($AZURE_CLIENT_ID, $AZURE_TENANT_ID, $AZURE_CLIENT_SECRET)"
        if os.environ.get("AZURE_CLIENT_CERTIFICATE_PATH"):
            return f"Microsoft Entra ID: service principal certificate ({os.environ['AZURE_CLIENT_CERTIFICATE_PATH']})"
        if os.environ.get("AZURE_FEDERATED_TOKEN_FILE"):
            return "Microsoft Entra ID: workload identity ($AZURE_FEDERATED_TOKEN_FILE)"
    if os.environ.get("IDENTITY_ENDPOINT") or os.environ.get("MSI_ENDPOINT"):
        return "Microsoft Entra ID: managed identity ($IDENTITY_ENDPOINT)"
    return "Microsoft Entra ID: DefaultAzureCredential (managed identity via IMDS, else Azure CLI / developer logins)"


def _first_line(exc: BaseException) -> str:
    text = str(exc.args[0] if exc.args else exc)
    return text.splitlines()[0][:300] if text else type(exc).__name__
