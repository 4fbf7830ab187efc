// Oracle for mamba.cpp's tokenizer tests and benchmark: HF tokenizers (npm `tokenizers`, the
// Rust core) builds tokenizer.json files for the pipelines under test, encodes documents and
// decodes id lists, writing the results as JSON for the C++ side to compare.
//
//   node oracle.js build OUT_DIR NEOX_JSON
//       writes OUT_DIR/<name>.json for each pipeline in PIPELINES (built from NEOX_JSON's vocab)
//   node oracle.js run SPEC_JSON
//       SPEC: {"docs": {SET: FILE(JSON array of strings)}, "decode": FILE(JSON array of id arrays) | null,
//              "tokenizers": [{"name", "path", "docs": SET, "out"}]}
//       writes to each "out": {"ids": [[...]...], "decoded": [...], "decode_cases": [[plain, skip_special]...]}
//   node oracle.js bench TOKENIZER_JSON TEXT_FILE REPEATS [whole|docs]
//       prints {first, best, tokens}: encode times in seconds of the whole file as one string
//       (whole) or as ~2 KB pieces encoded one after another (docs)
//       (first = cold word cache, best = best of REPEATS)
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

// ---- byte-level helpers (GPT-2 byte ↔ unicode mapping) ----------------------------------------
function bytesToUnicode() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  }
  const charToByte = new Map();
  bs.forEach((b, i) => charToByte.set(String.fromCodePoint(cs[i]), b));
  return charToByte;
}
const CHAR_TO_BYTE = bytesToUnicode();
const utf8 = new TextDecoder('utf-8', { fatal: true });
// Byte-level token → its text, or null when its bytes are not valid UTF-8.
function byteLevelToText(tok) {
  const bytes = [];
  for (const ch of tok) {
    const b = CHAR_TO_BYTE.get(ch);
    if (b === undefined) return null;
    bytes.push(b);
  }
  try { return utf8.decode(Uint8Array.from(bytes)); } catch (e) { return null; }
}

// ---- pipelines --------------------------------------------------------------------------------
const addedSpecial = (id, content, extra = {}) => Object.assign(
  { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }, extra);

// Falcon-Mamba's pipeline (tiiuae/falcon-mamba-7b): no normalizer, Punctuation + ByteLevel +
// Digits + Split("[0-9][0-9][0-9]") pre-tokenizers, on the GPT-NeoX vocab, with extra added
// tokens exercising lstrip / rstrip / single_word / normalized.
function falconLike(neox) {
  const t = JSON.parse(JSON.stringify(neox));
  t.normalizer = null;
  t.pre_tokenizer = { type: 'Sequence', pretokenizers: [
    { type: 'Punctuation', behavior: 'Contiguous' },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    { type: 'Digits', individual_digits: false },
    { type: 'Split', pattern: { Regex: '[0-9][0-9][0-9]' }, behavior: 'Isolated', invert: false },
  ] };
  const next = Math.max(...t.added_tokens.map((a) => a.id)) + 1;
  t.added_tokens.push(
    addedSpecial(next, '>>TITLE<<'),
    addedSpecial(next + 1, '<|im_start|>', { rstrip: true }),
    addedSpecial(next + 2, '<|im_end|>', { lstrip: true }),
    addedSpecial(next + 3, 'MASK', { single_word: true, special: false }),
    addedSpecial(next + 4, 'ﬁsh', { normalized: true, special: false }),
  );
  t.post_processor = { type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '>>TITLE<<', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { '>>TITLE<<': { id: '>>TITLE<<', ids: [next], tokens: ['>>TITLE<<'] } } };
  return t;
}

// Llama-3-style: NFKC + a regex Split (Isolated) + ByteLevel without its regex, ignore_merges.
function splitRegexLike(neox) {
  const t = JSON.parse(JSON.stringify(neox));
  t.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Replace', pattern: { Regex: '\\r\\n' }, content: '\n' }] };
  t.pre_tokenizer = { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
      behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
  ] };
  t.model.ignore_merges = true;
  return t;
}

// GPT-NeoX with add_prefix_space and individual digits, merges as pairs.
function neoxDigits(neox) {
  const t = JSON.parse(JSON.stringify(neox));
  t.pre_tokenizer = { type: 'Sequence', pretokenizers: [
    { type: 'Digits', individual_digits: true },
    { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  ] };
  t.model.merges = t.model.merges.map((m) => (typeof m === 'string' ? m.split(' ') : m));
  return t;
}

// A SentencePiece-style vocab from the GPT-NeoX one: '▁' for spaces, <0xXX> byte tokens.
function metaspaceVocab(neox) {
  const vocab = new Map([['<unk>', 0], ['<s>', 1], ['</s>', 2]]);
  let next = 3;
  for (let b = 0; b < 256; b++) vocab.set('<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>', next++);
  const conv = new Map();
  const entries = Object.entries(neox.model.vocab).sort((a, b) => a[1] - b[1]);
  for (const [tok] of entries) {
    const text = byteLevelToText(tok);
    if (text === null || text.length === 0) continue;
    const sp = text.replace(/ /g, '\u2581');
    conv.set(tok, sp);
    if (!vocab.has(sp)) vocab.set(sp, next++);
  }
  const merges = [];
  for (const m of neox.model.merges) {
    const [a, b] = typeof m === 'string' ? m.split(' ') : m;
    const ca = conv.get(a), cb = conv.get(b);
    if (ca === undefined || cb === undefined || !vocab.has(ca + cb)) continue;
    merges.push([ca, cb]);
  }
  return { vocab: Object.fromEntries(vocab), merges };
}

function spModel(neox) {
  const { vocab, merges } = metaspaceVocab(neox);
  return { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges };
}
const spAdded = () => [addedSpecial(0, '<unk>'), addedSpecial(1, '<s>'), addedSpecial(2, '</s>')];
const bosTemplate = () => ({ type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } });

// Mistral-7B-v0.1 / Llama-2 style: Prepend + Replace normalizer, no pre-tokenizer (each text is
// one word), byte-fallback BPE, Replace/ByteFallback/Fuse/Strip decoder.
function mistralLegacy(neox) {
  return { version: '1.0', truncation: null, padding: null, added_tokens: spAdded(),
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' },
      { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
    pre_tokenizer: null, post_processor: bosTemplate(),
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
      { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: spModel(neox) };
}

// Newer Mistral style (as Mamba-Codestral): Metaspace pre-tokenizer with prepend_scheme "first"
// and no split (each text is one word), Metaspace decoder.
function mistralMetaspace(neox) {
  return { version: '1.0', truncation: null, padding: null, added_tokens: spAdded(),
    normalizer: null,
    pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
    post_processor: bosTemplate(),
    decoder: { type: 'Sequence', decoders: [{ type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
      { type: 'ByteFallback' }, { type: 'Fuse' }] },
    model: spModel(neox) };
}

// Metaspace "always" without splitting, NFC, Punctuation (Removed behaviour is exercised elsewhere).
function metaspaceAlways(neox) {
  return { version: '1.0', truncation: null, padding: null, added_tokens: spAdded(),
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Punctuation', behavior: 'MergedWithPrevious' },
      { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true }] },
    post_processor: null,
    decoder: { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true },
      { type: 'Fuse' }] },
    model: spModel(neox) };
}

const PIPELINES = { 'falcon-like': falconLike, 'llama3-split-like': splitRegexLike, 'neox-digits': neoxDigits,
  'mistral-legacy': mistralLegacy, 'mistral-metaspace': mistralMetaspace, 'metaspace-always': metaspaceAlways };

function build(outDir, neoxPath) {
  const neox = JSON.parse(fs.readFileSync(neoxPath, 'utf8'));
  fs.mkdirSync(outDir, { recursive: true });
  for (const [name, make] of Object.entries(PIPELINES)) {
    // Loading through HF validates the file; saving writes HF's own serialization.
    const tok = Tokenizer.fromString(JSON.stringify(make(neox)));
    tok.save(path.join(outDir, name + '.json'));
  }
}

async function run(specPath) {
  const spec = JSON.parse(fs.readFileSync(specPath, 'utf8'));
  const docSets = {};
  for (const [k, f] of Object.entries(spec.docs)) docSets[k] = JSON.parse(fs.readFileSync(f, 'utf8'));
  const decodeCases = spec.decode ? JSON.parse(fs.readFileSync(spec.decode, 'utf8')) : [];
  for (const t of spec.tokenizers) {
    const tok = Tokenizer.fromFile(t.path);
    const docs = docSets[t.docs];
    const ids = (await tok.encodeBatch(docs, { addSpecialTokens: false })).map((e) => e.getIds());
    const decoded = await tok.decodeBatch(ids, false);
    const withSpecials = (await tok.encodeBatch(docs.slice(0, 50), { addSpecialTokens: true })).map((e) => e.getIds());
    const size = tok.getVocabSize(true);
    const cases = decodeCases.map((c) => c.map((v) => v % size));
    const plain = await tok.decodeBatch(cases, false);
    const skip = await tok.decodeBatch(cases, true);
    fs.writeFileSync(t.out, JSON.stringify({ size, ids, decoded, with_specials: withSpecials,
      decode_cases: plain.map((p, i) => [p, skip[i]]) }));
  }
}

// Splits the file's bytes into ~2 KB pieces at line ends (byte offsets, as the C++ bench does).
function pieces(bytes, target) {
  const out = [];
  let pos = 0;
  while (pos < bytes.length) {
    let end = Math.min(bytes.length, pos + target);
    if (end < bytes.length) {
      const nl = bytes.indexOf(10, end);
      end = nl < 0 ? bytes.length : nl + 1;
    }
    out.push(bytes.subarray(pos, end).toString('utf8'));
    pos = end;
  }
  return out;
}

async function bench(tokPath, textPath, repeats, mode) {
  const tok = Tokenizer.fromFile(tokPath);
  const bytes = fs.readFileSync(textPath);
  const docs = mode === 'docs' ? pieces(bytes, 2048) : [bytes.toString('utf8')];
  let first = 0, best = Infinity, n = 0;
  for (let r = 0; r < repeats; r++) {
    const t0 = process.hrtime.bigint();
    n = 0;
    for (const d of docs) n += (await tok.encode(d, null, { addSpecialTokens: false })).getLength();
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    if (r === 0) first = dt;
    best = Math.min(best, dt);
  }
  console.log(JSON.stringify({ first, best, tokens: n }));
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'build') build(args[0], args[1]);
else if (cmd === 'run') run(args[0]).catch((e) => { console.error(e); process.exit(1); });
else if (cmd === 'bench') bench(args[0], args[1], Number(args[2] || 3), args[3] || 'whole').catch((e) => { console.error(e); process.exit(1); });
else { console.error('usage: oracle.js build OUT_DIR NEOX_JSON | run SPEC_JSON | bench TOKENIZER TEXT REPEATS'); process.exit(2); }
