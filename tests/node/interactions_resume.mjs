// An Interactions stream dropped by the caller and resumed with the official @google/genai SDK:
// interactions.create({stream: true}) read up to the first text delta, then interactions.get(id,
// {stream: true, last_event_id}) for the rest. Prints "OK <text>" or "FAIL <why>".
//   node interactions_resume.mjs http://127.0.0.1:PORT MODEL
import { GoogleGenAI } from '@google/genai';

const [base, model] = process.argv.slice(2);
const client = new GoogleGenAI({ apiKey: 'caller-key', httpOptions: { baseUrl: base, timeout: 20000 } });

const stream = await client.interactions.create(
  { model, input: [{ type: 'user_input', content: [{ type: 'text', text: 'hi' }] }], store: true, stream: true },
  { maxRetries: 0 },
);
let id = null;
let lastEventId = null;
let head = '';
for await (const ev of stream) {
  if (ev.event_type === 'interaction.created') id = ev.interaction.id;
  lastEventId = ev.event_id ?? lastEventId;
  if (ev.event_type === 'step.delta' && ev.delta.type === 'text') {
    head += ev.delta.text;
    break; // the caller hangs up after its first token
  }
}
if (!id || !lastEventId) {
  console.log(`FAIL no interaction id (${id}) or event id (${lastEventId}) before the first token`);
  process.exit(1);
}
const rest = await client.interactions.get(id, { stream: true, last_event_id: lastEventId });
let tail = '';
let status = null;
for await (const ev of rest) {
  if (ev.event_type === 'step.delta' && ev.delta.type === 'text') tail += ev.delta.text;
  else if (ev.event_type === 'interaction.completed') status = ev.interaction.status;
}
const whole = await client.interactions.get(id);
console.log(status === 'completed' && whole.status === 'completed' ? `OK ${head + tail}` : `FAIL status ${status} / ${whole.status}`);
