"""gateway/dialects/items.py and the Responses items table: what crosses dialects and what is left out."""

from __future__ import annotations

import orjson

from gateway.dialects.base import RequestMeta
from gateway.dialects.items import unshown, without_lost_items
from gateway.dialects.openai_responses.items import client_call, client_result
from gateway.dialects.registry import codec_for
from gateway.events import BlockStart
from gateway.framing.sse import SSEDecoder
from gateway.ir import OpaquePart, ToolCallPart
from gateway.reply import fold
from tests.support.event_contract import check_events


def test_every_client_tool_call_kind_is_a_function_call_with_its_call_id() -> None:
    calls = [
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "shell_call", "call_id": "c2", "action": {"commands": ["ls"]}},
        {"type": "local_shell_call", "id": "lsh", "call_id": "c3", "action": {"type": "exec", "command": ["ls"]}},
        {"type": "apply_patch_call", "call_id": "c4", "operation": {"type": "delete_file", "path": "text"}},
        {"type": "computer_call", "call_id": "c5", "action": {"type": "click", "x": 1, "y": 2}},
    ]
    got = [client_call(c) for c in calls]
    assert [(g[0], g[1], orjson.loads(g[2])) for g in got if g is not None] == [
        ("c1", "apply_patch", {"input": "*** Begin Patch"}),
        ("c2", "shell", {"commands": ["ls"]}),
        ("c3", "local_shell", {"type": "exec", "command": ["ls"]}),
        ("c4", "apply_patch", {"type": "delete_file", "path": "text"}),
        ("c5", "computer", {"type": "click", "x": 1, "y": 2}),
    ]
    assert client_call({"type": "web_search_call", "id": "ws"}) is None
    assert client_call({"type": "function_call", "call_id": "c", "name": "f"}) is None  # the decoders' own


def test_results_are_text_a_structured_output_its_json() -> None:
    assert client_result({"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}) == ("c1", "ok")
    assert client_result({"type": "local_shell_call_output", "id": "c3", "output": "total 0"}) == ("c3", "total 0")
    call_id, text = client_result(
        {
            "type": "shell_call_output",
            "call_id": "c2",
            "output": [{"stdout": "x", "stderr": "", "outcome": {"type": "timeout"}}],
        }
    ) or ("", "")
    assert call_id == "c2" and orjson.loads(text)[0]["stdout"] == "x"
    assert client_result({"type": "function_call_output", "call_id": "c", "output": "x"}) is None


def test_client_calls_parse_as_tool_calls_that_keep_their_item() -> None:
    item = {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "patch"}
    req = codec_for("openai-responses").parse_request(
        {"model": "text", "input": [{"role": "user", "content": "text"}, item]}, RequestMeta()
    )
    part = req.messages[1].content[0]
    assert isinstance(part, ToolCallPart)
    assert (part.id, part.name, part.item, part.origin) == ("c1", "apply_patch", item, "openai-responses")


def test_server_items_of_another_dialect_are_taken_out_with_the_turns_they_empty() -> None:
    req = codec_for("openai-responses").parse_request(
        {
            "model": "text",
            "input": [
                {"role": "user", "content": "text"},
                {"type": "mcp_list_tools", "id": "ml", "server_label": "s", "tools": []},
                {"role": "user", "content": "again"},
            ],
        },
        RequestMeta(),
    )
    assert isinstance(req.messages[1].content[0], OpaquePart)
    same, lost = without_lost_items(req, "openai-responses")
    assert same is req and lost == []
    other, lost = without_lost_items(req, "anthropic")
    assert lost == ["input_item:mcp_list_tools"]
    assert [m.role for m in other.messages] == ["user", "user"]
    assert len(req.messages) == 3  # the caller's request is not changed


def test_a_foreign_opaque_block_is_unshown() -> None:
    block = BlockStart(0, "opaque", item={"type": "web_search_call"}, origin="openai-responses")
    assert unshown(block, "anthropic") == "output_item:web_search_call"
    assert unshown(block, "openai-responses") is None
    assert unshown(BlockStart(0, "text"), "anthropic") is None


def _responses_stream(*events: dict[str, object]) -> list[object]:
    decoder = codec_for("openai-responses").stream_decoder()
    body = b"".join(b"event: " + str(e["type"]).encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events)
    out: list[object] = []
    for frame in SSEDecoder().feed(body):
        out += decoder.feed(frame)
    return out


def test_a_responses_stream_keeps_each_item_whole_at_its_done_or_at_the_end() -> None:
    call = {
        "id": "ctc",
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "c1",
        "name": "apply_patch",
        "input": "p",
    }
    search = {"id": "ws", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}}
    head = {"id": "r", "model": "text", "output": []}
    events = _responses_stream(
        {"type": "response.created", "response": head},
        {"type": "response.output_item.added", "output_index": 0, "item": {**call, "input": ""}},
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "item_id": "ctc", "delta": "p"},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        {"type": "response.output_item.added", "output_index": 1, "item": {**search, "status": "in_progress"}},
        # no output_item.done for the search: the completed response's output says it
        {"type": "response.completed", "response": {**head, "status": "completed", "output": [call, search]}},
    )
    check_events(events)  # type: ignore[arg-type]
    reply = fold(events)  # type: ignore[arg-type]
    assert [(b.kind, b.item) for b in reply.blocks] == [("tool_call", call), ("opaque", search)]
    assert reply.blocks[0].name == "apply_patch" and orjson.loads(reply.blocks[0].text) == {"input": "p"}
    assert reply.end is not None and reply.end.reason == "tool_use"
