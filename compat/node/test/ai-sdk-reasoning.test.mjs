// The Vercel AI SDK (ai) against a reasoning model behind promptkit: the
// fake runs with --reasoning (a vLLM reasoning parser's answers:
// reasoning_content beside the content, streamed first, with reasoning and
// cached token counts). @ai-sdk/openai-compatible reads reasoning_content
// into the result's reasoning and passes its unknown provider options
// (vLLM's top_k, min_p, chat_template_kwargs) into the body; @ai-sdk/openai
// sends providerOptions.openai.reasoningEffort as reasoning_effort on Chat
// Completions and as reasoning.effort on the Responses API, which
// promptkit maps to chat's reasoning_effort.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, streamText } from 'ai';

import { MODEL, since, useStack } from '../lib/harness.mjs';

// o4-mini: a model @ai-sdk/openai takes for a reasoning model (it sends
// reasoning.effort on the Responses API only for those).
const REASONER = 'o4-mini';
const stack = useStack({
  backends: [
    {
      id: 'main',
      reasoning: true,
      profiles: [
        { id: 'default', model: MODEL },
        { id: 'reasoner', model: REASONER },
      ],
    },
  ],
});
const apiKey = 'sk-unused-in-local-mode';
const compatible = () =>
  createOpenAICompatible({ name: 'promptkit', baseURL: stack().baseURL, apiKey, includeUsage: true });
const openai = () => createOpenAI({ baseURL: stack().baseURL, apiKey });

/** Whitespace-separated words: how the fake counts tokens. */
const words = (text) => text.trim().split(/\s+/).length;
const reply = (prompt) => `Fake provider reply: ${prompt}`;
const thought = (prompt) => `Thinking about: ${prompt}`;

/** Fails unless usage is the fake's for prompt, with its reasoning and cached counts. */
function assertUsage(usage, prompt) {
  assert.equal(usage.inputTokens, words(prompt));
  assert.equal(usage.inputTokenDetails.cacheReadTokens, Math.floor(words(prompt) / 2));
  assert.equal(usage.outputTokenDetails.reasoningTokens, words(thought(prompt)));
  assert.equal(usage.outputTokens, words(thought(prompt)) + words(reply(prompt)));
}

describe('AI SDK with a reasoning model', () => {
  test('@ai-sdk/openai-compatible generateText: reasoningText; reasoningEffort and vLLM options reach the backend', async () => {
    const prompt = 'name a colour';
    const before = stack().calls().length;
    const vllm = { top_k: 20, min_p: 0.05, chat_template_kwargs: { enable_thinking: true } };
    const r = await generateText({
      model: compatible().chatModel(MODEL),
      prompt,
      providerOptions: { promptkit: { reasoningEffort: 'low', ...vllm } },
    });
    assert.equal(r.text, reply(prompt));
    assert.equal(r.reasoningText, thought(prompt));
    assert.deepEqual(r.reasoning.map((p) => p.type), ['reasoning']);
    assertUsage(r.usage, prompt);

    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].body.reasoning_effort, 'low');
    for (const [k, v] of Object.entries(vllm)) assert.deepEqual(calls[0].body[k], v, k);
  });

  test('@ai-sdk/openai-compatible streamText: reasoning deltas, then text deltas', async (t) => {
    const prompt = 'name a shade';
    const start = performance.now();
    let streamError;
    const r = streamText({
      model: compatible().chatModel(MODEL),
      prompt,
      onError: ({ error }) => {
        streamError ??= error;
      },
    });
    const parts = [];
    const arrivals = [];
    for await (const p of r.fullStream) {
      arrivals.push(since(start));
      parts.push(p);
    }
    t.diagnostic(`ai-sdk reasoning stream: ${parts.length} parts at ms ${JSON.stringify(arrivals)}`);
    if (streamError) throw streamError;
    const types = parts.map((p) => p.type);
    const reasoning = parts.filter((p) => p.type === 'reasoning-delta');
    const text = parts.filter((p) => p.type === 'text-delta');
    assert.ok(reasoning.length >= 1 && text.length >= 1, `${types}`);
    assert.ok(types.lastIndexOf('reasoning-delta') < types.indexOf('text-delta'), `the reasoning streams first: ${types}`);
    assert.equal(reasoning.map((p) => p.text).join(''), thought(prompt));
    assert.equal(text.map((p) => p.text).join(''), reply(prompt));
    assert.equal(await r.reasoningText, thought(prompt));
    assertUsage(await r.usage, prompt);
  });

  test('@ai-sdk/openai openai.chat: providerOptions reasoningEffort reaches the backend as reasoning_effort', async () => {
    const prompt = 'name a tree';
    const before = stack().calls().length;
    const r = await generateText({
      model: openai().chat(MODEL),
      prompt,
      providerOptions: { openai: { reasoningEffort: 'low' } },
    });
    assert.deepEqual(r.warnings, []);
    assert.equal(r.text, reply(prompt));
    // @ai-sdk/openai's chat model does not read reasoning_content (OpenAI
    // sends none); the counts it does read.
    assertUsage(r.usage, prompt);
    const [call] = stack().calls().slice(before);
    assert.equal(call.body.reasoning_effort, 'low');
  });

  test('@ai-sdk/openai Responses API: reasoning.effort reaches the backend as reasoning_effort; a reasoning item comes back', async (t) => {
    const prompt = 'name a bird';
    const before = stack().calls().length;
    const r = await generateText({
      model: openai()(REASONER),
      prompt,
      providerOptions: { openai: { reasoningEffort: 'low' } },
    });
    assert.deepEqual(r.warnings, []);
    assert.equal(r.text, reply(prompt));
    assertUsage(r.usage, prompt);
    // The answer's reasoning item reaches the SDK as a reasoning part;
    // @ai-sdk/openai reads a reasoning item's summary, and promptkit's
    // item carries the backend's reasoning as reasoning_text content with
    // an empty summary, so the part's text is empty (see README.md).
    assert.equal(r.reasoning.length, 1);
    assert.match(r.reasoning[0].providerMetadata.openai.itemId, /^rs_/);
    t.diagnostic(`ai-sdk responses: reasoning part text ${JSON.stringify(r.reasoning[0].text)}`);

    const [call] = stack().calls().slice(before);
    assert.equal(call.body.model, REASONER);
    assert.equal(call.body.reasoning_effort, 'low');
    assert.equal(call.body.reasoning, undefined);
  });
});
