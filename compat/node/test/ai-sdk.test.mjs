// The Vercel AI SDK (ai) with its OpenAI provider (@ai-sdk/openai) —
// openai.chat(model) on Chat Completions and the default openai(model) on
// the Responses API — and @ai-sdk/openai-compatible, each unmodified but
// for its base URL, against `promptkit serve`.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, generateText, Output, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';

import { MODEL, since, useStack } from '../lib/harness.mjs';
import { toolResult, weatherTool } from '../lib/expect.mjs';

const stack = useStack();
const apiKey = 'sk-unused-in-local-mode';

// Each flavour: how to get a model.
const flavours = [
  {
    name: '@ai-sdk/openai openai.chat(model)',
    tag: 'chat',
    model: () => createOpenAI({ baseURL: stack().baseURL, apiKey }).chat(MODEL),
  },
  {
    name: '@ai-sdk/openai-compatible',
    tag: 'compatible',
    model: () =>
      createOpenAICompatible({
        name: 'promptkit',
        baseURL: stack().baseURL,
        apiKey,
        includeUsage: true,
        supportsStructuredOutputs: true,
      }).chatModel(MODEL),
  },
  {
    name: '@ai-sdk/openai openai(model) (Responses API)',
    tag: 'responses',
    model: () => createOpenAI({ baseURL: stack().baseURL, apiKey })(MODEL),
    // promptkit talks Chat Completions to its backends whatever the front
    // door: the checks of what the provider was sent hold for this one too.
  },
];

const Rating = z.object({
  city: z.string().min(1),
  rating: z.number().int().min(1).max(5),
  visited: z.boolean(),
});

/** Whitespace-separated words: how the fake counts tokens. */
const words = (text) => text.trim().split(/\s+/).length;

function assertRating(out) {
  assert.deepEqual(Object.keys(out).sort(), ['city', 'rating', 'visited']);
  assert.ok(out.city.length >= 1);
  assert.ok(Number.isInteger(out.rating) && out.rating >= 1 && out.rating <= 5, `rating ${out.rating}`);
  assert.equal(typeof out.visited, 'boolean');
}

for (const f of flavours) {
  describe(f.name, () => {
    // Each flavour asks its own questions, so that what a test finds in
    // the provider's requests is its own. (The same request twice would
    // still be two jobs: the AI SDK sends no X-Stainless-Retry-Count, and
    // only a request that says it is a retry joins the job of the same
    // request.)
    const ask = (text) => `${text} (${f.tag})`;

    test('generateText', async () => {
      const before = stack().calls().length;
      const prompt = ask('say hi to the AI SDK');
      const r = await generateText({ model: f.model(), prompt });
      assert.equal(r.text, `Fake provider reply: ${prompt}`);
      assert.equal(r.finishReason, 'stop');
      // The fake counts words: the prompt's in, "Fake provider reply:" and
      // the prompt's out; promptkit passes the counts on.
      assert.equal(r.usage.inputTokens, words(prompt));
      assert.equal(r.usage.outputTokens, words(prompt) + 3);
      assert.equal(r.usage.totalTokens, 2 * words(prompt) + 3);
      const calls = stack().calls().slice(before);
      assert.equal(calls.length, 1);
      assert.equal(calls[0].body.model, MODEL);
    });

    test('streamText: chunks assemble to the answer', async (t) => {
      const start = performance.now();
      // streamText reports a failure to onError (by default it prints the
      // error, request body included): keep it to fail the test with.
      let streamError;
      const prompt = ask('stream a line about the harbour');
      const r = streamText({
        model: f.model(),
        prompt,
        onError: ({ error }) => {
          streamError ??= error;
        },
      });
      const arrivals = [];
      let text = '';
      for await (const delta of r.textStream) {
        arrivals.push(since(start));
        text += delta;
      }
      t.diagnostic(`${f.name} stream: ${arrivals.length} text deltas at ms ${JSON.stringify(arrivals)}`);
      if (streamError) throw streamError;
      assert.ok(arrivals.length >= 1);
      assert.equal(text, `Fake provider reply: ${prompt}`);
      assert.equal(await r.text, text);
      assert.equal(await r.finishReason, 'stop');
      const usage = await r.usage;
      assert.equal(usage.inputTokens, words(prompt));
      assert.equal(usage.outputTokens, words(prompt) + 3);
    });

    test('generateObject with a zod schema', async () => {
      const before = stack().calls().length;
      const r = await generateObject({ model: f.model(), schema: Rating, schemaName: 'rating', prompt: ask('rate a city') });
      assertRating(r.object);
      // The provider was asked with the schema.
      const [call] = stack().calls().slice(before);
      assert.equal(call.body.response_format.type, 'json_schema');
      const sent = call.body.response_format.json_schema.schema;
      assert.deepEqual(Object.keys(sent.properties).sort(), ['city', 'rating', 'visited']);
    });

    test('generateText with Output.object', async () => {
      const r = await generateText({
        model: f.model(),
        output: Output.object({ schema: Rating }),
        prompt: ask('rate a city with Output.object'),
      });
      assertRating(r.output);
    });

    test('tools: generateText with tools and stopWhen', async () => {
      const before = stack().calls().length;
      let executed = 0;
      const r = await generateText({
        model: f.model(),
        prompt: ask('what is the weather in Lisbon?'),
        tools: {
          [weatherTool.name]: tool({
            description: weatherTool.description,
            inputSchema: z.object({ city: z.string().optional() }),
            execute: async () => {
              executed++;
              return toolResult;
            },
          }),
        },
        stopWhen: stepCountIs(3),
      });
      assert.equal(executed, 1, 'the tool ran once');
      assert.equal(r.steps.length, 2, 'a tool step, then the answer');
      assert.equal(r.steps[0].finishReason, 'tool-calls');
      assert.equal(r.steps[0].toolCalls[0].toolName, weatherTool.name);
      assert.equal(r.steps[0].toolResults[0].output, toolResult);
      assert.equal(r.finishReason, 'stop');
      // The fake answers a conversation ending in a tool result with the
      // result's first words: the result went through promptkit and back.
      assert.equal(r.text, `Fake provider reply: ${toolResult}`);
      // What the provider was sent: the tool, then the call and its result.
      const calls = stack().calls().slice(before);
      assert.equal(calls.length, 2);
      assert.equal(calls[0].body.tools[0].function.name, weatherTool.name);
      const callId = r.steps[0].toolCalls[0].toolCallId;
      const sent = calls[1].body.messages;
      assert.equal(sent.find((m) => m.role === 'assistant').tool_calls[0].id, callId);
      const toolMsg = sent.find((m) => m.role === 'tool');
      assert.equal(toolMsg.tool_call_id, callId);
      assert.ok(String(toolMsg.content).includes(toolResult), 'the tool result was sent');
    });
  });
}
