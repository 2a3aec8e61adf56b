// BERT WordPiece tokenization and packing that gives BertPreprocessor's ids, in JavaScript
// (the page's notes on unknown and truncated text; a token-id runtime could take the ids).
// The same algorithm as android_demo's WordPieceTokenizer.java, on the same character table
// (bert_unicode.txt, written by `python -m keras_bert_impl.tokenization.char_table`): the
// browser's own Unicode tables (its ICU's version) are not asked, so every browser gives the
// pipeline's ids. tests/export/test_web_demo.py runs this module in Node against the
// pipeline's golden ids (every hard case and 4,000 MR sentences).

export const DEFAULT_MAX_CHARS_PER_WORD = 100;
const FORMAT_VERSION = 1;

function inRanges(ranges, cp) {
  // ranges: flat sorted [first0, last0, first1, last1, ...]
  let lo = 0;
  let hi = ranges.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (cp < ranges[2 * mid]) hi = mid - 1;
    else if (cp > ranges[2 * mid + 1]) lo = mid + 1;
    else return true;
  }
  return false;
}

/** Parses bert_unicode.txt; throws with the line on anything unexpected. */
export function parseCharTable(text) {
  const lines = text.split("\n");
  if (!lines[0].startsWith("#") || !lines[0].includes(`format ${FORMAT_VERSION}:`)) {
    throw new Error(`bert_unicode.txt is not format ${FORMAT_VERSION}: ${lines[0].slice(0, 80)}`);
  }
  const ranges = { R: [], W: [], S: [] };
  const fold = new Map();
  lines.forEach((line, i) => {
    if (line === "" || line.startsWith("#")) return;
    const parts = line.split(" ");
    if (parts[0] in ranges && parts.length === 3) {
      ranges[parts[0]].push([parseInt(parts[1], 16), parseInt(parts[2], 16)]);
    } else if (parts[0] === "F" && parts.length === 3) {
      fold.set(parseInt(parts[1], 16), parts[2] === "-" ? [] : parts[2].split(".").map((h) => parseInt(h, 16)));
    } else {
      throw new Error(`bert_unicode.txt line ${i + 1}: ${line}`);
    }
  });
  const flat = (list) => list.sort((a, b) => a[0] - b[0]).flat();
  return { removed: flat(ranges.R), space: flat(ranges.W), split: flat(ranges.S), fold };
}

export class WordPieceTokenizer {
  /** vocabulary: array of tokens (vocab.txt lines); table: parseCharTable's result. */
  constructor(vocabulary, table, lowercase, maxCharsPerWord = DEFAULT_MAX_CHARS_PER_WORD) {
    this.ids = new Map();
    // The first occurrence wins, as in tensorflow-text's vocabulary lookup.
    vocabulary.forEach((token, id) => { if (!this.ids.has(token)) this.ids.set(token, id); });
    for (const name of ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]) {
      if (!this.ids.has(name)) throw new Error(`The vocabulary has no ${name} token: is this a BERT vocab.txt?`);
    }
    this.padId = this.ids.get("[PAD]");
    this.unkId = this.ids.get("[UNK]");
    this.clsId = this.ids.get("[CLS]");
    this.sepId = this.ids.get("[SEP]");
    this.table = table;
    this.lowercase = lowercase;
    this.maxCharsPerWord = maxCharsPerWord;
  }

  /** Word-piece ids of text, the first maxPieces of them (tokenization stops there). */
  tokenize(text, maxPieces) {
    const out = [];
    let word = [];
    const flush = () => {
      if (word.length) this.wordPieces(word, out);
      word = [];
    };
    const accept = (cp) => {
      if (inRanges(this.table.space, cp)) flush();
      else if (inRanges(this.table.split, cp)) { flush(); word.push(cp); flush(); }
      else word.push(cp);
    };
    for (const char of text ?? "") {
      if (out.length >= maxPieces) break;
      const cp = char.codePointAt(0);
      // A lone surrogate is no character; BERT's cleaning drops the U+FFFD UTF-8 would make of it.
      if ((cp >= 0xd800 && cp <= 0xdfff) || inRanges(this.table.removed, cp)) continue;
      const folded = this.lowercase && !inRanges(this.table.space, cp) ? this.table.fold.get(cp) : undefined;
      if (folded === undefined) accept(cp);
      else folded.forEach(accept);
    }
    flush();
    return out.slice(0, maxPieces);
  }

  wordPieces(cps, out) {
    if (cps.length > this.maxCharsPerWord) {
      out.push(this.unkId);
      return;
    }
    const mark = out.length;
    let start = 0;
    while (start < cps.length) {
      let end = cps.length;
      let id;
      while (start < end) {
        const piece = String.fromCodePoint(...cps.slice(start, end));
        id = this.ids.get(start > 0 ? "##" + piece : piece);
        if (id !== undefined) break;
        end--;
      }
      if (id === undefined) {
        out.length = mark;
        out.push(this.unkId);
        return;
      }
      out.push(id);
      start = end;
    }
  }

  /** [CLS] text [SEP] [PAD]... at sequenceLength, with what the page tells the user. */
  encode(text, sequenceLength) {
    if (!(sequenceLength >= 3)) throw new Error(`sequenceLength must be >= 3. Received: ${sequenceLength}`);
    const budget = sequenceLength - 2;
    const pieces = this.tokenize(text, budget + 1); // one more than fits tells whether it was truncated
    const kept = pieces.slice(0, budget);
    const ids = new Int32Array(sequenceLength).fill(this.padId);
    const mask = new Int32Array(sequenceLength);
    ids[0] = this.clsId;
    ids.set(kept, 1);
    ids[kept.length + 1] = this.sepId;
    mask.fill(1, 0, kept.length + 2);
    return { ids, mask, segmentIds: new Int32Array(sequenceLength), keptPieces: kept.length,
      unknownPieces: kept.filter((id) => id === this.unkId).length, truncated: pieces.length > budget };
  }

  /** [CLS] a [SEP] b [SEP] [PAD]..., truncated like Google's _truncate_seq_pair. */
  encodePair(textA, textB, sequenceLength) {
    if (!(sequenceLength >= 4)) throw new Error(`sequenceLength must be >= 4. Received: ${sequenceLength}`);
    const budget = sequenceLength - 3;
    const a = this.tokenize(textA, budget + 1);
    const b = this.tokenize(textB, budget + 1);
    const keepA = Math.min(a.length, Math.max(budget - b.length, Math.ceil(budget / 2)));
    const keepB = Math.min(b.length, budget - keepA);
    const packed = [this.clsId, ...a.slice(0, keepA), this.sepId, ...b.slice(0, keepB), this.sepId];
    const ids = new Int32Array(sequenceLength).fill(this.padId);
    ids.set(packed);
    const mask = new Int32Array(sequenceLength).fill(1, 0, packed.length);
    const segmentIds = new Int32Array(sequenceLength).fill(1, keepA + 2, packed.length);
    return { ids, mask, segmentIds, keptPieces: keepA + keepB,
      unknownPieces: packed.filter((id) => id === this.unkId).length,
      truncated: keepA < a.length || keepB < b.length };
  }
}
