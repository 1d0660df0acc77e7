// LangChain.js's ChatOpenAI (@langchain/openai), unmodified but for its
// base URL, against `promptkit serve`.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

import { MODEL, since, useStack } from '../lib/harness.mjs';
import { toolResult, weatherTool } from '../lib/expect.mjs';

const stack = useStack();
const chat = () =>
  new ChatOpenAI({ model: MODEL, apiKey: 'sk-unused-in-local-mode', configuration: { baseURL: stack().baseURL } });

describe('@langchain/openai ChatOpenAI', () => {
  test('invoke', async () => {
    const before = stack().calls().length;
    const m = await chat().invoke('say hi to langchain');
    assert.equal(m.content, 'Fake provider reply: say hi to langchain');
    assert.equal(m.response_metadata.finish_reason, 'stop');
    assert.deepEqual(
      [m.usage_metadata.input_tokens, m.usage_metadata.output_tokens, m.usage_metadata.total_tokens],
      [4, 7, 11],
    );
    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].body.model, MODEL);
    assert.deepEqual(calls[0].body.messages, [{ role: 'user', content: 'say hi to langchain' }]);
  });

  test('stream: chunks assemble to the answer', async (t) => {
    const start = performance.now();
    const arrivals = [];
    let full;
    for await (const chunk of await chat().stream([new HumanMessage('stream about the old mill')])) {
      arrivals.push(since(start));
      full = full ? full.concat(chunk) : chunk;
    }
    t.diagnostic(`langchain stream: ${arrivals.length} chunks at ms ${JSON.stringify(arrivals)}`);
    assert.ok(arrivals.length >= 1);
    assert.equal(full.content, 'Fake provider reply: stream about the old mill');
    assert.equal(full.response_metadata.finish_reason, 'stop');
    // ChatOpenAI asks for usage in streams (stream_options.include_usage).
    assert.deepEqual([full.usage_metadata.input_tokens, full.usage_metadata.output_tokens], [5, 8]);
  });

  test('withStructuredOutput, method jsonSchema', async () => {
    const before = stack().calls().length;
    const Rating = z.object({
      city: z.string().min(1),
      rating: z.number().int().min(1).max(5),
      visited: z.boolean(),
    });
    const out = await chat().withStructuredOutput(Rating, { method: 'jsonSchema', name: 'rating' }).invoke('rate a city');
    assert.deepEqual(Object.keys(out).sort(), ['city', 'rating', 'visited']);
    assert.ok(out.city.length >= 1);
    assert.ok(Number.isInteger(out.rating) && out.rating >= 1 && out.rating <= 5, `rating ${out.rating}`);
    assert.equal(typeof out.visited, 'boolean');
    const [call] = stack().calls().slice(before);
    assert.equal(call.body.response_format.type, 'json_schema');
    assert.equal(call.body.response_format.json_schema.name, 'rating');
  });

  test('tools: bindTools, tool result, answer', async () => {
    const before = stack().calls().length;
    let executed = 0;
    const weather = tool(
      async () => {
        executed++;
        return toolResult;
      },
      { name: weatherTool.name, description: weatherTool.description, schema: z.object({ city: z.string().optional() }) },
    );
    const llm = chat().bindTools([weather]);
    const messages = [new HumanMessage('what is the weather in Lisbon?')];
    const first = await llm.invoke(messages);
    assert.equal(first.tool_calls?.length, 1, 'one tool call');
    const call = first.tool_calls[0];
    assert.equal(call.name, weatherTool.name);
    assert.ok(call.id, 'the call has an id');
    assert.equal(typeof call.args, 'object');
    // Invoked with the call, a LangChain tool answers a ToolMessage.
    const toolMessage = await weather.invoke(call);
    assert.equal(executed, 1);
    messages.push(first, toolMessage);
    const answer = await llm.invoke(messages);
    assert.equal(answer.tool_calls?.length ?? 0, 0);
    // The fake answers a conversation ending in a tool result with the
    // result's first words: the result went through promptkit and back.
    assert.equal(answer.content, `Fake provider reply: ${toolResult}`);
    assert.equal(answer.response_metadata.finish_reason, 'stop');

    // What the provider was sent: the tool, then the call and its result.
    const calls = stack().calls().slice(before);
    assert.equal(calls.length, 2);
    assert.equal(calls[0].body.tools[0].function.name, weatherTool.name);
    const sent = calls[1].body.messages;
    assert.equal(sent.find((m) => m.role === 'assistant').tool_calls[0].id, call.id);
    const tm = sent.find((m) => m.role === 'tool');
    assert.equal(tm.tool_call_id, call.id);
    assert.equal(tm.content, toolResult);
  });
});
