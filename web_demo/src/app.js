// The web demo: a classifier written by `kbert export` in MediaPipe Tasks Text, in this page.
// Everything is served from this folder (build.mjs copies MediaPipe's wasm and the model);
// the page never contacts another host.
import { FilesetResolver, TextClassifier, TextEmbedder } from "./mediapipe/text_bundle.mjs";
import { WordPieceTokenizer, parseCharTable } from "./bert_tokenizer.js";
import { Tensor, loadAndCompile, loadLiteRt } from "./litert/core.js";

const MODEL_DIR = "model/";
const EMBEDDER_DIR = "embedder/";
const NEIGHBOURS = 5;
// Sentences embedded per slice while indexing; the page stays responsive between slices.
const INDEX_SLICE = 8;
// Longer pastes are refused: the model reads only its first word pieces, and the textarea stays responsive.
const MAX_INPUT_CHARS = 50000;
// ?model=int8 picks the dynamic-range int8 file (a quarter of the size); float32 by default.
// ?runtime=litert starts on LiteRT.js instead of MediaPipe (the page has a switch too).
const PRECISION_KEYS = { float32: "mediapipe", int8: "mediapipe_int8" };

const $ = (id) => document.getElementById(id);
// State the browser test reads (tests/export/test_web_demo.py); the screen shows the same.
const demo = (window.kbertDemo = {
  ready: false, error: null, runs: 0, lastResult: null,
  search: { started: false, ready: false, error: null, indexed: 0, total: 0, runs: 0, lastResult: null },
});
let filesetPromise = null;
const wasmFileset = () => (filesetPromise ??= FilesetResolver.forTextTasks("mediapipe/wasm"));

class UserError extends Error {}

function showModelError(message) {
  demo.error = message;
  const line = $("model-line");
  line.textContent = message;
  line.classList.add("error");
  $("text").disabled = true;
}

async function fetchOk(path, what) {
  let response;
  try {
    response = await fetch(path);
  } catch (e) {
    throw new UserError(`Could not read ${what} (${path}): ${e.message}`);
  }
  if (!response.ok) {
    throw new UserError(`${what} is missing: ${path} answered ${response.status}. Run \`make web-demo\` ` +
      "(it exports the demo model) or build with `node web_demo/build.mjs --export DIR`.");
  }
  return response;
}

async function loadManifest() {
  const response = await fetchOk(MODEL_DIR + "export.json", "The model's export.json");
  let manifest;
  try {
    manifest = await response.json();
  } catch (e) {
    throw new UserError(`model/export.json is not JSON (${e.message}): copy a folder written by \`kbert export\`.`);
  }
  if (manifest.head !== "classifier") {
    throw new UserError(`This model is a ${manifest.head ?? "model without a head"}, not a classifier: ` +
      "the demo shows labels and probabilities, so export a `kbert finetune --task classification` run.");
  }
  if (manifest.pair) {
    throw new UserError("This classifier takes sentence pairs; the demo classifies one text.");
  }
  return manifest;
}

async function loadClassifier(manifest, precision) {
  const key = PRECISION_KEYS[precision];
  if (!key) throw new UserError(`Unknown ?model=${precision}: use float32 or int8.`);
  const file = manifest.files?.[key];
  if (!file) throw new UserError(`export.json lists no "${key}" file: export with MediaPipe files (--formats mediapipe).`);
  const bytes = new Uint8Array(await (await fetchOk(MODEL_DIR + file, "The model file")).arrayBuffer());
  // A TFLite flatbuffer says "TFL3" at bytes 4-7; anything else would fail deep inside the wasm.
  if (bytes.length < 8 || String.fromCharCode(...bytes.subarray(4, 8)) !== "TFL3") {
    throw new UserError(`${file} is not a TFLite model (${bytes.length} bytes without the TFL3 mark).`);
  }
  const fileset = await wasmFileset();
  let classifier;
  try {
    classifier = await TextClassifier.createFromOptions(fileset, {
      baseOptions: { modelAssetBuffer: bytes },
      maxResults: -1,
    });
  } catch (e) {
    throw new UserError(`${file} is not a MediaPipe text classifier: ${e.message ?? e}`);
  }
  // One run checks the model's outputs against labels.txt (and warms it up).
  const categories = classifier.classify("warm up").classifications[0]?.categories ?? [];
  if (categories.length !== manifest.label_names.length) {
    classifier.close();
    throw new UserError(`${file} gives ${categories.length} categories but export.json lists ` +
      `${manifest.label_names.length} labels: not the classifier of this export.`);
  }
  return { classifier, file };
}

async function loadTokenizer(manifest) {
  const vocabulary = (await (await fetchOk(MODEL_DIR + "vocab.txt", "The model's vocab.txt")).text()).split("\n");
  if (vocabulary.at(-1) === "") vocabulary.pop();
  const table = parseCharTable(await (await fetchOk("bert_unicode.txt", "The page's bert_unicode.txt")).text());
  return new WordPieceTokenizer(vocabulary, table, manifest.lowercase);
}

// The checks of android_demo's InputCheck.java, with the same messages: a problem (no
// prediction) or notes shown beside the prediction. Our tokenizer gives the pipeline's word
// pieces, so "unknown" and "truncated" are exact, whatever MediaPipe's tokenizer does.
function checkInput(text, tokenizer, manifest) {
  if (text.trim() === "") return { problem: "Type or paste some text to classify." };
  const budget = manifest.sequence_length - 2;
  // Characters are code points (an emoji is one); only a text over the limit in UTF-16 units needs counting.
  const chars = text.length > MAX_INPUT_CHARS ? [...text].length : text.length;
  if (chars > MAX_INPUT_CHARS) {
    return { problem: `The text has ${chars.toLocaleString("en")} characters; paste at most ` +
      `${MAX_INPUT_CHARS.toLocaleString("en")} (the model reads only its first ${budget} word pieces).` };
  }
  const encoded = tokenizer.encode(text, manifest.sequence_length);
  if (encoded.keptPieces === 0) {
    return { problem: "Nothing to classify: the text holds only characters BERT ignores " +
      "(spaces, control or format characters)." };
  }
  const notes = [];
  if (encoded.unknownPieces === encoded.keptPieces) {
    notes.push(`The vocabulary knows none of this text (all ${encoded.keptPieces} word pieces are [UNK]): ` +
      "the label is a guess.");
  } else if (2 * encoded.unknownPieces >= encoded.keptPieces) {
    notes.push(`Much of this text is outside the vocabulary (${encoded.unknownPieces} of ${encoded.keptPieces} ` +
      "word pieces are [UNK]).");
  }
  if (encoded.truncated) {
    notes.push(`Long text: the model reads its first ${budget} word pieces, as in training; the rest is ignored.`);
  }
  // MediaPipe's BERT tokenizer keeps accents that the model's own (uncased) tokenizer strips.
  if (manifest.lowercase && /\p{Mn}/u.test(text.normalize("NFD"))) {
    notes.push("Accented letters: MediaPipe's tokenizer keeps the accents that training stripped, so its " +
      "word pieces (and scores) can differ from the Python pipeline's here.");
  }
  return { problem: null, note: notes.join(" ") };
}

function render(text, categories, labels, ms, note, runtime) {
  const probabilities = new Array(labels.length).fill(0);
  for (const c of categories) probabilities[c.index] = c.score;
  let top = 0;
  probabilities.forEach((p, i) => { if (p > probabilities[top]) top = i; });
  $("label").textContent = labels[top];
  $("latency").textContent = `${ms.toFixed(1)} ms`;
  const bars = $("bars");
  bars.replaceChildren(...labels.map((name, i) => {
    const row = document.createElement("div");
    row.className = "bar-row" + (i === top ? " top" : "");
    row.dataset.label = name;
    row.dataset.probability = String(probabilities[i]);
    const nameCell = document.createElement("span");
    nameCell.textContent = name;
    const track = document.createElement("div");
    track.className = "bar-track";
    const fill = document.createElement("div");
    fill.className = "bar-fill";
    fill.style.width = `${(100 * probabilities[i]).toFixed(2)}%`;
    track.append(fill);
    const value = document.createElement("span");
    value.className = "bar-value";
    value.textContent = `${(100 * probabilities[i]).toFixed(1)}%`;
    row.append(nameCell, track, value);
    return row;
  }));
  const result = $("result");
  result.hidden = false;
  result.dataset.text = text;
  $("message").textContent = note;
  $("message").classList.remove("error");
  demo.lastResult = { text, label: labels[top], probabilities, latencyMs: ms, note, runtime };
  result.dataset.runtime = runtime;
}

function renderProblem(text, message) {
  $("result").hidden = true;
  $("result").dataset.text = text;
  $("message").textContent = message;
  demo.lastResult = { text, label: null, probabilities: null, latencyMs: null, note: message };
}

// LiteRT.js runs a token-id model on our own tokenizer's ids. It needs static shapes, and the
// id .tflite files take any [batch, length] ([-1, -1], refused by LiteRT.js 2.5.3), so it runs
// the MediaPipe file of the same precision: the same id model at [1, sequence_length] with
// inputs ids / mask / segment_ids and one probabilities output (LiteRT ignores the metadata).
async function loadLiteRtModel(manifest, precision) {
  const file = manifest.files?.[PRECISION_KEYS[precision]];
  if (!file) throw new UserError(`export.json lists no "${PRECISION_KEYS[precision]}" file for LiteRT.js.`);
  await loadLiteRt("litert/wasm/");
  const bytes = new Uint8Array(await (await fetchOk(MODEL_DIR + file, "The model file")).arrayBuffer());
  const model = await loadAndCompile(bytes, { accelerator: "wasm" });
  const inputs = model.getInputDetails().map((d) => `${d.name}:${d.dtype}[${Object.values(d.shape)}]`).sort();
  const want = ["ids", "mask", "segment_ids"].map((n) => `${n}:int32[1,${manifest.sequence_length}]`);
  if (inputs.join() !== want.join()) {
    throw new UserError(`${file} takes ${inputs.join(", ")}, not the token ids ${want.join(", ")}.`);
  }
  return { model, file };
}

async function classifyWithLiteRt(litert, encoded, labels) {
  const shape = [1, encoded.ids.length];
  const inputs = { ids: new Tensor(encoded.ids, shape), mask: new Tensor(encoded.mask, shape),
    segment_ids: new Tensor(encoded.segmentIds, shape) };
  try {
    const outputs = await litert.model.run(inputs);
    const probabilities = Array.from(outputs.probabilities.toTypedArray());
    for (const tensor of Object.values(outputs)) tensor.delete();
    if (probabilities.length !== labels.length) {
      throw new Error(`${probabilities.length} probabilities for ${labels.length} labels`);
    }
    return probabilities.map((score, index) => ({ index, score }));
  } finally {
    for (const tensor of Object.values(inputs)) tensor.delete();
  }
}

function startClassifying(classifier, tokenizer, manifest, precision) {
  const textarea = $("text");
  const runtimeChoice = $("runtime");
  let litert = null;
  let running = false;
  let dirty = false;
  // Key presses and pastes that arrive while a prediction runs only mark the text dirty; when
  // the prediction ends, one more run takes the newest text, so a paste during a prediction
  // never queues a backlog of stale predictions.
  const classifyOnce = async () => {
    const text = textarea.value;
    const runtime = runtimeChoice.value;
    const { problem, note } = checkInput(text, tokenizer, manifest);
    if (problem) return renderProblem(text, problem);
    try {
      let categories;
      let ms;
      if (runtime === "litert") {
        if (!litert) {
          $("message").textContent = "Loading LiteRT.js and the model…";
          litert = await loadLiteRtModel(manifest, precision);
        }
        const start = performance.now();
        const encoded = tokenizer.encode(text, manifest.sequence_length);
        categories = await classifyWithLiteRt(litert, encoded, manifest.label_names);
        ms = performance.now() - start;
      } else {
        const start = performance.now();
        categories = classifier.classify(text).classifications[0].categories;
        ms = performance.now() - start;
      }
      demo.runs += 1;
      // The LiteRT path feeds our own ids, so MediaPipe's accent note does not apply to it.
      const shownNote = runtime === "litert" ? note.replace(/ ?Accented letters: .*$/, "") : note;
      render(text, categories, manifest.label_names, ms, shownNote, runtime);
    } catch (e) {
      renderProblem(text, e instanceof UserError ? e.message : `Prediction failed: ${e.message ?? e}`);
      $("message").classList.add("error");
      if (runtime === "litert") litert = null;
    }
  };
  const request = async () => {
    dirty = true;
    if (running) return;
    running = true;
    while (dirty) {
      dirty = false;
      await classifyOnce();
      await new Promise((resolve) => setTimeout(resolve, 0)); // let queued input events mark dirty
    }
    running = false;
  };
  textarea.addEventListener("input", request);
  runtimeChoice.addEventListener("change", request);
  textarea.disabled = false;
  runtimeChoice.disabled = false;
  textarea.focus();
  request();
}

function searchMessage(text, isError = false) {
  $("search-message").textContent = text;
  $("search-message").classList.toggle("error", isError);
}

async function loadEmbedder() {
  const manifest = await loadJson(EMBEDDER_DIR + "export.json", "No sentence embedder is bundled: build with " +
    "`--embedder DIR --sentences FILE` (make web-demo does).");
  if (manifest.head !== "embedder") {
    throw new UserError(`embedder/export.json is a ${manifest.head}, not a sentence embedder.`);
  }
  const file = manifest.files?.mediapipe;
  if (!file) throw new UserError('embedder/export.json lists no "mediapipe" file.');
  const bytes = new Uint8Array(await (await fetchOk(EMBEDDER_DIR + file, "The embedder file")).arrayBuffer());
  let embedder;
  try {
    embedder = await TextEmbedder.createFromOptions(await wasmFileset(), {
      baseOptions: { modelAssetBuffer: bytes }, l2Normalize: true, quantize: false,
    });
  } catch (e) {
    throw new UserError(`${file} is not a MediaPipe text embedder: ${e.message ?? e}`);
  }
  const sentences = (await (await fetchOk(EMBEDDER_DIR + "sentences.txt", "The sentences to search")).text())
    .split("\n").filter((line) => line !== "");
  return { embedder, sentences, manifest };
}

async function loadJson(path, missing) {
  const response = await fetch(path);
  if (!response.ok) throw new UserError(missing);
  try {
    return await response.json();
  } catch (e) {
    throw new UserError(`${path} is not JSON: ${e.message}`);
  }
}

const embed = (embedder, text) => embedder.embed(text).embeddings[0].floatEmbedding;

// Embeds the sentences a slice at a time, yielding between slices so typing stays live.
async function buildIndex(embedder, sentences) {
  const vectors = [];
  demo.search.total = sentences.length;
  for (let i = 0; i < sentences.length; i += INDEX_SLICE) {
    for (const sentence of sentences.slice(i, i + INDEX_SLICE)) vectors.push(embed(embedder, sentence));
    demo.search.indexed = vectors.length;
    searchMessage(`Indexing ${vectors.length} of ${sentences.length} sentences…`);
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  return vectors;
}

function nearest(vectors, query) {
  // Both sides are unit length (l2Normalize), so the dot product is the cosine similarity.
  const scores = vectors.map((v) => v.reduce((sum, x, k) => sum + x * query[k], 0));
  return scores.map((score, index) => ({ index, score })).sort((a, b) => b.score - a.score).slice(0, NEIGHBOURS);
}

async function startSearch() {
  if (demo.search.started) return;
  demo.search.started = true;
  try {
    const { embedder, sentences, manifest } = await loadEmbedder();
    const vectors = await buildIndex(embedder, sentences);
    const input = $("query");
    let scheduled = false;
    const runLatest = () => {
      scheduled = false;
      const query = input.value;
      if (query.trim() === "" || query.length > MAX_INPUT_CHARS) {
        $("neighbours").replaceChildren();
        const problem = query.trim() === "" ? "Type a sentence to find its nearest neighbours." :
          `The text has ${query.length.toLocaleString("en")} characters; paste at most ${MAX_INPUT_CHARS.toLocaleString("en")}.`;
        searchMessage(problem);
        demo.search.lastResult = { query, neighbours: null, message: problem };
        return;
      }
      const start = performance.now();
      const found = nearest(vectors, embed(embedder, query));
      const ms = performance.now() - start;
      demo.search.runs += 1;
      $("neighbours").replaceChildren(...found.map(({ index, score }) => {
        const item = document.createElement("li");
        item.dataset.index = String(index);
        item.dataset.score = String(score);
        const scoreCell = document.createElement("span");
        scoreCell.className = "score";
        scoreCell.textContent = score.toFixed(3);
        item.append(scoreCell, document.createTextNode(sentences[index]));
        return item;
      }));
      searchMessage(`${ms.toFixed(1)} ms to embed the query and rank ${sentences.length} sentences ` +
        `(${manifest.name}, cosine similarity).`);
      demo.search.lastResult = { query, neighbours: found, latencyMs: ms };
    };
    input.addEventListener("input", () => {
      if (!scheduled) {
        scheduled = true;
        setTimeout(runLatest, 0);
      }
    });
    input.disabled = false;
    input.focus();
    runLatest();
    demo.search.ready = true;
  } catch (e) {
    const message = e instanceof UserError ? e.message : `The embedder could not be loaded: ${e.message ?? e}`;
    demo.search.error = message;
    searchMessage(message, true);
  }
}

function setUpTabs() {
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    tab.addEventListener("click", () => {
      for (const other of document.querySelectorAll('[role="tab"]')) {
        other.setAttribute("aria-selected", String(other === tab));
        $(other.dataset.panel).hidden = other !== tab;
      }
      // The index is built the first time the tab is opened, not at page load.
      if (tab.id === "tab-search") startSearch();
    });
  }
}

async function main() {
  setUpTabs();
  const params = new URLSearchParams(location.search);
  const precision = params.get("model") ?? "float32";
  if (params.get("runtime") === "litert") $("runtime").value = "litert";
  try {
    const manifest = await loadManifest();
    const tokenizer = await loadTokenizer(manifest);
    const { classifier, file } = await loadClassifier(manifest, precision);
    $("model-line").textContent = `${manifest.name}: ${manifest.model_class}, labels ${manifest.label_names.join(", ")}; ` +
      `${file} (${precision}), ${manifest.sequence_length} tokens.`;
    startClassifying(classifier, tokenizer, manifest, precision);
    demo.ready = true;
  } catch (e) {
    showModelError(e instanceof UserError ? e.message : `The model could not be loaded: ${e.message ?? e}`);
  }
}

main();
