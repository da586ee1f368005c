"""What an upstream dialect cannot carry: refused, or dropped where configured — never lost in silence.

Every dialect package lists in ``fields.py`` the request settings (IR fields, named as in
``ChatRequest``: ``stop``, ``top_k``, ``tools.strict`` …) its builder has no place for, as a
``Limit`` each. Before anything is sent, ``judge`` walks that table for the attempt's upstream:

* a setting the caller used that the upstream cannot carry is **refused**: ``CannotCarry``, which
  attempts.py turns into a 400 in the caller's dialect naming the caller's own parameter
  (``stop`` for Chat, ``stop_sequences`` for Anthropic, ``generationConfig.stopSequences`` …);
* unless the provider accepts the loss (``drop_unsupported = ["stop"]`` in its config), or the
  limit is *advisory*: a setting that changes nothing in the answer (``user``, ``metadata``,
  ``store``) or a sampling hint popular clients send by default (``top_k`` from Gemini CLI,
  ``tools.strict`` from pydantic-ai and the OpenAI Agents SDK; CONTRACT.md "What an upstream cannot
  carry"): then it is **dropped** and named in the access-log line (``dropped``) and in the
  ``x-gateway-dropped`` response header — unless the provider lists it in ``refuse_unsupported``,
  which makes that one strict again.

A builder that has to drop something only it can judge (Anthropic's temperature/top_p pair for
the models in ``sampling_exclusive_models``, thinking switched off because the history carries no
Anthropic signature) appends it to ``UpstreamCall.dropped`` itself: one record, one place to read.

Refusals are judged per attempt: a target that cannot carry the request is skipped before
anything is sent to it, and the next target (a fallback of another dialect) is tried. Only when no
target could carry it does the caller get the 400.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gateway.errors import GatewayError
from gateway.ir import ChatRequest, FilePart, ImagePart, Part, ToolResultPart


def _media_in_assistant_turns(req: ChatRequest) -> bool:
    return any(
        m.role == "assistant" and any(isinstance(p, (ImagePart, FilePart)) for p in m.content) for m in req.messages
    )


def _parts(req: ChatRequest) -> Iterator[Part]:
    """Every content part, tool results' own content included."""
    for m in req.messages:
        for p in m.content:
            yield p
            if isinstance(p, ToolResultPart):
                yield from p.content


def _file_by_url(req: ChatRequest) -> bool:
    return any(
        isinstance(p, FilePart) and p.data is None and (p.url or "").startswith(("http://", "https://", "gs://"))
        for p in _parts(req)
    )


# How to tell that a caller used a setting: the field names every ``Limit``, ``drop_unsupported``
# and ``dropped`` speak. A value equal to every dialect's default counts as unused.
USES: dict[str, Callable[[ChatRequest], bool]] = {
    "stop": lambda r: bool(r.stop),
    "top_k": lambda r: r.top_k is not None,
    "parallel_tool_calls": lambda r: r.parallel_tool_calls is False and bool(r.tools),
    "tools.strict": lambda r: any(t.strict for t in r.tools),
    "tool_choice.allowed": lambda r: (
        r.tool_choice is not None and bool(r.tool_choice.allowed) and r.tool_choice.mode in ("auto", "required")
    ),
    "response_format.json": lambda r: (
        r.response_format is not None and r.response_format.get("type") in ("json", "json_object")
    ),
    "thinking.disabled": lambda r: r.thinking is not None and r.thinking.enabled is False,
    "user": lambda r: r.user is not None,
    "metadata": lambda r: bool(r.metadata),
    "store": lambda r: r.store is True and not r.store_here,
    "messages.file_url": _file_by_url,
    "messages.assistant_media": _media_in_assistant_turns,
}


@dataclass(frozen=True, slots=True)
class Limit:
    """One setting an upstream dialect has no place for."""

    field: str  # IR field name (a key of ``USES``): what ``drop_unsupported`` lists and ``dropped`` reports
    why: str  # what the upstream lacks, said to the caller
    # losing it changes nothing in the answer, or it is a hint clients send by default: dropped
    # (and recorded) unless the provider lists it in refuse_unsupported
    advisory: bool = False
    when: Callable[[ChatRequest], bool] | None = None  # narrower than ``USES[field]`` for this dialect

    def used(self, req: ChatRequest) -> bool:
        return (self.when or USES[self.field])(req)


class CannotCarry(Exception):
    """The attempt's upstream has no place for ``field``; nothing was sent."""

    def __init__(self, field: str, why: str, configured: bool = False) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why
        self.configured = configured  # refused only because the provider's refuse_unsupported lists it


def judge(
    req: ChatRequest,
    limits: Sequence[Limit],
    drop_unsupported: Collection[str],
    refuse_unsupported: Collection[str] = (),
) -> list[str]:
    """The fields dropped for this upstream; raises ``CannotCarry`` for the first one refused.

    ``drop_unsupported`` accepts a loss that would be refused; ``refuse_unsupported`` refuses one
    that would be dropped by default (an advisory limit). Listing a field in both refuses it."""
    dropped: list[str] = []
    for limit in limits:
        if not limit.used(req):
            continue
        if limit.field in refuse_unsupported:
            raise CannotCarry(limit.field, limit.why, configured=limit.advisory)
        if limit.advisory or limit.field in drop_unsupported:
            dropped.append(limit.field)
        else:
            raise CannotCarry(limit.field, limit.why)
    return dropped


# A caller dialect's sampling hints with no IR slot (``seed``, ``presence_penalty`` …): kept in
# ``req.extras[dialect]`` for an upstream of the same dialect. Each dialect's ``fields.HINTS`` names
# where its parser keeps them: report name -> path in its extras.
Hints = Mapping[str, tuple[str, ...]]


def lost_hints(req: ChatRequest, upstream_dialect: str, hints: Hints) -> list[str]:
    """The caller's hints an upstream of another dialect never receives: dropped and reported."""
    if not hints or not req.dialect or req.dialect == upstream_dialect:
        return []
    extras = req.extras.get(req.dialect)
    if not extras:
        return []
    lost: list[str] = []
    for name, path in hints.items():
        node: object = extras
        for step in path:
            node = node.get(step) if isinstance(node, dict) else None
        if node is not None and node is not False and name not in lost:
            lost.append(name)
    return lost


def refusal(exc: CannotCarry, caller_params: dict[str, str], provider: str, dialect: str) -> GatewayError:
    """The 400 a caller gets, naming its own parameter and how to accept the loss instead."""
    param = caller_params.get(exc.field, exc.field)
    accept = (
        f'or take "{exc.field}" out of that provider\'s refuse_unsupported'
        if exc.configured
        else f'or list "{exc.field}" in that provider\'s drop_unsupported'
    )
    message = (
        f"{param}: cannot be sent to provider {provider!r} ({dialect}): {exc.why}. Remove {param}, "
        f"{accept} to send the request without it"
    )
    return GatewayError("invalid_request", message, 400, param=param)
