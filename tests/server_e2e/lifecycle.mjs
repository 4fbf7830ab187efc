// End-to-end lifecycle: a client that disconnects mid-stream or while waiting for a non-stream
// answer frees its slot (metrics), a full server answers 429, SIGTERM drains in-flight requests
// (they complete) and exits 0.
import assert from 'node:assert/strict';
import { deadline, startServer, postJson, postSse, metrics, waitFor, sleep, check, exitWithChecks, apiError } from './lib.mjs';

deadline(120);
const endless = { inputs: 'Once upon a time', parameters: { max_new_tokens: 100000 } };

{
  const srv = await startServer(['--max-concurrent-requests', '2']);
  const { base } = srv;
  await check('disconnect mid-stream cancels the sequence and frees its slot', async () => {
    const s = await postSse(base, '/generate_stream', endless, { onEvent: (_, i) => i < 4 });
    assert.ok(s.aborted);
    assert.equal(s.events.length, 5);
    const freed = await waitFor(async () => (await metrics(base)).mamba_slots_in_use === 0, { timeoutMs: 5000 });
    assert.ok(freed, 'slot still in use 5 s after the client left');
    const m = await metrics(base);
    assert.ok(m['mamba_requests_total{outcome="cancelled"}'] >= 1);
    // The request's log line has the tokens it reached (it logged zeros and no finish before).
    const line = /route=\/generate_stream client=127\.0\.0\.1 prompt_tokens=[1-9]\d* generated_tokens=[1-9]\d* .*finish=cancelled cancelled_by=client_gone$/m;
    assert.ok(await waitFor(async () => line.test(srv.log()), { timeoutMs: 5000 }), `no such log line:\n${srv.log()}`);
  });

  await check('non-stream client that leaves: sequence cancelled, slot freed (TGI and OpenAI)', async () => {
    const cancelled = async () => (await metrics(base))['mamba_requests_total{outcome="cancelled"}'];
    const rejected = async () => (await metrics(base))['mamba_requests_total{outcome="rejected"}'];
    const before = await cancelled(), rejectedBefore = await rejected();
    for (const [route, body] of [['/generate', endless], ['/v1/completions', { prompt: 'hi', max_tokens: 100000 }]]) {
      const ctrl = new AbortController();
      const req = fetch(base + route, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: ctrl.signal,
      }).catch((e) => e);
      assert.ok(await waitFor(async () => (await metrics(base)).mamba_running_sequences === 1), `${route} never ran`);
      ctrl.abort();  // closes the connection, as curl -m does on timeout
      assert.equal((await req).name, 'AbortError');
      const freed = await waitFor(async () => (await metrics(base)).mamba_slots_in_use === 0, { timeoutMs: 5000 });
      assert.ok(freed, `${route}: slot still in use 5 s after the client left`);
    }
    assert.equal((await cancelled()) - before, 2);
    await sleep(500);  // the route's answer to the gone client comes just after the slot is freed
    assert.equal((await rejected()) - rejectedBefore, 0, 'a client that left is counted as cancelled only, not rejected');
    for (const route of ['/generate', '/v1/completions'])
      assert.match(srv.log(), new RegExp(`route=${route} client=127\\.0\\.0\\.1 prompt_tokens=\\d+ .*finish=cancelled cancelled_by=client_gone$`, 'm'), route);
  });

  await check('non-stream client that half-closes: cancelled, and answered 400 "cancelled" if it still reads', async () => {
    const { connect } = await import('node:net');
    const rejectedBefore = (await metrics(base))['mamba_requests_total{outcome="rejected"}'];
    const url = new URL(base);
    for (const [route, body] of [['/generate', endless], ['/v1/completions', { prompt: 'hi', max_tokens: 100000 }]]) {
      const payload = JSON.stringify(body);
      const sock = connect({ port: Number(url.port), host: url.hostname, allowHalfOpen: true });
      sock.on('error', () => {});
      await new Promise((resolve) => sock.on('connect', resolve));
      let reply = '';
      const ended = new Promise((resolve) => { sock.on('data', (d) => { reply += d; }); sock.on('end', resolve); });
      sock.end(`POST ${route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\n\r\n${payload}`);
      await Promise.race([ended, sleep(10000)]);
      sock.destroy();
      assert.match(reply, /^HTTP\/1.1 400 /, `${route}: ${reply.slice(0, 300)}`);
      assert.equal(apiError(route, JSON.parse(reply.split('\r\n\r\n')[1])).type, 'cancelled', route);
      assert.match(reply, /half-close/, route);
      assert.ok(await waitFor(async () => (await metrics(base)).mamba_slots_in_use === 0, { timeoutMs: 5000 }), `${route}: slot not freed`);
    }
    assert.equal((await metrics(base))['mamba_requests_total{outcome="rejected"}'] - rejectedBefore, 0,
                 'a half-closed client is counted as cancelled only, not rejected');
  });

  await check('queue overflow → 429 overloaded; served again once capacity frees', async () => {
    const ctrl = [];
    const started = [];
    for (let k = 0; k < 2; k++) {
      const got = new Promise((resolve) => {
        const p = postSse(base, '/generate_stream', endless, { onEvent: () => { resolve(); return !ctrl[k]; } });
        started.push(p);
      });
      await got;
    }
    const r = await postJson(base, '/generate', { inputs: 'x', parameters: { max_new_tokens: 2 } });
    assert.equal(r.status, 429, r.text);
    assert.equal(r.json.error_type, 'overloaded');
    assert.equal(r.headers.get('retry-after'), '1');  // the OpenAI SDKs wait as it says before their retry
    assert.match(r.json.error, /Model is overloaded: 2 requests are already in flight/);
    ctrl[0] = ctrl[1] = true;  // next event aborts both streams
    await Promise.all(started);
    assert.ok(await waitFor(async () => (await metrics(base)).mamba_slots_in_use === 0));
    const ok = await postJson(base, '/generate', { inputs: 'x', parameters: { max_new_tokens: 2 } });
    assert.equal(ok.status, 200);
    assert.ok((await metrics(base))['mamba_requests_total{outcome="overloaded"}'] >= 1);
  });
  assert.equal((await srv.stop()).code, 0);
}

await check('SIGTERM drains: in-flight requests complete, then exit 0', async () => {
  const srv = await startServer([]);
  const { base } = srv;
  const body = { inputs: 'The king said', parameters: { max_new_tokens: 60, details: true } };
  const alone = await postJson(base, '/generate', body);
  let settled = 0;
  const inflight = postJson(base, '/generate', body).finally(() => ++settled);
  const stream = postSse(base, '/generate_stream', body).finally(() => ++settled);
  // SIGTERM once both are running (a fixed 30 ms sleep sent it before a loaded server had accepted
  // them: a 503, as it should be for a request that arrives while draining).
  const running = await waitFor(async () => settled === 2 || (await metrics(base)).mamba_running_sequences === 2, { stepMs: 5 });
  assert.ok(running, 'the two requests never ran together');
  srv.proc.kill('SIGTERM');
  const [r, s] = await Promise.all([inflight, stream]);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.generated_text, alone.json.generated_text);
  assert.equal(s.events.at(-1).generated_text, alone.json.generated_text);
  const ex = await srv.exited;
  assert.equal(ex.code, 0);
  assert.match(srv.log(), /req=\d+ route=\/generate client=127\.0\.0\.1 prompt_tokens=\d+ generated_tokens=\d+ queue_ms=/);
});

await check('SIGTERM with a request that cannot finish: cancelled after the grace period, exit 0', async () => {
  const srv = await startServer(['--shutdown-grace', '0.5']);
  const s = postSse(srv.base, '/generate_stream', endless);
  const o = postSse(srv.base, '/v1/completions', { prompt: 'hi', max_tokens: 100000, stream: true });
  await sleep(300);
  srv.proc.kill('SIGTERM');
  const res = await s;
  assert.ok(res.events.length > 0);
  assert.ok(res.events.at(-1).error, 'the stream ends with an error event');
  assert.equal(apiError('/generate_stream', res.events.at(-1)).type, 'unavailable');
  // OpenAI's stream ends with its error event in OpenAI's shape (the SDK throws it as an APIError), then [DONE].
  const ores = await o;
  assert.equal(apiError('/v1/completions', ores.events.filter((e) => e.error).at(-1)).type, 'unavailable', ores.raw.slice(-400));
  const ex = await srv.exited;
  assert.equal(ex.code, 0);
  assert.match(srv.log(), /route=\/generate_stream client=127\.0\.0\.1 prompt_tokens=\d+ generated_tokens=[1-9]\d* .*finish=cancelled cancelled_by=shutdown$/m);
  assert.match(srv.log(), /route=\/v1\/completions client=127\.0\.0\.1 prompt_tokens=\d+ generated_tokens=[1-9]\d* .*finish=cancelled cancelled_by=shutdown$/m);
});

await check('SIGTERM with a stream whose client stopped reading: logged as cancelled, exit 0 2 s after the grace period', async () => {
  // The request's line is logged when its sequence ends, not after the handler's last write, which
  // may wait for the 30 s write timeout when the process exits (seen with a client whose receive
  // buffer was 4 KiB; this client's write ends with the listener, so both orders pass here).
  const srv = await startServer(['--shutdown-grace', '0.5']);
  const { connect } = await import('node:net');
  const url = new URL(srv.base);
  const sock = connect({ port: Number(url.port), host: url.hostname });
  sock.on('error', () => {});
  try {
    await new Promise((resolve) => sock.on('connect', resolve));
    const body = JSON.stringify(endless);
    sock.write(`POST /generate_stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    sock.pause();  // reads nothing: the socket buffers fill, then the sequence pauses
    assert.ok(await waitFor(async () => (await metrics(srv.base)).mamba_streams_paused === 1, { timeoutMs: 20000, stepMs: 100 }),
              'the stream was never paused');
    const t0 = Date.now();
    srv.proc.kill('SIGTERM');
    const ex = await Promise.race([srv.exited, sleep(8000).then(() => null)]);
    assert.ok(ex !== null, 'the server was still running 8 s after SIGTERM');
    assert.equal(ex.code, 0, srv.log());
    assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
    // Its blocked write had not failed yet: the shutdown is what ended it.
    assert.match(srv.log(), /route=\/generate_stream client=127\.0\.0\.1 prompt_tokens=\d+ generated_tokens=[1-9]\d* .*finish=cancelled cancelled_by=shutdown$/m, srv.log());
  } finally {
    sock.destroy();
    if (srv.proc.exitCode === null) srv.proc.kill('SIGKILL');
  }
});

/// Starts a server (grace 0.5 s), connects, sends `first` and then `more` every `everyMs`, and
/// sends SIGTERM 0.5 s in: how the server exited, how long after the signal, and whether the
/// client's connection had ended by then.
async function sigtermWhileTrickling(first, more, everyMs) {
  const srv = await startServer(['--shutdown-grace', '0.5']);
  const { connect } = await import('node:net');
  const url = new URL(srv.base);
  const sock = connect(Number(url.port), url.hostname);
  sock.on('error', () => {});
  let ended = false;
  sock.on('close', () => { ended = true; });
  await new Promise((resolve) => sock.on('connect', resolve));
  sock.write(first);
  const trickle = setInterval(() => sock.write(more), everyMs);
  try {
    await sleep(500);
    const t0 = Date.now();
    srv.proc.kill('SIGTERM');
    const ex = await Promise.race([srv.exited, sleep(8000).then(() => null)]);
    assert.ok(ex !== null, 'the server was still running 8 s after SIGTERM');
    assert.equal(ex.code, 0, srv.log());
    const ms = Date.now() - t0;
    await waitFor(() => ended, { timeoutMs: 2000 });
    return { ms, log: srv.log(), ended };
  } finally {
    clearInterval(trickle);
    sock.destroy();
    if (srv.proc.exitCode === null) srv.proc.kill('SIGKILL');
  }
}

await check('SIGTERM while a client trickles its request headers: its parked connection ends, clean exit 0', async () => {
  // cpp-httplib served such a connection until it was silent for 10 s: the server waited for it
  // forever (a line every 3 s kept it open). Its head is now read while parked, without a worker,
  // and the parked connections end with the listener.
  const r = await sigtermWhileTrickling('POST /generate HTTP/1.1\r\nHost: x\r\n', 'X-Slow: 1\r\n', 300);
  assert.ok(r.ms < 3000, `took ${r.ms} ms`);
  assert.match(r.log, /\] stopped/);
  assert.ok(r.ended, 'the client\'s connection was not ended');
});

await check('SIGTERM while a client trickles its request body: its parked connection ends, clean exit 0', async () => {
  // A body was read by a worker (each read within the 10 s read timeout), and the server exited 2 s
  // after the drain rather than wait for it. Its connection is now parked until the body is here,
  // and ends with the listener as a trickled head's does.
  const r = await sigtermWhileTrickling(
    'POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{', ' ', 300);
  assert.ok(r.ms < 3000, `took ${r.ms} ms`);
  assert.match(r.log, /\] stopped/);
  assert.doesNotMatch(r.log, /connections still open/);
  assert.ok(r.ended, 'the client\'s connection was not ended');
});

await check('a second SIGTERM while draining exits at once (128 + 15), without waiting for the grace period', async () => {
  const srv = await startServer(['--shutdown-grace', '60']);
  const s = postSse(srv.base, '/generate_stream', endless).catch(() => null);  // the stream is cut
  await sleep(300);
  srv.proc.kill('SIGTERM');
  await waitFor(() => srv.log().includes('draining'));
  const t0 = Date.now();
  srv.proc.kill('SIGTERM');
  const ex = await srv.exited;
  assert.equal(ex.code, 143, srv.log());
  assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
  await s;
});

exitWithChecks();
