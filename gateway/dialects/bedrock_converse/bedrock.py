"""Converse on AWS Bedrock, its only platform: the codec already builds Bedrock's own call
(``/model/{id}/converse-stream``, ``/converse``), so it passes unchanged, and its eventstream
events are read as they are (``event`` = ``:event-type``: the default ``unwrap``). No counting
route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.dialects.base import OnPlatform, UpstreamCall

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings


class OnBedrock(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:
        return call


ADAPTER = OnBedrock()
