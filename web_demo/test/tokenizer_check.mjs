// Runs web_demo/src/bert_tokenizer.js on the golden ids the Python pipeline wrote
// (tests/export/edge_reference.py's file: hard cases, MR sentences, codepoints, bad input) and
// prints {"checked": N, "wrong": [...]} as JSON, for tests/export/test_web_demo.py.
//
//   node web_demo/test/tokenizer_check.mjs GOLDEN.json
import fs from "node:fs";
import { WordPieceTokenizer, parseCharTable } from "../src/bert_tokenizer.js";

const golden = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const vocabulary = fs.readFileSync(golden.vocabulary, "utf8").split("\n");
if (vocabulary.at(-1) === "") vocabulary.pop();
const tokenizer = new WordPieceTokenizer(vocabulary, parseCharTable(fs.readFileSync(golden.char_table, "utf8")),
  golden.lowercase);
const wrong = [];
let checked = 0;
const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);
function check(name, got, want) {
  checked += 1;
  for (const key of Object.keys(want)) {
    if (!same(Array.from(got[key]), want[key])) {
      wrong.push({ name, key, got: Array.from(got[key]), want: want[key] });
      return;
    }
  }
}
for (const c of golden.hard_cases) {
  const got = "text_b" in c ? tokenizer.encodePair(c.text, c.text_b, c.sequence_length)
    : tokenizer.encode(c.text, c.sequence_length);
  check(c.name, { ids: got.ids, segmentIds: got.segmentIds, mask: got.mask },
    { ids: c.token_ids, segmentIds: c.segment_ids, mask: c.padding_mask });
}
golden.mr.texts.forEach((text, i) => {
  check(`mr ${i}`, { ids: tokenizer.encode(text, golden.mr.sequence_length).ids }, { ids: golden.mr.token_ids[i] });
});
// "ab{c}cd {c}" for every BMP codepoint and every 7th above.
golden.codepoints.codepoints.forEach((cp, i) => {
  const c = String.fromCodePoint(cp);
  check(`U+${cp.toString(16).toUpperCase()}`, { ids: tokenizer.tokenize(`ab${c}cd ${c}`, Infinity) },
    { ids: golden.codepoints.token_ids[i] });
});
for (const c of golden.bad_input) {
  check(c.name, { ids: tokenizer.encode(c.text, c.sequence_length).ids }, { ids: c.token_ids });
}
console.log(JSON.stringify({ checked, hard_cases: golden.hard_cases.length, mr: golden.mr.texts.length,
  codepoints: golden.codepoints.codepoints.length, wrong: wrong.slice(0, 20), wrong_count: wrong.length }));
