// The OpenAPI document `promptkit serve` serves at /openapi.json, read by
// the tools people feed such documents to: @apidevtools/swagger-parser
// (validate), @redocly/cli (lint, recommended rules, zero errors) and
// openapi-typescript (generate; the types are then compiled).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import SwaggerParser from '@apidevtools/swagger-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';

import { removeDir, startStack, tempDir } from '../lib/harness.mjs';

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let doc; // the served document, parsed
let dir; // a temporary folder holding it as openapi.json
before(async () => {
  // Only the document is needed: the stack stops once it is read.
  const stack = await startStack();
  let text;
  try {
    const res = await fetch(`${stack.url}/openapi.json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /json/);
    text = await res.text();
  } finally {
    await stack.stop();
  }
  doc = JSON.parse(text);
  dir = await tempDir('promptkit-openapi-');
  await writeFile(path.join(dir, 'openapi.json'), text);
});
after(async () => {
  if (dir) await removeDir(dir);
});

describe('/openapi.json', () => {
  test('describes the OpenAI-compatible routes', () => {
    assert.match(doc.openapi, /^3\.1\./);
    for (const [p, method] of [
      ['/v1/chat/completions', 'post'],
      ['/v1/models', 'get'],
      ['/v1/files', 'post'],
      ['/v1/batches', 'post'],
      ['/v1/batches/{id}', 'get'],
    ]) {
      assert.ok(doc.paths[p]?.[method], `${method.toUpperCase()} ${p} is in the document`);
    }
  });

  test('swagger-parser validates it', async () => {
    // validate() dereferences in place: give it a copy.
    const api = await SwaggerParser.validate(structuredClone(doc));
    assert.ok(api.paths['/v1/chat/completions']);
  });

  test('redocly lint: zero errors', async () => {
    const { stdout } = await promisify(execFile)(
      path.join(pkgDir, 'node_modules', '.bin', 'redocly'),
      ['lint', path.join(dir, 'openapi.json'), '--config', path.join(pkgDir, 'redocly.yaml'), '--format=json'],
      {
        cwd: pkgDir,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        maxBuffer: 16 * 1024 * 1024,
      },
    ).catch((err) => err); // a lint with errors exits 1: the report says why
    const report = JSON.parse(stdout);
    const errors = report.problems
      .filter((p) => p.severity === 'error')
      .map((p) => `${p.ruleId} at ${p.location?.[0]?.pointer}: ${p.message}`);
    assert.deepEqual(errors, [], `redocly lint errors:\n${errors.join('\n')}`);
    assert.equal(report.totals.errors, 0);
  });

  test('openapi-typescript generates types that compile and type a chat request', async () => {
    const out = astToString(await openapiTS(structuredClone(doc)));
    assert.match(out, /"\/v1\/chat\/completions": \{/);
    const schemaFile = path.join(dir, 'schema.d.ts');
    const useFile = path.join(dir, 'use.ts');
    await writeFile(schemaFile, out);
    // A program using the generated types the way a client would: an
    // OpenAI-shaped chat request and batch request must be assignable,
    // and the answer's content readable.
    await writeFile(
      useFile,
      `import type { paths } from './schema';
type Chat = paths['/v1/chat/completions']['post'];
type ChatRequest = Chat['requestBody']['content']['application/json'];
type ChatAnswer = Chat['responses'][200]['content']['application/json'];
export const request: ChatRequest = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
export function content(a: ChatAnswer): string | null | undefined {
  return a.choices[0]?.message.content;
}
type BatchRequest = paths['/v1/batches']['post']['requestBody']['content']['application/json'];
export const batch: BatchRequest = { input_file_id: 'file-1', endpoint: '/v1/chat/completions', completion_window: '24h' };
`,
    );
    const program = ts.createProgram([useFile], {
      noEmit: true,
      strict: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      skipLibCheck: true,
      types: [],
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file ? `${path.basename(d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}` : '';
      return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    assert.deepEqual(diagnostics, []);
  });
});
