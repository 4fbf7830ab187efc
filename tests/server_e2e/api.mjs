// End-to-end: every endpoint's happy path and its validation errors against a real mamba-server
// (embedded model), at the HTTP level. Bad input gets a 4xx with TGI's {error, error_type} (OpenAI's
// {error: {message, type, param, code}} under /v1) and the
// server keeps serving.
import assert from 'node:assert/strict';
import { deadline, startServer, postJson, postSse, metrics, check, exitWithChecks, apiError, waitFor } from './lib.mjs';

deadline(120);
const srv = await startServer(['--max-concurrent-requests', '16']);
const { base } = srv;
const PROMPT = 'It was a dark and stormy night';

await check('GET /health, GET and POST /ping (vLLM\'s), GET /version', async () => {
  const r = await fetch(base + '/health');
  assert.equal(r.status, 200);
  for (const method of ['GET', 'POST']) assert.equal((await fetch(base + '/ping', { method })).status, 200, method);
  const v = await fetch(base + '/version');
  assert.equal(v.status, 200);
  assert.match((await v.json()).version, /^\d+\.\d+\.\d+$/);
});

await check('GET /info', async () => {
  const j = await (await fetch(base + '/info')).json();
  assert.equal(j.model_id, 'mamba2-books-7m-bpe8k');
  assert.equal(j.max_stop_sequences, 4);
  assert.equal(j.max_best_of, 2);  // --max-best-of's default, TGI's
  assert.ok(j.state_slots >= 1);
  assert.equal(j.model_pipeline_tag, 'text-generation');
  // The default precision (auto) computes this bf16 checkpoint in the bf16 tier on a CPU with
  // AVX-512 BF16, exactly elsewhere; model_dtype names the tier's compute dtype.
  const want = /cpu: avx512 \([^\n]*BF16 yes/.test(srv.log()) ? 'bf16' : 'exact';
  assert.equal(j.precision, want, srv.log());
  assert.equal(j.model_dtype, want === 'bf16' ? 'bfloat16' : 'float32');
  assert.match(srv.log(), new RegExp(`precision: ${want} \\(auto: [^)]+\\); compute threads`), srv.log());
  // auto's memory check counted the state slots the server then allocated (LoadOptions::reserve_bytes).
  const counted = srv.log().match(/; counted (\d+) MiB of state slots, (\d+) MiB of prefix cache\)/), pool = srv.log().match(/allocating \d+ state slots? \((\d+) MiB\)/);
  assert.ok(counted && pool, srv.log());
  assert.equal(counted[1], pool[1], srv.log());
  const exact = await startServer(['--precision', 'exact']);
  try {
    const e = await (await fetch(exact.base + '/info')).json();
    assert.equal(e.precision, 'exact');
    assert.equal(e.model_dtype, 'float32');
  } finally {
    await exact.stop();
  }
});

await check('GET /v1/models', async () => {
  const j = await (await fetch(base + '/v1/models')).json();
  assert.equal(j.object, 'list');
  assert.equal(j.data[0].id, 'mamba2-books-7m-bpe8k');
  assert.equal(j.data[0].object, 'model');
  // The OpenAI SDK's models.retrieve: the served model by its id; another id is a JSON 404.
  const one = await fetch(base + '/v1/models/' + j.data[0].id);
  assert.equal(one.status, 200);
  assert.deepEqual(await one.json(), j.data[0]);
  const other = await fetch(base + '/v1/models/' + j.data[0].id + 'x');
  assert.equal(other.status, 404);
  const oe = apiError('/v1/models/x', await other.json());
  assert.equal(oe.message, `no model '${j.data[0].id}x' here: this server serves '${j.data[0].id}' (GET /v1/models)`);
  assert.equal(oe.type, 'not_found');
  assert.equal(oe.openaiType, 'not_found_error');
});

await check('a stream whose text is held back (a stop string may be starting) sends pings, and ends when its client leaves', async () => {
  // Every token is "x" (logit_bias) and the stop string starts with 5000 of them: the OpenAI route
  // writes no event while they may still become the stop. It wrote nothing at all, so a client that
  // left went unseen and its sequence generated to max_tokens (100 000 here).
  const x = (await postJson(base, '/tokenize', { inputs: 'x', add_special_tokens: false })).json;
  assert.equal(x.length, 1);
  const ctrl = new AbortController();
  const res = await fetch(base + '/v1/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: PROMPT, max_tokens: 100000, temperature: 0, logit_bias: { [x[0].id]: 100 },
                           stop: ['x'.repeat(5000) + 'END'], stream: true }),
    signal: ctrl.signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  let got = '';
  const t0 = Date.now();
  while (!got.includes(': ping') && Date.now() - t0 < 5000) {
    const { value, done } = await reader.read();
    if (done) break;
    got += new TextDecoder().decode(value);
  }
  assert.ok(got.includes(': ping\n\n'), `no heartbeat in 5 s: ${JSON.stringify(got.slice(0, 200))}`);
  assert.ok(!got.includes('"text":"x'), 'the held-back text was sent');
  ctrl.abort();
  assert.ok(await waitFor(async () => (await metrics(base)).mamba_running_sequences === 0, { timeoutMs: 8000 }),
            'the sequence of a client that left kept running');
});

await check('POST /tokenize', async () => {
  const r = await postJson(base, '/tokenize', { inputs: PROMPT });
  assert.equal(r.status, 200);
  assert.ok(Array.isArray(r.json) && r.json.length > 3);
  assert.equal(r.json.map((t) => t.text).join(''), PROMPT);
  for (const t of r.json) assert.ok(Number.isInteger(t.id) && t.stop >= t.start);
  // Input the tokenizer's NFC changes ("e" + U+0301 → "é"): byte spans of the input as sent (they
  // were the NFC text's, one byte short after the first word), and the echo's text_offset alike.
  const nfd = 'e\u0301 caf\u00e9';
  const t = await postJson(base, '/tokenize', { inputs: nfd });
  assert.deepEqual(t.json.map((x) => [x.start, x.stop]), [[0, 3], [3, 6], [6, 9]], JSON.stringify(t.json));
  const e = await postJson(base, '/v1/completions', { prompt: nfd, max_tokens: 0, echo: true, logprobs: 0 });
  assert.equal(e.json.choices[0].text, nfd);
  assert.deepEqual(e.json.choices[0].logprobs.text_offset, [0, 2, 5]);
  // TGI's `inputs` and vLLM's `prompt` together: refused, not one of them silently dropped.
  const both = await postJson(base, '/tokenize', { inputs: 'a', prompt: 'b' });
  assert.equal(both.status, 422, both.text);
  assert.match(both.json.error, /either `inputs` .* or `prompt` .*not both/);
});

await check('a large answer (details and top tokens of 4000 tokens, ~1.7 MB) arrives whole, as application/json', async () => {
  const r = await postJson(base, '/generate', {
    inputs: PROMPT,
    parameters: { max_new_tokens: 4000, details: true, top_n_tokens: 5, do_sample: true, temperature: 1.0, seed: 1 },
  });
  assert.equal(r.status, 200, r.text.slice(0, 200));
  assert.equal(r.headers.get('content-type'), 'application/json');
  const d = r.json.details;
  assert.equal(d.tokens.length, d.generated_tokens);
  assert.equal(d.top_tokens.length, d.generated_tokens);
  if (d.finish_reason === 'length') assert.ok(r.text.length >= 1 << 20, `${r.text.length} bytes for 4000 tokens`);
  // The heap trim after a large answer runs on its own thread: the server goes on serving.
  const again = await postJson(base, '/v1/completions', { prompt: PROMPT, max_tokens: 4 });
  assert.equal(again.status, 200);
  assert.equal(again.headers.get('content-type'), 'application/json');
});

let greedy;
await check('POST /generate with details, prefill and top tokens', async () => {
  const r = await postJson(base, '/generate', {
    inputs: PROMPT,
    parameters: { max_new_tokens: 12, details: true, decoder_input_details: true, top_n_tokens: 3 },
  });
  assert.equal(r.status, 200, r.text);
  greedy = r.json;
  const d = r.json.details;
  assert.equal(typeof r.json.generated_text, 'string');
  assert.ok(['length', 'eos_token'].includes(d.finish_reason));
  assert.equal(d.generated_tokens, d.tokens.length);
  assert.equal(d.seed, null);  // greedy
  const toks = (await postJson(base, '/tokenize', { inputs: PROMPT })).json;
  assert.deepEqual(d.prefill.map((t) => t.id), toks.map((t) => t.id));
  assert.equal(d.prefill[0].logprob, null);
  for (const t of d.prefill.slice(1)) assert.ok(t.logprob <= 0);
  for (const [i, t] of d.tokens.entries()) {
    assert.ok(t.logprob <= 0 && typeof t.special === 'boolean');
    assert.equal(d.top_tokens[i].length, 3);
    assert.equal(d.top_tokens[i][0].id, t.id, 'greedy token is the top-1');
    assert.equal(d.top_tokens[i][0].logprob, t.logprob);
  }
  for (const h of ['x-compute-time', 'x-prompt-tokens', 'x-generated-tokens', 'x-time-per-token', 'x-queue-time', 'x-compute-type']) {
    assert.ok(r.headers.get(h) !== null, `header ${h}`);
  }
  assert.equal(Number(r.headers.get('x-prompt-tokens')), toks.length);
  assert.equal(Number(r.headers.get('x-generated-tokens')), d.generated_tokens);
  // TGI's member order (its Details struct); without `details` the answer has no such member (TGI
  // skips a None), on / (a one-element array) too; details without top_n_tokens has no top_tokens.
  assert.deepEqual(Object.keys(d), ['finish_reason', 'generated_tokens', 'seed', 'prefill', 'tokens', 'top_tokens']);
  // Each token's members in TGI's order (its Token and PrefillToken structs), not sorted by name.
  assert.deepEqual(Object.keys(d.tokens[0]), ['id', 'text', 'logprob', 'special']);
  assert.deepEqual(Object.keys(d.top_tokens[0][0]), ['id', 'text', 'logprob', 'special']);
  assert.deepEqual(Object.keys(d.prefill[0]), ['id', 'text', 'logprob']);
  const plain = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 12 } });
  assert.deepEqual(plain.json, { generated_text: r.json.generated_text });
  const compat = await postJson(base, '/', { inputs: PROMPT, parameters: { max_new_tokens: 12, details: true } });
  assert.deepEqual(Object.keys(compat.json[0].details), ['finish_reason', 'generated_tokens', 'seed', 'prefill', 'tokens']);
  assert.deepEqual(compat.json[0].details.tokens, d.tokens);
});

await check('TGI best_of: the sequence whose logprobs sum highest, the others in details.best_of_sequences; refused as TGI refuses it', async () => {
  const params = { max_new_tokens: 8, do_sample: true, temperature: 1.5, details: true, decoder_input_details: true, return_full_text: true };
  const sum = (tokens) => tokens.reduce((a, t) => a + t.logprob, 0);
  let differed = false;
  for (let round = 0; round < 4 && !differed; ++round) {
    const r = await postJson(base, '/generate', { inputs: PROMPT, parameters: { ...params, best_of: 2 } });
    assert.equal(r.status, 200, r.text);
    const d = r.json.details;
    assert.deepEqual(Object.keys(d), ['finish_reason', 'generated_tokens', 'seed', 'prefill', 'tokens', 'best_of_sequences']);
    assert.equal(d.best_of_sequences.length, 1);
    const other = d.best_of_sequences[0];
    assert.deepEqual(Object.keys(other), ['generated_text', 'finish_reason', 'generated_tokens', 'seed', 'prefill', 'tokens']);
    assert.ok(sum(d.tokens) >= sum(other.tokens), `${sum(d.tokens)} < ${sum(other.tokens)}`);
    assert.ok(r.json.generated_text.startsWith(PROMPT) && other.generated_text.startsWith(PROMPT));  // return_full_text, both
    assert.deepEqual(other.prefill, d.prefill);  // the prompt prefilled once for both
    assert.equal(Number(r.headers.get('x-generated-tokens')), d.generated_tokens);
    assert.notEqual(d.seed, other.seed);  // each its own random seed
    differed = r.json.generated_text !== other.generated_text;
  }
  assert.ok(differed, 'two sampled sequences at temperature 1.5 were the same 4 times');
  // Without details, the answer is the text alone; the compat route / takes best_of too.
  const plain = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 4, do_sample: true, best_of: 2 } });
  assert.deepEqual(Object.keys(plain.json), ['generated_text']);
  const compat = await postJson(base, '/', { inputs: PROMPT, parameters: { max_new_tokens: 4, do_sample: true, best_of: 2, details: true } });
  assert.equal(compat.status, 200, compat.text);
  assert.equal(compat.json[0].details.best_of_sequences.length, 1);
  for (const [route, parameters, message] of [
    ['/generate', { best_of: 2 }, 'you must use sampling when `best_of` is > 1 (do_sample, or a temperature other than 1, top_k, top_p or typical_p)'],
    ['/generate', { best_of: 2, do_sample: true, seed: 1 }, '`seed` must not be set when `best_of` > 1'],
    ['/generate', { best_of: 3, do_sample: true }, '`best_of` must be > 0 and <= 2 (--max-best-of), given: 3'],
    ['/generate_stream', { best_of: 2, do_sample: true }, '`best_of` != 1 is not supported when streaming tokens'],
  ]) {
    const e = await postJson(base, route, { inputs: PROMPT, parameters });
    assert.equal(e.status, 422, `${JSON.stringify(parameters)}: ${e.text}`);
    assert.equal(e.json.error, message);
  }
});

await check('prefix cache: a prompt that begins with an earlier one starts from its kept state; the answer is bitwise the uncached one', async () => {
  const metric = async (name) => Number((await (await fetch(base + '/metrics')).text()).match(new RegExp(`^${name} (\\S+)$`, 'm'))[1]);
  const hits0 = await metric('mamba_prefix_cache_hits_total');
  const long = Array(16).fill(PROMPT).join('. ') + ' and';  // > 64 tokens: one whole SSD chunk (chunk_size 64) is kept
  const body = { prompt: long, max_tokens: 6, temperature: 0, logprobs: 2 };
  const first = await postJson(base, '/v1/completions', body);
  assert.equal(first.status, 200, first.text);
  assert.equal(first.json.usage.prompt_tokens_details.cached_tokens, 0);
  const again = await postJson(base, '/v1/completions', body);
  assert.equal(again.status, 200, again.text);
  const kept = Math.floor((again.json.usage.prompt_tokens - 1) / 64) * 64;
  assert.ok(kept >= 64, `${again.json.usage.prompt_tokens} prompt tokens`);
  assert.equal(again.json.usage.prompt_tokens_details.cached_tokens, kept);
  assert.equal(again.json.choices[0].text, first.json.choices[0].text);
  assert.deepEqual(again.json.choices[0].logprobs, first.json.choices[0].logprobs);  // bitwise: the same floats
  // A longer prompt that begins with it (the next turn) on the TGI route: its details are those of
  // a server that prefilled everything (the same request after the cache is bypassed by
  // decoder_input_details, which needs every prompt position's logits).
  const next = { inputs: long + ' the wind', parameters: { max_new_tokens: 5, details: true } };
  const cached = await postJson(base, '/generate', next);
  const whole = await postJson(base, '/generate', { ...next, parameters: { ...next.parameters, decoder_input_details: true } });
  assert.equal(cached.status, 200, cached.text);
  assert.deepEqual(cached.json.details.tokens, whole.json.details.tokens);
  assert.equal(await metric('mamba_prefix_cache_hits_total'), hits0 + 2);
  assert.ok(await metric('mamba_prefix_cache_entries') >= 1);
  assert.ok(/req=\d+ route=\/v1\/completions .* cached_tokens=\d+/.test(srv.log()), srv.log().slice(-800));
});

await check('POST /generate_stream: concatenated tokens == generated_text == /generate', async () => {
  const s = await postSse(base, '/generate_stream', { inputs: PROMPT, parameters: { max_new_tokens: 12, details: true } });
  assert.equal(s.status, 200);
  const evs = s.events;
  assert.equal(evs.length, greedy.details.generated_tokens);
  // TGI's StreamResponse and Token member order.
  assert.deepEqual(Object.keys(evs[0]), ['index', 'token', 'generated_text', 'details']);
  assert.deepEqual(Object.keys(evs[0].token), ['id', 'text', 'logprob', 'special']);
  evs.forEach((e, i) => {
    assert.equal(e.index, i + 1);
    assert.equal(e.token.id, greedy.details.tokens[i].id);
    assert.equal(e.token.logprob, greedy.details.tokens[i].logprob);
    if (i < evs.length - 1) {
      assert.equal(e.generated_text, null);
      assert.equal(e.details, null);
    }
  });
  const last = evs.at(-1);
  assert.equal(last.generated_text, greedy.generated_text);
  // The generated text leaves special tokens out; a special token's event carries its text (TGI).
  assert.equal(evs.filter((e) => !e.token.special).map((e) => e.token.text).join(''), greedy.generated_text);
  evs.forEach((e, i) => { if (e.token.special) assert.equal(e.token.text, greedy.details.tokens[i].text); });
  assert.equal(last.details.finish_reason, greedy.details.finish_reason);
  assert.equal(last.details.generated_tokens, greedy.details.generated_tokens);
});

await check('stop sequence spanning tokens: TGI ends the text with it, OpenAI leaves it out; stream == non-stream', async () => {
  const full = (await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 24 } })).json.generated_text;
  assert.ok(full.length > 12, full);
  const stop = full.slice(5, 11);  // a piece from the middle of the text, likely spanning tokens
  const before = full.slice(0, full.indexOf(stop));
  const o = await postJson(base, '/v1/completions', { prompt: PROMPT, max_tokens: 24, temperature: 0, stop: [stop] });
  assert.equal(o.json.choices[0].text, before);
  assert.equal(o.json.choices[0].finish_reason, 'stop');
  const cut = before + stop;  // TGI: generated_text includes the stop sequence
  const r = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 24, stop: [stop], details: true } });
  assert.equal(r.json.generated_text, cut);
  assert.equal(r.json.details.finish_reason, 'stop_sequence');
  const s = await postSse(base, '/generate_stream', { inputs: PROMPT, parameters: { max_new_tokens: 24, stop: [stop] } });
  const text = s.events.map((e) => e.token.text).join('');
  assert.equal(text, cut);
  assert.equal(s.events.at(-1).generated_text, cut);
  // no event ever carried text past the stop
  let acc = '';
  for (const e of s.events) {
    acc += e.token.text;
    assert.ok(cut.startsWith(acc));
  }
});

await check('POST / (compat): array answer, and stream flag', async () => {
  const r = await postJson(base, '/', { inputs: PROMPT, parameters: { max_new_tokens: 12 } });
  assert.equal(r.status, 200);
  assert.ok(Array.isArray(r.json));
  assert.equal(r.json[0].generated_text, greedy.generated_text);
  const s = await postSse(base, '/', { inputs: PROMPT, parameters: { max_new_tokens: 12 }, stream: true });
  assert.equal(s.events.at(-1).generated_text, greedy.generated_text);
});

await check('return_full_text and seeded sampling', async () => {
  const r = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 12, return_full_text: true } });
  assert.equal(r.json.generated_text, PROMPT + greedy.generated_text);
  const p = { inputs: PROMPT, parameters: { max_new_tokens: 16, do_sample: true, temperature: 0.9, top_k: 40, seed: 1234, details: true } };
  const a = (await postJson(base, '/generate', p)).json;
  const b = (await postJson(base, '/generate', p)).json;
  assert.equal(a.details.seed, 1234);
  assert.deepEqual(a.details.tokens, b.details.tokens);
});

await check('POST /v1/completions (stream and not)', async () => {
  const body = { model: 'x', prompt: PROMPT, max_tokens: 12, temperature: 0, logprobs: 2 };
  const r = await postJson(base, '/v1/completions', body);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.object, 'text_completion');
  assert.equal(r.json.model, 'mamba2-books-7m-bpe8k', 'the served model, not the name asked for ("x")');
  assert.equal(r.json.choices[0].text, greedy.generated_text);
  assert.equal(r.json.usage.completion_tokens, greedy.details.generated_tokens);
  assert.equal(r.json.usage.total_tokens, r.json.usage.prompt_tokens + r.json.usage.completion_tokens);
  assert.deepEqual(r.json.choices[0].logprobs.token_logprobs, greedy.details.tokens.map((t) => t.logprob));
  const s = await postSse(base, '/v1/completions', { ...body, stream: true, stream_options: { include_usage: true } });
  assert.equal(s.events.at(-1), '[DONE]');
  const chunks = s.events.slice(0, -1);
  chunks.forEach((c, i) => assert.equal(c.model, 'mamba2-books-7m-bpe8k', `chunk ${i}: the served model`));
  assert.equal(chunks.filter((c) => c.choices.length).map((c) => c.choices[0].text).join(''), greedy.generated_text);
  assert.equal(chunks.at(-1).usage.completion_tokens, greedy.details.generated_tokens);
  assert.ok(['stop', 'length'].includes(chunks.at(-2).choices[0].finish_reason));
  chunks.slice(0, -1).forEach((c, i) => assert.equal(c.usage, null, `chunk ${i}: "usage": null before the last (OpenAI)`));
});

await check('text_offset: where each token starts in text, also while a stop string holds text back', async () => {
  const body = { model: 'x', prompt: 'It was a dark', max_tokens: 6, temperature: 0, logprobs: 0 };
  const a = await postJson(base, '/v1/completions', body);
  assert.equal(a.status, 200, a.text);
  const plain = a.json.choices[0];
  assert.ok([...plain.text].length >= 5, plain.text);
  // A stop string that begins with the text's 2nd–5th characters and never completes: those are held
  // back until the mismatch, which must not move any token's offset.
  const stop = [...plain.text].slice(1, 5).join('') + '\u0001';
  const b = await postJson(base, '/v1/completions', { ...body, stop: [stop] });
  assert.equal(b.status, 200, b.text);
  assert.equal(b.json.choices[0].text, plain.text);
  assert.deepEqual(b.json.choices[0].logprobs.text_offset, plain.logprobs.text_offset);
  const s = await postSse(base, '/v1/completions', { ...body, stop: [stop], stream: true });
  const offs = s.events.slice(0, -1).flatMap((c) => (c.choices[0]?.logprobs ? c.choices[0].logprobs.text_offset : []));
  assert.deepEqual(offs, plain.logprobs.text_offset);
});

await check('OpenAI `n`: n choices, choice i the text of seed + i, the prompt counted once; streamed the same', async () => {
  const body = { model: 'x', prompt: 'Once upon a time', max_tokens: 8, n: 3, seed: 7, logprobs: 1 };
  const r = await postJson(base, '/v1/completions', body);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.choices.map((c) => c.index), [0, 1, 2]);
  let completion = 0;
  for (let i = 0; i < 3; ++i) {
    const one = await postJson(base, '/v1/completions', { ...body, n: 1, seed: 7 + i });
    assert.equal(one.status, 200, one.text);
    assert.equal(r.json.choices[i].text, one.json.choices[0].text, `choice ${i}`);
    assert.deepEqual(r.json.choices[i].logprobs, one.json.choices[0].logprobs, `choice ${i}`);
    assert.equal(r.json.choices[i].finish_reason, one.json.choices[0].finish_reason);
    assert.equal(r.json.usage.prompt_tokens, one.json.usage.prompt_tokens);
    completion += one.json.usage.completion_tokens;
  }
  assert.equal(r.json.usage.completion_tokens, completion);
  assert.equal(r.json.usage.total_tokens, r.json.usage.prompt_tokens + completion);
  assert.equal(r.headers.get('x-generated-tokens'), String(completion));
  assert.equal(new Set(r.json.choices.map((c) => c.text)).size, 3, 'seeds 7, 8, 9 give three texts: ' + r.text);
  const s = await postSse(base, '/v1/completions', { ...body, stream: true, stream_options: { include_usage: true } });
  assert.equal(s.events.at(-1), '[DONE]');
  assert.equal(s.events.filter((e) => e === '[DONE]').length, 1);
  const chunks = s.events.slice(0, -1);
  assert.deepEqual(chunks.at(-1).choices, []);
  assert.deepEqual(chunks.at(-1).usage, r.json.usage);
  for (let i = 0; i < 3; ++i) {
    const mine = chunks.slice(0, -1).filter((c) => c.choices[0].index === i);
    assert.equal(mine.map((c) => c.choices[0].text).join(''), r.json.choices[i].text, `streamed choice ${i}`);
    assert.equal(mine.at(-1).choices[0].finish_reason, r.json.choices[i].finish_reason);
    assert.deepEqual(mine.flatMap((c) => c.choices[0].logprobs.tokens), r.json.choices[i].logprobs.tokens);
  }
  // Chat: each choice's stream opens with its own role chunk.
  const cb = { model: 'x', messages: [{ role: 'user', content: 'Tell me about the sea.' }], max_tokens: 6, n: 2, seed: 3 };
  const cr = await postJson(base, '/v1/chat/completions', cb);
  assert.equal(cr.status, 200, cr.text);
  assert.deepEqual(cr.json.choices.map((c) => c.index), [0, 1]);
  const cs = await postSse(base, '/v1/chat/completions', { ...cb, stream: true });
  const cc = cs.events.slice(0, -1);
  for (let i = 0; i < 2; ++i) {
    const mine = cc.filter((c) => c.choices[0].index === i);
    assert.equal(mine.filter((c) => c.choices[0].delta.role === 'assistant').length, 1);
    assert.equal(mine[0].choices[0].delta.role, 'assistant');
    assert.equal(mine.map((c) => c.choices[0].delta.content ?? '').join(''), cr.json.choices[i].message.content);
  }
  // Greedy: every choice is the same text (as vLLM).
  const g = await postJson(base, '/v1/completions', { model: 'x', prompt: 'Once upon a time', max_tokens: 6, n: 2, temperature: 0 });
  assert.equal(g.json.choices.length, 2);
  assert.equal(g.json.choices[0].text, g.json.choices[1].text);
});

await check('x-request-id: the client\'s own echoed when valid (streams and errors too, logged), else the body\'s id (OpenAI) or req-<instance>-<n> (TGI)', async () => {
  const chat = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 };
  const tgi = { inputs: PROMPT, parameters: { max_new_tokens: 2 } };
  // None sent: the server's id, the OpenAI body's `id` itself.
  const c = await postJson(base, '/v1/completions', { prompt: PROMPT, max_tokens: 2 });
  assert.equal(c.status, 200, c.text);
  assert.match(c.json.id, /^cmpl-[0-9a-f]{8}-\d+$/);
  assert.equal(c.headers.get('x-request-id'), c.json.id);
  const ch = await postJson(base, '/v1/chat/completions', chat);
  assert.equal(ch.headers.get('x-request-id'), ch.json.id);
  const g = await postJson(base, '/generate', tgi);
  const instance = c.json.id.split('-')[1];
  assert.match(g.headers.get('x-request-id'), new RegExp(`^req-${instance}-\\d+$`));
  const req = g.headers.get('x-request-id').split('-')[2];
  assert.match(srv.log(), new RegExp(`req=${req} route=/generate client=`));  // the log's request id
  // A stream's head has it too: the chunks' id.
  const plain = await fetch(base + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: PROMPT, max_tokens: 2, stream: true }) });
  const first = JSON.parse((await plain.text()).split('\n\n')[0].slice(5));
  assert.equal(plain.headers.get('x-request-id'), first.id);

  // A valid one sent: echoed unchanged (the body's id stays the server's), in the log line.
  const mine = 'Trace-42/abc:DEF_7.x~' + 'z'.repeat(100);  // 122 visible ASCII bytes
  const e = await postJson(base, '/v1/completions', { prompt: PROMPT, max_tokens: 2 }, { 'x-request-id': mine });
  assert.equal(e.status, 200, e.text);
  assert.equal(e.headers.get('x-request-id'), mine);
  assert.match(e.json.id, /^cmpl-[0-9a-f]{8}-\d+$/);
  const req2 = e.json.id.split('-')[2];
  assert.ok(srv.log().split('\n').some((l) => l.includes(`req=${req2} route=/v1/completions client=127.0.0.1 x_request_id=${mine} prompt_tokens=`)), srv.log().slice(-2000));
  assert.equal((await postJson(base, '/generate', tgi, { 'x-request-id': mine })).headers.get('x-request-id'), mine);
  for (const [route, body] of [['/v1/chat/completions', { ...chat, stream: true }], ['/v1/completions', { prompt: PROMPT, max_tokens: 2, stream: true }],
    ['/generate_stream', tgi], ['/', { ...tgi, stream: true }]]) {
    const r = await fetch(base + route, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': mine }, body: JSON.stringify(body) });
    assert.equal(r.status, 200, route);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/, route);
    assert.equal(r.headers.get('x-request-id'), mine, route);
    const text = await r.text();
    if (route.startsWith('/v1')) assert.doesNotMatch(text, new RegExp(mine), route);  // chunk ids stay the server's
  }
  // Errors of these routes: a refused request echoes a valid one (it has no id of the server's yet).
  const bad = await postJson(base, '/v1/completions', { prompt: 'x', n: 0 }, { 'x-request-id': mine });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.headers.get('x-request-id'), mine);
  assert.ok(srv.log().includes(`refused POST /v1/completions client=127.0.0.1 x_request_id=${mine} status=400`), srv.log().slice(-2000));
  assert.equal((await postJson(base, '/generate', { inputs: '' }, { 'x-request-id': mine })).headers.get('x-request-id'), mine);
  assert.equal((await postJson(base, '/v1/completions', { prompt: 'x', n: 0 })).headers.get('x-request-id'), null);

  // An invalid one (too long, a space, a tab, a non-ASCII byte; fetch sends no other control byte, the
  // unit test RequestId covers them): ignored, the server's id sent and nothing logged.
  for (const bogus of ['x'.repeat(200), 'x'.repeat(129), 'a b', 'caf\u00e9', 'a\tb']) {
    const r = await postJson(base, '/v1/chat/completions', chat, { 'x-request-id': bogus });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('x-request-id'), r.json.id, JSON.stringify(bogus));
    const s = await fetch(base + '/generate_stream', { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': bogus }, body: JSON.stringify(tgi) });
    assert.match(s.headers.get('x-request-id'), new RegExp(`^req-${instance}-\\d+$`), JSON.stringify(bogus));
    await s.text();
  }
  assert.doesNotMatch(srv.log(), /x_request_id=(x{129}|a |caf|a\t)/);
  // Other routes carry none.
  assert.equal((await fetch(base + '/health', { headers: { 'x-request-id': mine } })).headers.get('x-request-id'), null);
});

await check('POST /v1/chat/completions (stream and not)', async () => {
  const body = { model: 'x', messages: [{ role: 'user', content: 'Tell me about the sea.' }], max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 2 };
  const r = await postJson(base, '/v1/chat/completions', body);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.object, 'chat.completion');
  assert.equal(r.json.model, 'mamba2-books-7m-bpe8k', 'the served model, not the name asked for ("x")');
  assert.equal(r.json.choices[0].message.role, 'assistant');
  const content = r.json.choices[0].message.content;
  assert.equal(typeof content, 'string');
  assert.equal(r.json.choices[0].logprobs.content.length, r.json.usage.completion_tokens);
  assert.equal(r.json.choices[0].logprobs.content[0].top_logprobs.length, 2);
  // OpenAI's ChatCompletionMessage and its logprobs carry `refusal` (required, nullable).
  assert.strictEqual(r.json.choices[0].message.refusal, null, r.text);
  assert.strictEqual(r.json.choices[0].logprobs.refusal, null, r.text);
  const s = await postSse(base, '/v1/chat/completions', { ...body, stream: true });
  assert.equal(s.events.at(-1), '[DONE]');
  const chunks = s.events.slice(0, -1);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(chunks.map((c) => c.choices[0].delta.content ?? '').join(''), content);
  const withLogprobs = chunks.filter((c) => c.choices[0].logprobs);
  assert.ok(withLogprobs.length > 0);
  withLogprobs.forEach((c) => assert.strictEqual(c.choices[0].logprobs.refusal, null));
  assert.equal(chunks.at(-1).choices[0].finish_reason, r.json.choices[0].finish_reason);
  // Without logprobs, no chunk but the role's and the last carries empty content (a token that
  // released no text yet, e.g. "\n" held back for the "\nUser:" stop, sends nothing).
  const { logprobs, top_logprobs, ...plain } = body;
  const p = await postSse(base, '/v1/chat/completions', { ...plain, max_tokens: 40, stream: true });
  const pc = p.events.slice(0, -1);
  pc.slice(1, -1).forEach((c, i) => assert.notEqual(c.choices[0].delta.content, '', `chunk ${i + 1} is empty`));
  const pr = await postJson(base, '/v1/chat/completions', { ...plain, max_tokens: 40 });
  assert.equal(pc.map((c) => c.choices[0].delta.content ?? '').join(''), pr.json.choices[0].message.content);
});

await check('logit_bias (OpenAI routes): bans and forces tokens; chat logprobs `bytes` are the token\'s own bytes', async () => {
  const body = { prompt: PROMPT, max_tokens: 4, temperature: 0, logprobs: 0 };
  const plain = await postJson(base, '/v1/completions', body);
  assert.equal(plain.status, 200, plain.text);
  const first = plain.json.choices[0].logprobs.tokens[0];
  const greedy = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 1, details: true } });
  const firstId = greedy.json.details.tokens[0].id;
  assert.equal(greedy.json.details.tokens[0].text, first);
  const banned = await postJson(base, '/v1/completions', { ...body, logit_bias: { [firstId]: -100 } });
  assert.equal(banned.status, 200, banned.text);
  assert.notEqual(banned.json.choices[0].logprobs.tokens[0], first, banned.text);
  // Id 160 is the byte 0xE2 alone (the embedded tokenizer's "â"): its text is U+FFFD, its bytes
  // [0xE2] (OpenAI: bytes join across the tokens of one character), not U+FFFD's EF BF BD.
  const chat = await postJson(base, '/v1/chat/completions', {
    messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1, temperature: 0, logprobs: true, top_logprobs: 1, logit_bias: { 160: 100 } });
  assert.equal(chat.status, 200, chat.text);
  const c = chat.json.choices[0].logprobs.content[0];
  assert.equal(c.token, '\uFFFD', chat.text);
  assert.deepEqual(c.bytes, [0xe2], chat.text);
  // The reported logprobs are the model's (raw, as vLLM's default), not the biased ones.
  assert.ok(c.logprob < -1, chat.text);
  // Every entry's `token` is its `bytes` as text (invalid UTF-8 as U+FFFD), for the chosen tokens
  // (here byte tokens, forced) and the candidates alike.
  const many = await postJson(base, '/v1/chat/completions', {
    messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 5, logit_bias: { 160: 100 } });
  const entries = many.json.choices[0].logprobs.content.flatMap((e) => [e, ...e.top_logprobs]);
  assert.equal(entries.length, 18, many.text);
  for (const e of entries) assert.equal(Buffer.from(e.bytes).toString('utf8'), e.token, JSON.stringify(e));
  for (const [bias, mentions] of [[{ 8192: 1 }, 'token id 8192 is outside the vocabulary [0, 8192)'],
                                  [{ 5: 101 }, 'between -100 and 100'], [{ x: 1 }, 'keys must be token ids']]) {
    const r = await postJson(base, '/v1/completions', { ...body, logit_bias: bias });
    assert.equal(r.status, 400, r.text);  // OpenAI's, vLLM's and llama.cpp's status for a bad parameter
    assert.ok(apiError('/v1/completions', r.json).message.includes(mentions), r.text);
  }
});

const bad = [
  ['/generate', '{"inputs": "x", "parameters": {"max_new_tokens": ', 400],  // truncated JSON
  ['/generate', '[]', 400],
  ['/generate', '', 400],
  ['/generate', '{"inputs": 12}', 422],  // wrong type
  ['/generate', '{"inputs": ""}', 422],  // empty prompt
  ['/generate', '{"inputs": "x", "parameters": {"max_new_tokens": -1}}', 422],
  ['/generate', '{"inputs": "x", "parameters": {"max_new_tokens": 1e999}}', 400],
  ['/generate', '{"inputs": "x", "parameters": {"max_new_tokens": 123456789012345678901234567890}}', 422],
  ['/generate', '{"inputs": "x", "parameters": {"temperature": "hot"}}', 422],
  ['/generate', '{"inputs": "x", "parameters": {"top_p": 1.5}}', 422],
  ['/generate', '{"inputs": "x", "parameters": {"stop": ["a","b","c","d","e"]}}', 422],
  ['/generate', '{"inputs": "x", "parameters": {"best_of": 2}}', 422],  // greedy
  ['/generate', '{"inputs": "x", "parameters": {"best_of": 2, "do_sample": true, "n": 2}}', 422],
  ['/generate', '{"inputs": "x", "parameters": {"max_new_tokens": 500000}}', 422],
  ['/generate_stream', '{"inputs": "x", "parameters": {"seed": -1}}', 422],
  ['/generate_stream', '{"inputs": "x", "parameters": {"decoder_input_details": true}}', 422],
  ['/v1/completions', '{"prompt": "x", "n": 0}', 400, '`n` must be'],
  ['/v1/completions', '{"prompt": "x", "n": 100000}', 400, '`n` must be at most'],
  // Any integral n above the limit names it, however large (1e12, past int's range: was "between 1 and 2147483647").
  ['/v1/completions', '{"prompt": "x", "n": 1e12}', 400, '`n` must be at most 16 (--max-concurrent-requests: each choice is a sequence of its own), got 1000000000000'],
  ['/v1/chat/completions', '{"messages": [{"role": "user", "content": "x"}], "n": 2147483648}', 400, '`n` must be at most 16 (--max-concurrent-requests'],
  ['/v1/completions', '{"prompt": "x", "n": 123456789012345678901234567890}', 400, '`n` must be at most 16 (--max-concurrent-requests'],
  ['/v1/completions', '{"prompt": "x", "n": -5}', 400, '`n` must be between 1 and 2147483647, got -5'],
  ['/v1/completions', '{"prompt": "x", "n": "2"}', 400, '`n` must be an integer, got string'],
  ['/v1/completions', '{"prompt": ""}', 400],
  ['/v1/completions', '{"prompt": "x", "max_tokens": -3}', 400],
  ['/v1/chat/completions', '{"messages": []}', 400],
  ['/v1/chat/completions', '{"messages": [{"role": "user", "content": "x"}], "n": 1.5}', 400, '`n` must be'],
  ['/v1/chat/completions', '{"messages": "hello"}', 400],
  ['/v1/chat/completions', '{"messages": [{"role": "user"}]}', 400, 'messages[0].content` is required'],
  ['/v1/chat/completions', '{"messages": [{"role": "user", "content": null}]}', 400, 'messages[0].content` is required'],
  // No tools are offered: a tool_choice that demands a tool call is refused by name, not ignored.
  ['/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"}', 400, '`tool_choice` "required" is not supported'],
  ['/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "function", "function": {"name": "f"}}}', 400, '`tool_choice` naming a function is not supported'],
  ['/v1/completions', '{"prompt": "hi", "tool_choice": "required"}', 400, '`tool_choice` "required" is not supported'],
  ['/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}]}', 400, '`tools` is not supported'],
];
await check('malformed bodies → 4xx with {error, error_type} (OpenAI\'s shape under /v1)', async () => {
  for (const [route, body, status, mentions] of bad) {
    const r = await postJson(base, route, body);
    assert.equal(r.status, status, `${route} ${body} → ${r.status} ${r.text}`);
    const e = apiError(route, r.json);
    if (mentions) assert.ok(e.message.includes(mentions), r.text);
    // A validation error is TGI's 422 on its routes, OpenAI's 400 under /v1 (code: validation).
    assert.equal(e.type, status === 400 && !route.startsWith('/v1') ? 'malformed_request' : 'validation', r.text);
    if (e.openaiType) assert.equal(e.openaiType, 'invalid_request_error', r.text);
  }
  // invalid UTF-8 bytes in the prompt
  const raw = Buffer.concat([Buffer.from('{"inputs": "ab'), Buffer.from([0xff, 0xc3]), Buffer.from('"}')]);
  const r = await postJson(base, '/generate', new Uint8Array(raw));
  assert.ok(r.status >= 400 && r.status < 500, `invalid UTF-8 → ${r.status}`);
  assert.equal(typeof r.json.error, 'string');
});

await check('a refused request is logged on one line (its client text escaped: no forged lines)', async () => {
  const r = await postJson(base, '/v1/completions', { prompt: 'x', logit_bias: { 'a\n[x] [mamba-server] [info] req=1 forged': 1 } });
  assert.equal(r.status, 400, r.text);
  const line = srv.log().split('\n').findLast((l) => l.includes('refused POST /v1/completions client=127.0.0.1 status=400 error_type=validation'));
  assert.ok(line, srv.log().slice(-2000));
  assert.ok(line.endsWith('got \\"a\\n[x] [mamba-server] [info] req=1 forged\\""'), line);
  assert.doesNotMatch(srv.log(), /^\[x\] \[mamba-server\]/m);
});

await check('chat content parts other than text are refused by their type (a text-only model: an image was answered without it)', async () => {
  for (const [part, says] of [
    [{ type: 'image_url', text: 'hi', image_url: { url: 'http://x/y.png' } }, "`messages[0].content[1].type` 'image_url' is not supported"],
    [{ type: 'input_audio', text: 'hi' }, "`messages[0].content[1].type` 'input_audio' is not supported"],
    [{ text: 'hi' }, '`messages[0].content[1]` must be a text part {"type": "text", "text": ...}'],
  ]) {
    const r = await postJson(base, '/v1/chat/completions', { max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, part] }] });
    assert.equal(r.status, 400, r.text);
    assert.ok(apiError('/v1/chat/completions', r.json).message.startsWith(says), r.text);
  }
  const ok = await postJson(base, '/v1/chat/completions', { max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }] });
  assert.equal(ok.status, 200, ok.text);
  // A role is shown cut, as every other value a client sends (it was echoed whole: 2 MB in the answer and the log).
  const role = await postJson(base, '/v1/chat/completions', { messages: [{ role: 'x'.repeat(100000), content: 'y' }] });
  assert.equal(role.status, 400);
  assert.ok(role.text.length < 1000 && role.text.includes('… (100000 bytes)'), role.text.slice(0, 300));
});

await check('an OpenAI client whose base URL lacks /v1 gets an OpenAI-shaped 404 saying where the routes are', async () => {
  for (const path of ['/chat/completions', '/completions', '/models']) {
    const r = await postJson(base, path, {});
    assert.equal(r.status, 404, r.text);
    const e = apiError(path, r.json);
    assert.equal(e.openaiType, 'not_found_error');
    assert.match(e.message, new RegExp(`; the OpenAI routes are under /v1 \\(/v1${path}\\): an OpenAI client's base URL ends in /v1$`));
  }
});

await check('fields the server does not read are logged (as vLLM logs them); a prompt id past the vocabulary names `prompt`', async () => {
  const r = await postJson(base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 1, max_tokenz: 5, user: 'u' });
  assert.equal(r.status, 200, r.text);
  assert.ok(await waitFor(() => /\/v1\/chat\/completions client=127\.0\.0\.1: ignored 1 field the server does not read: "max_tokenz"$/m.test(srv.log())),
            srv.log().slice(-1500));
  // Ids unique across restarts: the server's random instance tag, then the request number.
  assert.match(r.json.id, /^chatcmpl-[0-9a-f]{8}-\d+$/);
  const bad = await postJson(base, '/v1/completions', { prompt: [41, 999999], max_tokens: 1 });
  assert.equal(bad.status, 400, bad.text);
  const e = apiError('/v1/completions', bad.json);
  assert.equal(e.message, '`prompt` token id 999999 is outside the vocabulary [0, 8192)');
  assert.equal(e.param, 'prompt');
});

await check('a malformed JSON body is named without the JSON library\'s tag', async () => {
  const r = await postJson(base, '/v1/completions', '{"prompt": }');
  assert.equal(r.status, 400);
  assert.equal(apiError('/v1/completions', r.json).message,
               "malformed JSON body: parse error at line 1, column 12: syntax error while parsing value - unexpected '}'; expected '[', '{', or a literal");
});

await check('413 for bodies over 8 MiB, 404 JSON for unknown routes', async () => {
  const before = (await metrics(base))['mamba_requests_total{outcome="rejected"}'];
  const big = JSON.stringify({ inputs: 'a'.repeat(9 << 20) });
  const r = await postJson(base, '/generate', big);
  assert.equal(r.status, 413);
  assert.equal(r.json.error_type, 'payload_too_large');
  // A refused body is a rejected request (as the 100-continue path's 413), a 404 is not.
  const n = await postJson(base, '/nope', {});
  assert.equal(n.status, 404);
  assert.equal(typeof n.json.error, 'string');
  assert.equal((await metrics(base))['mamba_requests_total{outcome="rejected"}'], before + 1);
});

await check('x-compute-characters counts characters, as TGI (not UTF-8 bytes)', async () => {
  const r = await postJson(base, '/generate', { inputs: 'Héllo wörld ✓', parameters: { max_new_tokens: 1 } });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('x-compute-characters'), '13');
});

await check('a JSON body over 8 KiB sent as form-urlencoded (curl -d) is served, streamed too', async () => {
  // cpp-httplib 0.11 refuses x-www-form-urlencoded bodies over 8 KiB before routing.
  const req = { inputs: PROMPT + ' x'.repeat(5000), parameters: { max_new_tokens: 3 } };
  const body = JSON.stringify(req);
  assert.ok(body.length > 9000);
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const r = await postJson(base, '/generate', body, form);
  assert.equal(r.status, 200, r.text);
  const want = await postJson(base, '/generate', body);
  assert.equal(r.json.generated_text, want.json.generated_text);
  const { status, events } = await postSse(base, '/generate_stream', req, { headers: form });
  assert.equal(status, 200);
  assert.equal(events.length, 3);
  assert.equal(events[2].generated_text, want.json.generated_text);
  // to an unknown path: its 404 (it was a 413 naming the body limit)
  const nope = await postJson(base, '/nope', body, form);
  assert.equal(nope.status, 404, nope.text);
});

/// Sends `text` as it is over a new connection; resolves with what the server sent once it closed
/// the connection, or (`toFirstBrace`) once the reply holds its JSON body's first '}'.
async function rawExchange(text, toFirstBrace = false) {
  const { connect } = await import('node:net');
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(url.port), url.hostname, () => sock.write(text));
    let data = '';
    sock.on('data', (d) => {
      data += d;
      if (toFirstBrace && data.includes('}')) { sock.destroy(); resolve(data); }
    });
    sock.on('error', reject);
    sock.on('close', () => resolve(data));
  });
}
const rawRequest = (text) => rawExchange(text, true);

await check('a refused Transfer-Encoding (501) is logged as the other refusals', async () => {
  const reply = await rawRequest('POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n');
  assert.match(reply, /^HTTP\/1\.1 501 /, reply);
  assert.ok(await waitFor(() => /refused POST \/generate client=127\.0\.0\.1 status=501 error_type=not_implemented/.test(srv.log())), srv.log().slice(-1500));
});

await check('an invalid Content-Length is a 400 naming the header, at once', async () => {
  for (const cl of ['abc', '-5', '99999999999999999999']) {
    const t0 = Date.now();
    const reply = await rawRequest(`POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: ${cl}\r\n\r\n`);
    assert.match(reply, /^HTTP\/1\.1 400/, `${cl}: ${reply}`);
    assert.ok(reply.includes('invalid Content-Length'), reply);
    if (cl === 'abc') assert.ok(Date.now() - t0 < 2000, `${cl} took ${Date.now() - t0} ms`);
  }
});

await check('completions echo + logprobs: the prompt tokens come first (null, then the prefill logprobs), offsets into the text', async () => {
  const r = await postJson(base, '/v1/completions', { prompt: PROMPT, max_tokens: 3, temperature: 0, logprobs: 2, echo: true });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const c = r.json.choices[0];
  const lp = c.logprobs;
  const tgi = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 3, details: true, decoder_input_details: true } });
  const prefill = tgi.json.details.prefill;
  const n = prefill.length;
  assert.equal(lp.tokens.length, n + 3);
  assert.deepEqual(lp.tokens.slice(0, n), prefill.map((t) => t.text));
  assert.deepEqual(lp.token_logprobs.slice(0, n), prefill.map((t) => t.logprob));
  assert.equal(lp.token_logprobs[0], null);
  // Prompt positions have top_logprobs dicts too (lm-eval's loglikelihood takes max() of each),
  // except the first (nothing before it): the 2 likeliest and the prompt token itself (up to
  // logprobs + 1 entries, as OpenAI's legacy API), none above the likeliest.
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < n; ++i) {
    const top = lp.top_logprobs[i];
    assert.ok([2, 3].includes(Object.keys(top).length), `position ${i}: ${JSON.stringify(top)}`);
    const vals = Object.values(top);
    assert.ok(vals[0] >= vals[1] && vals[0] >= lp.token_logprobs[i], `position ${i}: ${JSON.stringify(top)} vs ${lp.token_logprobs[i]}`);
    assert.equal(top[lp.tokens[i]], lp.token_logprobs[i], `position ${i}: ${JSON.stringify(top)}`);
  }
  assert.equal(Object.keys(lp.top_logprobs[n]).length, 2);
  assert.ok(c.text.startsWith(PROMPT));
  for (let i = 0; i < lp.tokens.length; ++i) {
    const end = i + 1 < lp.tokens.length ? lp.text_offset[i + 1] : c.text.length;
    assert.equal(c.text.slice(lp.text_offset[i], end), lp.tokens[i], `token ${i}`);
  }
  // Streamed, the echo chunk carries the prompt's logprobs (as vLLM), the later chunks the
  // generated tokens': together the non-stream arrays.
  const st = await postSse(base, '/v1/completions', { prompt: PROMPT, max_tokens: 3, temperature: 0, logprobs: 2, echo: true, stream: true });
  const sc = st.events.slice(0, -1).map((e) => e.choices[0]);
  assert.equal(sc[0].text, PROMPT);
  assert.equal(sc[0].logprobs.tokens.length, n, JSON.stringify(sc[0]));
  for (const key of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset'])
    assert.deepEqual(sc.flatMap((ch) => ch.logprobs?.[key] ?? []), lp[key], key);
  // Offsets count characters, not UTF-8 bytes (OpenAI's are Python str indices): curly quotes are
  // 3 bytes each but one character, so a client's slicing still finds each token.
  const q = await postJson(base, '/v1/completions', { prompt: 'He said “hello” to me', max_tokens: 2, temperature: 0, logprobs: 1, echo: true });
  assert.equal(q.status, 200, JSON.stringify(q.json));
  const ql = q.json.choices[0].logprobs, qt = q.json.choices[0].text;
  for (let i = 0; i < ql.tokens.length; ++i) {
    const end = i + 1 < ql.tokens.length ? ql.text_offset[i + 1] : qt.length;
    assert.equal(qt.slice(ql.text_offset[i], end), ql.tokens[i], `token ${i} of ${JSON.stringify(ql.tokens)} at ${JSON.stringify(ql.text_offset)}`);
  }
});

await check('completions echo + max_tokens 0 scores the prompt and generates nothing (as OpenAI\'s legacy API, lm-eval)', async () => {
  const r = await postJson(base, '/v1/completions', { prompt: PROMPT, max_tokens: 0, temperature: 0, logprobs: 1, echo: true });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const c = r.json.choices[0];
  assert.equal(c.text, PROMPT);
  assert.equal(c.finish_reason, 'length');
  assert.equal(r.json.usage.completion_tokens, 0);
  const tgi = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 1, details: true, decoder_input_details: true } });
  const prefill = tgi.json.details.prefill;
  assert.equal(r.json.usage.prompt_tokens, prefill.length);
  assert.deepEqual(c.logprobs.tokens, prefill.map((t) => t.text));
  assert.deepEqual(c.logprobs.token_logprobs, prefill.map((t) => t.logprob));
  assert.equal(c.logprobs.token_logprobs[0], null);
  // Streamed: the echo, then one empty chunk with the finish reason, then the usage.
  const s = await postSse(base, '/v1/completions', { prompt: PROMPT, max_tokens: 0, echo: true, stream: true, stream_options: { include_usage: true } });
  assert.equal(s.events.at(-1), '[DONE]');
  const chunks = s.events.slice(0, -1);
  assert.equal(chunks.length, 3, JSON.stringify(chunks));
  assert.equal(chunks[0].choices[0].text, PROMPT);
  assert.deepEqual([chunks[1].choices[0].text, chunks[1].choices[0].finish_reason], ['', 'length']);
  assert.equal(chunks[2].usage.completion_tokens, 0);
  // lm-eval's loglikelihood request as it sends it (tokenized_requests: a batch of one token-id
  // array; echo, logprobs 1, max_tokens 1): the same prompt scores, and its parse (max over each
  // prompt position's top_logprobs dict) finds a dict at every position but the first.
  const ids = (await postJson(base, '/tokenize', { inputs: PROMPT })).json.map((t) => t.id);
  const le = await postJson(base, '/v1/completions', { model: 'm', prompt: [ids], temperature: 0, max_tokens: 1, logprobs: 1, seed: 1234, echo: true });
  assert.equal(le.status, 200, JSON.stringify(le.json));
  const ll = le.json.choices[0].logprobs;
  assert.deepEqual(ll.token_logprobs.slice(0, ids.length), c.logprobs.token_logprobs);
  for (let i = 1; i < ids.length; ++i) {
    const top = ll.top_logprobs[i];
    const best = Math.max(...Object.values(top));
    assert.ok(best >= ll.token_logprobs[i], `position ${i}`);
    assert.ok([1, 2].includes(Object.keys(top).length), JSON.stringify(top));
    assert.equal(top[ll.tokens[i]], ll.token_logprobs[i]);
  }
  // logprobs 0: each dict holds the chosen token alone (prompt and sampled ones), as OpenAI's.
  const z = await postJson(base, '/v1/completions', { prompt: PROMPT, max_tokens: 3, temperature: 0, logprobs: 0, echo: true });
  assert.equal(z.status, 200, JSON.stringify(z.json));
  const zl = z.json.choices[0].logprobs;
  assert.equal(zl.top_logprobs[0], null);
  for (let i = 1; i < zl.tokens.length; ++i) assert.deepEqual(zl.top_logprobs[i], { [zl.tokens[i]]: zl.token_logprobs[i] }, `token ${i}`);
  // Without echo there is nothing to return: 400 (as chat completions, whatever echo says).
  for (const [path, body] of [['/v1/completions', { prompt: PROMPT, max_tokens: 0 }],
                              ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 0 }]]) {
    const e = await postJson(base, path, body);
    assert.equal(e.status, 400, `${path}: ${JSON.stringify(e.json)}`);
    assert.match(apiError(path, e.json).message, /max_tokens/);
  }
});

await check('completions top_logprobs dicts run from the most to the least likely token; keys in OpenAI order', async () => {
  const r = await postJson(base, '/v1/completions', { prompt: PROMPT, max_tokens: 6, temperature: 0, logprobs: 5 });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.deepEqual(Object.keys(r.json), ['id', 'object', 'created', 'model', 'choices', 'usage']);
  const lp = r.json.choices[0].logprobs;
  let checked = 0;
  for (const top of lp.top_logprobs) {
    const keys = Object.keys(top);
    // JavaScript lists integer-like keys ("7") first whatever the JSON order: skip such dicts.
    if (keys.some((k) => /^(0|[1-9][0-9]*)$/.test(k))) continue;
    const values = keys.map((k) => top[k]);
    for (let i = 1; i < values.length; ++i) assert.ok(values[i - 1] >= values[i], `${JSON.stringify(top)} not in descending order`);
    checked += keys.length >= 2;
  }
  assert.ok(checked >= 3, `only ${checked} dicts checked`);
  // A sampled token outside the top `logprobs` is added to its dict (up to logprobs + 1 entries).
  const sr = await postJson(base, '/v1/completions', { prompt: 'It was a dark', max_tokens: 12, temperature: 1.5, seed: 7, logprobs: 1 });
  const sl = sr.json.choices[0].logprobs;
  let outside = 0;
  sl.tokens.forEach((t, i) => {
    const top = sl.top_logprobs[i];
    assert.equal(top[t], sl.token_logprobs[i], `token ${i}: ${JSON.stringify(top)}`);
    assert.ok(Object.keys(top).length <= 2, JSON.stringify(top));
    outside += Object.keys(top).length === 2;
  });
  assert.ok(outside >= 1, 'no sampled token outside the top 1: the check did not run');
});

await check('chat: a max_completion_tokens past --max-total-tokens is named in the 400 (not max_tokens), as context_length_exceeded', async () => {
  const info = await (await fetch(base + '/info')).json();
  const r = await postJson(base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: info.max_total_tokens });
  assert.equal(r.status, 400, JSON.stringify(r.json));
  const e = apiError('/v1/chat/completions', r.json);
  assert.match(e.message, /`max_completion_tokens` must be <= \d+ \(--max-total-tokens, the server's maximum context length\)/);
  assert.equal(e.type, 'context_length_exceeded');  // OpenAI's code, which LangChain and LiteLLM look for
  assert.equal(e.param, 'messages');
});

await check('a multipart/form-data body is a 415 saying to send the JSON itself', async () => {
  const form = new FormData();
  form.append('inputs', 'hi');
  const res = await fetch(base + '/generate', { method: 'POST', body: form });
  assert.equal(res.status, 415);
  const j = await res.json();
  assert.equal(j.error_type, 'unsupported_media_type');
  assert.match(j.error, /send the JSON object itself/);
});

await check('conflicting Content-Length headers, or one beside Transfer-Encoding, are a 400 (no request smuggling)', async () => {
  const body = '{"inputs":"x","parameters":{"max_new_tokens":1}}';
  const send = (headers) => rawRequest(`POST /generate HTTP/1.1\r\nHost: x\r\n${headers}\r\n${body}`);
  let reply = await send(`Content-Length: ${body.length}\r\nContent-Length: 3\r\n`);
  assert.match(reply, /^HTTP\/1\.1 400/, reply);
  assert.ok(reply.includes('conflicting Content-Length'), reply);
  reply = await send(`Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n`);
  assert.match(reply, /^HTTP\/1\.1 400/, reply);
  assert.ok(reply.includes('Transfer-Encoding'), reply);
  reply = await send(`Content-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n`);  // equal: allowed
  assert.match(reply, /^HTTP\/1\.1 200/, reply);
});

await check('a chunked body is read as a Content-Length one (fetch with a stream body; pipelined after it; 100-continue)', async () => {
  const req = { inputs: PROMPT, parameters: { max_new_tokens: 3 } };
  const want = await postJson(base, '/generate', JSON.stringify(req));
  assert.equal(want.status, 200, want.text);
  // undici sends a ReadableStream body chunked (no Content-Length), as Go's and requests' clients
  // send a body of unknown size.
  const text = JSON.stringify(req);
  const stream = new ReadableStream({
    start(c) {
      for (let i = 0; i < text.length; i += 7) c.enqueue(new TextEncoder().encode(text.slice(i, i + 7)));
      c.close();
    },
  });
  const res = await fetch(base + '/generate', { method: 'POST', body: stream, duplex: 'half', headers: { 'content-type': 'application/json' } });
  assert.equal(res.status, 200);
  assert.equal((await res.json()).generated_text, want.json.generated_text);
  // Raw: chunks with an extension and a trailer, a request pipelined after the body (answered
  // too), and "Expect: 100-continue" (invited, then answered).
  const chunked = (body) => {
    const half = Math.floor(body.length / 2);
    return `${half.toString(16)};note=x\r\n${body.slice(0, half)}\r\n${(body.length - half).toString(16)}\r\n${body.slice(half)}\r\n0\r\nX-Trailer: 1\r\n\r\n`;
  };
  const all = await rawExchange(`POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(text)}` +
                                'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.equal((all.match(/HTTP\/1\.1 \d{3}/g) || []).length, 2, all);
  assert.match(all, /^HTTP\/1\.1 200/);
  assert.ok(all.includes(JSON.stringify(want.json.generated_text).slice(1, -1)), all);
  const cont = await rawExchange(`POST /generate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n${chunked(text)}`);
  assert.match(cont, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200/, cont);
});

await check('a chunked body over the limit, malformed, or where none belongs is refused, and the connection ends', async () => {
  const cases = [
    // 413 at the size line that passes 8 MiB, before its data
    ['POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"inp\r\n800000\r\n', 413, 'payload_too_large',
     /the chunked request body exceeds 8388608 bytes \(chunk 2 declares more than the 8388603 bytes left\)/],
    ['POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"inputs":1}\r\n0\r\n\r\n', 400, 'malformed_request',
     /malformed chunked request body: chunk 1's data is not followed by CRLF after the 5 bytes its size line declares/],
    ['POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n', 400, 'malformed_request',
     /a bare LF \(without CR\) ends the size line of chunk 1/],
    ['POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 501, 'not_implemented', /Transfer-Encoding 'gzip, chunked' is not supported/],
    ['POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n', 501, 'not_implemented', /'chunked, chunked'/],
    ['POST /generate HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'malformed_request', /HTTP\/1\.0 has no chunked bodies/],
    ['GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'malformed_request', /a GET request has no body \(Transfer-Encoding: chunked\)/],
    ['POST /generate HTTP/1.1\r\nHost: x\r\n\r\n', 411, 'length_required', /needs its JSON body with a Content-Length header .* or sent chunked/],
    ['PUT /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 405, 'method_not_allowed', /method PUT not allowed/],
    ['PUT /nope HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'malformed_request',
     /this server reads request bodies of POSTs only \(a chunked PUT body was sent\)/],
    ['POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Check: 1\r\nGET /health HTTP/1.1\r\n\r\n', 400,
     'malformed_request', /trailer line 2 of the chunked body has ' ' in its field name/],
  ];
  for (const [text, status, type, message] of cases) {
    const t0 = Date.now();
    // the whole exchange: the answer, then the connection's end (what follows is never a request)
    const reply = await rawExchange(text + 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.match(reply, new RegExp(`^HTTP/1\\.1 ${status}`), reply);
    assert.equal((reply.match(/HTTP\/1\.1 \d{3}/g) || []).length, 1, reply);
    assert.ok(reply.includes(`"error_type":"${type}"`), reply);
    assert.match(reply, message);
    assert.ok(Date.now() - t0 < 3000, `${status} took ${Date.now() - t0} ms`);
  }
  // "Expect: 100-continue": what would be refused is refused at once, without "100 Continue"
  // inviting the body (RFC 7231 §5.1.1); an over-limit declared length too (413, not after 10 s).
  for (const [headers, status] of [['Transfer-Encoding: gzip', 501], ['Content-Length: 20000000', 413]]) {
    const t0 = Date.now();
    const reply = await rawRequest(`POST /generate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n${headers}\r\n\r\n`);
    assert.match(reply, new RegExp(`^HTTP/1\\.1 ${status}`), reply);
    assert.ok(Date.now() - t0 < 2000, `${headers}: ${Date.now() - t0} ms`);
  }
  // A GET with a body (cpp-httplib reads none for GET): 400 at once, not the body as a request.
  const hidden = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
  const get = await rawRequest(`GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: ${hidden.length}\r\n\r\n${hidden}`);
  assert.match(get, /^HTTP\/1\.1 400/, get);
  assert.ok(get.includes('a GET request has no body'), get);
});

await check('a PUT / PATCH without Content-Length has no body: answered at once, its bytes never read as a body', async () => {
  // cpp-httplib read such a body until the connection ended, without bound.
  for (const method of ['PUT', 'PATCH']) {
    const { connect } = await import('node:net');
    const url = new URL(base);
    const t0 = Date.now();
    const reply = await new Promise((resolve, reject) => {
      const sock = connect(Number(url.port), url.hostname, () => sock.write(`${method} /nope HTTP/1.1\r\nHost: x\r\n\r\n` + 'a'.repeat(100000)));
      let data = '';
      sock.on('data', (d) => { data += d; if (data.includes('}')) { sock.destroy(); resolve(data); } });
      sock.on('error', reject);
      setTimeout(() => { sock.destroy(); resolve(data + '[no answer after 5 s]'); }, 5000);
    });
    assert.match(reply, /^HTTP\/1\.1 404/, reply.slice(0, 300));
    assert.ok(Date.now() - t0 < 3000, `${method}: ${Date.now() - t0} ms`);
  }
});

await check('a slow chunked upload over the limit gets its 413 (the server reads on while the client still sends, as nginx)', async () => {
  // Python's http.client / requests read the answer only once they have sent everything: the
  // server's lingering close must outlast the upload (it ended after 2 s: a reset, no 413).
  const { connect } = await import('node:net');
  const url = new URL(base);
  const reply = await new Promise((resolve, reject) => {
    const sock = connect(Number(url.port), url.hostname);
    let data = '';
    let sent = 0;
    sock.on('connect', async () => {
      sock.write('POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
      const chunk = (1 << 20).toString(16) + '\r\n' + 'a'.repeat(1 << 20) + '\r\n';
      for (let i = 0; i < 12 && !sock.destroyed; ++i) {  // 12 MiB, 1 MiB every 0.4 s: ~4.8 s
        sock.write(chunk);
        sent += 1;
        await new Promise((r) => setTimeout(r, 400));
      }
      if (!sock.destroyed) sock.end('0\r\n\r\n');
    });
    sock.on('data', (d) => { data += d; });
    sock.on('error', (e) => resolve(data + `[${e.code} after ${sent} MiB]`));
    sock.on('close', () => resolve(data));
    setTimeout(() => { sock.destroy(); reject(new Error('no end after 20 s')); }, 20000);
  });
  assert.match(reply, /^HTTP\/1\.1 413/, reply.slice(0, 300));
  assert.ok(!reply.includes('[E'), reply.slice(-200));
});

await check('a body that ends before its Content-Length: 400 after the read timeout, and the connection ends (its late bytes are no request)', async () => {
  const { connect } = await import('node:net');
  const url = new URL(base);
  const body = '{"inputs":"hi","parameters":{"max_new_tokens":2}}';
  const t0 = Date.now();
  const all = await new Promise((resolve, reject) => {
    const sock = connect(Number(url.port), url.hostname, () =>
      sock.write(`POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length + 4}\r\n\r\n${body}`));
    let data = '', sentLate = false;
    sock.on('data', (d) => {
      data += d;
      // The answer came: send the 4 missing bytes and then a request, as a late client would.
      if (!sentLate && data.includes('}')) {
        sentLate = true;
        sock.write('}}}}GET /info HTTP/1.1\r\nHost: x\r\n\r\n');
      }
    });
    sock.on('error', (e) => (e.code === 'ECONNRESET' ? resolve(data) : reject(e)));
    sock.on('close', () => resolve(data));
    setTimeout(() => { sock.destroy(); resolve(data + '[still open after 20 s]'); }, 20000);
  });
  assert.match(all, /^HTTP\/1\.1 400/, all);
  assert.ok(all.includes('the request body ended before its Content-Length'), all);
  assert.match(all, /\r\nConnection: close\r\n/i, all);
  assert.ok(!/\r\nKeep-Alive:/i.test(all), all);
  assert.equal((all.match(/HTTP\/1\.1 \d{3}/g) || []).length, 1, all);  // the late bytes got no answer
  assert.ok(!all.includes('[still open'), all);
  assert.ok(Date.now() - t0 < 16000, `${Date.now() - t0} ms`);
});

await check('no tool offered: an empty `tools` and tool_choice "none" / "auto" / null are accepted (LangChain sends them)', async () => {
  const chat = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 };
  for (const extra of [{ tools: [] }, { tool_choice: 'none' }, { tool_choice: 'auto' }, { tool_choice: null }, { tools: [], tool_choice: 'auto' }]) {
    const r = await postJson(base, '/v1/chat/completions', { ...chat, ...extra });
    assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${r.text}`);
    assert.equal(r.json.choices[0].message.role, 'assistant');
    assert.equal(r.json.usage.completion_tokens, 1);
  }
  const c = await postJson(base, '/v1/completions', { prompt: 'hi', tools: [], max_tokens: 1 });
  assert.equal(c.status, 200, c.text);
  assert.equal(c.json.usage.completion_tokens, 1);
});

await check('cpp-httplib refusals of the request line, headers and body are JSON errors naming the fault and the limit', async () => {
  const cases = [
    [`GET /${'a'.repeat(100000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 414, 'uri_too_long', /the request line \(method, URL and HTTP version\) is longer than 8192 bytes/, true],
    [`GET /info HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(9000)}\r\n\r\n`, 400, 'malformed_request', /a header line longer than 8192 bytes/, true],
    ['FETCH /info HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'malformed_request', /unknown method 'FETCH'/, true],
    ['GET /info HTTP/2.0\r\nHost: x\r\n\r\n', 400, 'malformed_request', /HTTP version 'HTTP\/2\.0' is not supported/, true],
    // Lines ending in LF alone (a hand-written request, printf without \r): named, not "expected METHOD /path".
    ['GET /info HTTP/1.1\nHost: x\n\n', 400, 'malformed_request', /the request line ends in a bare LF: HTTP lines end in CR LF \(\\r\\n\)/, true],
    ['GET /info HTTP/1.1\r\nHost: x\n\r\n', 400, 'malformed_request', /header line 1 ends in a bare LF/, true],
    ['GET /info HTTP/1.1\r\nHost: x\r\n\n', 400, 'malformed_request', /header line 2 \(the blank line that ends the headers\) is a bare LF/, true],
    // A TLS ClientHello (curl https:// to this port, a load balancer's TLS check): named as such.
    ['\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03 /x', 400, 'malformed_request',
      /the request line is a TLS handshake \(an https:\/\/ client\?\): this port speaks plain HTTP \(http:\/\/\)/, true],
    [`GET /info HTTP/1.1\r\nHost: x\r\n${`X-Pad: ${'p'.repeat(1000)}\r\n`.repeat(70)}\r\n`, 431, 'request_header_fields_too_large',
      /the request's head \(request line and headers\) is longer than 65536 bytes/, true],
    ['GET /info HTTP/1.1\r\nHost: x\r\nRange: bytes=abc\r\n\r\n', 416, 'range_not_satisfiable', /invalid Range header 'bytes=abc'/, false],
    // An encoded body is refused before it is read (cpp-httplib would decode it past the body limit).
    ['POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 14\r\n\r\n{"inputs":"x"}',
      415, 'unsupported_media_type', /Content-Encoding 'gzip' is not accepted: send the JSON body uncompressed \(at most \d+ bytes\)/, true],
    ['POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: BR\r\nContent-Length: 2\r\n\r\n{}',
      415, 'unsupported_media_type', /Content-Encoding 'BR' is not accepted/, true],
  ];
  for (const [text, status, type, message, closes] of cases) {
    const reply = await rawRequest(text);
    const [head, body] = reply.split('\r\n\r\n');
    assert.match(head, new RegExp(`^HTTP/1\\.1 ${status} `), reply.slice(0, 300));
    const e = apiError(text.split(' ')[1], JSON.parse(body));
    assert.equal(e.type, type, body);
    assert.match(e.message, message);
    // A request line or header not taken leaves the rest unread: the answer says the connection ends.
    assert.equal(/\r\nConnection: close\r\n/i.test(head + '\r\n'), closes, head);
    assert.equal(/Keep-Alive/i.test(head), !closes, head);
  }
});

await check('a Range header is ignored: every answer is whole, 200 (cpp-httplib would cut it: 206 and half a JSON object)', async () => {
  const whole = await (await fetch(base + '/info')).text();
  for (const range of ['bytes=0-9', 'bytes=0-1,3-4', 'bytes=100000-']) {
    const res = await fetch(base + '/info', { headers: { Range: range } });
    assert.equal(res.status, 200, range);
    assert.equal(res.headers.get('content-range'), null, range);
    assert.equal(await res.text(), whole, range);
  }
  const r = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 12 } }, { Range: 'bytes=0-9' });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.generated_text, greedy.generated_text);
  const nf = await fetch(base + '/nope', { headers: { Range: 'bytes=0-9' } });
  assert.equal(nf.status, 404);
  assert.equal((await nf.json()).error_type, 'not_found');
});

await check('a request refused before its head was read ends the connection: the head\'s rest is no request', async () => {
  for (const text of ['FETCH /info HTTP/1.1\r\nHost: x\r\n\r\n', `GET /${'a'.repeat(9000)} HTTP/1.1\r\nHost: x\r\n\r\n`]) {
    const reply = await rawExchange(text);
    assert.equal(reply.match(/HTTP\/1\.1 \d{3} /g).length, 1, reply);
  }
  // Their log lines still name the client (cpp-httplib had not filled its address: client=-).
  assert.ok(await waitFor(() => /refused - - client=127\.0\.0\.1 status=414 error_type=uri_too_long/.test(srv.log())), srv.log().slice(-2000));
});

await check('an HTTP/1.0 stream is not chunked (1.0 has no chunks): its end is the connection\'s', async () => {
  const body = JSON.stringify({ inputs: PROMPT, parameters: { max_new_tokens: 12 } });
  const reply = await rawExchange(`POST /generate_stream HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  const [head, rest] = [reply.slice(0, reply.indexOf('\r\n\r\n')), reply.slice(reply.indexOf('\r\n\r\n') + 4)];
  assert.match(head, /^HTTP\/1\.1 200 /, head);
  assert.doesNotMatch(head, /Transfer-Encoding/i, head);
  assert.match(head, /\r\nConnection: close/i, head);
  const events = rest.split('\n\n').filter((e) => e.startsWith('data:')).map((e) => JSON.parse(e.slice(5)));
  assert.equal(events.length, 12, rest);
  assert.equal(events[11].generated_text, greedy.generated_text);
});

await check('pipelined requests on one connection are all answered, in order', async () => {
  const body = JSON.stringify({ inputs: PROMPT, parameters: { max_new_tokens: 12 } });
  const text = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n' +
    `POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
    'GET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
  const reply = await rawExchange(text);
  assert.deepEqual(reply.match(/HTTP\/1\.1 \d{3} /g), ['HTTP/1.1 200 ', 'HTTP/1.1 200 ', 'HTTP/1.1 200 '], reply);
  assert.ok(reply.includes(JSON.stringify(greedy.generated_text)), reply);
  assert.ok(reply.includes('"model_id"'), reply);
});

await check('Connection options are case-insensitive list items; HTTP/1.0 keeps the connection only when asked', async () => {
  const health = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
  for (const value of ['close', 'Close', 'CLOSE', 'TE, close', 'keep-alive, close']) {
    const reply = await rawExchange(`GET /health HTTP/1.1\r\nHost: x\r\nConnection: ${value}\r\n\r\n${health}`);
    assert.equal(reply.match(/HTTP\/1\.1 200 /g).length, 1, `${value}: ${reply}`);
    assert.equal(reply.match(/\r\nConnection: close/gi).length, 1, reply);
    assert.doesNotMatch(reply, /Keep-Alive/i, reply);
  }
  const reply = await rawExchange('GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /health HTTP/1.0\r\n\r\n' + health);
  const heads = reply.split('\r\n\r\n').filter((h) => h.startsWith('HTTP/'));
  assert.equal(heads.length, 2, reply);
  assert.match(heads[0], /\r\nConnection: keep-alive/i, heads[0]);
  assert.match(heads[1], /\r\nConnection: close/i, heads[1]);
  assert.doesNotMatch(heads[1], /Keep-Alive/i, heads[1]);
});

await check('header lines cpp-httplib would skip are a 400 naming the line (no smuggled Transfer-Encoding); a stray CRLF after a body is no request', async () => {
  const body = '{"inputs":"Hi","parameters":{"max_new_tokens":1}}';
  let reply = await rawExchange(`POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  assert.match(reply, /^HTTP\/1\.1 400 /, reply);
  assert.match(reply, /header line 2 has whitespace in its name or before its ':'/, reply);
  reply = await rawExchange(`POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}\r\n` +
    'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.deepEqual(reply.match(/HTTP\/1\.1 \d{3} /g), ['HTTP/1.1 200 ', 'HTTP/1.1 200 '], reply);
  reply = await rawExchange('CONNECT x:80 HTTP/1.1\r\nHost: x:80\r\n\r\n');
  assert.match(reply, /CONNECT is not supported/, reply);
});

await check('Expect: 100-continue gets its refusal at once: an unknown path\'s 404, a length of 20 digits the 413', async () => {
  let reply = await rawRequest('POST /v1/completion HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 49\r\n\r\n');
  assert.match(reply, /^HTTP\/1\.1 404 /, reply);
  assert.match(reply, /no route for POST \/v1\/completion/, reply);
  reply = await rawRequest('POST /generate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10000000000000000000\r\n\r\n');
  assert.match(reply, /^HTTP\/1\.1 413 /, reply);
});

await check('a 416 or 413 before the body was read ends the connection: the body is never a request; two Host headers are a 400', async () => {
  const inner = 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n';
  let reply = await rawExchange(`POST /generate HTTP/1.1\r\nHost: x\r\nRange: bytes=zz\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`);
  assert.deepEqual(reply.match(/HTTP\/1\.1 \d{3} /g), ['HTTP/1.1 416 '], reply);
  assert.match(reply, /\r\nConnection: close/i, reply);
  reply = await rawExchange(`POST /generate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 99999999999\r\n\r\n${inner}`);
  assert.deepEqual(reply.match(/HTTP\/1\.1 \d{3} /g), ['HTTP/1.1 413 '], reply);
  reply = await rawRequest('GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n');
  assert.match(reply, /^HTTP\/1\.1 400 [^]*more than one Host header/, reply);
  // a malformed head's 400 ends the connection, body or not (as nginx's); a bodyless GET's 405 keeps it
  reply = await rawExchange(`GET /info HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n${inner}`);
  assert.deepEqual(reply.match(/HTTP\/1\.1 \d{3} /g), ['HTTP/1.1 400 '], reply);
  assert.match(reply, /\r\nConnection: close/i, reply);
  reply = await rawExchange(`GET /generate HTTP/1.1\r\nHost: x\r\n\r\n${inner}`);
  assert.deepEqual(reply.match(/HTTP\/1\.1 \d{3} /g), ['HTTP/1.1 405 ', 'HTTP/1.1 200 '], reply);
});

await check('HEAD answers offer no Accept-Ranges (Range is ignored), as GET answers do not', async () => {
  const head = await fetch(base + '/info', { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get('accept-ranges'), null);
});

await check('a body sent with Content-Encoding: identity is taken as it is', async () => {
  const r = await postJson(base, '/generate', { inputs: 'hi', parameters: { max_new_tokens: 1, details: true } },
    { 'Content-Encoding': 'identity' });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.details.generated_tokens, 1);
});

await check('an answer that ends the connection says so alone: Connection: close without a Keep-Alive offer', async () => {
  // (the chunked case's "headers" end the head and begin a malformed body)
  for (const headers of ['', 'Transfer-Encoding: chunked\r\n\r\nzz\r\n', 'Transfer-Encoding: gzip\r\n', 'Content-Length: 5\r\nContent-Length: 6\r\n',
    'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n', 'Content-Length: abc\r\n']) {
    const reply = await rawRequest(`POST /generate HTTP/1.1\r\nHost: x\r\n${headers}\r\n`);
    const head = reply.split('\r\n\r\n')[0];
    assert.match(head, /^HTTP\/1\.1 (400|411|501) /, `${headers}: ${head}`);
    assert.match(head + '\r\n', /\r\nConnection: close\r\n/i, `${headers}: ${head}`);
    assert.doesNotMatch(head, /Keep-Alive/i, `${headers}: ${head}`);
  }
  // An answer that keeps the connection still offers Keep-Alive, without Connection: close.
  const kept = (await rawRequest('GET /info HTTP/1.1\r\nHost: x\r\n\r\n')).split('\r\n\r\n')[0];
  assert.match(kept, /^HTTP\/1\.1 200 /, kept);
  assert.match(kept, /\r\nKeep-Alive: timeout=5, max=100/i, kept);
  assert.doesNotMatch(kept, /Connection: close/i, kept);
});

await check('405 JSON with Allow for a known path asked with the wrong method', async () => {
  for (const [method, route, allow] of [['GET', '/generate', 'POST'], ['DELETE', '/v1/completions', 'POST'], ['POST', '/health', 'GET, HEAD']]) {
    const res = await fetch(base + route, { method });
    assert.equal(res.status, 405, `${method} ${route}`);
    assert.equal(res.headers.get('allow'), allow);
    const e = apiError(route, await res.json());
    assert.equal(e.type, 'method_not_allowed');
    assert.ok(e.message.includes(route), e.message);
  }
  assert.equal((await fetch(base + '/health', { method: 'HEAD' })).status, 200);
  // A browser's CORS preflight while CORS is off: the 405 names the flag it needs.
  const pre = await fetch(base + '/v1/chat/completions', { method: 'OPTIONS', headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST' } });
  assert.equal(pre.status, 405);
  assert.equal(pre.headers.get('access-control-allow-origin'), null);
  assert.match(apiError('/v1/chat/completions', await pre.json()).message, /this is a browser's CORS preflight: start the server with --cors-allow-origin http:\/\/localhost:3000 to let/);
  const pre404 = await fetch(base + '/v1/nope', { method: 'OPTIONS', headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST' } });
  assert.equal(pre404.status, 404);
  assert.match(apiError('/v1/nope', await pre404.json()).message, /no route for OPTIONS \/v1\/nope; this is a browser's CORS preflight/);
  // A JSON answer may be compressed (cpp-httplib, for a client that accepts gzip / br): caches key it by Accept-Encoding.
  const info = await fetch(base + '/info', { headers: { 'accept-encoding': 'gzip' } });
  assert.equal(info.headers.get('vary'), 'Accept-Encoding');
  assert.equal(info.headers.get('content-encoding'), 'gzip');
  assert.equal((await info.json()).model_id.length > 0, true);
});

await check('server still serves after bad input; metrics count it', async () => {
  const r = await postJson(base, '/generate', { inputs: PROMPT, parameters: { max_new_tokens: 12 } });
  assert.equal(r.json.generated_text, greedy.generated_text);
  const m = await metrics(base);
  assert.ok(m['mamba_requests_total{outcome="rejected"}'] >= bad.length);
  assert.ok(m.mamba_generated_tokens_total > 0);
  assert.equal(m.mamba_slots_in_use, 0);
  // Latency histograms: one observation per request that finished normally, this one included.
  assert.equal(m.mamba_request_duration_seconds_count, m['mamba_requests_total{outcome="ok"}']);
  assert.equal(m['mamba_request_duration_seconds_bucket{le="+Inf"}'], m.mamba_request_duration_seconds_count);
  assert.ok(m.mamba_time_to_first_token_seconds_count >= 1 && m.mamba_time_per_output_token_seconds_count >= 1);
  assert.ok(m.mamba_time_to_first_token_seconds_sum > 0 && m.mamba_time_to_first_token_seconds_sum <= m.mamba_request_duration_seconds_sum);
});

const ex = await srv.stop();
await check('SIGTERM exits 0', async () => assert.equal(ex.code, 0, srv.log()));
exitWithChecks();
