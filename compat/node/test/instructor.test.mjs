// instructor-js (@instructor-ai/instructor), unmodified, around an
// openai-node client whose base URL is promptkit's. Its JSON_SCHEMA mode
// sends response_format {type: "json_object", schema: {...}} — not
// OpenAI's shape, but what vLLM and other self-hosted servers take — and
// promptkit must send it to the backend as written; the fake answers a
// json_object with a schema by a document valid against it. TOOLS and
// JSON modes too. (MD_JSON asks for JSON in a Markdown block by the
// system prompt alone, which the fake does not follow: not tested.)
//
// instructor 1.7.0 and its zod-stream work on zod 3 schemas: the schemas
// here come from zod 4's zod/v3 entry point, the zod 3 API that
// zod-to-json-schema (which instructor converts schemas with) reads too.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import Instructor from '@instructor-ai/instructor';
import OpenAI from 'openai';
import { z } from 'zod/v3';

import { MODEL, useStack } from '../lib/harness.mjs';

const stack = useStack();

/**
 * An instructor client in mode, and the chat request bodies it sent to
 * promptkit (read off its openai-node client's fetch).
 */
function instructor(mode) {
  const sent = [];
  const oa = new OpenAI({
    baseURL: stack().baseURL,
    apiKey: 'sk-unused-in-local-mode',
    fetch: (url, init) => {
      if (String(url).endsWith('/chat/completions')) sent.push(JSON.parse(init.body));
      return fetch(url, init);
    },
  });
  return { client: Instructor({ client: oa, mode }), sent };
}

const Rating = z.object({
  city: z.string().min(1).describe('the city'),
  rating: z.number().int().min(1).max(5),
  visited: z.boolean(),
  tags: z.array(z.enum(['coast', 'hills', 'river'])).max(3),
});

function assertRating(out) {
  // instructor adds _meta beside the extracted fields.
  const { _meta, ...fields } = out;
  assert.deepEqual(Object.keys(fields).sort(), ['city', 'rating', 'tags', 'visited']);
  // Validated by instructor with the schema; checked again here.
  assert.equal(Rating.safeParse(fields).success, true, JSON.stringify(fields));
  assert.ok(fields.city.length >= 1);
}

describe('instructor-js', () => {
  // The tools TOOLS mode sent and the ones the backend received.
  let toolsMode;

  test('JSON_SCHEMA mode: a validated object; the backend got response_format with its schema unchanged', async () => {
    const { client, sent } = instructor('JSON_SCHEMA');
    const before = stack().calls().length;
    const out = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Lisbon: 5 stars, visited, by the river and on hills.' }],
      response_model: { schema: Rating, name: 'Rating' },
      max_retries: 0,
    });
    assertRating(out);

    // What instructor sent: a json_object with the JSON Schema of Rating.
    assert.equal(sent.length, 1);
    const format = sent[0].response_format;
    assert.equal(format.type, 'json_object');
    assert.equal(format.schema.type, 'object');
    assert.deepEqual(Object.keys(format.schema.properties).sort(), ['city', 'rating', 'tags', 'visited']);
    assert.deepEqual(format.schema.properties.tags.items.enum, ['coast', 'hills', 'river']);
    // What the backend got: the same, as written.
    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1);
    assert.deepEqual(calls[0].body.response_format, format);
    assert.deepEqual(calls[0].body.messages, sent[0].messages);
  });

  test('TOOLS mode: a validated object from a tool call', async () => {
    const { client, sent } = instructor('TOOLS');
    const before = stack().calls().length;
    const out = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Porto: 4 stars, not visited, on the coast.' }],
      response_model: { schema: Rating, name: 'Rating' },
      max_retries: 0,
    });
    assertRating(out);
    const [call] = stack().calls().slice(before);
    // The tool's name and parameters schema reach the backend unchanged.
    assert.equal(sent[0].tools.length, 1);
    assert.equal(call.body.tools.length, 1);
    assert.equal(call.body.tools[0].type, 'function');
    assert.equal(call.body.tools[0].function.name, 'Rating');
    assert.deepEqual(call.body.tools[0].function.parameters, sent[0].tools[0].function.parameters);
    assert.deepEqual(call.body.tool_choice, sent[0].tool_choice);
    assert.deepEqual(call.body.tool_choice, { type: 'function', function: { name: 'Rating' } });
    toolsMode = { sent: sent[0].tools, received: call.body.tools };
  });

  // instructor sends the tool with "description": "" (its schema has
  // none): that empty description reaches the backend too.
  test('TOOLS mode: the tools reach the backend exactly as written', () => {
    assert.ok(toolsMode, 'the TOOLS mode test ran');
    assert.deepEqual(toolsMode.received, toolsMode.sent);
  });

  test('JSON mode: response_format json_object without a schema', async () => {
    // The fake answers a plain json_object with {"reply": "..."}: the
    // schema here is that document's.
    const Reply = z.object({ reply: z.string().min(1) });
    const { client } = instructor('JSON');
    const before = stack().calls().length;
    const out = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say something about Braga.' }],
      response_model: { schema: Reply, name: 'Reply' },
      max_retries: 0,
    });
    assert.equal(typeof out.reply, 'string');
    assert.ok(out.reply.length >= 1);
    const [call] = stack().calls().slice(before);
    assert.deepEqual(call.body.response_format, { type: 'json_object' });
  });
});
