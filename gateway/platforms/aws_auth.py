"""AWS Signature Version 4 for httpx, with botocore's own signer and credential chain.

Why botocore and not a hand-written signer: its ``SigV4Auth`` is what every AWS SDK's signature
is checked against (double-encoded canonical paths, the payload hash, the session token), and its
credential chain is the one operators already configure — environment, shared config and
profiles (``AWS_PROFILE``, SSO, ``credential_process``), web identity / IRSA, ECS/EKS container
credentials, EC2 instance metadata. Temporary credentials are ``RefreshableCredentials``, which
refresh themselves shortly before they expire.

A refresh (and the first resolution of the chain) reads files or calls STS / a metadata endpoint:
blocking IO, so it runs in a thread (``asyncio.to_thread``); the common case — credentials still
fresh — is a few attribute reads on the event loop. A signature is pure CPU (one SHA-256 of the
body, five HMACs), done inline.

Only the headers that must be signed are: ``host``, ``content-type``, ``x-amz-date`` and, with
temporary credentials, ``x-amz-security-token``. ``user-agent``, ``accept`` and the like stay out
of the signature, so a proxy that rewrites them cannot break it. The body's SHA-256 is part of the
canonical request, so the body is signed too.

botocore is imported inside functions: the gateway imports without the ``[bedrock]`` extra.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator, Generator
from typing import Any

import httpx

from gateway.errors import GatewayError

SERVICE = "bedrock"  # the signing name of bedrock-runtime

# botocore.auth logs the canonical request at DEBUG, x-amz-security-token's value included: a
# gateway run at DEBUG must not write a session token to its logs.
_signer_log = logging.getLogger("botocore.auth")
if _signer_log.getEffectiveLevel() < logging.INFO or _signer_log.level == logging.NOTSET:
    _signer_log.setLevel(logging.INFO)


class SigV4(httpx.Auth):
    """Signs every request for ``service`` in ``region`` with the default chain's credentials.

    ``credentials``: a botocore credentials object to use instead of the chain (tests)."""

    def __init__(self, region: str, provider: str, service: str = SERVICE, credentials: Any = None) -> None:
        self.region = region
        self.service = service
        self.provider = provider
        self._credentials = credentials
        self._resolved = credentials is not None
        self._lock = threading.Lock()  # one resolution of the chain, whichever thread gets there first

    # -- credentials -------------------------------------------------------------------------

    def _resolve(self) -> Any:
        """The chain's credentials object (blocking: files, maybe the network). Once."""
        with self._lock:
            if not self._resolved:
                import botocore.session

                self._credentials = botocore.session.Session().get_credentials()
                self._resolved = True
        return self._credentials

    def _missing(self) -> GatewayError:
        return GatewayError(
            "bad_gateway",
            f"upstream {self.provider}: no AWS credentials found (environment, shared config / AWS_PROFILE, "
            "web identity, container or instance credentials), and no api_key_env for a Bedrock API key",
            502,
        )

    def _freeze(self) -> Any:
        """Frozen (access key, secret, token) for one request; may refresh (blocking)."""
        credentials = self._resolve()
        if credentials is None:
            raise self._missing()
        try:
            return credentials.get_frozen_credentials()
        except Exception as exc:  # a failed refresh (STS down, a revoked role): name it, never its values
            raise GatewayError(
                "bad_gateway",
                f"upstream {self.provider}: AWS credentials could not be refreshed ({type(exc).__name__})",
                502,
            ) from None

    def _cheap(self) -> bool:
        """Whether ``_freeze`` will not block: resolved, and not due for a refresh."""
        if not self._resolved:
            return False
        refresh_needed = getattr(self._credentials, "refresh_needed", None)
        if refresh_needed is None:
            return True  # static credentials
        try:
            return not refresh_needed()
        except Exception:
            return False

    async def frozen(self) -> Any:
        if self._cheap():
            return self._freeze()
        return await asyncio.to_thread(self._freeze)

    def method(self) -> str | None:
        """Where the chain found credentials (botocore's ``method``: env, shared-credentials-file,
        assume-role-with-web-identity, container-role, iam-role …), or None."""
        credentials = self._resolve()
        return getattr(credentials, "method", None) if credentials is not None else None

    # -- signing -----------------------------------------------------------------------------

    def sign(self, request: httpx.Request, frozen: Any) -> None:
        """Add ``authorization``, ``x-amz-date`` (and ``x-amz-security-token``) to ``request``."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers = {"host": request.headers["host"]}
        content_type = request.headers.get("content-type")
        if content_type is not None:
            headers["content-type"] = content_type
        aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
        SigV4Auth(frozen, self.service, self.region).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = aws.headers.get(name)
            if value is not None:
                request.headers[name.lower()] = value

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        self.sign(request, self._freeze())
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        self.sign(request, await self.frozen())
        yield request
