// The Playground's five caller dialects: how each one asks for a streamed answer (path, auth
// header, body, tools) and how its own stream events map onto the answer being drawn. Each reducer
// reads that dialect's wire events (not a text projection), so what the page shows is what a
// client of that dialect would receive — a translation bug shows up here as it would in the client.
//
// `ends(name, data)` says whether an event is the dialect's last one: a stream that closes
// without it is shown as cut off, never as a finished answer.
// A reducer gets (ui, name, data): `name` the SSE event name (or ""), `data` the parsed JSON
// (or the raw string when it is not JSON, e.g. "[DONE]"). `ui` draws:
//   ui.append(kind, key, text)      kind "text" | "thinking": text into block `key` (made on first use)
//   ui.tool(key, id, name)          a tool call starts
//   ui.args(key, text)              its arguments grow
//   ui.wholeArgs(key, id, name, o)  a tool call that arrives complete (Gemini)
//   ui.usage({input, output, reasoning, cache_read})   ui.stop(reason)   ui.error(message)

// Tools are typed in one neutral shape: [{name, description, parameters: JSON Schema}].
const fn = (t) => ({ name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.parameters || { type: "object", properties: {} } });

const num = (v) => (typeof v === "number" ? v : null);
// Gemini's output counts exclude the thoughts; shown as the others count it (thoughts included).
const plus = (out, thoughts) => (num(out) === null && num(thoughts) === null ? null : (num(out) || 0) + (num(thoughts) || 0));

// Gemini sends parts without indexes: consecutive parts of one kind form one block.
function gluedKey(ui, kind) {
  return ui.lastKind() === kind ? ui.lastKey() : `${kind}${ui.count()}`;
}

export const DIALECTS = {
  anthropic: {
    label: "Anthropic Messages",
    path: () => "/v1/messages",
    auth: (key) => ({ "x-api-key": key }),
    ends: (name, d) => d?.type === "message_stop",
    body: ({ model, prompt, tools, maxTokens, thinking }) => ({
      model, max_tokens: maxTokens, stream: true, messages: [{ role: "user", content: prompt }],
      ...(tools.length ? { tools: tools.map((t) => { const f = fn(t); return { name: f.name, description: f.description, input_schema: f.parameters }; }) } : {}),
      ...(thinking ? { thinking: { type: "enabled", budget_tokens: Math.max(1024, Math.min(4096, maxTokens - 1)) } } : {}),
    }),
    reduce(ui, name, d) {
      const type = d?.type || name;
      if (type === "message_start") {
        const u = d.message?.usage || {};
        ui.usage({ input: num(u.input_tokens), output: num(u.output_tokens), cache_read: num(u.cache_read_input_tokens), cache_write: num(u.cache_creation_input_tokens) });
      } else if (type === "content_block_start") {
        const b = d.content_block || {};
        if (b.type === "tool_use" || b.type === "server_tool_use") ui.tool(d.index, b.id, b.name);
        else if (b.type === "thinking") ui.append("thinking", d.index, b.thinking || "");
        else if (b.type === "redacted_thinking") ui.append("thinking", d.index, "[redacted thinking]");
        else if (b.type === "text") ui.append("text", d.index, b.text || "");
      } else if (type === "content_block_delta") {
        const x = d.delta || {};
        if (x.type === "text_delta") ui.append("text", d.index, x.text);
        else if (x.type === "thinking_delta") ui.append("thinking", d.index, x.thinking);
        else if (x.type === "input_json_delta") ui.args(d.index, x.partial_json);
      } else if (type === "message_delta") {
        if (d.delta?.stop_reason) ui.stop(d.delta.stop_reason);
        const u = d.usage || {};
        ui.usage({ output: num(u.output_tokens), ...(u.input_tokens !== undefined ? { input: num(u.input_tokens) } : {}) });
      } else if (type === "error") {
        ui.error(d.error?.message || "error event");
      }
    },
  },

  "openai-chat": {
    label: "OpenAI Chat Completions",
    path: () => "/v1/chat/completions",
    auth: (key) => ({ Authorization: `Bearer ${key}` }),
    ends: (name, d) => d === "[DONE]",
    body: ({ model, prompt, tools, maxTokens, thinking }) => ({
      model, stream: true, stream_options: { include_usage: true }, max_tokens: maxTokens, messages: [{ role: "user", content: prompt }],
      ...(tools.length ? { tools: tools.map((t) => ({ type: "function", function: fn(t) })) } : {}),
      ...(thinking ? { reasoning_effort: "medium" } : {}),
    }),
    reduce(ui, name, d) {
      if (typeof d !== "object" || d === null) return; // "[DONE]"
      if (d.error) { ui.error(d.error.message || "error"); return; }
      for (const c of d.choices || []) {
        const x = c.delta || {};
        const thought = x.reasoning_content ?? x.reasoning;
        if (thought) ui.append("thinking", gluedKey(ui, "thinking"), thought);
        if (x.content) ui.append("text", gluedKey(ui, "text"), x.content);
        if (x.refusal) ui.append("text", gluedKey(ui, "text"), x.refusal);
        for (const t of x.tool_calls || []) {
          const key = `tool${t.index ?? 0}`;
          if (t.id || t.function?.name) ui.tool(key, t.id, t.function?.name);
          if (t.function?.arguments) ui.args(key, t.function.arguments);
        }
        if (c.finish_reason) ui.stop(c.finish_reason);
      }
      if (d.usage) {
        const u = d.usage;
        ui.usage({ input: num(u.prompt_tokens), output: num(u.completion_tokens), reasoning: num(u.completion_tokens_details?.reasoning_tokens), cache_read: num(u.prompt_tokens_details?.cached_tokens) });
      }
    },
  },

  "openai-responses": {
    label: "OpenAI Responses",
    path: () => "/v1/responses",
    auth: (key) => ({ Authorization: `Bearer ${key}` }),
    ends: (name, d) => ["response.completed", "response.incomplete", "response.failed"].includes(d?.type),
    body: ({ model, prompt, tools, maxTokens, thinking }) => ({
      model, stream: true, input: prompt, max_output_tokens: maxTokens,
      ...(tools.length ? { tools: tools.map((t) => ({ type: "function", ...fn(t) })) } : {}),
      ...(thinking ? { reasoning: { effort: "medium", summary: "auto" } } : {}),
    }),
    reduce(ui, name, d) {
      const type = d?.type || name;
      const i = d?.output_index;
      if (type === "response.output_item.added" && d.item?.type === "function_call") ui.tool(i, d.item.call_id || d.item.id, d.item.name);
      else if (type === "response.output_text.delta" || type === "response.refusal.delta") ui.append("text", i, d.delta);
      else if (type === "response.reasoning_summary_text.delta" || type === "response.reasoning_text.delta") ui.append("thinking", i, d.delta);
      else if (type === "response.function_call_arguments.delta") ui.args(i, d.delta);
      else if (type === "response.completed" || type === "response.incomplete" || type === "response.failed") {
        const r = d.response || {};
        const u = r.usage || {};
        ui.usage({ input: num(u.input_tokens), output: num(u.output_tokens), reasoning: num(u.output_tokens_details?.reasoning_tokens), cache_read: num(u.input_tokens_details?.cached_tokens) });
        ui.stop(r.incomplete_details?.reason ? `${r.status}: ${r.incomplete_details.reason}` : r.status);
        if (r.error) ui.error(r.error.message || "response failed");
      } else if (type === "error") ui.error(d.message || d.error?.message || "error event");
    },
  },

  gemini: {
    label: "Gemini generateContent",
    path: (model) => `/v1beta/models/${encodeURIComponent(model)}:streamGenerateContent?alt=sse`,
    auth: (key) => ({ "x-goog-api-key": key }),
    ends: (name, d) => Boolean(d?.candidates?.some((c) => c.finishReason)),
    body: ({ prompt, tools, maxTokens, thinking }) => ({
      contents: [{ role: "user", parts: [{ text: prompt }] }],
      generationConfig: { maxOutputTokens: maxTokens, ...(thinking ? { thinkingConfig: { includeThoughts: true } } : {}) },
      ...(tools.length ? { tools: [{ functionDeclarations: tools.map(fn) }] } : {}),
    }),
    reduce(ui, name, d) {
      if (typeof d !== "object" || d === null) return;
      if (d.error) { ui.error(d.error.message || "error"); return; }
      for (const c of d.candidates || []) {
        for (const p of c.content?.parts || []) {
          if (p.functionCall) ui.wholeArgs(`call${ui.count()}`, p.functionCall.id, p.functionCall.name, p.functionCall.args || {});
          else if (p.text && p.thought) ui.append("thinking", gluedKey(ui, "thinking"), p.text);
          else if (p.text) ui.append("text", gluedKey(ui, "text"), p.text);
        }
        if (c.finishReason) ui.stop(c.finishReason);
      }
      const u = d.usageMetadata;
      if (u) ui.usage({ input: num(u.promptTokenCount), output: plus(u.candidatesTokenCount, u.thoughtsTokenCount), reasoning: num(u.thoughtsTokenCount), cache_read: num(u.cachedContentTokenCount) });
    },
  },

  "gemini-interactions": {
    label: "Gemini Interactions",
    path: () => "/v1beta/interactions",
    auth: (key) => ({ "x-goog-api-key": key }),
    ends: (name, d) => ["interaction.completed", "interaction.failed"].includes(d?.event_type) || name === "done",
    body: ({ model, prompt, tools, maxTokens, thinking }) => ({
      model, stream: true, input: prompt,
      generation_config: { max_output_tokens: maxTokens, ...(thinking ? { thinking_summaries: "auto" } : {}) },
      ...(tools.length ? { tools: tools.map((t) => ({ type: "function", ...fn(t) })) } : {}),
    }),
    reduce(ui, name, d) {
      if (typeof d !== "object" || d === null) return; // event: done, data: [DONE]
      const type = d.event_type || name;
      if (type === "step.start") {
        const s = d.step || {};
        if (s.type === "function_call") {
          ui.tool(d.index, s.id, s.name);
          if (s.arguments && Object.keys(s.arguments).length) ui.args(d.index, JSON.stringify(s.arguments));
        }
      } else if (type === "step.delta") {
        const x = d.delta || {};
        if (x.type === "text") ui.append("text", d.index, x.text);
        else if (x.type === "thought_summary" || x.type === "thought") ui.append("thinking", d.index, x.content?.text ?? x.text ?? "");
        else if (x.type === "arguments_delta") ui.args(d.index, x.arguments);
      } else if (type === "interaction.completed" || type === "interaction.failed") {
        const r = d.interaction || {};
        const u = r.usage || {};
        ui.usage({ input: num(u.total_input_tokens), output: plus(u.total_output_tokens, u.total_thought_tokens), reasoning: num(u.total_thought_tokens), cache_read: num(u.total_cached_tokens) });
        if (r.status) ui.stop(r.status);
        if (r.error) ui.error(r.error.message || "interaction failed");
      } else if (type === "error") ui.error(d.error?.message || "error event");
    },
  },
};

// Server-sent events from a fetch body: yields [eventName, data] per frame as bytes arrive.
export async function* sseFrames(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += value.replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let name = "";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      const raw = data.join("\n");
      let parsed = raw;
      try { parsed = JSON.parse(raw); } catch { /* "[DONE]" and other non-JSON data stay strings */ }
      yield [name, parsed];
    }
    if (done) {
      if (buf.trim()) throw new Error("the stream ended inside an event (no blank line after the last frame)");
      return;
    }
  }
}
