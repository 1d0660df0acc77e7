// An SDK's own retries against a slow backend: openai-node with a 1 s
// timeout and 2 retries, against a backend that takes 3 s, sends the same
// request three times. promptkit must run it once: one job, one provider
// call. This file has a stack of its own, so every prompt and provider
// call counted is this test's.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import OpenAI from 'openai';

import { MODEL, since, useStack } from '../lib/harness.mjs';

const stack = useStack({
  backends: [{ id: 'slow', latency: '3s', profiles: [{ id: 'default', model: MODEL }] }],
});

describe('openai-node retries against a slow backend', () => {
  test('timeout 1000, maxRetries 2, backend 3 s: one job, one provider call', async (t) => {
    const oa = new OpenAI({ baseURL: stack().baseURL, apiKey: 'sk-unused-in-local-mode', timeout: 1000, maxRetries: 2 });
    const start = performance.now();
    let outcome;
    try {
      const c = await oa.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'take your time' }] });
      outcome = { ok: true, content: c.choices[0].message.content };
    } catch (err) {
      outcome = { ok: false, error: `${err.constructor.name}: ${err.message}` };
    }
    // Whether the client's last try got the answer depends on when the
    // job ended relative to it: recorded, not asserted.
    t.diagnostic(
      `retry: client ${outcome.ok ? 'got the answer' : `failed (${outcome.error})`} after ${since(start)} ms`,
    );
    if (outcome.ok) assert.equal(outcome.content, 'Fake provider reply: take your time');

    // Every request the SDK sent reached serve before the SDK gave up on
    // it (each try waited 1 s); wait for every job they made to end, then
    // count.
    let prompts = await stack().prompts();
    await stack().waitTerminal(prompts.map((p) => p.job.id));
    prompts = await stack().prompts();
    let jobs = 0;
    let attempts = 0;
    for (const p of prompts) {
      const { body } = await stack().rest('GET', `/v1/prompts/${p.prompt_id}`);
      jobs += body.jobs.length;
      for (const j of body.jobs) {
        const { events } = await stack().job(j.id);
        attempts += events.filter((e) => e.type === 'attempt' && e.data?.dispatched).length;
      }
    }
    const calls = stack().calls('slow').length;
    t.diagnostic(`retry: ${prompts.length} prompts, ${jobs} jobs, ${attempts} dispatched attempts, ${calls} provider calls`);
    assert.equal(prompts.length, 1, 'one prompt');
    assert.equal(jobs, 1, 'one job');
    assert.equal(prompts[0].job.state, 'succeeded');
    assert.equal(attempts, 1, 'one dispatched attempt, as promptkit recorded it');
    assert.equal(calls, 1, 'one provider call, as the relay in front of the fake saw it');
  });
});
