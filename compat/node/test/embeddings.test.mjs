// Embeddings through each client, unmodified but for its base URL:
// openai-node (which asks for base64 by default and decodes it), the AI
// SDK's embed/embedMany, and LangChain's OpenAIEmbeddings. The fake
// provider's vectors are a function of the text, so the same text must
// give the same vector through every client.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { createOpenAI } from '@ai-sdk/openai';
import { OpenAIEmbeddings } from '@langchain/openai';
import { embed, embedMany } from 'ai';
import OpenAI from 'openai';

import { MODEL, useStack } from '../lib/harness.mjs';

const stack = useStack();
const apiKey = 'sk-unused-in-local-mode';
const texts = ['the first text', 'a second one'];

const sameVector = (a, b, what) => {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) < 1e-6, `${what}: component ${i}`);
};

describe('embeddings', () => {
  test('openai-node, the AI SDK and LangChain get the same vectors', async () => {
    const oa = new OpenAI({ baseURL: stack().baseURL, apiKey });
    const res = await oa.embeddings.create({ model: MODEL, input: texts });
    assert.equal(res.object, 'list');
    assert.equal(res.data.length, 2);
    assert.deepEqual(res.data.map((d) => d.index), [0, 1]);
    const [v0, v1] = res.data.map((d) => d.embedding);
    assert.ok(Array.isArray(v0) && v0.length > 0 && v0.every((x) => typeof x === 'number'));
    assert.notDeepEqual(v0, v1);
    assert.ok(res.usage.prompt_tokens > 0);

    const floats = await oa.embeddings.create({ model: MODEL, input: texts[0], encoding_format: 'float' });
    sameVector(floats.data[0].embedding, v0, 'float vs base64');

    const ai = createOpenAI({ baseURL: stack().baseURL, apiKey });
    const one = await embed({ model: ai.embedding(MODEL), value: texts[0] });
    sameVector(one.embedding, v0, 'AI SDK embed');
    const many = await embedMany({ model: ai.embedding(MODEL), values: texts });
    sameVector(many.embeddings[1], v1, 'AI SDK embedMany');

    const lc = new OpenAIEmbeddings({ model: MODEL, apiKey, configuration: { baseURL: stack().baseURL } });
    const docs = await lc.embedDocuments(texts);
    sameVector(docs[0], v0, 'LangChain embedDocuments');
    sameVector(await lc.embedQuery(texts[1]), v1, 'LangChain embedQuery');
  });
});
