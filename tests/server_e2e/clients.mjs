// End-to-end with real client libraries: the npm `openai` SDK (completions + chat, streaming and
// not) and `@huggingface/inference` — v2 (`hf-inference-v2`, which talks to TGI's POST / route
// with TGI stream events) and the current major (which talks to /v1/completions).
import assert from 'node:assert/strict';
import { deadline, startServer, postJson, requireNode, requireNodeOrSkip, check, exitWithChecks } from './lib.mjs';

requireNodeOrSkip(['openai', '@huggingface/inference', 'hf-inference-v2']);

deadline(120);
const srvKey = 'sekrit';
const APP = 'http://app.example:5173';
const srv = await startServer(['--api-key', srvKey, '--cors-allow-origin', `${APP}, http://other.example`]);  // spaces after commas are fine
const { base } = srv;
const PROMPT = 'The old man said';
const auth = { authorization: `Bearer ${srvKey}` };
const ref = (await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 10 } }, auth)).json;

await check('--api-key: 401 without / with a wrong key, /health open', async () => {
  const r = await postJson(base, '/generate', { inputs: PROMPT });
  assert.equal(r.status, 401);
  assert.equal(r.json.error_type, 'authentication');
  assert.equal(r.headers.get('www-authenticate'), 'Bearer');  // RFC 7235 §3.1
  assert.equal((await postJson(base, '/v1/completions', { prompt: 'x' }, { authorization: 'Bearer nope' })).status, 401);
  assert.equal((await postJson(base, '/v1/completions', { prompt: 'x' }, { authorization: `Basic ${srvKey}` })).status, 401);
  // The scheme name is case-insensitive (RFC 7235 §2.1).
  const lower = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 10 } }, { authorization: `bearer ${srvKey}` });
  assert.equal(lower.status, 200);
  assert.equal(lower.json.generated_text, ref.generated_text);
  assert.equal((await fetch(base + '/health')).status, 200);
  assert.equal(typeof ref.generated_text, 'string');
  // A malformed head is a 400 before any key is looked at (a framing fault is the server's to name).
  const { connect } = await import('node:net');
  const url = new URL(base);
  const reply = await new Promise((resolve) => {
    const sock = connect(Number(url.port), url.hostname, () =>
      sock.write('POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'));
    let data = '';
    sock.on('data', (d) => { data += d; });
    sock.on('error', () => resolve(data));
    sock.on('close', () => resolve(data));
  });
  assert.match(reply, /^HTTP\/1\.1 400 [^]*conflicting Content-Length headers/, reply);
});

const OpenAIModule = requireNode('openai');
const OpenAI = OpenAIModule.OpenAI ?? OpenAIModule.default ?? OpenAIModule;
const client = new OpenAI({ baseURL: base + '/v1', apiKey: srvKey, maxRetries: 0, timeout: 30000 });

await check('openai: completions.create (non-stream and stream)', async () => {
  const c = await client.completions.create({ model: 'mamba', prompt: PROMPT, max_tokens: 10, temperature: 0 });
  assert.equal(c.choices[0].text, ref.generated_text);
  assert.equal(c.usage.completion_tokens, 10);
  const stream = await client.completions.create({ model: 'mamba', prompt: PROMPT, max_tokens: 10, temperature: 0, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, ref.generated_text);
  assert.equal(finish, 'length');
});

await check('openai: chat.completions.create (non-stream and stream)', async () => {
  const messages = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Begin.' }];
  const c = await client.chat.completions.create({ model: 'mamba', messages, max_tokens: 8, temperature: 0 });
  const content = c.choices[0].message.content;
  assert.equal(typeof content, 'string');
  assert.equal(c.choices[0].message.role, 'assistant');
  const stream = await client.chat.completions.create({ model: 'mamba', messages, max_tokens: 8, temperature: 0, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, content);
});

await check('openai: _request_id / requestID read x-request-id (the body\'s id, or the one the client sent)', async () => {
  const c = await client.completions.create({ model: 'mamba', prompt: PROMPT, max_tokens: 2 });
  assert.match(c._request_id, /^cmpl-/);
  assert.equal(c._request_id, c.id);  // null before the header
  const mine = await client.chat.completions.create({ model: 'mamba', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 },
                                                    { headers: { 'x-request-id': 'my-trace-0001' } });
  assert.equal(mine._request_id, 'my-trace-0001');
  assert.match(mine.id, /^chatcmpl-/);  // the body's id stays the server's
  const { data: stream, request_id } = await client.completions.create({ model: 'mamba', prompt: PROMPT, max_tokens: 2, stream: true }).withResponse();
  for await (const chunk of stream) assert.equal(chunk.id, request_id);
  await assert.rejects(client.completions.create({ model: 'mamba', prompt: PROMPT, n: 100000 }, { headers: { 'x-request-id': 'my-trace-0002' } }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.requestID, 'my-trace-0002');
    return true;
  });
});

await check('openai: n choices (non-stream and stream, told apart by index)', async () => {
  const c = await client.completions.create({ model: 'mamba', prompt: PROMPT, max_tokens: 6, n: 2, seed: 11 });
  assert.deepEqual(c.choices.map((x) => x.index), [0, 1]);
  const texts = ['', ''];
  const stream = await client.completions.create({ model: 'mamba', prompt: PROMPT, max_tokens: 6, n: 2, seed: 11, stream: true });
  for await (const chunk of stream) for (const x of chunk.choices) texts[x.index] += x.text;
  assert.deepEqual(texts, c.choices.map((x) => x.text));
});

await check('openai: errors surface as APIErrors with OpenAI\'s message, type, param and code (n=100000 → 400 BadRequestError, a wrong key → 401)', async () => {
  // The /v1 routes answer errors in OpenAI's shape, so the SDK reads the message as such (with TGI's
  // {error: "..."} it showed the JSON string, quotes included) and `type` / `code` are set.
  const n2 = /`n` must be at most \d+ \(--max-concurrent-requests: each choice is a sequence of its own\), got 100000/;
  for (const stream of [false, true]) {
    await assert.rejects(client.completions.create({ model: 'mamba', prompt: PROMPT, n: 100000, stream }), (e) => {
      // BadRequestError, as from OpenAI, vLLM and llama.cpp (code catching it missed the 422s).
      assert.ok(e instanceof OpenAI.BadRequestError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 400);
      assert.match(e.message, new RegExp('^400 ' + n2.source + '$'));
      assert.equal(e.type, 'invalid_request_error');
      assert.equal(e.code, 'validation');
      assert.equal(e.param, 'n');
      return true;
    });
  }
  const wrongKey = new OpenAI({ apiKey: 'nope', baseURL: base + '/v1', maxRetries: 0 });
  await assert.rejects(wrongKey.chat.completions.create({ model: 'mamba', messages: [{ role: 'user', content: 'hi' }] }), (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.type, 'authentication_error');
    assert.equal(e.code, 'invalid_api_key');  // OpenAI's code for it
    assert.match(e.message, /^401 missing or invalid API key/);
    return true;
  });
});

await check('@huggingface/inference v2: textGeneration / textGenerationStream on TGI routes', async () => {
  const hf2 = requireNode('hf-inference-v2');
  const args = { model: 'mamba', endpointUrl: base + '/', accessToken: srvKey, inputs: PROMPT, parameters: { max_new_tokens: 10 } };
  const out = await hf2.textGeneration(args);
  assert.equal(out.generated_text, ref.generated_text);
  let text = '';
  let last;
  for await (const ev of hf2.textGenerationStream(args)) {
    text += ev.token.text;
    last = ev;
  }
  assert.equal(text, ref.generated_text);
  assert.equal(last.generated_text, ref.generated_text);
  const viaGenerate = await hf2.textGeneration({ ...args, endpointUrl: base + '/generate' });
  assert.equal(viaGenerate.generated_text, ref.generated_text);
});

await check('@huggingface/inference (current): textGeneration / textGenerationStream', async () => {
  const { InferenceClient } = requireNode('@huggingface/inference');
  const hf = new InferenceClient(srvKey, { endpointUrl: base });
  const out = await hf.textGeneration({ inputs: PROMPT, parameters: { max_new_tokens: 10, temperature: 0 } });
  assert.equal(out.generated_text, ref.generated_text);
  let text = '';
  for await (const ev of hf.textGenerationStream({ inputs: PROMPT, parameters: { max_new_tokens: 10, temperature: 0 } })) {
    text += ev.choices?.[0]?.text ?? ev.token?.text ?? '';
  }
  assert.equal(text, ref.generated_text);
});

await check('--cors-allow-origin: a preflight needs no key; allowed pages read answers (errors and streams too), others do not', async () => {
  const pre = await fetch(base + '/v1/chat/completions', {
    method: 'OPTIONS',
    headers: { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, x-stainless-os' },
  });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), APP);
  assert.equal(pre.headers.get('access-control-allow-methods'), 'POST');
  assert.equal(pre.headers.get('access-control-allow-headers'), 'authorization, content-type, x-stainless-os');
  // A path that is no route: the preflight passes, so the page can read the request's 404.
  const nope = await fetch(base + '/v1/nope', { method: 'OPTIONS', headers: { origin: APP, 'access-control-request-method': 'POST' } });
  assert.equal(nope.status, 204);
  const missing = await postJson(base, '/v1/nope', {}, { ...auth, origin: APP });
  assert.equal(missing.status, 404);
  assert.equal(missing.headers.get('access-control-allow-origin'), APP);
  const denied = await fetch(base + '/generate', { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' } });
  assert.equal(denied.status, 403);
  assert.equal(denied.headers.get('access-control-allow-origin'), null);
  assert.equal((await denied.json()).error_type, 'forbidden');
  assert.match(srv.log(), /refused OPTIONS \/generate client=127\.0\.0\.1 status=403 error_type=forbidden error="origin 'http:\/\/evil\.example' is not allowed/);
  // The page can read a 401's JSON (the Allow-Origin is on every answer) and a result with its token counts.
  const unauth = await postJson(base, '/generate', { inputs: PROMPT }, { origin: APP });
  assert.equal(unauth.status, 401);
  assert.equal(unauth.headers.get('access-control-allow-origin'), APP);
  const ok = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 10 } }, { ...auth, origin: 'http://other.example' });
  assert.equal(ok.status, 200);
  assert.equal(ok.json.generated_text, ref.generated_text);
  assert.equal(ok.headers.get('access-control-allow-origin'), 'http://other.example');
  assert.match(ok.headers.get('access-control-expose-headers'), /x-generated-tokens/);
  assert.match(ok.headers.get('access-control-expose-headers'), /(^|, )x-request-id(,|$)/);  // a page reads the request's id
  assert.match(ok.headers.get('x-request-id'), /^req-/);
  assert.equal(ok.headers.get('vary'), 'Origin, Accept-Encoding');  // JSON may go out compressed
  const stream = await fetch(base + '/generate_stream', {
    method: 'POST',
    headers: { ...auth, origin: APP, 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: PROMPT, parameters: { max_new_tokens: 3 } }),
  });
  assert.equal(stream.headers.get('access-control-allow-origin'), APP);
  assert.match(await stream.text(), /"generated_text":"/);
  // Another origin, or none (curl, SDKs outside a browser): no Allow-Origin, the same answer.
  const evil = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 10 } }, { ...auth, origin: 'http://evil.example' });
  assert.equal(evil.status, 200);
  assert.equal(evil.headers.get('access-control-allow-origin'), null);
  assert.equal((await fetch(base + '/health')).headers.get('access-control-allow-origin'), null);
});

const ex = await srv.stop();
await check('SIGTERM exits 0', async () => assert.equal(ex.code, 0));
exitWithChecks();
