// Builds the web demo into a folder that holds everything it loads: the page (src/), MediaPipe
// Tasks Text's bundle and wasm (from node_modules, installed by `make edge-setup`), and the
// model files of a `kbert export` folder. Written to OUT.partial-PID and renamed, so an
// interrupted build never leaves a half-copied OUT.
//
//   node web_demo/build.mjs --export data/demo/mr_export --out web_demo/dist \
//       [--embedder data/demo/minilm_embedder --sentences data/demo/mr_validation.csv]
// With --embedder (a `kbert export` of a sentence embedder), the page's second tab finds the
// sentences of --sentences (one per line, or a kbert CSV whose last column is the text)
// nearest to what is typed, with MediaPipe's TextEmbedder.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MEDIAPIPE = path.join(HERE, "node_modules", "@mediapipe", "tasks-text");
const LITERT = path.join(HERE, "node_modules", "@litertjs");
// BERT's character table for the page's tokenizer: one copy, the Android app's asset.
const CHAR_TABLE = path.join(HERE, "..", "android_demo", "app", "src", "main", "assets", "bert_unicode.txt");
// export.json "files" keys the page can load (float32 and dynamic-range int8).
const MODEL_KEYS = ["mediapipe", "mediapipe_int8"];
// The search tab embeds its sentences in the browser when first opened: a few hundred keep
// that under half a minute on a laptop.
const DEFAULT_MAX_SENTENCES = 300;

function fail(message) {
  console.error(`build.mjs: ${message}`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { export: null, out: path.join(HERE, "dist"), embedder: null, sentences: null,
    "max-sentences": String(DEFAULT_MAX_SENTENCES) };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === "--help" || flag === "-h") {
      console.log("usage: node web_demo/build.mjs --export EXPORT_DIR [--out OUT_DIR] " +
        "[--embedder EXPORT_DIR --sentences FILE [--max-sentences N]]\n" +
        "  --export         a folder written by `kbert export` (a classifier with MediaPipe files)\n" +
        "  --out            where the page is written (default web_demo/dist); replaced as a whole\n" +
        "  --embedder       a `kbert export` of a sentence embedder (MediaPipe file), for the search tab\n" +
        "  --sentences      the sentences to search: one per line, or a CSV whose last column is the text\n" +
        `  --max-sentences  how many of them (default ${DEFAULT_MAX_SENTENCES})`);
      process.exit(0);
    }
    if (!["--export", "--out", "--embedder", "--sentences", "--max-sentences"].includes(flag) || i + 1 >= argv.length) {
      fail(`bad argument ${flag}; see --help`);
    }
    args[flag.slice(2)] = argv[++i];
  }
  if (!args.export) fail("--export EXPORT_DIR is required (make web-demo passes data/demo/mr_export)");
  if (Boolean(args.embedder) !== Boolean(args.sentences)) fail("--embedder and --sentences go together");
  if (!(Number(args["max-sentences"]) >= 1)) fail(`--max-sentences must be >= 1, got ${args["max-sentences"]}`);
  return args;
}

// The last field of each row of a CSV (RFC 4180 quoting, as kbert's training files are
// written), or each line of a plain text file.
function readSentences(file) {
  const text = fs.readFileSync(file, "utf8").replace(/^\uFEFF/, "");
  if (!file.endsWith(".csv")) return text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== "");
  const rows = [];
  let row = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; }
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") { row.push(field); field = ""; }
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field); rows.push(row); row = []; field = "";
    } else field += c;
  }
  if (field !== "" || row.length) { row.push(field); rows.push(row); }
  return rows.map((r) => r[r.length - 1].trim()).filter((t) => t !== "");
}

function copy(from, to) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const manifestPath = path.join(args.export, "export.json");
  if (!fs.existsSync(manifestPath)) fail(`${manifestPath} does not exist: is ${args.export} a \`kbert export\` folder?`);
  const manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
  if (!fs.existsSync(path.join(MEDIAPIPE, "text_bundle.mjs"))) fail("@mediapipe/tasks-text is not installed: run `make edge-setup`");

  const out = path.resolve(args.out);
  const partial = `${out}.partial-${process.pid}`;
  fs.rmSync(partial, { recursive: true, force: true });
  for (const name of fs.readdirSync(path.join(HERE, "src"))) copy(path.join(HERE, "src", name), path.join(partial, name));
  copy(CHAR_TABLE, path.join(partial, "bert_unicode.txt"));
  copy(path.join(MEDIAPIPE, "text_bundle.mjs"), path.join(partial, "mediapipe", "text_bundle.mjs"));
  for (const name of fs.readdirSync(path.join(MEDIAPIPE, "wasm"))) {
    copy(path.join(MEDIAPIPE, "wasm", name), path.join(partial, "mediapipe", "wasm", name));
  }
  // LiteRT.js's module imports its helper package by name; browsers resolve only paths, so the
  // copy points at the helper's bundle beside it.
  const core = fs.readFileSync(path.join(LITERT, "core", "dist", "index.js"), "utf8");
  if (!core.includes('from "@litertjs/wasm-utils"')) fail("@litertjs/core no longer imports @litertjs/wasm-utils as expected");
  fs.mkdirSync(path.join(partial, "litert"), { recursive: true });
  fs.writeFileSync(path.join(partial, "litert", "core.js"), core.replaceAll('from "@litertjs/wasm-utils"', 'from "./wasm-utils.js"'));
  copy(path.join(LITERT, "wasm-utils", "dist", "bundle.js"), path.join(partial, "litert", "wasm-utils.js"));
  for (const name of fs.readdirSync(path.join(LITERT, "core", "wasm"))) {
    copy(path.join(LITERT, "core", "wasm", name), path.join(partial, "litert", "wasm", name));
  }
  const model = path.join(partial, "model");
  for (const name of ["export.json", "labels.txt", "vocab.txt"]) copy(path.join(args.export, name), path.join(model, name));
  // A model the page cannot show (an embedder, say) is still copied: the page says why it refuses it.
  for (const key of MODEL_KEYS) {
    const relative = manifest.files?.[key];
    if (relative) copy(path.join(args.export, relative), path.join(model, relative));
  }
  if (args.embedder) {
    const embedderManifest = JSON.parse(fs.readFileSync(path.join(args.embedder, "export.json"), "utf8"));
    const relative = embedderManifest.files?.mediapipe;
    if (!relative) fail(`${args.embedder}/export.json lists no "mediapipe" file: export it with --formats mediapipe`);
    for (const name of ["export.json", "vocab.txt", relative]) {
      copy(path.join(args.embedder, name), path.join(partial, "embedder", name));
    }
    const sentences = readSentences(args.sentences).slice(0, Number(args["max-sentences"]));
    fs.writeFileSync(path.join(partial, "embedder", "sentences.txt"), sentences.join("\n") + "\n");
  }
  fs.rmSync(out, { recursive: true, force: true });
  fs.renameSync(partial, out);
  console.log(`built ${out} from ${args.export}`);
}

main();
