// One retry owner: against a backend that is down (every call answers
// 503), one openai-node call with the SDK's default retries is one job,
// whose attempts promptkit makes (each with its transient retries) within
// the time the SDK says it waits (X-Stainless-Timeout); the error then
// tells the SDK not to retry (x-should-retry: false), so the SDK makes
// one attempt and gets promptkit's error, not its own timeout. This file
// has a stack of its own, so every job and backend call counted is this
// test's.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import OpenAI from 'openai';

import { MODEL, since, useStack } from '../lib/harness.mjs';

// transient_retries 2: a job attempt is up to three backend calls, as in a
// default promptkit.yaml, so the bound below counts what both retry
// layers did.
const TRANSIENT_RETRIES = 2;
// A chat completion's job gets jobs.DefaultMaxAttempts attempts.
const MAX_ATTEMPTS = 3;

const stack = useStack({
  backends: [{ id: 'down', status: 503, profiles: [{ id: 'default', model: MODEL }] }],
  transientRetries: TRANSIENT_RETRIES,
});

describe('one retry owner: openai-node against a backend that answers 503', () => {
  test('default maxRetries: one SDK attempt, one job, a 502 with x-should-retry false before the SDK times out', async (t) => {
    // Every request openai-node sends to promptkit goes through this
    // fetch: the SDK's own attempts, counted.
    const sdkAttempts = [];
    const countingFetch = (url, init) => {
      const h = new Headers(init?.headers);
      sdkAttempts.push({ retryCount: h.get('x-stainless-retry-count'), timeout: h.get('x-stainless-timeout') });
      return fetch(url, init);
    };
    // maxRetries is the SDK's default (2), said aloud. The timeout is 20 s
    // rather than the SDK's 10 minutes, so the test stays short: promptkit
    // fits the job's attempts and backoffs in 90% of it (18 s); the first
    // backoff (5 s + up to 5 s of jitter) fits and the second (25 s and
    // more) does not, so the job fails after its second attempt. It is
    // given per request because only then does openai-node send it
    // (X-Stainless-Timeout: 20); a client-wide timeout is not sent, and
    // promptkit then plans for its own chat timeout instead (see
    // README.md).
    const oa = new OpenAI({
      baseURL: stack().baseURL,
      apiKey: 'sk-unused-in-local-mode',
      maxRetries: 2,
      fetch: countingFetch,
    });
    const start = performance.now();
    let error;
    try {
      await oa.chat.completions.create(
        { model: MODEL, messages: [{ role: 'user', content: 'is anyone there?' }] },
        { timeout: 20_000 },
      );
    } catch (err) {
      error = err;
    }
    t.diagnostic(`retry owner: the SDK got ${error?.constructor?.name} ${error?.status} after ${since(start)} ms`);

    // What the program sees: promptkit's error, not the SDK's timeout (a
    // timeout is an APIConnectionTimeoutError, which has no status).
    assert.ok(error, 'the call failed');
    assert.ok(!(error instanceof OpenAI.APIConnectionTimeoutError), `the SDK timed out: ${error}`);
    assert.ok(error instanceof OpenAI.APIError, `${error}`);
    assert.equal(error.status, 502);
    assert.ok(error instanceof OpenAI.InternalServerError);
    assert.equal(error.headers.get('x-should-retry'), 'false');
    assert.equal(error.type, 'server_error');
    assert.equal(error.code, 'provider_5xx');
    assert.equal(sdkAttempts.length, 1, `the SDK made one attempt: ${JSON.stringify(sdkAttempts)}`);
    assert.deepEqual(sdkAttempts[0], { retryCount: '0', timeout: '20' });

    // Exactly one job, failed, as promptkit's API reports it.
    const jobs = await stack().jobs();
    assert.equal(jobs.length, 1, `jobs ${JSON.stringify(jobs.map((j) => j.id))}`);
    const [job] = jobs;
    assert.equal(job.id, error.headers.get('x-promptkit-job-id'));
    assert.equal(job.state, 'failed');
    assert.equal(job.error_kind, 'provider_5xx');
    // It ended because its next attempt would start after the client
    // stops waiting, not because it ran out of attempts.
    assert.ok(job.attempt < MAX_ATTEMPTS, `attempt ${job.attempt} of ${MAX_ATTEMPTS}`);
    assert.match(job.error_message, /not retried: the next attempt would start after the client stops waiting/);

    // Backend calls: every job attempt makes its call and, every call
    // answering 503, all its transient retries; the job makes at most
    // MAX_ATTEMPTS attempts. So at most (transient_retries + 1) ×
    // MAX_ATTEMPTS calls: that is the bound asserted. Within it, every
    // job attempt but the last made all its calls (the last may stop a
    // transient retry that would wait past the deadline). Without one
    // retry owner, each of the SDK's 3 attempts would be a job of its own:
    // up to 27 calls.
    const calls = stack().calls('down').length;
    const perAttempt = TRANSIENT_RETRIES + 1;
    t.diagnostic(`retry owner: ${job.attempt} job attempts, ${calls} backend calls`);
    assert.ok(calls <= perAttempt * MAX_ATTEMPTS, `${calls} backend calls`);
    assert.equal(Math.ceil(calls / perAttempt), job.attempt, `${calls} backend calls for ${job.attempt} job attempts`);
    // promptkit's own record of the calls agrees with the relay's count.
    const { events } = await stack().job(job.id);
    assert.equal(events.filter((e) => e.type === 'attempt' && e.data?.dispatched).length, calls);
  });

  test('responses.create (not background): one SDK attempt, one more job, a 502 with x-should-retry false', async () => {
    let sdkAttempts = 0;
    const oa = new OpenAI({
      baseURL: stack().baseURL,
      apiKey: 'sk-unused-in-local-mode',
      maxRetries: 2,
      fetch: (url, init) => {
        sdkAttempts++;
        return fetch(url, init);
      },
    });
    const jobsBefore = (await stack().jobs()).length;
    const callsBefore = stack().calls('down').length;
    // A 4 s timeout (3.6 s for the job): the first job backoff (5 s and
    // more) does not fit, so the job fails after its first attempt.
    let error;
    try {
      await oa.responses.create({ model: MODEL, input: 'is anyone there at all?' }, { timeout: 4_000 });
    } catch (err) {
      error = err;
    }
    assert.ok(error, 'the call failed');
    assert.ok(!(error instanceof OpenAI.APIConnectionTimeoutError), `the SDK timed out: ${error}`);
    assert.ok(error instanceof OpenAI.InternalServerError, `${error}`);
    assert.equal(error.status, 502);
    assert.equal(error.headers.get('x-should-retry'), 'false');
    assert.equal(sdkAttempts, 1, 'the SDK made one attempt');

    const jobs = await stack().jobs();
    assert.equal(jobs.length, jobsBefore + 1, 'one job more');
    const job = jobs.find((j) => j.id === error.headers.get('x-promptkit-job-id'));
    assert.ok(job, 'the job the answer names');
    assert.equal(job.state, 'failed');
    assert.equal(job.attempt, 1);
    const calls = stack().calls('down').length - callsBefore;
    assert.ok(calls >= 1 && calls <= TRANSIENT_RETRIES + 1, `${calls} backend calls for one job attempt`);
  });
});
