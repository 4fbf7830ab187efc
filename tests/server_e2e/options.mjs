// End-to-end startup errors: bad flags and unusable listen addresses print one `error: ...` line
// naming the flag (or the bind failure's reason) and exit 2, without the shutdown/drain logs of a
// server that never started; --help exits 0.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { deadline, startServer, postJson, SERVER_BIN, check, exitWithChecks, waitFor } from './lib.mjs';
import os from 'node:os';
import path from 'node:path';

/// The model the checks below copy or link from: MAMBA_E2E_MODEL, else the embedded one.
const modelDir = path.resolve(process.env.MAMBA_E2E_MODEL ||
                              path.join(path.dirname(new URL(import.meta.url).pathname), '../../models/mamba2-books-7m-bpe8k'));

/// A fresh temporary directory (removed by the caller) holding links to `files` of modelDir.
function linkedModelDir(prefix, files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  for (const f of files) fs.symlinkSync(path.join(modelDir, f), path.join(dir, f));
  return dir;
}

deadline(120);

/// Runs mamba-server with `args` (and `env` added to the environment) to its exit (it must not
/// start serving); {code, signal, stderr}.
function runServer(args, env = {}) {
  const model = process.env.MAMBA_E2E_MODEL ? ['-m', process.env.MAMBA_E2E_MODEL] : [];
  const proc = spawn(SERVER_BIN, [...model, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  let stdout = '';
  proc.stderr.on('data', (d) => (stderr += d.toString()));
  proc.stdout.on('data', (d) => (stdout += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => proc.kill('SIGKILL'), 30000);
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stderr, stdout });
    });
  });
}

async function expectStartupError(args, pattern, env = {}) {
  const host = args.includes('--host') || env.MAMBA_HOST ? [] : ['--host', '127.0.0.1'];
  const port = args.includes('--port') || env.MAMBA_PORT ? [] : ['--port', '0'];
  const r = await runServer([...host, ...port, ...args], env);
  const what = `${JSON.stringify(env)} mamba-server ${args.join(' ')}: exit ${r.code} ${r.signal ?? ''}\nstderr:\n${r.stderr}`;
  assert.equal(r.code, 2, what);
  assert.match(r.stderr, pattern, what);
  assert.match(r.stderr, /^error: /m, what);
  assert.doesNotMatch(r.stderr, /draining|terminate called|Aborted|system_error|libgomp/, what);
  assert.doesNotMatch(r.stdout, /listening on/, what);
}

await check('--threads above 1024 → error naming the flag, exit 2', () =>
  expectStartupError(['--threads', '100000'], /error: --threads: expected an integer from 0 \(all hardware threads\) to 1024, got 100000\nRun with --help/));
await check('negative or past-int size flags → the range in plain numbers, exit 2', async () => {
  await expectStartupError(['--max-batch-size', '-3'], /error: --max-batch-size: expected an integer from 0 to 2147483647, got -3\nRun with --help/);
  await expectStartupError(['--max-total-tokens', '99999999999999999999'],
    /error: --max-total-tokens: expected an integer from 2 \(one prompt token and one generated\) to 2147483647, got 99999999999999999999/);
});
await check('size flags that need >= 1 refuse 0 at parse time (help shows INT >= 1), with the hint line', async () => {
  for (const flag of ['--max-concurrent-requests', '--max-batch-prefill-tokens', '--max-input-tokens'])
    await expectStartupError([flag, '0'], new RegExp(`error: ${flag}: expected an integer from 1 to 2147483647, got 0\nRun with --help`));
  const help = await runServer(['--help']);
  assert.match(help.stdout, /--max-batch-prefill-tokens INT:INT >= 1=512/, help.stdout);
});
await check('--max-total-tokens below 2 alone, or not above --max-input-tokens → both flags named', async () => {
  // One rule at parse time, 0 and 1 alike (0 was "from 1", then 1 "must be >= 2").
  for (const v of ['0', '1'])
    await expectStartupError(['--max-total-tokens', v],
      new RegExp(`error: --max-total-tokens: expected an integer from 2 \\(one prompt token and one generated\\) to 2147483647, got ${v}\nRun with --help`));
  await expectStartupError(['--max-input-tokens', '50', '--max-total-tokens', '40'],
    /error: need 1 <= --max-input-tokens < --max-total-tokens, got --max-input-tokens 50 and --max-total-tokens 40\nRun with --help/);
});
for (const host of ['::1', '[::1]']) await check(`--host ${host} → the listening line is a usable URL (http://[::1]:PORT)`, async () => {
  let srv;
  try {
    srv = await startServer(['--host', host, '--port', '0']);
  } catch (e) {
    if (/cannot bind/.test(String(e))) {
      console.log('  (no IPv6 loopback here: not checked)');
      return;
    }
    throw e;
  }
  try {
    assert.match(srv.base, /^http:\/\/\[::1\]:\d+$/);
    const res = await fetch(srv.base + '/health');
    assert.equal(res.status, 200);
  } finally {
    await srv.stop();
  }
});
await check('--threads -1 → exit 2', () => expectStartupError(['--threads', '-1'], /error: --threads: expected an integer .* got -1/));
await check('--http-threads above 4096 → exit 2', () =>
  expectStartupError(['--http-threads', '1000000'], /error: --http-threads must be 0 .* to 4096, got 1000000/));
await check('--max-concurrent-requests needing too many HTTP threads → exit 2', () =>
  expectStartupError(['--max-concurrent-requests', '100000'], /error: --max-concurrent-requests 100000 needs 100032 HTTP threads/));
for (const g of ['nan', 'inf', '-1', '1e300']) {
  await check(`--shutdown-grace ${g} → exit 2`, () =>
    expectStartupError(['--shutdown-grace', g], /error: --shutdown-grace must be a number of seconds from 0 to 86400/));
}
await check('--port 99999 → exit 2 (not CLI11\'s 105)', () => expectStartupError(['--port', '99999'], /error: --port: Value 99999 not in range/));
await check('unknown flag → exit 2', () => expectStartupError(['--no-such-flag'], /error: .*--no-such-flag/));
await check('llama.cpp flags → refused by name with what to do here, as by mamba-cli (CLI11 took -ngl 99 for stray arguments, -hf for the help: exit 0)', async () => {
  await expectStartupError(['-ngl', '99'],
    /error: unknown option '-ngl' \(llama\.cpp's -ngl\/--gpu-layers\/--n-gpu-layers\? mamba\.cpp computes on the CPU only[^\n]*\)\nRun with --help for more information\.\n$/);
  await expectStartupError(['-fa'], /error: unknown option '-fa' \(llama\.cpp's -fa\/--flash-attn\? Mamba models have no attention: leave it out\)/);
  await expectStartupError(['-np', '4'], /llama\.cpp's -np\/--parallel\? mamba-server batches concurrent requests itself: --max-batch-size N .* --max-concurrent-requests N/);
  await expectStartupError(['-cb'], /llama\.cpp's -cb\/--cont-batching\? mamba-server always batches continuously: leave it out/);
  await expectStartupError(['-c', '4096'], /error: unknown option '-c' \(llama\.cpp's -c\/--ctx-size\? .*--max-total-tokens N \(prompt \+ generated tokens\)/);
  await expectStartupError(['--ctx-size=4096'], /error: unknown option '--ctx-size=4096' \(llama\.cpp's -c\/--ctx-size\? .*--max-total-tokens N/);
  await expectStartupError(['-hf', 'state-spaces/mamba-130m-hf'], /llama\.cpp's -hf\/-hfr\/--hf-repo\? -m takes a Hugging Face repo id .*hf download ORG\/NAME/);
  await expectStartupError(['-t', '2'], /error: unknown option '-t' \(llama\.cpp's -t\/--threads\? mamba-server's is --threads N\)/);
  await expectStartupError(['-xyz'], /error: unknown option '-xyz' \(one dash takes one letter; long options take two, as --help lists them\)/);
});
await check('--threads above the CPUs this process may run on → a warning naming them, as mamba-cli -t; the server still serves', async () => {
  const cpus = os.availableParallelism();  // the affinity mask, as the server counts
  const srv = await startServer(['--threads', String(cpus + 1)]);
  try {
    const warning = new RegExp(`\\[warning\\] --threads ${cpus + 1} is more than the ${cpus} hardware threads? this process may run on: ` +
                               `[^\\n]*\\(leave --threads out, or --threads 0, to use all ${cpus}\\)`);
    assert.ok(await waitFor(() => warning.test(srv.log())), srv.log());
    assert.equal((await fetch(srv.base + '/health')).status, 200);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});
await check('--http-threads not above --max-concurrent-requests → a warning that /health can wait; the server still serves', async () => {
  const srv = await startServer(['--http-threads', '4', '--max-concurrent-requests', '4']);
  try {
    const warning = /\[warning\] --http-threads 4 is not above --max-concurrent-requests 4: 4 requests being generated or streamed [^\n]*\/health and \/metrics then wait for one \(the default, 0, gives 36\)/;
    assert.ok(await waitFor(() => warning.test(srv.log())), srv.log());
    assert.equal((await fetch(srv.base + '/health')).status, 200);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
  const fine = await startServer(['--http-threads', '5', '--max-concurrent-requests', '4']);
  try {
    assert.doesNotMatch(fine.log(), /is not above --max-concurrent-requests/);
  } finally {
    assert.equal((await fine.stop()).code, 0);
  }
});
await check('--host that does not resolve → the reason, no drain log', () =>
  expectStartupError(['--host', '999.1.1.1'], /error: cannot bind 999\.1\.1\.1:<any port>: cannot resolve the address: /));
await check('port already taken → "Address already in use", exit 2', async () => {
  const srv = await startServer([]);
  try {
    const port = new URL(srv.base).port;
    const r = await runServer(['--host', '127.0.0.1', '--port', port, '--threads', '1']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`error: cannot bind 127\\.0\\.0\\.1:${port}: Address already in use`), r.stderr);
    assert.doesNotMatch(r.stderr, /draining/, r.stderr);
    // Reported before the model load (which logs "precision:" when done): seconds, not minutes, for
    // a large checkpoint.
    assert.doesNotMatch(r.stderr, /precision:/, r.stderr);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});
await check('--cors-allow-origin that no browser could send (a path, capitals, a default port, * among others, an empty entry) → exit 2 naming the form to use', async () => {
  await expectStartupError(['--cors-allow-origin', 'http://localhost:3000/'],
    /error: --cors-allow-origin: 'http:\/\/localhost:3000\/' is not an origin as a browser sends it: a browser's Origin has no path, query or trailing slash: use 'http:\/\/localhost:3000'/);
  await expectStartupError(['--cors-allow-origin', 'HTTP://App.Example:80'], /a browser leaves out the default port 80: use 'http:\/\/app\.example'/);
  await expectStartupError(['--cors-allow-origin', 'http://a.example,*'], /error: --cors-allow-origin: \* allows every origin: give it alone/);
  await expectStartupError(['--cors-allow-origin', 'http://a.example,,http://b.example'], /error: --cors-allow-origin: '' is not an origin as a browser sends it: the entry is empty \(two commas in a row, one at an end, or only spaces\?\)/);
  await expectStartupError(['--cors-allow-origin', ','], /the entry is empty/);
  await expectStartupError(['--cors-allow-origin', ''], /the entry is empty/);
});
await check('empty --api-key / --model-id → exit 2 (an empty key must not switch authentication off)', async () => {
  await expectStartupError(['--api-key', ''], /error: --api-key is empty/);
  await expectStartupError(['--model-id', ''], /error: --model-id is empty/);
});
await check('flags from MAMBA_<FLAG> when not given (a given flag wins); a bad value names its variable; an empty MAMBA_API_KEY is refused', async () => {
  const srv = await startServer(['--model-id', 'from-flag'], {
    env: { MAMBA_API_KEY: 'envkey', MAMBA_MODEL_ID: 'from-env', MAMBA_MAX_INPUT_TOKENS: '7', MAMBA_PORT: '1' } });
  try {
    assert.equal((await fetch(srv.base + '/info')).status, 401, 'MAMBA_API_KEY is the key');
    // The probes' routes need no key (vLLM protects /v1 only; a load balancer sends none).
    for (const [method, route] of [['GET', '/health'], ['GET', '/ping'], ['POST', '/ping']])
      assert.equal((await fetch(srv.base + route, { method })).status, 200, `${method} ${route}`);
    assert.equal((await fetch(srv.base + '/version')).status, 401);
    const info = await (await fetch(srv.base + '/info', { headers: { authorization: 'Bearer envkey' } })).json();
    assert.equal(info.model_id, 'from-flag', '--model-id given: MAMBA_MODEL_ID is not read');
    assert.equal(info.max_input_tokens, 7, 'MAMBA_MAX_INPUT_TOKENS');
    // The log names what came from the environment (the key's name only, never its value).
    assert.match(srv.log(), /from the environment: --max-input-tokens \(MAMBA_MAX_INPUT_TOKENS\), --api-key \(MAMBA_API_KEY\)/);
    assert.doesNotMatch(srv.log(), /envkey|MAMBA_PORT|MAMBA_MODEL_ID/);
    assert.match(srv.log(), /API key required/);
  } finally {
    await srv.stop();
  }
  await expectStartupError([], /error: --port: Value 99999 not in range 0 to 65535\nnote: from the environment: --port \(MAMBA_PORT\)\nRun with --help/,
                           { MAMBA_PORT: '99999' });
  await expectStartupError([], /error: --state-memory: invalid byte size '1Q'[^]*note: from the environment: --state-memory \(MAMBA_STATE_MEMORY\)/,
                           { MAMBA_STATE_MEMORY: '1Q' });
  await expectStartupError([], /error: --cors-allow-origin: 'http:\/\/a.example\/' is not an origin[^]*note: from the environment: --cors-allow-origin/,
                           { MAMBA_CORS_ALLOW_ORIGIN: 'http://b.example, http://a.example/' });
  await expectStartupError([], /error: MAMBA_API_KEY is set but empty/, { MAMBA_API_KEY: '' });
  // A variable within two edits of one the server reads is a typo (MAMBA_APIKEY left the server
  // open): warned about; others of the prefix (micromamba's MAMBA_ROOT_PREFIX) are not.
  const typo = await startServer([], { env: { MAMBA_APIKEY: 'k', MAMBA_ROOT_PREFIX: '/opt/conda' } });
  try {
    assert.match(typo.log(), /warning\] set in the environment but not read: MAMBA_APIKEY \(did you mean MAMBA_API_KEY\?\)\n/);
    assert.doesNotMatch(typo.log(), /MAMBA_ROOT_PREFIX/);
  } finally {
    await typo.stop();
  }
  // A key no client can send (header values lose their spaces; a file's final newline): refused.
  await expectStartupError([], /error: --api-key has a control character[^]*note: from the environment: --api-key \(MAMBA_API_KEY\)/,
                           { MAMBA_API_KEY: 'sekret\n' });
  await expectStartupError(['--api-key', 'sekret '], /error: --api-key starts or ends with whitespace: no client could send it/);
  await expectStartupError(['--model-id', 'x\n[info] forged'], /error: --model-id has a control character/);
  // A bind failure names the variable the port came from.
  const blocker = await startServer([]);
  try {
    await expectStartupError([], /error: cannot bind 127\.0\.0\.1:\d+: Address already in use\nnote: from the environment: --port \(MAMBA_PORT\)/,
                             { MAMBA_PORT: new URL(blocker.base).port });
  } finally {
    await blocker.stop();
  }
  const help = await runServer(['--help']);
  assert.match(help.stdout, /--max-batch-size INT:INT >= 0=0 \(Env:MAMBA_MAX_BATCH_SIZE\)/);
  assert.match(help.stdout, /--api-key TEXT \(Env:MAMBA_API_KEY\)/);
});
await check('empty -m / --host → exit 2 (not the embedded model, not a listen address nobody can reach)', async () => {
  await expectStartupError(['-m', ''], /error: --model: must not be empty/);
  await expectStartupError(['--host', ''], /error: --host: must not be empty/);
});
await check('numbers are plain decimal: 0x50, "" and abc are errors naming the flag', async () => {
  await expectStartupError(['--max-batch-size', '0x50'], /error: --max-batch-size: expected a decimal integer, got '0x50'/);
  await expectStartupError(['--max-concurrent-requests', ''], /error: --max-concurrent-requests: expected a decimal integer, got ''/);
  await expectStartupError(['--shutdown-grace', 'abc'], /error: --shutdown-grace: expected a decimal number, got 'abc'/);
  // A '+' is a decimal sign like '-': "+1" is one ("got +1" before), "+0" zero.
  await expectStartupError(['--threads', '+1', '--max-batch-size', '+1', '--port', '99999'], /error: --port: Value 99999 not in range/);
  await expectStartupError(['--threads', '-01'], /error: --threads: expected an integer from 0 \(all hardware threads\) to 1024, got -1/);
});
await check('chat templates: tokenizer_config.json\'s is rendered (bos/eos, raise_exception → 400, kwargs); --chat-template overrides; one this server cannot render falls back, named', async () => {
  const dir = linkedModelDir('mamba-chattpl-', ['config.json', 'model.safetensors', 'tokenizer.json']);
  // ChatML with the tokenizer's own bos_token first, eos_token after the system turn, and the
  // alternation check of Llama-2-style templates as raise_exception.
  const chatml =
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('Only user, assistant and system roles are supported!') }}{% endif %}" +
    "{{ '<|im_start|>' + m.role + '\\n' + m.content | trim + '<|im_end|>' + '\\n' }}{% if m.role == 'system' %}{{ eos_token }}{% endif %}{% endfor %}" +
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}{% if note is defined %}({{ note }}){% endif %}";
  let eosEntry = null;
  const ids = async (srv, body) => {
    const r = await postJson(srv.base, '/tokenize', body);
    assert.equal(r.status, 200, r.text);
    return r.json.tokens;
  };
  try {
    fs.writeFileSync(path.join(dir, 'tokenizer_config.json'),
                     JSON.stringify({ chat_template: chatml, bos_token: { content: '<s>', lstrip: false }, eos_token: '</s>' }));
    let srv = await startServer(['-m', dir]);
    try {
      assert.match(srv.log(), /chat template: .*tokenizer_config\.json \(\d+ bytes\)/, srv.log());
      const messages = [{ role: 'system', content: ' Be brief. ' }, { role: 'user', content: 'Hi' }];
      const text = '<s><|im_start|>system\nBe brief.<|im_end|>\n</s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n';
      const expected = await ids(srv, { prompt: text, add_special_tokens: false });
      assert.deepEqual(await ids(srv, { messages }), expected);
      assert.deepEqual(await ids(srv, { messages, add_generation_prompt: false }),
                       await ids(srv, { prompt: text.slice(0, -'<|im_start|>assistant\n'.length), add_special_tokens: false }));
      assert.deepEqual(await ids(srv, { messages, chat_template_kwargs: { note: 'x' } }),
                       await ids(srv, { prompt: text + '(x)', add_special_tokens: false }));
      // The chat route runs those ids (its usage counts them) and adds no "\nUser:" stop.
      const r = await postJson(srv.base, '/v1/chat/completions', { messages, max_tokens: 3, temperature: 0 });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.usage.prompt_tokens, expected.length);
      // The template's raise_exception is the client's 400, with its message.
      const bad = await postJson(srv.base, '/v1/chat/completions', { messages: [{ role: 'tool', content: 'x' }], max_tokens: 3 });
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.json.error.message, 'chat template: Only user, assistant and system roles are supported!');
      const badkw = await postJson(srv.base, '/v1/chat/completions', { messages, chat_template_kwargs: 5 });
      assert.equal(badkw.status, 400, badkw.text);
      assert.match(badkw.json.error.message, /`chat_template_kwargs` must be an object/);
      // continue_final_message: the prompt ends inside the assistant's turn.
      assert.deepEqual(await ids(srv, { messages: [...messages, { role: 'assistant', content: 'Once upon ' }], add_generation_prompt: false,
                                        continue_final_message: true }),
                       await ids(srv, { prompt: text.replace(/<\|im_start\|>assistant\n$/, '<|im_start|>assistant\nOnce upon'),
                                        add_special_tokens: false }));
      // A vocabulary entry for the next server's eos_token.
      const t = await postJson(srv.base, '/tokenize', { prompt: 'the', add_special_tokens: false, return_token_strs: true });
      assert.equal(t.status, 200, t.text);
      eosEntry = { id: t.json.tokens[0], text: t.json.token_strs[0] };
    } finally {
      await srv.stop();
    }
    // --chat-template (a file) wins over the tokenizer's; the tokenizer's eos_token (here an
    // ordinary entry, whose id generation_config.json does not name) ends generation, as in vLLM.
    fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: chatml, eos_token: eosEntry.text }));
    const file = path.join(dir, 'simple.jinja');
    fs.writeFileSync(file, "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}");
    srv = await startServer(['-m', dir, '--chat-template', file]);
    try {
      assert.match(srv.log(), new RegExp(`chat template: --chat-template ${file}`), srv.log());
      assert.match(srv.log(), new RegExp(`eos_token .* \\(id ${eosEntry.id}\\) also ends generation`), srv.log());
      assert.deepEqual(await ids(srv, { messages: [{ role: 'user', content: 'hi' }] }),
                       await ids(srv, { prompt: '[user] hi\n', add_special_tokens: false }));
      const r = await postJson(srv.base, '/v1/chat/completions',
                               { messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, temperature: 0, logit_bias: { [eosEntry.id]: 100 } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.choices[0].finish_reason, 'stop', r.text);
      assert.equal(r.json.usage.completion_tokens, 1, r.text);
    } finally {
      await srv.stop();
    }
    await expectStartupError(['-m', dir, '--chat-template', '{% for %}'], /error: --chat-template: .*line 1/);
    await expectStartupError(['-m', dir, '--chat-template', 'no/such.jinja'], /error: --chat-template 'no\/such\.jinja': no such file, and not a template/);
    await expectStartupError(['-m', dir, '--chat-template', dir], /error: --chat-template .*: not a regular file/);
    fs.writeFileSync(path.join(dir, 'empty.jinja'), '');
    await expectStartupError(['-m', dir, '--chat-template', path.join(dir, 'empty.jinja')], /error: --chat-template .*empty\.jinja: the file is empty/);
    await expectStartupError(['-m', dir, '--chat-template', '{{ x | nosuchfilter }}'],
                             /error: --chat-template: chat template: line 1: .*nosuchfilter.* \(rendering one user message\)/);
    // A template this server cannot render: warned about, the fixed format used.
    fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: "{% extends 'base.html' %}" }));
    srv = await startServer(['-m', dir]);
    try {
      assert.match(srv.log(), /tokenizer_config\.json: chat template: line 1: the 'extends' tag is not supported.*fixed "User: …\\n\\nAssistant:" format instead/, srv.log());
      assert.deepEqual(await ids(srv, { messages: [{ role: 'user', content: 'hi' }] }),
                       await ids(srv, { prompt: 'User: hi\n\nAssistant:' }));
    } finally {
      await srv.stop();
    }
    // HF's list of named templates without a "default": warned about (transformers asks for a
    // name), the fixed format used; --chat-template NAME picks one, as apply_chat_template(chat_template=NAME).
    fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
      chat_template: [{ name: 'tool_use', template: '{% for m in messages %}<{{ m.content }}>{% endfor %}' },
                      { name: 'rag', template: '{% for m in messages %}({{ m.content }}){% endfor %}' }] }));
    srv = await startServer(['-m', dir]);
    try {
      assert.match(srv.log(), /tokenizer_config\.json: chat_template lists templates named rag, tool_use but none "default".*--chat-template NAME/, srv.log());
      assert.deepEqual(await ids(srv, { messages: [{ role: 'user', content: 'hi' }] }), await ids(srv, { prompt: 'User: hi\n\nAssistant:' }));
    } finally {
      await srv.stop();
    }
    srv = await startServer(['-m', dir, '--chat-template', 'rag']);
    try {
      assert.match(srv.log(), /chat template: --chat-template rag \(.*tokenizer_config\.json's template of that name\)/, srv.log());
      assert.deepEqual(await ids(srv, { messages: [{ role: 'user', content: 'hi' }] }), await ids(srv, { prompt: '(hi)', add_special_tokens: false }));
    } finally {
      await srv.stop();
    }
    await expectStartupError(['-m', dir, '--chat-template', 'nosuchname'], /error: --chat-template 'nosuchname': no such file, and not a template/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
await check('a model directory without tokenizer.json → exit 2 saying where one comes from; --tokenizer supplies one', async () => {
  const { symlinkSync, rmSync } = await import('node:fs');
  const dir = linkedModelDir('mamba-notok-', []);
  try {
    // A directory that is no checkpoint at all is named for its config.json first (as the model load),
    // not for the tokenizer.json it lacks too.
    await expectStartupError(['-m', dir], new RegExp(`error: ${dir}/config\\.json: no such file`));
    for (const f of ['config.json', 'model.safetensors']) symlinkSync(path.join(modelDir, f), path.join(dir, f));
    await expectStartupError(['-m', dir], /error: .* has no tokenizer\.json, which the server needs .*--tokenizer .*EleutherAI\/gpt-neox-20b/);
    await expectStartupError(['-m', dir, '--tokenizer', path.join(dir, 'nowhere')], /error: --tokenizer: .*nowhere: no such tokenizer file or directory/);
    await expectStartupError(['-m', dir, '--tokenizer', dir], /error: --tokenizer: .*: holds no tokenizer\.json/);
    // --tokenizer as a file or as a directory holding one: the same text as the model with its own.
    const body = { inputs: 'Once upon a time', parameters: { max_new_tokens: 6 } };
    const own = await startServer(['-m', modelDir]);
    let want;
    try {
      want = (await postJson(own.base, '/generate', body)).json.generated_text;
    } finally {
      await own.stop();
    }
    for (const ref of [path.join(modelDir, 'tokenizer.json'), modelDir]) {
      const srv = await startServer(['-m', dir, '--tokenizer', ref]);
      try {
        const r = await postJson(srv.base, '/generate', body);
        assert.equal(r.status, 200, JSON.stringify(r.json));
        assert.equal(r.json.generated_text, want, `--tokenizer ${ref}`);
      } finally {
        await srv.stop();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
/// A Hugging Face hub cache (removed by the caller) holding the embedded model as repo me/tiny at
/// snapshot abc123, the `main` ref pointing at it.
async function makeHub() {
  const { mkdtempSync, mkdirSync, writeFileSync, symlinkSync } = await import('node:fs');
  const hub = mkdtempSync(path.join(os.tmpdir(), 'mamba-hub-'));
  const repo = path.join(hub, 'models--me--tiny');
  mkdirSync(path.join(repo, 'refs'), { recursive: true });
  mkdirSync(path.join(repo, 'snapshots'), { recursive: true });
  writeFileSync(path.join(repo, 'refs', 'main'), 'abc123');
  symlinkSync(path.resolve(modelDir), path.join(repo, 'snapshots', 'abc123'));
  return hub;
}
await check('a Hugging Face repo id is the default model id, also for a snapshot named by its hash', async () => {
  const { rmSync } = await import('node:fs');
  const hub = await makeHub();
  try {
    for (const ref of ['me/tiny', 'me/tiny@abc123']) {
      const srv = await startServer(['-m', ref], { env: { HF_HUB_CACHE: hub } });
      try {
        const info = await (await fetch(srv.base + '/info')).json();
        assert.equal(info.model_id, ref);
        const models = await (await fetch(srv.base + '/v1/models')).json();
        assert.equal(models.data[0].id, ref);
      } finally {
        assert.equal((await srv.stop()).code, 0);
      }
    }
  } finally {
    rmSync(hub, { recursive: true, force: true });
  }
});
await check('--model-id mamba is kept as given; $MAMBA_MODEL as a repo id names the model when -m is not given', async () => {
  const { rmSync } = await import('node:fs');
  const named = await startServer(['--model-id', 'mamba']);
  try {
    assert.equal((await (await fetch(named.base + '/v1/models')).json()).data[0].id, 'mamba');
  } finally {
    assert.equal((await named.stop()).code, 0);
  }
  const hub = await makeHub();
  try {
    const srv = await startServer([], { env: { HF_HUB_CACHE: hub, MAMBA_MODEL: 'me/tiny' } });
    try {
      assert.equal((await (await fetch(srv.base + '/info')).json()).model_id, 'me/tiny');
    } finally {
      assert.equal((await srv.stop()).code, 0);
    }
  } finally {
    rmSync(hub, { recursive: true, force: true });
  }
});
await check('prompts get the tokenizer\'s post-processor specials (a BOS), as TGI / vLLM / HF tokenizer(text); add_special_tokens: false leaves them out', async () => {
  const { mkdtempSync, readFileSync, writeFileSync, rmSync } = await import('node:fs');
  const { postJson } = await import('./lib.mjs');
  // The embedded model's tokenizer with a Llama-style post-processor: BOS = id 0 before the text.
  const tj = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8'));
  const bos = tj.added_tokens.find((t) => t.id === 0).content;
  tj.post_processor = {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { [bos]: { id: bos, ids: [0], tokens: [bos] } },
  };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mamba-bos-'));
  const tokFile = path.join(dir, 'tokenizer.json');
  writeFileSync(tokFile, JSON.stringify(tj));
  const srv = await startServer(['-m', modelDir, '--tokenizer', tokFile]);
  try {
    const text = 'Once upon a time';
    const plain = (await postJson(srv.base, '/tokenize', { inputs: text, add_special_tokens: false })).json;
    const full = (await postJson(srv.base, '/tokenize', { inputs: text })).json;
    assert.equal(full.length, plain.length + 1);
    assert.deepEqual(full[0], { id: 0, text: bos, start: 0, stop: 0 });  // not in the text: HF's (0, 0)
    assert.deepEqual(full.slice(1), plain);
    assert.equal(plain.at(-1).stop, text.length);
    const gen = await postJson(srv.base, '/generate', { inputs: text, parameters: { max_new_tokens: 2, details: true, decoder_input_details: true } });
    assert.equal(gen.status, 200, gen.text);
    assert.deepEqual(gen.json.details.prefill.map((t) => t.id), full.map((t) => t.id));
    const gen2 = await postJson(srv.base, '/generate', { inputs: text, add_special_tokens: false, parameters: { max_new_tokens: 2, details: true, decoder_input_details: true } });
    assert.deepEqual(gen2.json.details.prefill.map((t) => t.id), plain.map((t) => t.id));
    for (const [route, body] of [['/v1/completions', { prompt: text }], ['/v1/chat/completions', { messages: [{ role: 'user', content: text }] }]]) {
      const a = await postJson(srv.base, route, { ...body, max_tokens: 1 });
      const b = await postJson(srv.base, route, { ...body, max_tokens: 1, add_special_tokens: false });
      assert.equal(a.status, 200, a.text);
      assert.equal(a.json.usage.prompt_tokens, b.json.usage.prompt_tokens + 1, route);
    }
    const bad = await postJson(srv.base, '/v1/completions', { prompt: text, add_special_tokens: 'yes' });
    assert.equal(bad.status, 400);  // a bad parameter under /v1: OpenAI's 400
    // vLLM's /tokenize shape ({prompt} or {messages} → {count, max_model_len, tokens}): the ids the
    // generation routes run, the same defaults; /detokenize gives the text back, specials kept.
    const info = (await (await fetch(srv.base + '/info')).json());
    const v = await postJson(srv.base, '/tokenize', { model: 'any', prompt: text });
    assert.equal(v.status, 200, v.text);
    assert.deepEqual(Object.keys(v.json), ['count', 'max_model_len', 'tokens']);
    assert.deepEqual(v.json.tokens, full.map((t) => t.id));
    assert.equal(v.json.count, full.length);
    assert.equal(v.json.max_model_len, info.max_total_tokens);
    const vp = await postJson(srv.base, '/tokenize', { prompt: text, add_special_tokens: false, return_token_strs: true });
    assert.deepEqual(vp.json.tokens, plain.map((t) => t.id));
    assert.equal(vp.json.token_strs.length, plain.length);
    assert.equal((await postJson(srv.base, '/tokenize', { prompt: text, return_token_strs: true })).json.token_strs[0], bos);
    const messages = [{ role: 'user', content: text }];
    const chat = await postJson(srv.base, '/v1/chat/completions', { messages, max_tokens: 1 });
    const vm = await postJson(srv.base, '/tokenize', { messages });
    assert.equal(vm.json.count, chat.json.usage.prompt_tokens);
    const vm2 = await postJson(srv.base, '/tokenize', { messages, add_generation_prompt: false });
    assert.ok(vm2.json.count < vm.json.count, `${vm2.json.count} ≥ ${vm.json.count}`);
    const d = await postJson(srv.base, '/detokenize', { model: 'any', tokens: plain.map((t) => t.id) });
    assert.equal(d.status, 200, d.text);
    assert.deepEqual(d.json, { prompt: text });
    assert.equal((await postJson(srv.base, '/detokenize', { tokens: full.map((t) => t.id) })).json.prompt, bos + text);
    for (const [route, body, want] of [
      ['/tokenize', { prompt: text, messages }, 'give `prompt` or `messages`, not both'],
      ['/tokenize', { prompt: 7 }, '`prompt`'],
      ['/tokenize', { prompt: null }, '`prompt` (a string) or `messages` is required'],  // not TGI's `inputs`
      ['/detokenize', { tokens: [1, -1] }, '`tokens[1]` must be a token id'],
      ['/detokenize', { tokens: [1, 1 << 30] }, `\`tokens[1]\` = ${1 << 30} is outside the vocabulary [0, ${tj.model.vocab ? Object.keys(tj.model.vocab).length + tj.added_tokens.filter((a) => !(a.content in tj.model.vocab)).length : 0})`],
      ['/detokenize', {}, '`tokens` is required'],
    ]) {
      const r = await postJson(srv.base, route, body);
      assert.equal(r.status, 422, `${route} ${JSON.stringify(body)}: ${r.text}`);
      assert.ok(r.json.error.includes(want), `${route} ${JSON.stringify(body)}: ${r.json.error}`);
    }
  } finally {
    assert.equal((await srv.stop()).code, 0);
    rmSync(dir, { recursive: true, force: true });
  }
});
await check('a default max_new_tokens shrinks to --max-total-tokens (as TGI); a given one that does not fit is a 422 (OpenAI: 400 context_length_exceeded) naming the route\'s fields', async () => {
  const { postJson } = await import('./lib.mjs');
  const srv = await startServer(['--max-input-tokens', '30', '--max-total-tokens', '40']);
  try {
    const ok = await postJson(srv.base, '/generate', { inputs: 'one two' });  // default 100 new tokens
    assert.equal(ok.status, 200, ok.text);
    const chat = await postJson(srv.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(chat.status, 200, chat.text);
    const tgi = await postJson(srv.base, '/generate', { inputs: 'one two', parameters: { max_new_tokens: 39 } });
    assert.equal(tgi.status, 422);
    assert.match(tgi.json.error, /`inputs` tokens \+ `max_new_tokens` must be <= 40/);
    const oai = await postJson(srv.base, '/v1/completions', { prompt: 'one two', max_tokens: 39 });
    assert.equal(oai.status, 400);
    assert.match(oai.json.error.message, /`prompt` tokens \+ `max_tokens` must be <= 40 \(--max-total-tokens, the server's maximum context length\)/);
    assert.equal(oai.json.error.code, 'context_length_exceeded');
    // A count past --max-total-tokens on its own is the same error (it had been a plain range error,
    // "must be <= 40", code validation: clients looking for context_length_exceeded missed it).
    for (const [route, body, field] of [['/v1/completions', { prompt: 'one two', max_tokens: 200000 }, 'max_tokens'],
                                        ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 200000 }, 'max_completion_tokens']]) {
      const big = await postJson(srv.base, route, body);
      assert.equal(big.status, 400, big.text);
      assert.equal(big.json.error.code, 'context_length_exceeded', big.text);
      assert.match(big.json.error.message, new RegExp('`' + field + '` must be <= 40 \\(--max-total-tokens, the server\'s maximum context length\\)'));
    }
    const long = await postJson(srv.base, '/v1/completions', { prompt: 'a b c d e f g h i j '.repeat(4) });
    assert.equal(long.status, 400);
    assert.match(long.json.error.message, /`prompt` must have at most 30 tokens \(--max-input-tokens, the server's maximum context length for a prompt\)/);
    assert.equal(long.json.error.code, 'context_length_exceeded');
    assert.equal(long.json.error.param, 'prompt');
    // /tokenize has the same bound (its answer is ~50 bytes per token: unbounded, it took gigabytes).
    const tok = await postJson(srv.base, '/tokenize', { inputs: 'a b c d e f g h i j '.repeat(4) });
    assert.equal(tok.status, 422, tok.text);
    assert.match(tok.json.error, /`inputs` must have at most 30 tokens \(--max-input-tokens\)\. Given: 41/);
    assert.equal((await postJson(srv.base, '/tokenize', { inputs: 'one two' })).status, 200);
    // `parameters.truncate` keeps the last tokens first (as /generate's prompt): then within the bound.
    const cut = await postJson(srv.base, '/tokenize', { inputs: 'a b c d e f g h i j '.repeat(4), parameters: { truncate: 5 } });
    assert.equal(cut.status, 200, cut.text);
    assert.equal(cut.json.length, 5);
    const whole = 'a b c d e f g h i j '.repeat(4);
    assert.equal(whole.slice(cut.json[0].start, cut.json.at(-1).stop), whole.slice(cut.json[0].start));
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});
await check('a model directory given as DIR/ is named DIR; --max-total-tokens alone lowers the default --max-input-tokens; /info gives the prefill budget as raised to one chunk', async () => {
  const srv = await startServer(['-m', modelDir + '/', '--max-total-tokens', '40', '--max-batch-prefill-tokens', '10']);
  try {
    const info = await (await fetch(srv.base + '/info')).json();
    assert.equal(info.model_id, path.basename(path.resolve(modelDir)));
    assert.equal(info.max_input_tokens ?? info.max_input_length, 39, JSON.stringify(info));
    const chunk = JSON.parse(fs.readFileSync(path.join(modelDir, 'config.json'), 'utf8')).chunk_size;
    assert.ok(chunk > 10, `chunk_size ${chunk}`);
    assert.equal(info.max_batch_prefill_tokens, chunk, JSON.stringify(info));
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});
await check('SIGTERM during start-up (allocating the state slots) exits at once, 143, logged', async () => {
  // The signals were blocked from before the model load until the server listened: a SIGTERM then
  // waited for the whole start-up (17 s for 1900 slots on a VM), and a second one was lost.
  const model = process.env.MAMBA_E2E_MODEL ? ['-m', process.env.MAMBA_E2E_MODEL] : [];
  const proc = spawn(SERVER_BIN, [...model, '--host', '127.0.0.1', '--port', '0', '--max-concurrent-requests', '500', '--state-memory', '1GiB'],
                     { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '', stdout = '';
  proc.stdout.on('data', (d) => (stdout += d.toString()));
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  let sent = 0;
  proc.stderr.on('data', (d) => {
    stderr += d.toString();
    if (!sent && /allocating \d+ state slots?/.test(stderr)) {
      sent = Date.now();
      proc.kill('SIGTERM');
    }
  });
  const timer = setTimeout(() => proc.kill('SIGKILL'), 30000);
  const ex = await exited;
  clearTimeout(timer);
  const what = `exit ${ex.code} ${ex.signal ?? ''}\nstdout:\n${stdout}\nstderr:\n${stderr}`;
  assert.ok(sent, what);
  if (/listening on/.test(stdout)) {  // start-up outran the signal: nothing to check
    console.log('  (the slots were allocated before the signal arrived: not checked)');
    return;
  }
  assert.equal(ex.code, 143, what);
  assert.match(stderr, /received SIGTERM during start-up: exiting at once/, what);
  assert.ok(Date.now() - sent < 5000, what);
});
await check('--help exits 0', async () => {
  const r = await runServer(['--help']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /--shutdown-grace/);
});

await check('auto counts the state slots --state-memory sizes (not --max-concurrent-requests alone)', async () => {
  // The embedded model's state is ~1.6 MiB: 8 MiB holds fewer slots than the default 128 requests.
  const srv = await startServer(['--state-memory', '8MiB']);
  try {
    const counted = srv.log().match(/; counted (\d+) MiB of state slots, (\d+) MiB of prefix cache\)/), pool = srv.log().match(/allocating (\d+) state slots? \((\d+) MiB\)/);
    assert.ok(counted && pool, srv.log());
    assert.ok(Number(pool[1]) < 128 && Number(pool[2]) <= 8, srv.log());
    assert.equal(counted[1], pool[2], srv.log());
    assert.equal(counted[2], '512', srv.log());  // --prefix-cache-memory's default
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});

await check('auto counts --prefix-cache-memory too: a cache past the machine\'s memory leaves the weights exact, saying why', async () => {
  const srv = await startServer(['--prefix-cache-memory', '100000GiB', '--state-memory', '8MiB']);
  try {
    assert.match(srv.log(), /; counted \d+ MiB of state slots, 102400000 MiB of prefix cache\)/, srv.log());
    if (/cpu: avx512 \([^\n]*BF16 yes/.test(srv.log())) {
      assert.equal((await (await fetch(srv.base + '/info')).json()).precision, 'exact');
      assert.match(srv.log(), /precision: exact \(auto: the bf16 tier's copy of the projections \([\d.]+ GB\), [\d.]+ GB reserved \(states, caches\)/, srv.log());
    }
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});

await check('--precision in any case (as MAMBA_CPU_TARGET), from MAMBA_PRECISION too; a bad value → exit 2', async () => {
  // 'EXACT' had passed the check and then failed to parse after it: an abort, not an error line.
  for (const [args, env] of [[['--precision', 'EXACT'], undefined], [[], { MAMBA_PRECISION: 'Exact' }]]) {
    const srv = await startServer(args, { env });
    try {
      const info = await (await fetch(srv.base + '/info')).json();
      assert.equal(info.precision, 'exact', JSON.stringify(args) + JSON.stringify(env));
      assert.match(srv.log(), /precision: exact; compute threads/);
    } finally {
      assert.equal((await srv.stop()).code, 0);
    }
  }
  await expectStartupError(['--precision', 'fp8'], /error: --precision: expected auto, exact, bf16 or int8, got 'fp8'/);
});

exitWithChecks();
