// Shared helpers of the server end-to-end tests: start a real mamba-server on a free loopback
// port, HTTP/SSE helpers, npm client loading from tests/node, bounded waits, error bodies.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
export const SERVER_BIN = process.env.MAMBA_SERVER || path.join(here, '../../build/mamba-server');
const NODE_DIR = process.env.MAMBA_NODE_DIR || path.join(here, '../node');

/// npm packages installed in tests/node (openai, @huggingface/inference, ...).
export function requireNode(name) {
  const req = createRequire(path.join(NODE_DIR, 'package.json'));
  return req(name);
}

/// Exit status that CTest reads as "skipped" (SKIP_RETURN_CODE in tests/scripts/server.cmake).
export const SKIP_CODE = 77;

/// Skips the whole script (exit SKIP_CODE) when an npm package of tests/node is not installed —
/// a failure instead under CI (CI=true), where scripts/test.sh installs them.
export function requireNodeOrSkip(names) {
  const missing = names.filter((n) => {
    try {
      requireNode(n);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length === 0) return;
  const msg = `npm package(s) ${missing.join(', ')} not installed in ${NODE_DIR} (run: cd tests/node && npm install)`;
  if (process.env.CI === 'true') {
    console.error(`FAIL: ${msg}`);
    process.exit(1);
  }
  console.log(`SKIP: ${msg}`);
  process.exit(SKIP_CODE);
}

/// Fails the whole script if it runs longer than `seconds` (every test is bounded in time).
export function deadline(seconds) {
  const t = setTimeout(() => {
    console.error(`FAIL: test exceeded ${seconds} s`);
    process.exit(1);
  }, seconds * 1000);
  t.unref();
}

/// Starts mamba-server with `args` on port 0; resolves once it prints its address.
export async function startServer(args = [], { quiet = true, env = undefined } = {}) {
  const model = process.env.MAMBA_E2E_MODEL && !args.includes('-m') ? ['-m', process.env.MAMBA_E2E_MODEL] : [];
  const host = args.includes('--host') ? [] : ['--host', '127.0.0.1'];
  const port = args.includes('--port') ? [] : ['--port', '0'];
  const proc = spawn(SERVER_BIN, [...host, ...port, '--threads', '1', ...model, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: env ? { ...process.env, ...env } : process.env,
  });
  // Whatever ends this script (a failed assertion, a missing npm package, the deadline), the
  // server goes with it: a left-over server would outlive the test run.
  const killOnExit = () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  };
  process.on('exit', killOnExit);
  proc.on('exit', () => process.off('exit', killOnExit));  // one hook per live server, not per server started
  let log = '';
  proc.stderr.on('data', (d) => {
    log += d.toString();
    if (!quiet) process.stderr.write(d);
  });
  const base = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start in 60 s; log:\n${log}`)), 60000);
    proc.stdout.on('data', (d) => {
      out += d.toString();
      const m = out.match(/listening on (http:\/\/(?:127\.0\.0\.1|\[::1\]):\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening; log:\n${log}`));
    });
  });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    proc,
    base,
    exited,
    log: () => log,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const r = await Promise.race([exited, new Promise((res) => setTimeout(() => res(null), 40000))]);
      if (r === null) {
        proc.kill('SIGKILL');
        throw new Error('server did not exit within 40 s of SIGTERM');
      }
      return r;
    },
  };
}

export async function postJson(base, route, body, headers = {}) {
  const res = await fetch(base + route, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

/// POSTs and reads a text/event-stream answer; returns the parsed `data:` payloads.
/// `onEvent(ev, i)` returning false aborts the connection (client disconnect).
export async function postSse(base, route, body, { onEvent, headers = {} } = {}) {
  const ctrl = new AbortController();
  const res = await fetch(base + route, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal: ctrl.signal,
  });
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
    return { status: res.status, events: [], raw: await res.text(), contentType: res.headers.get('content-type') };
  }
  const events = [];
  let aborted = false;
  let buf = '';
  let raw = '';
  const decoder = new TextDecoder('utf-8', { fatal: true });  // every chunk boundary here is an event boundary
  try {
    for await (const chunk of res.body) {
      const s = decoder.decode(chunk, { stream: true });
      raw += s;
      buf += s;
      let k;
      while ((k = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, k);
        buf = buf.slice(k + 2);
        for (const line of block.split('\n')) {
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          const ev = data === '[DONE]' ? '[DONE]' : JSON.parse(data);
          events.push(ev);
          if (onEvent && onEvent(ev, events.length - 1) === false) {
            aborted = true;
            ctrl.abort();
            return { status: res.status, events, raw, aborted };
          }
        }
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  }
  return { status: res.status, events, raw, aborted };
}

/// The error of an answer's JSON body, checked to be in the shape its route answers: OpenAI's
/// {error: {message, type, param, code}} under /v1 and on an OpenAI client's paths without it
/// (`code` is the server's own type, or context_length_exceeded), TGI's {error, error_type}
/// everywhere else. Returns {message, type} with type the server's (validation, …).
export function apiError(route, json) {
  const openai = route === '/v1' || route.startsWith('/v1/') || ['/completions', '/chat/completions', '/models'].includes(route) ||
                 route.startsWith('/models/');
  const text = JSON.stringify(json);
  if (openai) {
    assert.equal(typeof json?.error, 'object', `${route}: OpenAI's error shape expected: ${text}`);
    assert.equal(typeof json.error.message, 'string', text);
    assert.equal(typeof json.error.type, 'string', text);
    // param: the field the message starts with (`name`), else null.
    const named = json.error.message.match(/^`([^`]+)`/);
    assert.equal(json.error.param, named ? named[1] : null, text);
    assert.equal(typeof json.error.code, 'string', text);
    assert.equal(json.error_type, undefined, text);
    return { message: json.error.message, type: json.error.code, openaiType: json.error.type, param: json.error.param };
  }
  assert.equal(typeof json?.error, 'string', `${route}: TGI's error shape expected: ${text}`);
  assert.equal(typeof json.error_type, 'string', text);
  return { message: json.error, type: json.error_type };
}

/// Parses /metrics into {name or name{labels}: number}.
export async function metrics(base) {
  const text = await (await fetch(base + '/metrics')).text();
  const m = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    m[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return m;
}

export async function waitFor(pred, { timeoutMs = 5000, stepMs = 50 } = {}) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await pred()) return true;
    await new Promise((r) => setTimeout(r, stepMs));
  }
  return false;
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

let anyCheckFailed = false;

/// Runs one named check: prints `ok   NAME`, or `FAIL NAME` with the error's stack (and the run
/// goes on); exitWithChecks() then exits 1 if any check failed, else 0.
export async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    anyCheckFailed = true;
    console.log(`FAIL ${name}\n${e.stack}`);
  }
}

export function exitWithChecks() {
  process.exit(anyCheckFailed ? 1 : 0);
}
