// The harness: a real `promptkit serve` in front of `promptkit fake-provider`
// backends, each on a free loopback port, in a fresh temporary working
// directory with a generated promptkit.yaml. Between serve and each fake
// sits a small counting relay (in this process), so a test can tell how
// many provider calls promptkit made and what it sent: fake-provider has
// no endpoint that reports its request count.
//
// Nothing here sleeps to synchronise: a process is ready when it prints
// its listening address (both commands print one), serve's /readyz is
// then checked, and every wait has a deadline that fails the test.
//
// Every process started is killed by stop(), by a test's after() hook,
// and, should the test process end any other way, by the exit handler.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before } from 'node:test';

/** The repository root: compat/node/lib/../../.. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** How long a process may take to start or stop before the test fails. */
const startDeadlineMs = 30_000;
const stopDeadlineMs = 15_000;

// ---------------------------------------------------------------------
// Process bookkeeping: every child, killed at exit whatever happens.

const children = new Set();
const tempDirs = new Set();

function killAll(signal) {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.kill(signal);
      } catch {
        // already gone
      }
    }
  }
}

process.on('exit', () => {
  killAll('SIGKILL');
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    killAll('SIGKILL');
    process.exit(128 + (os.constants.signals[sig] ?? 1));
  });
}

/** A new temporary directory, removed at exit should its user not get to it. */
export async function tempDir(prefix) {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

/** Removes a directory made by tempDir. */
export async function removeDir(dir) {
  await rm(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

// ---------------------------------------------------------------------
// The binary.

let builtBin;

/**
 * The promptkit binary: $PROMPTKIT_BIN (what .ci/run and `npm test` set),
 * or one built here with `go build` into a temporary directory.
 */
export function promptkitBin() {
  if (process.env.PROMPTKIT_BIN) return process.env.PROMPTKIT_BIN;
  if (builtBin) return builtBin;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'promptkit-compat-bin-'));
  tempDirs.add(dir);
  const out = path.join(dir, 'promptkit');
  const res = spawnSync('go', ['build', '-o', out, './cmd/promptkit'], { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'] });
  if (res.status !== 0) throw new Error(`go build ./cmd/promptkit failed (exit ${res.status ?? res.signal})`);
  builtBin = out;
  return out;
}

// ---------------------------------------------------------------------
// Starting and stopping a process.

/**
 * Starts bin with args and waits for a stderr line matching ready; the
 * promise resolves to { child, match, log } where log() is what the
 * process wrote (kept for failure messages; never printed otherwise).
 */
function startProcess(name, args, { cwd, ready }) {
  const child = spawn(promptkitBin(), args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: childEnv() });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let output = '';
  const log = () => output;
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err, value) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) {
        child.kill('SIGKILL');
        reject(err);
      } else resolve(value);
    };
    const timer = setTimeout(
      () => finish(new Error(`${name} did not print its address within ${startDeadlineMs} ms:\n${output}`)),
      startDeadlineMs,
    );
    const onData = (chunk) => {
      output += chunk.toString();
      // Keep what is needed to explain a failure, not an unbounded log.
      if (output.length > 64 * 1024) output = output.slice(-64 * 1024);
      const m = ready.exec(output);
      if (m) finish(null, { child, match: m, log });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', (err) => finish(new Error(`${name}: ${err.message}`)));
    child.once('exit', (code, signal) => finish(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${output}`)));
  });
}

/** The children's environment: no provider keys or proxies leak in. */
function childEnv() {
  const env = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'TZ']) if (process.env[k] !== undefined) env[k] = process.env[k];
  return env;
}

/** Ends child: SIGTERM, then SIGKILL past the deadline. Resolves on exit. */
function stopProcess(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), stopDeadlineMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

// ---------------------------------------------------------------------
// The counting relay between serve and a fake.

/**
 * A loopback HTTP server that forwards every request to target (the
 * fake's base URL, ending in /v1) and records the chat requests: their
 * count and decoded bodies. Bodies stay in memory for assertions; they are
 * never logged.
 */
async function startRelay(target) {
  const upstream = new URL(target);
  const calls = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.method === 'POST' && req.url.endsWith('/chat/completions')) {
        let json;
        try {
          json = JSON.parse(body.toString('utf8'));
        } catch {
          json = undefined;
        }
        calls.push({ path: req.url, body: json, at: Date.now() });
      }
      const headers = { ...req.headers, host: upstream.host };
      const out = http.request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
        (up) => {
          res.writeHead(up.statusCode, up.headers);
          up.pipe(res);
        },
      );
      out.on('error', () => res.destroy());
      // A client (serve) that gives up ends the upstream request too, as
      // it would end a direct one.
      res.on('close', () => out.destroy());
      out.end(body);
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}${upstream.pathname.replace(/\/$/, '')}`,
    calls,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------
// The stack.

/**
 * Starts one fake-provider per backend (each behind a counting relay) and
 * a `promptkit serve` whose promptkit.yaml names them.
 *
 * backends: [{ id, latency?: '3s', reasoning?: true, status?: 503, profiles: [{ id, model }] }]
 * Every profile's model is what clients may also name as `model`.
 * reasoning starts the fake with --reasoning (it answers like a vLLM
 * reasoning model), status with --status (every chat and embeddings
 * request answers that status).
 * transientRetries is serve's transient_retries (provider calls a job
 * attempt makes beyond its first); 0, the default, makes one job attempt
 * one provider call.
 *
 * The answer: { url, baseURL (url + '/v1'), calls(backendId), stop(),
 * prompts(), jobs(), waitTerminal(jobIds), job(id), rest(), log() }.
 */
export async function startStack({ backends = defaultBackends, transientRetries = 0 } = {}) {
  const dir = await tempDir('promptkit-compat-');
  const stack = { dir, fakes: [], relays: new Map(), serve: undefined };
  const stop = async () => {
    await Promise.all([
      stack.serve && stopProcess(stack.serve.child),
      ...stack.fakes.map((f) => stopProcess(f.child)),
    ]);
    await Promise.all([...stack.relays.values()].map((r) => r.close()));
    await removeDir(dir);
  };
  try {
    // transient_retries 0 (the default here): one job attempt is one
    // provider call, so what a test counts is what the job did.
    if (!Number.isInteger(transientRetries) || transientRetries < 0) throw new Error(`transientRetries ${transientRetries}`);
    let yaml = `transient_retries: ${transientRetries}\nbackends:\n`;
    let profiles = 'profiles:\n';
    for (const b of backends) {
      const args = ['fake-provider', '--addr', '127.0.0.1:0'];
      if (b.latency) args.push('--latency', b.latency);
      if (b.reasoning) args.push('--reasoning');
      if (b.status) args.push('--status', String(b.status));
      const fake = await startProcess(`fake-provider ${b.id}`, args, {
        cwd: dir,
        ready: /fake provider listening on (http:\/\/\S+)/,
      });
      stack.fakes.push(fake);
      const relay = await startRelay(fake.match[1]);
      stack.relays.set(b.id, relay);
      yaml += `  - {id: ${b.id}, base_url: "${relay.url}"}\n`;
      for (const p of b.profiles) profiles += `  - {id: ${p.id}, backend: ${b.id}, model: "${p.model}"}\n`;
    }
    const config = path.join(dir, 'promptkit.yaml');
    await writeFile(config, yaml + profiles);
    stack.serve = await startProcess(
      'serve',
      [
        'serve',
        '--addr', '127.0.0.1:0',
        '--config', config,
        '--database', path.join(dir, 'promptkit.db'),
        // A stopping serve hands running jobs back at once: the tests
        // are over, nothing waits for them.
        '--shutdown-grace', '0s',
        '--submit-rate', '-1',
      ],
      { cwd: dir, ready: /msg="promptkit serve listening[^"]*" addr=(http:\/\/\S+)/ },
    );
    const url = stack.serve.match[1];
    const ready = await fetch(`${url}/readyz`);
    if (ready.status !== 200) throw new Error(`serve printed its address but /readyz answered ${ready.status}`);
    return makeStack(url, stack, stop);
  } catch (err) {
    await stop();
    throw err;
  }
}

/** One backend "main" whose profile "default" runs gpt-4o-mini. */
export const defaultBackends = [{ id: 'main', profiles: [{ id: 'default', model: 'gpt-4o-mini' }] }];

/** The model name the tests send: a model a profile uses, as an unmodified program would. */
export const MODEL = 'gpt-4o-mini';

const terminalStates = new Set(['succeeded', 'failed', 'cancelled', 'superseded']);

function makeStack(url, stack, stop) {
  const rest = async (method, p, body) => {
    const res = await fetch(url + p, {
      method,
      headers: body ? { 'Content-Type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (!res.ok && res.status !== 202) throw new Error(`${method} ${p}: ${res.status} ${text.slice(0, 500)}`);
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const prompts = async () => {
    const all = [];
    let cursor = '';
    for (;;) {
      const q = new URLSearchParams({ limit: '100' });
      if (cursor) q.set('cursor', cursor);
      const { body } = await rest('GET', `/v1/prompts?${q}`);
      all.push(...body.prompts);
      if (!body.next_cursor) return all;
      cursor = body.next_cursor;
    }
  };
  return {
    url,
    baseURL: `${url}/v1`,
    /** The chat requests promptkit sent to backend id (decoded bodies). */
    calls: (id = 'main') => stack.relays.get(id).calls,
    /** Every prompt with its newest job (GET /v1/prompts, all pages). */
    prompts,
    /**
     * Every job of every prompt (each prompt's retries included), read
     * through the API: GET /v1/prompts, then GET /v1/prompts/{id} for
     * each prompt's jobs.
     */
    async jobs() {
      const out = [];
      for (const p of await prompts()) {
        const { body } = await rest('GET', `/v1/prompts/${encodeURIComponent(p.prompt_id)}`);
        out.push(...body.jobs);
      }
      return out;
    },
    /**
     * Waits until every job in jobIds is terminal, reading /v1/events from
     * the start of the log (Last-Event-ID: 0), so a change made before the
     * stream opened is replayed, not missed. Resolves to a map of states.
     */
    async waitTerminal(jobIds, timeoutMs = 60_000) {
      const pending = new Set(jobIds);
      const states = new Map();
      if (pending.size === 0) return states;
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), timeoutMs);
      try {
        const res = await fetch(`${url}/v1/events`, { headers: { 'Last-Event-ID': '0' }, signal: ac.signal });
        if (res.status !== 200) throw new Error(`GET /v1/events: ${res.status}`);
        const decoder = new TextDecoder();
        let buf = '';
        for await (const bytes of res.body) {
          buf += decoder.decode(bytes, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const event = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const data = event
              .split('\n')
              .filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(5).trim())
              .join('\n');
            if (!data) continue;
            const ev = JSON.parse(data);
            if (!pending.has(ev.job_id)) continue;
            states.set(ev.job_id, ev.state);
            if (terminalStates.has(ev.state)) pending.delete(ev.job_id);
            if (pending.size === 0) return states;
          }
        }
        throw new Error('the event stream ended');
      } catch (err) {
        if (ac.signal.aborted) throw new Error(`jobs ${[...pending]} not terminal within ${timeoutMs} ms`);
        throw err;
      } finally {
        clearTimeout(timer);
        ac.abort();
      }
    },
    /** GET /v1/jobs/{id}: the job and its events. */
    job: async (id) => (await rest('GET', `/v1/jobs/${encodeURIComponent(id)}`)).body,
    rest,
    log: () => stack.serve.log(),
    stop,
  };
}

/**
 * Starts a stack for the calling test file: before() starts it, after()
 * stops it (whatever the tests did). Returns a getter.
 */
export function useStack(opts) {
  let s;
  before(async () => {
    s = await startStack(opts);
  });
  after(async () => {
    if (s) await s.stop();
  });
  return () => s;
}

/** The time since start, in milliseconds with one decimal. */
export function since(start) {
  return Math.round((performance.now() - start) * 10) / 10;
}
