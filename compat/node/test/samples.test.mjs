// Samples stay samples: identical requests sent at once are separate
// samples (at temperature 1 a program asks for several answers this way),
// so each is a job and a backend call of its own. Only a request that
// says it is an SDK's retry (X-Stainless-Retry-Count 1 and up) joins the
// job of the same request; openai-node sends 0 on a call's first attempt.
// This file has a stack of its own, so every job and backend call counted
// is this test's.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import OpenAI from 'openai';

import { MODEL, useStack } from '../lib/harness.mjs';

// The backend takes 1 s, so each call arrives while the jobs of the others
// are queued or running: the case where joining the job of the same
// request would be easiest.
const stack = useStack({ backends: [{ id: 'main', latency: '1s', profiles: [{ id: 'default', model: MODEL }] }] });

describe('samples stay samples', () => {
  test('five identical chat.completions.create calls at once, temperature 1: five jobs, five backend calls', async () => {
    const oa = new OpenAI({ baseURL: stack().baseURL, apiKey: 'sk-unused-in-local-mode' });
    const request = { model: MODEL, temperature: 1, messages: [{ role: 'user', content: 'pick a number' }] };
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => oa.chat.completions.create(request).withResponse()),
    );
    for (const { data } of answers) assert.equal(data.choices[0].message.content, 'Fake provider reply: pick a number');

    // Each call was answered by a job of its own...
    const answeredBy = new Set(answers.map(({ response }) => response.headers.get('x-promptkit-job-id')));
    assert.equal(answeredBy.size, 5, `answered by jobs ${[...answeredBy]}`);
    assert.equal(new Set(answers.map(({ data }) => data.id)).size, 5, 'five completion ids');
    // ...promptkit stored five jobs...
    const jobs = await stack().jobs();
    assert.deepEqual(new Set(jobs.map((j) => j.id)), answeredBy);
    assert.ok(jobs.every((j) => j.state === 'succeeded'));
    // ...and the backend was asked five times, the same request each time.
    const calls = stack().calls();
    assert.equal(calls.length, 5);
    for (const c of calls) {
      assert.equal(c.body.temperature, 1);
      assert.deepEqual(c.body.messages, request.messages);
    }
  });
});
