// A faithful front door, seen by the official OpenAI Node SDK (openai):
// every parameter promptkit does not model reaches the backend unchanged,
// and every field the backend answers reaches the program — several
// choices, a reasoning model's reasoning_content, log probabilities, the
// system fingerprint, cached and reasoning token counts — plain and
// streamed; the Responses API's reasoning.effort reaches a chat backend
// as reasoning_effort and its reasoning comes back as a reasoning item.
//
// The fake here is not started with --reasoning: it reasons only because
// a request's reasoning_effort (or chat_template_kwargs.enable_thinking)
// asks it to, as vLLM does, so the answer's reasoning is itself evidence
// that the parameter arrived.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import OpenAI from 'openai';

import { MODEL, since, useStack } from '../lib/harness.mjs';

const stack = useStack();
const client = () => new OpenAI({ baseURL: stack().baseURL, apiKey: 'sk-unused-in-local-mode' });

/** Whitespace-separated words: how the fake counts tokens. */
const words = (text) => text.trim().split(/\s+/).length;

// What a program sends a vLLM-served reasoning model beside the
// conversation. OpenAI's own parameters are typed by the SDK; vLLM's
// (top_k, min_p, repetition_penalty, chat_template_kwargs) are not, and
// openai-node has no extra_body: a JavaScript program puts them in the
// body as they are (TypeScript needs a cast), and the SDK sends the body
// as given.
const params = {
  reasoning_effort: 'low',
  n: 2,
  logprobs: true,
  top_logprobs: 2,
  presence_penalty: 0.5,
  logit_bias: { 50256: -100 },
  top_k: 20,
  min_p: 0.05,
  repetition_penalty: 1.1,
  chat_template_kwargs: { enable_thinking: true },
};

/** Fails unless the backend request has every parameter of params, unchanged. */
function assertSentUnchanged(body) {
  for (const [k, v] of Object.entries(params)) assert.deepEqual(body[k], v, `the backend got ${k} = ${JSON.stringify(body[k])}`);
  // logit_bias's keys are strings in JSON whatever the program wrote.
  assert.deepEqual(Object.keys(body.logit_bias), ['50256']);
}

/** The fake's answer to prompt, choice i: its text and its reasoning. */
const reply = (prompt, i) => `Fake provider reply: ${prompt}${i ? ` (choice ${i})` : ''}`;
const thought = (prompt, i) => `Thinking about: ${prompt}${i ? ` (choice ${i})` : ''}`;

describe('openai-node: a faithful front door', () => {
  // The program names the profile, not the model: the answer names the
  // model the backend answered with, plain and streamed alike.
  const PROFILE = 'default';
  let plainModel;

  test('chat: reasoning_effort, n, logprobs, penalties and vLLM parameters pass through; every answered field comes back', async () => {
    const prompt = 'name a colour';
    const before = stack().calls().length;
    const c = await client().chat.completions.create({
      model: PROFILE,
      messages: [{ role: 'user', content: prompt }],
      ...params,
    });

    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1, 'one backend call for n 2: the backend makes the choices');
    assertSentUnchanged(calls[0].body);
    assert.equal(calls[0].body.model, MODEL);

    plainModel = c.model;
    assert.equal(c.model, MODEL, "the backend's model");
    assert.equal(c.system_fingerprint, 'fp_providertest');
    assert.deepEqual(c.choices.map((ch) => ch.index), [0, 1]);
    for (const [i, ch] of c.choices.entries()) {
      assert.equal(ch.message.content, reply(prompt, i));
      // Not in openai-node's types (OpenAI does not send it), but in the
      // object the program gets: vLLM's reasoning parser's field.
      assert.equal(ch.message.reasoning_content, thought(prompt, i));
      assert.equal(ch.finish_reason, 'stop');
      // One entry per word, the tokens joining back to the content, each
      // with the top 2 alternatives asked for.
      const lp = ch.logprobs.content;
      assert.equal(lp.map((e) => e.token).join(''), ch.message.content);
      assert.ok(lp.every((e) => e.top_logprobs.length === 2 && e.top_logprobs[0].token === e.token), JSON.stringify(lp[0]));
      assert.ok(lp.every((e) => typeof e.logprob === 'number' && e.logprob < 0));
    }
    // The fake's usage: prompt words, completion words of both choices
    // (reasoning included), the reasoning words, half the prompt cached.
    const reasoningWords = c.choices.reduce((n, ch) => n + words(ch.message.reasoning_content), 0);
    const contentWords = c.choices.reduce((n, ch) => n + words(ch.message.content), 0);
    assert.equal(c.usage.prompt_tokens, words(prompt));
    assert.equal(c.usage.completion_tokens, contentWords + reasoningWords);
    assert.equal(c.usage.completion_tokens_details.reasoning_tokens, reasoningWords);
    assert.equal(c.usage.prompt_tokens_details.cached_tokens, Math.floor(words(prompt) / 2));
  });

  test('chat streamed: reasoning deltas before content, both choices, logprobs in chunks, the same model', async (t) => {
    const prompt = 'name a shade';
    const before = stack().calls().length;
    const start = performance.now();
    const stream = await client().chat.completions.create({
      model: PROFILE,
      messages: [{ role: 'user', content: prompt }],
      ...params,
      stream: true,
      stream_options: { include_usage: true },
    });
    const arrivals = [];
    const models = new Set();
    const fingerprints = new Set();
    // Per choice index: the pieces in order, each { kind, text }, and the
    // log probability tokens.
    const pieces = new Map();
    const lpTokens = new Map();
    const finish = new Map();
    let usage;
    for await (const chunk of stream) {
      arrivals.push(since(start));
      models.add(chunk.model);
      fingerprints.add(chunk.system_fingerprint);
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        const list = pieces.get(ch.index) ?? [];
        pieces.set(ch.index, list);
        if (ch.delta.reasoning_content) list.push({ kind: 'reasoning', text: ch.delta.reasoning_content });
        if (ch.delta.content) {
          list.push({ kind: 'content', text: ch.delta.content });
          // A content chunk carries the log probability of its piece.
          assert.ok(ch.logprobs?.content?.length >= 1, `content chunk without logprobs: ${JSON.stringify(ch)}`);
        }
        for (const e of ch.logprobs?.content ?? []) lpTokens.set(ch.index, (lpTokens.get(ch.index) ?? '') + e.token);
        if (ch.finish_reason) finish.set(ch.index, ch.finish_reason);
      }
    }
    t.diagnostic(`openai-node faithful stream: ${arrivals.length} chunks at ms ${JSON.stringify(arrivals)}`);

    const [call] = stack().calls().slice(before);
    assertSentUnchanged(call.body);
    assert.equal(call.body.stream, true);

    assert.deepEqual([...models], [plainModel ?? MODEL], 'every chunk names the model the plain answer names');
    assert.deepEqual([...fingerprints], ['fp_providertest']);
    assert.deepEqual([...pieces.keys()].sort(), [0, 1], 'both choices streamed');
    for (const i of [0, 1]) {
      const list = pieces.get(i);
      const text = (kind) => list.filter((p) => p.kind === kind).map((p) => p.text).join('');
      assert.equal(text('reasoning'), thought(prompt, i));
      assert.equal(text('content'), reply(prompt, i));
      const lastReasoning = list.findLastIndex((p) => p.kind === 'reasoning');
      const firstContent = list.findIndex((p) => p.kind === 'content');
      assert.ok(lastReasoning < firstContent, `choice ${i}: reasoning deltas come before the content`);
      assert.equal(lpTokens.get(i), reply(prompt, i), `choice ${i}: the chunks' logprobs tokens join to its content`);
      assert.equal(finish.get(i), 'stop');
    }
    const reasoningWords = words(thought(prompt, 0)) + words(thought(prompt, 1));
    assert.equal(usage.completion_tokens_details.reasoning_tokens, reasoningWords);
    assert.equal(usage.prompt_tokens_details.cached_tokens, Math.floor(words(prompt) / 2));
  });

  test('chat: messages keep their content parts and extra fields', async () => {
    // A conversation as a program may send it: text parts, a user's name,
    // an earlier reasoning model turn with its reasoning_content, and a
    // field promptkit does not know (cache_control, as some gateways take).
    const messages = [
      { role: 'system', content: [{ type: 'text', text: 'Be brief.' }] },
      { role: 'user', name: 'alice', content: [{ type: 'text', text: 'first part' }, { type: 'text', text: 'second part' }] },
      { role: 'assistant', content: 'an earlier answer', reasoning_content: 'an earlier thought' },
      { role: 'user', content: 'name a stone', cache_control: { type: 'ephemeral' } },
    ];
    const before = stack().calls().length;
    const c = await client().chat.completions.create({ model: MODEL, messages });
    assert.equal(c.choices[0].message.content, reply('name a stone', 0));
    const [call] = stack().calls().slice(before);
    assert.deepEqual(call.body.messages, messages);
  });

  test('responses.create with reasoning.effort: the backend gets reasoning_effort; a reasoning item, then the message', async () => {
    const prompt = 'name a flower';
    const before = stack().calls().length;
    const r = await client().responses.create({ model: MODEL, input: prompt, reasoning: { effort: 'low' } });

    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].body.reasoning_effort, 'low');
    assert.equal(calls[0].body.reasoning, undefined, "Chat Completions has no 'reasoning' object");

    assert.equal(r.status, 'completed');
    assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
    assert.deepEqual(r.output[0].content, [{ type: 'reasoning_text', text: thought(prompt, 0) }]);
    assert.equal(r.output_text, reply(prompt, 0));
    assert.equal(r.usage.output_tokens_details.reasoning_tokens, words(thought(prompt, 0)));
    assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
    assert.equal(r.usage.input_tokens_details.cached_tokens, Math.floor(words(prompt) / 2));
  });

  test('responses streamed with reasoning.effort: reasoning_text deltas, then output_text deltas', async (t) => {
    const prompt = 'name a tree';
    const before = stack().calls().length;
    const start = performance.now();
    const arrivals = [];
    const events = [];
    for await (const ev of await client().responses.create({
      model: MODEL,
      input: prompt,
      reasoning: { effort: 'low' },
      stream: true,
    })) {
      arrivals.push(since(start));
      events.push(ev);
    }
    t.diagnostic(`openai-node faithful responses stream: ${events.length} events at ms ${JSON.stringify(arrivals)}`);
    assert.equal(stack().calls().slice(before)[0].body.reasoning_effort, 'low');

    const types = events.map((e) => e.type);
    const reasoningDeltas = events.filter((e) => e.type === 'response.reasoning_text.delta');
    const textDeltas = events.filter((e) => e.type === 'response.output_text.delta');
    assert.ok(reasoningDeltas.length >= 1, `events ${types}`);
    assert.ok(textDeltas.length >= 1, `events ${types}`);
    assert.ok(
      types.lastIndexOf('response.reasoning_text.delta') < types.indexOf('response.output_text.delta'),
      `the reasoning streams first: ${types}`,
    );
    assert.equal(reasoningDeltas.map((e) => e.delta).join(''), thought(prompt, 0));
    assert.equal(textDeltas.map((e) => e.delta).join(''), reply(prompt, 0));
    assert.equal(events.at(-1).type, 'response.completed');
    const final = events.at(-1).response;
    assert.deepEqual(final.output.map((o) => o.type), ['reasoning', 'message']);
    assert.equal(final.output[0].content[0].text, thought(prompt, 0));
    assert.equal(final.usage.output_tokens_details.reasoning_tokens, words(thought(prompt, 0)));
  });
});
