// Builds the web demo into a folder that holds everything it loads: the page (src/), MediaPipe
// Tasks Text's bundle and wasm (from node_modules, installed by `make edge-setup`), and the
// model files of a `kbert export` folder. Written to OUT.partial-PID and renamed, so an
// interrupted build never leaves a half-copied OUT.
//
//   node web_demo/build.mjs --export data/demo/mr_export --out web_demo/dist
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MEDIAPIPE = path.join(HERE, "node_modules", "@mediapipe", "tasks-text");
// BERT's character table for the page's tokenizer: one copy, the Android app's asset.
const CHAR_TABLE = path.join(HERE, "..", "android_demo", "app", "src", "main", "assets", "bert_unicode.txt");
// export.json "files" keys the page can load (float32 and dynamic-range int8).
const MODEL_KEYS = ["mediapipe", "mediapipe_int8"];

function fail(message) {
  console.error(`build.mjs: ${message}`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { export: null, out: path.join(HERE, "dist") };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === "--help" || flag === "-h") {
      console.log("usage: node web_demo/build.mjs --export EXPORT_DIR [--out OUT_DIR]\n" +
        "  --export  a folder written by `kbert export` (a classifier with MediaPipe files)\n" +
        "  --out     where the page is written (default web_demo/dist); replaced as a whole");
      process.exit(0);
    }
    if (!["--export", "--out"].includes(flag) || i + 1 >= argv.length) fail(`bad argument ${flag}; see --help`);
    args[flag.slice(2)] = argv[++i];
  }
  if (!args.export) fail("--export EXPORT_DIR is required (make web-demo passes data/demo/mr_export)");
  return args;
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
  const model = path.join(partial, "model");
  for (const name of ["export.json", "labels.txt", "vocab.txt"]) copy(path.join(args.export, name), path.join(model, name));
  // A model the page cannot show (an embedder, say) is still copied: the page says why it refuses it.
  for (const key of MODEL_KEYS) {
    const relative = manifest.files?.[key];
    if (relative) copy(path.join(args.export, relative), path.join(model, relative));
  }
  fs.rmSync(out, { recursive: true, force: true });
  fs.renameSync(partial, out);
  console.log(`built ${out} from ${args.export}`);
}

main();
