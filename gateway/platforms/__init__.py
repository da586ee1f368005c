"""Platform name → ``Platform`` (gateway/platforms/base.py). Imported lazily: a platform's module
may import its optional extra (botocore, google-auth, azure-identity) only when a provider uses it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from gateway.platforms.base import DIRECT, ConfigError, Platform

if TYPE_CHECKING:
    from gateway.settings import ProviderSettings, Settings

MODULES = {
    "bedrock": "gateway.platforms.bedrock",
    "vertex": "gateway.platforms.vertex",
    "azure": "gateway.platforms.azure",
}

_cache: dict[str, Platform] = {}


def platform_for(s: ProviderSettings) -> Platform:
    """The provider's platform (``DIRECT`` without ``platform``)."""
    if s.platform is None:
        return DIRECT
    platform = _cache.get(s.platform)
    if platform is None:
        try:
            platform = importlib.import_module(MODULES[s.platform]).PLATFORM
        except (ImportError, KeyError, AttributeError) as exc:
            raise ConfigError(f"provider {s.name!r}: platform {s.platform!r} is not available ({exc})") from None
        _cache[s.platform] = platform
    return platform


def check_platforms(settings: Settings) -> None:
    """Every provider's platform settings and extras, at startup (``ConfigError`` names the extra)."""
    for s in settings.providers:
        platform_for(s).check(s)


__all__ = ["ConfigError", "Platform", "check_platforms", "platform_for"]
