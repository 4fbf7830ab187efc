// End-to-end batch invariance: 32 concurrent requests of different prompt lengths (1 to ~400
// tokens, so long prompts are prefilled in chunk_size pieces) and sampling settings give, for
// each request, exactly (ids and logprobs, bitwise; text) what the same request gives alone —
// under several --max-batch-prefill-tokens budgets and --max-batch-size 1, 2, 17, 64 (17 with two
// compute threads, which sample a step's rows in parallel). Also: 8
// identical concurrent requests agree, and /metrics shows a mean decode batch size > 1.
import assert from 'node:assert/strict';
import { deadline, startServer, postJson, postSse, metrics } from './lib.mjs';

deadline(170);
const PARA =
  'The rain had stopped before dawn, and the road that ran along the river was full of bright pools. ' +
  'Mary walked slowly, with her basket on her arm, thinking of the letter she had not yet answered. ' +
  'Her brother had written from the city that he was well, that the work was hard but honest, and that ' +
  'he hoped to come home before the winter. She did not quite believe him, for he had said the same thing last year. ';
const LONG = PARA.repeat(5);

function makeRequests() {
  const reqs = [];
  for (let i = 0; i < 32; i++) {
    const words = LONG.split(' ');
    const len = i === 0 ? 1 : Math.min(words.length, 1 + ((i * 37) % 90) + (i % 4 === 3 ? 60 : 0));
    const inputs = words.slice(0, len).join(' ');
    const parameters = { max_new_tokens: 3 + (i % 6), details: true };
    if (i % 4 === 1) Object.assign(parameters, { do_sample: true, temperature: 0.8, top_k: 50, top_p: 0.95, seed: 100 + i });
    if (i % 5 === 2) parameters.repetition_penalty = 1.3;
    if (i % 6 === 4) parameters.top_n_tokens = 2;
    const route = i % 3 === 0 ? '/generate_stream' : '/generate';
    if (i % 7 === 5 && route === '/generate') parameters.decoder_input_details = true;  // streams refuse it (TGI)
    reqs.push({ route, body: { inputs, parameters } });
  }
  return reqs;
}

// One request → {ids, logprobs, text, prefill} (stream answers are folded the same way).
async function run(base, { route, body }) {
  if (route === '/generate_stream') {
    const s = await postSse(base, route, body);
    assert.equal(s.status, 200, s.raw);
    const evs = s.events;
    assert.ok(evs.length > 0 && !evs.some((e) => e.error), s.raw);
    return { ids: evs.map((e) => e.token.id), logprobs: evs.map((e) => e.token.logprob), text: evs.at(-1).generated_text, prefill: null };
  }
  const r = await postJson(base, route, body);
  assert.equal(r.status, 200, r.text);
  const d = r.json.details;
  return {
    ids: d.tokens.map((t) => t.id),
    logprobs: d.tokens.map((t) => t.logprob),
    text: r.json.generated_text,
    prefill: d.prefill.length ? d.prefill.map((t) => t.logprob) : null,
    top: d.top_tokens ?? null,
  };
}

const reqs = makeRequests();
let failed = false;

// Reference: each request alone on a default server.
let t0 = Date.now();
const ref = await startServer([]);
const alone = [];
for (const q of reqs) alone.push(await run(ref.base, q));
assert.equal((await ref.stop()).code, 0);
console.log(`     reference: 32 requests one at a time in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

const configs = [
  ['--max-batch-size', '64', '--max-batch-prefill-tokens', '4096'],
  // Two compute threads (the helper's --threads 1 comes first; the last value wins): the rows of a
  // decode step are then sampled and detokenised on both (ops::parallel_tasks).
  ['--max-batch-size', '17', '--max-batch-prefill-tokens', '100', '--threads', '2'],
  ['--max-batch-size', '2', '--max-batch-prefill-tokens', '7'],
  ['--max-batch-size', '1', '--max-batch-prefill-tokens', '64'],
];
for (const cfg of configs) {
  const name = cfg.join(' ');
  try {
    t0 = Date.now();
    const srv = await startServer(cfg);
    const got = await Promise.all(reqs.map((q) => run(srv.base, q)));
    got.forEach((g, i) => {
      assert.deepEqual(g.ids, alone[i].ids, `request ${i}: ids`);
      assert.deepEqual(g.logprobs, alone[i].logprobs, `request ${i}: logprobs (bitwise)`);
      assert.equal(g.text, alone[i].text, `request ${i}: text`);
      assert.deepEqual(g.prefill, alone[i].prefill, `request ${i}: prompt logprobs`);
      if (g.top) assert.deepEqual(g.top, alone[i].top, `request ${i}: top tokens`);
    });
    // 8 identical concurrent requests: identical outputs
    const same = { route: '/generate', body: { inputs: LONG.slice(0, 500), parameters: { max_new_tokens: 8, details: true } } };
    const eight = await Promise.all(Array.from({ length: 8 }, () => run(srv.base, same)));
    for (const e of eight) assert.deepEqual(e, eight[0]);
    const m = await metrics(srv.base);
    const mean = m.mamba_decode_batch_size_mean;
    if (cfg[1] !== '1') assert.ok(mean > 1, `mean decode batch size ${mean} should be > 1`);
    else assert.equal(mean, 1);
    assert.equal(m.mamba_slots_in_use, 0);
    assert.equal((await srv.stop()).code, 0);
    console.log(`ok   ${name}: 32 concurrent == alone, 8 identical agree, mean decode batch ${mean.toFixed(2)}, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } catch (e) {
    failed = true;
    console.log(`FAIL ${name}\n${e.stack}`);
  }
}
process.exit(failed ? 1 : 0);
