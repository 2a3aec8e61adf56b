// Drives the built web demo in Debian's headless Chromium with playwright-core, for
// tests/export/test_web_demo.py: types sentences, reads what the page shows, tries the bad
// input, loads broken model folders, takes a screenshot, and records every request the
// page made (any outside 127.0.0.1 is blocked and reported). Prints one JSON object.
//
//   node web_demo/test/browser_check.mjs CONFIG.json
// CONFIG: {"url", "chromium", "sentences": [...] (typed key by key), "bad_input": {name: text} (pasted),
//          "broken_pages": {name: url}, "screenshot", "screenshot_text",
//          "search_queries": [...], "search_screenshot", "litert_sentences": [...], "mediapipe_accented": [...]}
import fs from "node:fs";
import { chromium } from "playwright-core";

const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const LOCAL = /^http:\/\/127\.0\.0\.1(:\d+)?\//;
// The flags the issue asks for: no sandbox (root in a container), no GPU, and none of
// Chromium's own background traffic (component updates, sync, field trials).
const FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];

const requests = [];
const outside = [];
const consoleErrors = [];

async function resultFor(page, text, previousRuns, runtime = "mediapipe") {
  // The page records the text (and runtime) it last handled; wait until that is this one.
  await page.waitForFunction(([t, runs, rt]) => {
    const d = window.kbertDemo;
    return d.lastResult && d.lastResult.text === t &&
      (d.lastResult.label === null || (d.runs > runs && d.lastResult.runtime === rt));
  }, [text, previousRuns, runtime], { timeout: 120000, polling: 20 });
  return page.evaluate(() => {
    const result = document.getElementById("result");
    const bars = [...document.querySelectorAll("#bars .bar-row")];
    return {
      shown: !result.hidden,
      label: result.hidden ? null : document.getElementById("label").textContent,
      latency_text: result.hidden ? null : document.getElementById("latency").textContent,
      latency_ms: window.kbertDemo.lastResult.latencyMs,
      runtime: window.kbertDemo.lastResult.runtime ?? null,
      probabilities: result.hidden ? null : bars.map((b) => Number(b.dataset.probability)),
      bar_labels: bars.map((b) => b.dataset.label),
      message: document.getElementById("message").textContent,
    };
  });
}

async function enter(page, text, { typed = false, runtime = "mediapipe" } = {}) {
  const runs = await page.evaluate(() => window.kbertDemo.runs);
  await page.fill("#text", "");
  await page.focus("#text");
  if (typed) {
    // Key by key: each key press arrives while earlier predictions run (the latest-only path).
    await page.keyboard.type(text);
  } else {
    // One input event for the whole text, as a paste or an IME commit gives.
    await page.keyboard.insertText(text);
  }
  return resultFor(page, text, runs, runtime);
}

async function search(page) {
  const start = Date.now();
  await page.click("#tab-search");
  await page.waitForFunction(() => window.kbertDemo.search.ready || window.kbertDemo.search.error,
    null, { timeout: 300000, polling: 100 });
  const result = { index_seconds: (Date.now() - start) / 1000, error: await page.evaluate(() => window.kbertDemo.search.error),
    indexed: await page.evaluate(() => window.kbertDemo.search.indexed), queries: [] };
  if (result.error) return result;
  for (const query of config.search_queries) {
    const runs = await page.evaluate(() => window.kbertDemo.search.runs);
    await page.fill("#query", "");
    await page.focus("#query");
    await page.keyboard.insertText(query);
    await page.waitForFunction(([q, r]) => {
      const s = window.kbertDemo.search;
      return s.lastResult && s.lastResult.query === q && s.runs > r;
    }, [query, runs], { timeout: 60000, polling: 20 });
    result.queries.push(await page.evaluate(() => ({
      shown: [...document.querySelectorAll("#neighbours li")].map((li) => ({
        index: Number(li.dataset.index), score: Number(li.dataset.score), text: li.lastChild.textContent })),
      latency_ms: window.kbertDemo.search.lastResult.latencyMs,
    })));
  }
  await page.screenshot({ path: config.search_screenshot, fullPage: true });
  return result;
}

async function main() {
  const browser = await chromium.launch({ executablePath: config.chromium, headless: true, args: FLAGS });
  const context = await browser.newContext({ viewport: { width: 900, height: 720 } });
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (LOCAL.test(url)) return route.continue();
    outside.push(url);
    return route.abort("blockedbyclient");
  });
  context.on("request", (request) => requests.push(request.url()));
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(`pageerror: ${e.message}`));

  const loadStart = Date.now();
  await page.goto(config.url);
  await page.waitForFunction(() => window.kbertDemo && (window.kbertDemo.ready || window.kbertDemo.error),
    null, { timeout: 300000 });
  const loadError = await page.evaluate(() => window.kbertDemo.error);
  const out = { load_seconds: (Date.now() - loadStart) / 1000, load_error: loadError, model_line: null,
    results: [], bad_input: {}, paste_during_prediction: null, broken_pages: {} };
  if (!loadError) {
    out.model_line = await page.textContent("#model-line");
    // The first TYPED sentences key by key (the latest-only path while keys arrive), the rest
    // pasted: typing all of them cost about 80 s of the test suite and checked nothing more.
    const TYPED = 4;
    for (const [i, sentence] of config.sentences.entries()) {
      const start = Date.now();
      const typed = i < TYPED;
      out.results.push({ text: sentence, typed, ...(await enter(page, sentence, { typed })),
        seconds: (Date.now() - start) / 1000 });
    }
    // Accented sentences through MediaPipe too: measured and reported, not expected to agree.
    out.mediapipe_accented = [];
    for (const sentence of config.mediapipe_accented ?? []) {
      out.mediapipe_accented.push({ text: sentence, ...(await enter(page, sentence)) });
    }
    for (const [name, text] of Object.entries(config.bad_input)) {
      const start = Date.now();
      out.bad_input[name] = { ...(await enter(page, text)), seconds: (Date.now() - start) / 1000 };
    }
    // Paste a long text and, without waiting, a second one: the page must end on the second.
    const runs = await page.evaluate(() => window.kbertDemo.runs);
    await page.fill("#text", "");
    await page.focus("#text");
    await page.keyboard.insertText(config.bad_input["10000_characters"]);
    await page.keyboard.insertText(" " + config.sentences[0]);
    const final = await page.inputValue("#text");
    out.paste_during_prediction = { ...(await resultFor(page, final, runs)),
      runs: (await page.evaluate(() => window.kbertDemo.runs)) - runs };
    const shot = await enter(page, config.screenshot_text);
    out.screenshot_result = shot;
    await page.screenshot({ path: config.screenshot, fullPage: true });
    if (config.litert_sentences) {
      // The same page on LiteRT.js: our tokenizer's ids into the id model.
      await page.selectOption("#runtime", "litert");
      out.litert = [];
      for (const sentence of config.litert_sentences) {
        out.litert.push({ text: sentence, ...(await enter(page, sentence, { runtime: "litert" })) });
      }
      out.litert_bad_input = await enter(page, config.bad_input.script_not_in_vocabulary, { runtime: "litert" });
      await page.selectOption("#runtime", "mediapipe");
    }
    if (config.search_queries) out.search = await search(page);
  }
  for (const [name, url] of Object.entries(config.broken_pages ?? {})) {
    const broken = await context.newPage();
    await broken.goto(url);
    await broken.waitForFunction(() => window.kbertDemo && (window.kbertDemo.ready || window.kbertDemo.error),
      null, { timeout: 60000 });
    out.broken_pages[name] = { error: await broken.evaluate(() => window.kbertDemo.error),
      shown: await broken.textContent("#model-line"), textarea_disabled: await broken.isDisabled("#text") };
    // These folders bundle no embedder either: the search tab must say so.
    await broken.click("#tab-search");
    await broken.waitForFunction(() => window.kbertDemo.search.ready || window.kbertDemo.search.error,
      null, { timeout: 60000 });
    out.broken_pages[name].search_error = await broken.evaluate(() => window.kbertDemo.search.error);
    await broken.close();
  }
  out.browser_version = browser.version();
  await browser.close();
  out.requests = requests;
  out.outside = outside;
  out.console_errors = consoleErrors;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e.stack ?? String(e));
  process.exit(1);
});
