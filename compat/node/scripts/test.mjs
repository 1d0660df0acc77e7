// npm test: runs test/*.test.mjs with Node's test runner against the
// promptkit binary named by $PROMPTKIT_BIN (.ci/run builds one). Without
// it, builds one with `go build` into a temporary directory first, so that
// the test files (run in parallel, one process each) share one build.
// Extra arguments go to `node --test` (e.g. --test-name-pattern=batches).

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = path.resolve(pkgDir, '..', '..');

let tmp;
const env = { ...process.env };
if (!env.PROMPTKIT_BIN) {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'promptkit-compat-bin-'));
  env.PROMPTKIT_BIN = path.join(tmp, 'promptkit');
  console.error(`compat/node: building ${env.PROMPTKIT_BIN} (set PROMPTKIT_BIN to use another)`);
  const res = spawnSync('go', ['build', '-o', env.PROMPTKIT_BIN, './cmd/promptkit'], { cwd: repoRoot, stdio: 'inherit' });
  if (res.status !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    console.error('compat/node: go build ./cmd/promptkit failed');
    process.exit(1);
  }
}

const files = readdirSync(path.join(pkgDir, 'test'))
  .filter((f) => f.endsWith('.test.mjs'))
  .sort()
  .map((f) => path.join('test', f));

// The tests mostly wait on loopback I/O and on slow fakes, not the CPU:
// four files at once keep a 2-core machine busy without starving it.
const child = spawn(
  process.execPath,
  ['--test', '--test-concurrency=4', '--test-timeout=120000', ...process.argv.slice(2), ...files],
  { cwd: pkgDir, env, stdio: 'inherit' },
);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  process.exit(code ?? (signal ? 1 : 0));
});
