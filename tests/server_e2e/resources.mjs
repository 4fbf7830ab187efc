// End-to-end resource bounds: what a request body costs the server beyond its own bytes. A parsed
// JSON body is up to ~35× its text (an 8 MiB body of nested arrays in a field the server ignores is
// ~260 MB of DOM): it must not be kept while its generation runs, and however many clients send
// such bodies at once, only a few are parsed and tokenized at a time (the rest wait), with the memory
// given back after each. Memory is read from /proc/PID/status (Linux; elsewhere the script skips).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { deadline, startServer, check, exitWithChecks, sleep, waitFor, SKIP_CODE } from './lib.mjs';

deadline(200);

if (!fs.existsSync('/proc/self/status')) {
  console.log('SKIP: no /proc/PID/status to read the server\'s memory from');
  process.exit(SKIP_CODE);
}

/// The server's resident memory in MiB (VmRSS), or its peak (VmHWM).
function rssMiB(pid, field = 'VmRSS') {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return Number(m[1]) / 1024;
}

/// An ~8 MB completion request (under the 8 MiB limit) whose bulk is `levels` levels of arrays in an
/// unknown field, which the server ignores (as vLLM does) after parsing it: runs of arrays nested
/// 200 deep (the server refuses more than 256 levels), side by side, ~31 bytes of DOM per byte.
function nestedBody(levels, fields) {
  const run = '['.repeat(200) + ']'.repeat(200);
  return `{${JSON.stringify(fields).slice(1, -1)},"x":[${Array(Math.floor(levels / 200)).fill(run).join(',')}]}`;
}

/// Starts a stream and resolves once its first event arrived (the request runs), with the abort.
async function startStream(base, body) {
  const ctrl = new AbortController();
  const res = await fetch(base + '/v1/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    signal: ctrl.signal,
  });
  assert.equal(res.status, 200, await (res.status === 200 ? '' : res.text()));
  const reader = res.body.getReader();
  const { value } = await reader.read();
  assert.match(new TextDecoder().decode(value), /data: /);
  return () => ctrl.abort();
}

const srv = await startServer();
const pid = srv.proc.pid;

await check('a running generation does not keep its parsed body (4 × 8 MB nested bodies)', async () => {
  const before = rssMiB(pid);
  const body = nestedBody(4_000_000, { prompt: 'Hello', max_tokens: 100000, ignore_eos: true, stream: true });
  assert.ok(body.length < 8 * 1024 * 1024, `${body.length}`);
  const aborts = [];
  try {
    // One after another: each parse's peak is freed before the next begins; what stays is what the
    // running requests hold (with the DOM kept: ~270 MB each).
    for (let i = 0; i < 4; i++) aborts.push(await startStream(srv.base, body));
    await sleep(1500);  // the malloc_trim that follows a large body
    const grown = rssMiB(pid) - before;
    assert.ok(grown < 400, `4 running requests with 8 MB bodies grew the server by ${grown.toFixed(0)} MiB`);
  } finally {
    for (const a of aborts) a();
  }
});

await check('endless header lines: 431 once the head passes 64 KiB, the connection ends (its rest read and dropped for at most 2 s), memory does not grow (4 × 100 MB)', async () => {
  const { connect } = await import('node:net');
  const url = new URL(srv.base);
  const before = rssMiB(pid);
  const flood = () => new Promise((resolve, reject) => {
    const sock = connect(Number(url.port), url.hostname);
    let reply = '';
    let sent = 0;
    const line = `X-Pad: ${'p'.repeat(4000)}\r\n`.repeat(16);  // 64 KB a write
    const pump = () => {
      while (sent < 100e6 && !sock.destroyed) {
        sent += line.length;
        if (!sock.write(line)) return sock.once('drain', pump);
      }
    };
    sock.on('connect', () => { sock.write('GET /info HTTP/1.1\r\nHost: x\r\n'); pump(); });
    sock.on('data', (d) => { reply += d; });
    sock.on('error', () => {});  // the server ends the connection mid-flood
    sock.on('close', () => resolve({ reply }));
    setTimeout(() => { sock.destroy(); reject(new Error(`no end after 60 s (${sent} bytes sent; ${reply.slice(0, 200)})`)); }, 60000);
  });
  const results = await Promise.all([flood(), flood(), flood(), flood()]);
  for (const { reply } of results) {
    assert.match(reply, /^HTTP\/1\.1 431 /, reply.slice(0, 300));
    assert.match(reply, /"error_type":"request_header_fields_too_large"/);
    assert.match(reply, /\r\nConnection: close\r\n/i);
  }
  const grown = rssMiB(pid) - before;
  // cpp-httplib 0.11 alone kept every header line: ~2× the bytes sent (200 MB of lines: +380 MB).
  assert.ok(grown < 50, `4 floods of header lines grew the server by ${grown.toFixed(0)} MiB`);
});

await srv.stop();

await check('10 clients sending 8 MB bodies at once: peak memory stays bounded', async () => {
  const fresh = await startServer();
  try {
    const before = rssMiB(fresh.proc.pid, 'VmHWM');
    const body = nestedBody(4_000_000, { prompt: 'Hi', inputs: 'Hi', max_tokens: 1, parameters: { max_new_tokens: 1 } });
    const routes = ['/v1/completions', '/generate', '/tokenize', '/v1/chat/completions', '/'];
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        fetch(fresh.base + routes[i % routes.length], { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(
          async (r) => [r.status, await r.text()],
        ),
      ),
    );
    // Each is answered as a small body would be (chat: no `messages` → 400, OpenAI's validation
    // status; /tokenize: TGI's `inputs` and vLLM's `prompt` together → 422).
    const want = [200, 200, 422, 400, 200];
    for (const [i, [status, text]] of answers.entries()) assert.equal(status, want[i % 5], text);
    const grown = rssMiB(fresh.proc.pid, 'VmHWM') - before;
    // Each parse peaks at ~300 MB; all 10 at once took ~3 GB, two at a time take under 1 GB.
    assert.ok(grown < 1400, `10 concurrent 8 MB bodies raised the server's peak memory by ${grown.toFixed(0)} MiB`);
    await sleep(200);
    const after = rssMiB(fresh.proc.pid) - before;
    assert.ok(after < 400, `${after.toFixed(0)} MiB were still held after the answers`);
  } finally {
    await fresh.stop();
  }
});

await check('600 connections waiting for their clients (idle, or trickling a head) hold no HTTP thread: /health answers at once', async () => {
  // 40 HTTP threads; each waiting connection held one (until its keep-alive timeout or head deadline).
  const fresh = await startServer(['--http-threads', '40']);
  const { connect } = await import('node:net');
  const url = new URL(fresh.base);
  const socks = [];
  try {
    const before = rssMiB(fresh.proc.pid);
    for (let i = 0; i < 600; i++) {
      const sock = connect(Number(url.port), url.hostname);
      sock.on('error', () => {});
      socks.push(sock);
      await new Promise((resolve) => sock.on('connect', resolve));
      if (i % 2) sock.write('GET /health HTTP/1.1\r\nHost: x\r\n');  // half a head
    }
    await sleep(300);
    for (let round = 0; round < 3; round++) {
      const t0 = Date.now();
      const res = await fetch(fresh.base + '/health');
      assert.equal(res.status, 200);
      assert.ok(Date.now() - t0 < 500, `/health took ${Date.now() - t0} ms with 600 connections waiting`);
    }
    const grown = rssMiB(fresh.proc.pid) - before;
    assert.ok(grown < 64, `600 waiting connections cost ${grown.toFixed(0)} MiB`);
    // the half heads, finished, are answered
    const answered = await Promise.all(
      socks.filter((_, i) => i % 2).slice(0, 100).map(
        (sock) =>
          new Promise((resolve) => {
            sock.once('data', (d) => resolve(d.toString().startsWith('HTTP/1.1 200')));
            sock.write('\r\n');
          }),
      ),
    );
    assert.equal(answered.filter(Boolean).length, 100);
  } finally {
    for (const sock of socks) sock.destroy();
    await fresh.stop();
  }
});

await check('300 clients trickling request bodies hold no HTTP thread: /health answers at once, the bodies once whole are served', async () => {
  // 40 HTTP threads; each client sent a head and part of its body, by Content-Length or chunked.
  // A worker read each body as it came (no overall deadline): 170 of them left none for /health.
  const fresh = await startServer(['--http-threads', '40']);
  const { connect } = await import('node:net');
  const url = new URL(fresh.base);
  // (200 KB of trailing whitespace: half a body fills a buffer well past its uncounted 4 KiB)
  const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 2, temperature: 0 }) + ' '.repeat(200_000);
  const half = body.length >> 1;
  const gauge = async (name) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await fetch(fresh.base + '/metrics')).text())[1]);
  const socks = [];
  try {
    for (let i = 0; i < 300; i++) {
      const sock = connect(Number(url.port), url.hostname);
      sock.on('error', () => {});
      socks.push(sock);
      await new Promise((resolve) => sock.on('connect', resolve));
      const framing = i % 2 ? `Content-Length: ${body.length}` : 'Transfer-Encoding: chunked';
      const part = i % 2 ? body.slice(0, half) : `${half.toString(16)}\r\n${body.slice(0, half)}\r\n`;
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${framing}\r\n\r\n${part}`);
    }
    await sleep(300);
    for (let round = 0; round < 3; round++) {
      const t0 = Date.now();
      const res = await fetch(fresh.base + '/health');
      assert.equal(res.status, 200);
      assert.ok(Date.now() - t0 < 500, `/health took ${Date.now() - t0} ms with 300 bodies arriving`);
    }
    assert.ok((await gauge('mamba_http_connections_parked')) >= 300);
    const ahead = await gauge('mamba_http_read_ahead_bytes');
    assert.ok(ahead >= 300 * (half - 4096) && ahead <= 128 << 20, `${ahead} bytes read ahead`);
    const want = await (await fetch(fresh.base + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body })).json();
    const answers = await Promise.all(
      socks.slice(0, 60).map(
        (sock, i) =>
          new Promise((resolve) => {
            let got = '';
            sock.on('data', (d) => {
              got += d.toString();
              const end = got.indexOf('\r\n\r\n');
              const len = /content-length: (\d+)/i.exec(got);
              if (end >= 0 && len && got.length >= end + 4 + Number(len[1])) resolve(got);
            });
            const rest = body.slice(half);
            sock.write(i % 2 ? rest : `${rest.length.toString(16)}\r\n${rest}\r\n0\r\n\r\n`);
          }),
      ),
    );
    for (const a of answers) {
      assert.match(a, /^HTTP\/1\.1 200/, a.slice(0, 300));
      assert.equal(JSON.parse(a.slice(a.indexOf('\r\n\r\n') + 4)).choices[0].text, want.choices[0].text);
    }
    for (const sock of socks) sock.destroy();
    // every buffer given back once its connection is gone (else later bodies would find no room)
    assert.ok(await waitFor(async () => (await gauge('mamba_http_read_ahead_bytes')) === 0, { timeoutMs: 5000 }), 'read-ahead bytes left counted');
  } finally {
    for (const sock of socks) sock.destroy();
    await fresh.stop();
  }
});

await check('bodies read ahead stay within their 128 MiB and leave a worker free: 8 MiB bodies held one byte short, and refused ones while their clients linger', async () => {
  // Each held body's buffer was read whole before the limit was asked, then handed to a worker
  // uncounted (60 × 8 MiB: +670 MB with 4 workers); a body refused unread (405) kept its buffer
  // while its client lingered (30 × 8 MiB: +240 MB for up to 30 s).
  const fresh = await startServer(['--http-threads', '4']);
  const { connect } = await import('node:net');
  const url = new URL(fresh.base);
  const size = 8 << 20;
  const socks = [];
  const open = async (path, bytes) => {
    const sock = connect({ port: Number(url.port), host: url.hostname, allowHalfOpen: true });
    sock.on('error', () => {});
    sock.on('data', () => {});
    socks.push(sock);
    await new Promise((resolve) => sock.on('connect', resolve));
    sock.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`);
    sock.write(Buffer.alloc(bytes, 0x20));
    return sock;
  };
  try {
    const before = rssMiB(fresh.proc.pid);
    for (let i = 0; i < 30; i++) await open('/health', size);  // 405, refused unread
    for (let i = 0; i < 60; i++) await open('/v1/completions', size - 1);
    const tick = setInterval(() => { for (const s of socks.slice(0, 30)) s.write('x'); }, 1000);  // the refused ones linger
    try {
      await sleep(3000);
      const grown = rssMiB(fresh.proc.pid) - before;
      assert.ok(grown < 400, `90 clients with 8 MiB bodies grew the server by ${grown.toFixed(0)} MiB`);
      // the bodies past the limit took at most 3 of the 4 workers: one answers at once
      const t0 = Date.now();
      assert.equal((await fetch(fresh.base + '/health')).status, 200);
      assert.ok(Date.now() - t0 < 1000, `/health took ${Date.now() - t0} ms`);
    } finally {
      clearInterval(tick);
    }
  } finally {
    for (const sock of socks) sock.destroy();
    await fresh.stop();
  }
});

exitWithChecks();
