// Server load generator: N concurrent streaming clients against mamba-server for a fixed time.
// Prints one table row per N: generated tok/s, p50/p99 time-to-first-token, p50/p99 inter-token
// latency, requests, errors, server RSS before/after.
//
//   node bench/bench_server.mjs [--server build/release/mamba-server] [-m MODEL_DIR] [--n 1,8,64]
//                               [--seconds 10] [--max-new-tokens 64] [--threads 0] [--precision auto]
//                               [--url http://...]
// With --url the running server is used (RSS not reported; the mean decode batch is that run's, from
// /metrics before and after it); else one is started per run.
// Exit status: 0, 1 when any request failed, 2 for a bad argument.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const USAGE = `usage: node bench/bench_server.mjs [--server PATH] [-m MODEL_DIR] [--n 1,8,64] [--seconds 10]
                                   [--max-new-tokens 64] [--threads 0] [--precision auto]
                                   [--url http://HOST:PORT]
  --server          mamba-server binary to start (default build/release/mamba-server)
  -m, --model       model directory or HF repo id for the started server (default: its default)
  --n               concurrent streaming clients per run, comma-separated (default 1,8,64)
  --seconds         seconds per run (default 10)
  --max-new-tokens  tokens per request (default 64)
  --threads         server compute threads, 0 = all (default 0)
  --precision       the started server's --precision: auto, exact, bf16 or int8 (default auto)
  --url             use a running server instead of starting one (no RSS column)`;

function fail(msg) {
  console.error(`error: ${msg}\n${USAGE}`);
  process.exit(2);
}
let args;
try {
  args = parseArgs({
    options: {
      server: { type: 'string', default: 'build/release/mamba-server' },
      model: { type: 'string', short: 'm', default: '' },
      n: { type: 'string', default: '1,8,64' },
      seconds: { type: 'string', default: '10' },
      'max-new-tokens': { type: 'string', default: '64' },
      threads: { type: 'string', default: '0' },
      precision: { type: 'string', default: 'auto' },
      url: { type: 'string', default: '' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  }).values;
} catch (e) {
  fail(e.message);
}
if (args.help) {
  console.log(USAGE);
  process.exit(0);
}
/** A whole number in [lo, hi] from option `name`, else exit 2. */
function int(name, text, lo, hi) {
  const v = Number(text);
  if (!/^\s*\d+\s*$/.test(text) || !Number.isInteger(v) || v < lo || v > hi) fail(`--${name}: expected an integer in [${lo}, ${hi}], got '${text}'`);
  return v;
}
const SERVER = args.server;
const MODEL = args.model;
const NS = args.n.split(',').map((x) => int('n', x, 1, 4096));
const SECONDS = int('seconds', args.seconds, 1, 3600);
const MAX_NEW = int('max-new-tokens', args['max-new-tokens'], 1, 1 << 20);
const THREADS = String(int('threads', args.threads, 0, 4096));
const URL_ = args.url;
args.precision = args.precision.toLowerCase();  // any case, as mamba-server takes it
if (!['auto', 'exact', 'bf16', 'int8'].includes(args.precision)) fail(`--precision: expected auto, exact, bf16 or int8, got '${args.precision}'`);
if (URL_ && (args.precision !== 'auto' || MODEL)) fail('--precision and -m apply to a started server, not to --url');
if (!URL_ && !existsSync(SERVER)) fail(`no server binary at '${SERVER}' (build it, or pass --server PATH or --url)`);

const args_precision = args.precision;

/// The decode counters of /metrics (steps, sum of batch sizes); throws with one line when unreachable.
async function decodeCounters(base) {
  let text;
  try {
    text = await (await fetch(base + '/metrics')).text();
  } catch (e) {
    throw new Error(`cannot reach ${base}/metrics: ${e.cause?.code ?? e.message}`);
  }
  const num = (name) => Number((text.match(new RegExp(`^${name} (\\S+)`, 'm')) || [])[1]);
  return { steps: num('mamba_decode_steps_total'), sum: num('mamba_decode_sequence_steps_total') };
}

const PROMPTS = [
  'It was a dark and stormy night',
  'The old man walked down to the harbour and looked at the ships',
  'She opened the letter slowly, afraid of what it might say',
  'In the morning the village was covered in snow, and the children',
];

function rssMiB(pid) {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

async function start() {
  if (URL_) return { base: URL_, proc: null };
  const args = ['--host', '127.0.0.1', '--port', '0', '--threads', THREADS, '--max-concurrent-requests', '256',
    '--precision', args_precision];
  if (MODEL) args.push('-m', MODEL);
  const proc = spawn(SERVER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => {
    err += d;
  });
  const base = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[\d.]+:\d+)/);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (c) => reject(new Error(`server exited with status ${c} before listening:\n${err.trim()}`)));
  });
  return { base, proc };
}

async function client(base, id, stopAt, stats) {
  let k = 0;
  while (Date.now() < stopAt) {
    const body = {
      inputs: PROMPTS[(id + k++) % PROMPTS.length],
      parameters: { max_new_tokens: MAX_NEW, do_sample: true, temperature: 0.9, seed: id * 1000 + k },
    };
    const t0 = performance.now();
    let last = t0;
    let n = 0;
    try {
      const res = await fetch(base + '/generate_stream', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (res.status !== 200) {
        stats.errors++;
        await res.text();
        continue;
      }
      let buf = '';
      for await (const chunk of res.body) {
        buf += Buffer.from(chunk).toString();
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (!ev.startsWith('data:')) continue;
          const now = performance.now();
          if (ev.includes('"error"')) stats.errors++;
          if (n === 0) stats.ttft.push(now - t0);
          else stats.itl.push(now - last);
          last = now;
          n++;
        }
      }
      stats.tokens += n;
      stats.requests++;
    } catch {
      stats.errors++;
    }
  }
}

const pct = (a, p) => {
  if (!a.length) return NaN;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

if (URL_) {
  try {
    await decodeCounters(URL_);
  } catch (e) {
    console.error(`error: ${e.message}`);
    process.exit(1);
  }
}
console.log(`model: ${URL_ ? `(the server at ${URL_})` : MODEL || '(embedded)'}  precision: ${URL_ ? '(the server\'s)' : args_precision}  ` +
  `seconds per run: ${SECONDS}  max_new_tokens: ${MAX_NEW}`);
console.log('|  N | tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | requests | errors | RSS before MiB | RSS after MiB | mean decode batch |');
console.log('|---:|------:|------------:|------------:|-----------:|-----------:|---------:|-------:|---------------:|--------------:|------------------:|');
let anyErrors = 0;
for (const N of NS) {
  let srv;
  try {
    srv = await start();
  } catch (e) {
    console.error(`error: ${e.message}`);
    process.exit(1);
  }
  const rss0 = srv.proc ? rssMiB(srv.proc.pid) : NaN;
  let before, after;
  try {
    before = await decodeCounters(srv.base);
  } catch (e) {
    console.error(`error: ${e.message}`);
    process.exit(1);
  }
  const stats = { ttft: [], itl: [], tokens: 0, requests: 0, errors: 0 };
  const t0 = performance.now();
  const stopAt = Date.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: N }, (_, i) => client(srv.base, i, stopAt, stats)));
  const elapsed = (performance.now() - t0) / 1000;
  const rss1 = srv.proc ? rssMiB(srv.proc.pid) : NaN;
  try {
    after = await decodeCounters(srv.base);
  } catch (e) {
    console.error(`error: ${e.message}`);
    process.exit(1);
  }
  const mean = (after.sum - before.sum) / (after.steps - before.steps);  // this run's steps only
  if (srv.proc) {
    srv.proc.kill('SIGTERM');
    await new Promise((r) => srv.proc.on('exit', r));
  }
  const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  console.log(`| ${String(N).padStart(2)} | ${f(stats.tokens / elapsed, 0)} | ${f(pct(stats.ttft, 50))} | ${f(pct(stats.ttft, 99))} | ` +
    `${f(pct(stats.itl, 50), 2)} | ${f(pct(stats.itl, 99), 2)} | ${stats.requests} | ${stats.errors} | ${f(rss0)} | ${f(rss1)} | ${f(mean, 2)} |`);
  anyErrors += stats.errors;
}
if (anyErrors > 0) {
  console.error(`error: ${anyErrors} request(s) failed (see the errors column)`);
  process.exit(1);
}
