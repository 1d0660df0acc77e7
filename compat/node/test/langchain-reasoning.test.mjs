// LangChain.js's ChatOpenAI (@langchain/openai) with a reasoning model
// behind promptkit: `reasoning: {effort}` (or the call option
// reasoningEffort) reaches the backend as reasoning_effort on Chat
// Completions, and with useResponsesApi as the Responses API's
// reasoning.effort, which promptkit maps to chat's reasoning_effort;
// modelKwargs (vLLM's top_k, min_p, ...) reach it unchanged either way;
// the backend's reasoning comes back to the message.
//
// ChatOpenAI sends reasoning only for models it takes for reasoning
// models (o-series, gpt-5): the profile here runs o4-mini. The fake is not
// started with --reasoning: it reasons because reasoning_effort asks it
// to, as vLLM does.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ChatOpenAI } from '@langchain/openai';

import { since, useStack } from '../lib/harness.mjs';

const REASONER = 'o4-mini';
const stack = useStack({ backends: [{ id: 'main', profiles: [{ id: 'reasoner', model: REASONER }] }] });

const modelKwargs = { top_k: 20, min_p: 0.05, repetition_penalty: 1.1, chat_template_kwargs: { enable_thinking: true } };
const chat = (fields = {}) =>
  new ChatOpenAI({
    model: REASONER,
    apiKey: 'sk-unused-in-local-mode',
    configuration: { baseURL: stack().baseURL },
    reasoning: { effort: 'low' },
    modelKwargs,
    ...fields,
  });

/** Whitespace-separated words: how the fake counts tokens. */
const words = (text) => text.trim().split(/\s+/).length;
const reply = (prompt) => `Fake provider reply: ${prompt}`;
const thought = (prompt) => `Thinking about: ${prompt}`;

/** Fails unless the backend request carries the effort and every modelKwargs value, unchanged. */
function assertSent(body, effort) {
  assert.equal(body.model, REASONER);
  assert.equal(body.reasoning_effort, effort);
  assert.equal(body.reasoning, undefined);
  for (const [k, v] of Object.entries(modelKwargs)) assert.deepEqual(body[k], v, k);
}

/** Fails unless LangChain's usage is the fake's, reasoning and cached counts included. */
function assertUsage(um, prompt) {
  assert.equal(um.input_tokens, words(prompt));
  assert.equal(um.output_tokens, words(thought(prompt)) + words(reply(prompt)));
  assert.equal(um.output_token_details.reasoning, words(thought(prompt)));
  assert.equal(um.input_token_details.cache_read, Math.floor(words(prompt) / 2));
}

describe('@langchain/openai ChatOpenAI with a reasoning model', () => {
  test('chat completions invoke: reasoning.effort and modelKwargs reach the backend; reasoning_content comes back', async () => {
    const prompt = 'name a colour';
    const before = stack().calls().length;
    const m = await chat().invoke(prompt);
    assert.equal(m.content, reply(prompt));
    assert.equal(m.additional_kwargs.reasoning_content, thought(prompt));
    assert.equal(m.response_metadata.system_fingerprint, 'fp_providertest');
    assertUsage(m.usage_metadata, prompt);
    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1);
    assertSent(calls[0].body, 'low');
  });

  test('chat completions stream: reasoning_content and the text assemble', async (t) => {
    const prompt = 'name a shade';
    const before = stack().calls().length;
    const start = performance.now();
    const arrivals = [];
    let full;
    for await (const chunk of await chat().stream(prompt)) {
      arrivals.push(since(start));
      full = full ? full.concat(chunk) : chunk;
    }
    t.diagnostic(`langchain reasoning stream: ${arrivals.length} chunks at ms ${JSON.stringify(arrivals)}`);
    assert.equal(full.content, reply(prompt));
    assert.equal(full.additional_kwargs.reasoning_content, thought(prompt));
    assertUsage(full.usage_metadata, prompt);
    const [call] = stack().calls().slice(before);
    assertSent(call.body, 'low');
    assert.equal(call.body.stream, true);
  });

  test('the call option reasoningEffort reaches the backend', async () => {
    const prompt = 'name a tree';
    const before = stack().calls().length;
    const m = await chat({ reasoning: undefined }).invoke(prompt, { reasoningEffort: 'high' });
    assert.equal(m.additional_kwargs.reasoning_content, thought(prompt));
    const [call] = stack().calls().slice(before);
    assertSent(call.body, 'high');
  });

  test('useResponsesApi invoke: reasoning.effort reaches the backend as reasoning_effort, modelKwargs unchanged; the reasoning item comes back', async () => {
    const prompt = 'name a bird';
    const before = stack().calls().length;
    const m = await chat({ useResponsesApi: true }).invoke(prompt);
    assert.equal(m.text, reply(prompt));
    assert.match(m.id, /^resp_/);
    // ChatOpenAI keeps the Responses API's reasoning item as it came.
    const item = m.additional_kwargs.reasoning;
    assert.equal(item.type, 'reasoning');
    assert.deepEqual(item.content, [{ type: 'reasoning_text', text: thought(prompt) }]);
    assertUsage(m.usage_metadata, prompt);
    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1);
    assertSent(calls[0].body, 'low');
  });

  test('useResponsesApi stream: the text assembles; the effort reaches the backend', async (t) => {
    const prompt = 'name a fish';
    const before = stack().calls().length;
    const start = performance.now();
    const arrivals = [];
    let full;
    for await (const chunk of await chat({ useResponsesApi: true }).stream(prompt)) {
      arrivals.push(since(start));
      full = full ? full.concat(chunk) : chunk;
    }
    t.diagnostic(`langchain responses reasoning stream: ${arrivals.length} chunks at ms ${JSON.stringify(arrivals)}`);
    assert.equal(full.text, reply(prompt));
    assert.equal(full.additional_kwargs.reasoning?.type, 'reasoning');
    assertUsage(full.usage_metadata, prompt);
    const [call] = stack().calls().slice(before);
    assertSent(call.body, 'low');
  });
});
