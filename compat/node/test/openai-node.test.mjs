// The official OpenAI Node SDK (openai), unmodified but for its base URL,
// against `promptkit serve` in front of `promptkit fake-provider`.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import OpenAI, { toFile } from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

import { defaultBackends, MODEL, since, useStack } from '../lib/harness.mjs';
import { weatherTool, toolResult } from '../lib/expect.mjs';

// A second, slow backend: a background response on it is still running
// when a test reads its first events (a resume then follows it live).
const SLOW = 'gpt-4o-mini-slow';
const stack = useStack({
  backends: [...defaultBackends, { id: 'slow', latency: '1s', profiles: [{ id: 'slow', model: SLOW }] }],
});
// Only the base URL changes: an SDK always sends some key, and in local
// mode promptkit accepts any.
const client = () => new OpenAI({ baseURL: stack().baseURL, apiKey: 'sk-unused-in-local-mode' });

describe('openai-node', () => {
  test('models list names the profile and its model', async () => {
    const ids = [];
    for await (const m of client().models.list()) ids.push(m.id);
    assert.ok(ids.includes('default'), `models ${ids}`);
    assert.ok(ids.includes(MODEL), `models ${ids}`);
    const m = await client().models.retrieve(MODEL);
    assert.equal(m.id, MODEL);
    assert.equal(m.object, 'model');
  });

  test('chat completion', async () => {
    const before = stack().calls().length;
    const { data: c, response } = await client()
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'say hi to the node client' }] })
      .withResponse();
    assert.equal(c.object, 'chat.completion');
    assert.match(c.id, /^chatcmpl-/);
    assert.equal(c.model, MODEL);
    assert.equal(c.choices.length, 1);
    assert.equal(c.choices[0].message.role, 'assistant');
    assert.equal(c.choices[0].message.content, 'Fake provider reply: say hi to the node client');
    assert.equal(c.choices[0].finish_reason, 'stop');
    // The fake counts words: 6 in, 9 out; promptkit passes the counts on.
    assert.deepEqual(
      [c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens],
      [6, 9, 15],
    );
    // One provider call, with the model and the message.
    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].body.model, MODEL);
    assert.deepEqual(calls[0].body.messages.at(-1), { role: 'user', content: 'say hi to the node client' });
    // The request became a durable job, readable by its id.
    const jobId = response.headers.get('x-promptkit-job-id');
    assert.ok(jobId, 'X-Promptkit-Job-Id header');
    assert.equal(c.id, `chatcmpl-${jobId}`);
    const { job } = await stack().job(jobId);
    assert.equal(job.state, 'succeeded');
  });

  test('streaming: chunks assemble to the answer', async (t) => {
    const start = performance.now();
    const stream = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'tell me a story about a lighthouse' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const arrivals = [];
    let content = '';
    let role;
    let finish;
    let usage;
    let usageChunks = 0;
    for await (const chunk of stream) {
      arrivals.push(since(start));
      assert.equal(chunk.object, 'chat.completion.chunk');
      if (chunk.usage) {
        usageChunks++;
        usage = chunk.usage;
        assert.equal(chunk.choices.length, 0, 'the usage chunk has no choices');
      }
      for (const ch of chunk.choices) {
        role ??= ch.delta.role;
        content += ch.delta.content ?? '';
        finish ??= ch.finish_reason ?? undefined;
      }
    }
    t.diagnostic(`openai-node stream: ${arrivals.length} chunks at ms ${JSON.stringify(arrivals)}`);
    assert.equal(role, 'assistant');
    assert.equal(content, 'Fake provider reply: tell me a story about a lighthouse');
    assert.equal(finish, 'stop');
    assert.equal(usageChunks, 1);
    assert.deepEqual([usage.prompt_tokens, usage.completion_tokens, usage.total_tokens], [7, 10, 17]);
  });

  test('streaming helper: chat.completions.stream().finalChatCompletion()', async (t) => {
    const start = performance.now();
    const arrivals = [];
    const runner = client().chat.completions.stream({
      model: MODEL,
      messages: [{ role: 'user', content: 'count the waves' }],
    });
    runner.on('chunk', () => arrivals.push(since(start)));
    const final = await runner.finalChatCompletion();
    t.diagnostic(`openai-node stream helper: ${arrivals.length} chunks at ms ${JSON.stringify(arrivals)}`);
    assert.ok(arrivals.length >= 2, `${arrivals.length} chunks`);
    assert.equal(final.choices[0].message.content, 'Fake provider reply: count the waves');
    assert.equal(final.choices[0].finish_reason, 'stop');
  });

  const citySchema = {
    type: 'object',
    properties: {
      city: { type: 'string', minLength: 1 },
      rating: { type: 'integer', minimum: 1, maximum: 5 },
      visited: { type: 'boolean' },
    },
    required: ['city', 'rating', 'visited'],
    additionalProperties: false,
  };

  test('structured output: response_format json_schema', async () => {
    const before = stack().calls().length;
    const c = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'rate a city' }],
      response_format: { type: 'json_schema', json_schema: { name: 'rating', schema: citySchema, strict: true } },
    });
    const out = JSON.parse(c.choices[0].message.content);
    assert.deepEqual(Object.keys(out).sort(), ['city', 'rating', 'visited']);
    assert.equal(typeof out.city, 'string');
    assert.ok(out.city.length >= 1);
    assert.ok(Number.isInteger(out.rating) && out.rating >= 1 && out.rating <= 5, `rating ${out.rating}`);
    assert.equal(typeof out.visited, 'boolean');
    // The provider was asked with the schema.
    const [call] = stack().calls().slice(before);
    assert.equal(call.body.response_format.type, 'json_schema');
    assert.deepEqual(call.body.response_format.json_schema.schema, citySchema);
  });

  test('structured output: chat.completions.parse with zodResponseFormat', async () => {
    const Rating = z.object({ city: z.string(), rating: z.number().int(), visited: z.boolean() });
    const c = await client().chat.completions.parse({
      model: MODEL,
      messages: [{ role: 'user', content: 'rate another city' }],
      response_format: zodResponseFormat(Rating, 'rating'),
    });
    const parsed = c.choices[0].message.parsed;
    assert.ok(parsed, 'parsed output');
    assert.equal(typeof parsed.city, 'string');
    assert.ok(Number.isInteger(parsed.rating));
    assert.equal(typeof parsed.visited, 'boolean');
  });

  test('batches: upload JSONL, create, wait, read the output file', async () => {
    const oa = client();
    const lines = ['alpha', 'beta', 'gamma'].map((id) => ({
      custom_id: id,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'user', content: `batch line ${id}` }] },
    }));
    const jsonl = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
    const file = await oa.files.create({ file: await toFile(Buffer.from(jsonl), 'requests.jsonl'), purpose: 'batch' });
    assert.match(file.id, /\S/);
    assert.equal(file.purpose, 'batch');
    assert.equal(file.bytes, Buffer.byteLength(jsonl));

    let batch = await oa.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    assert.equal(batch.object, 'batch');
    assert.equal(batch.input_file_id, file.id);
    // Poll until terminal. promptkit's ?wait= holds each read until the
    // batch is terminal (or 30 s pass), so this loop does not spin.
    const terminal = new Set(['completed', 'failed', 'expired', 'cancelled']);
    const deadline = Date.now() + 90_000;
    while (!terminal.has(batch.status)) {
      assert.ok(Date.now() < deadline, `batch still ${batch.status}`);
      batch = await oa.batches.retrieve(batch.id, { query: { wait: '30s' } });
    }
    assert.equal(batch.status, 'completed');
    assert.deepEqual(batch.request_counts, { total: 3, completed: 3, failed: 0 });
    assert.ok(batch.output_file_id, 'output_file_id');

    const content = await oa.files.content(batch.output_file_id);
    const out = (await content.text())
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    assert.deepEqual(out.map((o) => o.custom_id).sort(), ['alpha', 'beta', 'gamma']);
    for (const o of out) {
      assert.equal(o.error, null);
      assert.equal(o.response.status_code, 200);
      assert.equal(o.response.body.object, 'chat.completion');
      assert.equal(o.response.body.choices[0].message.content, `Fake provider reply: batch line ${o.custom_id}`);
    }
    const listed = [];
    for await (const b of oa.batches.list()) listed.push(b.id);
    assert.ok(listed.includes(batch.id));
  });

  test('errors are the SDK typed errors', async () => {
    // The SDK does not retry these statuses: what it raises is what
    // promptkit answered.
    const oa = client();
    await assert.rejects(
      oa.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'anyone?' }] }),
      (err) => {
        assert.ok(err instanceof OpenAI.NotFoundError, `${err}`);
        assert.equal(err.code, 'model_not_found');
        return true;
      },
    );
    // n passes through to the backend (openai-node-faithful.test.mjs),
    // but not past OpenAI's own limit of 128.
    await assert.rejects(
      oa.chat.completions.create({ model: MODEL, n: 129, messages: [{ role: 'user', content: 'too many answers' }] }),
      (err) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `${err}`);
        assert.equal(err.param, 'n');
        assert.equal(err.type, 'invalid_request_error');
        return true;
      },
    );
  });

  test('tools: call, tool result, answer', async () => {
    const oa = client();
    const before = stack().calls().length;
    const messages = [{ role: 'user', content: 'what is the weather in Lisbon?' }];
    const first = await oa.chat.completions.create({ model: MODEL, messages, tools: [weatherTool.openai] });
    const choice = first.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.tool_calls?.length, 1, 'one tool call');
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, weatherTool.name);
    assert.ok(call.id, 'the call has an id');
    const args = JSON.parse(call.function.arguments);
    assert.equal(typeof args, 'object');

    messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: toolResult });
    const second = await oa.chat.completions.create({ model: MODEL, messages, tools: [weatherTool.openai] });
    assert.equal(second.choices[0].finish_reason, 'stop');
    // The fake answers a conversation ending in a tool result with the
    // result's first words: the result went through promptkit and back.
    assert.equal(second.choices[0].message.content, `Fake provider reply: ${toolResult}`);

    // What the provider was sent: the tool, then the call and its result.
    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 2);
    assert.equal(calls[0].body.tools[0].function.name, weatherTool.name);
    const sent = calls[1].body.messages;
    const assistant = sent.find((m) => m.role === 'assistant');
    assert.equal(assistant.tool_calls[0].id, call.id);
    const tool = sent.find((m) => m.role === 'tool');
    assert.equal(tool.tool_call_id, call.id);
    assert.equal(tool.content, toolResult);
  });
});

/** Collects a stream's events. */
async function collect(stream) {
  const out = [];
  for await (const ev of stream) out.push(ev);
  return out;
}

/** Fails unless the events are numbered from first, one by one. */
function assertNumbered(events, first) {
  assert.deepEqual(
    events.map((e) => e.sequence_number),
    events.map((_, i) => first + i),
  );
}

const deltas = (events) =>
  events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta)
    .join('');

describe('openai-node responses', () => {
  test('responses.create, retrieve, input items, delete', async () => {
    const before = stack().calls().length;
    const { data: r, response } = await client()
      .responses.create({ model: MODEL, input: 'say hi to the responses API', instructions: 'Be brief.', metadata: { suite: 'compat' } })
      .withResponse();
    assert.equal(r.object, 'response');
    assert.equal(r.id, `resp_${response.headers.get('x-promptkit-prompt-id')}`);
    assert.equal(r.status, 'completed');
    // output_text is the SDK's own, from the output items.
    assert.equal(r.output_text, 'Fake provider reply: say hi to the responses API');
    assert.equal(r.output[0].type, 'message');
    assert.equal(r.output[0].content[0].type, 'output_text');
    assert.deepEqual(r.metadata, { suite: 'compat' });
    assert.equal(r.instructions, 'Be brief.');
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
    // promptkit called the backend's Chat Completions, instructions first.
    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1);
    assert.deepEqual(calls[0].body.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'say hi to the responses API' },
    ]);

    const again = await client().responses.retrieve(r.id);
    assert.deepEqual(again, r);
    const items = [];
    for await (const it of client().responses.inputItems.list(r.id)) items.push(it);
    assert.equal(items.length, 1);
    assert.equal(items[0].role, 'user');
    assert.equal(items[0].content[0].text, 'say hi to the responses API');

    // Continued: the previous conversation and answer come first.
    const next = await client().responses.create({ model: MODEL, input: 'and again', previous_response_id: r.id });
    assert.equal(next.previous_response_id, r.id);
    assert.deepEqual(stack().calls().at(-1).body.messages.map((m) => m.role), ['user', 'assistant', 'user']);

    await client().responses.delete(r.id);
    await assert.rejects(client().responses.retrieve(r.id), (err) => err instanceof OpenAI.NotFoundError);
    await assert.rejects(
      client().responses.create({ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] }),
      (err) => err instanceof OpenAI.BadRequestError && err.param === 'tools[0].type',
    );
  });

  test('responses streaming: events numbered in order, the text relayed', async (t) => {
    const start = performance.now();
    const arrivals = [];
    const events = [];
    for await (const ev of await client().responses.create({ model: MODEL, input: 'stream about the responses harbour', stream: true })) {
      arrivals.push(since(start));
      events.push(ev);
    }
    t.diagnostic(`openai-node responses stream: ${events.length} events at ms ${JSON.stringify(arrivals)}`);
    assertNumbered(events, 0);
    assert.equal(events[0].type, 'response.created');
    assert.equal(events[1].type, 'response.in_progress');
    assert.equal(events.at(-1).type, 'response.completed');
    assert.equal(deltas(events), 'Fake provider reply: stream about the responses harbour');
    assert.equal(events.at(-1).response.status, 'completed');

    // The SDK's helper accumulates the events into the response.
    let pieces = 0;
    const helper = client().responses.stream({ model: MODEL, input: 'stream with the helper' });
    helper.on('response.output_text.delta', () => pieces++);
    const final = await helper.finalResponse();
    assert.ok(pieces >= 1);
    assert.equal(final.output_text, 'Fake provider reply: stream with the helper');
  });

  test('responses background: poll, stream, resume after a sequence number, cancel', async () => {
    const r = await client().responses.create({ model: SLOW, input: 'a background story', background: true });
    assert.ok(['queued', 'in_progress'].includes(r.status), r.status);
    assert.equal(r.background, true);

    // Read the first events, then leave.
    const seen = [];
    for await (const ev of await client().responses.retrieve(r.id, { stream: true })) {
      seen.push(ev);
      if (seen.length === 2) break;
    }
    assert.deepEqual(
      seen.map((e) => e.type),
      ['response.created', 'response.in_progress'],
    );
    // Resume after the last one seen: the rest, followed to the end.
    const rest = await collect(await client().responses.retrieve(r.id, { stream: true, starting_after: 1 }));
    assertNumbered(rest, 2);
    assert.equal(rest.at(-1).type, 'response.completed');
    assert.equal(deltas(rest), 'Fake provider reply: a background story');
    // Read again from the start, now that it ended: the same events.
    const all = await collect(await client().responses.retrieve(r.id, { stream: true }));
    assert.deepEqual(all.slice(0, 2), seen);
    assert.deepEqual(all.slice(2), rest);
    // The SDK's resume helper replays the stream and emits what follows N.
    const emitted = [];
    const helper = client().responses.stream({ response_id: r.id, starting_after: 4 });
    helper.on('event', (e) => emitted.push(e.sequence_number));
    const final = await helper.finalResponse();
    assert.equal(final.output_text, 'Fake provider reply: a background story');
    assert.equal(emitted[0], 5);
    assert.equal((await client().responses.retrieve(r.id)).status, 'completed');

    // Cancel: a running background response ends cancelled; one that
    // ended is answered as it is.
    const c = await client().responses.create({ model: SLOW, input: 'cancel me', background: true });
    const cancelled = await client().responses.cancel(c.id);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal((await client().responses.cancel(r.id)).status, 'completed');
  });
});
