"""A self-contained interactive HTML page of `AttentionMaps`: no network, no libraries, one
file to open in any browser or attach to a bug report.

The page draws the wordpieces twice (attending on the left, attended to on the right) and a
line between every pair, as thick and opaque as the attention probability, for the chosen
layer and head (or every head of the layer, one colour each). Hovering a token keeps only
its lines. A heatmap of the chosen head sits below.
"""

import html
import json
import re

from keras_bert_impl.atomic_write import write_text_atomically

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
<title>__TITLE__</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
#controls label { margin-right: 1.5em; }
#lines text { font-size: 14px; cursor: default; dominant-baseline: middle; }
#lines text.active { font-weight: bold; fill: #c00; }
#heatmap { border-collapse: collapse; margin-top: 1.5em; font-size: 11px; }
#heatmap td { width: 18px; height: 18px; padding: 0; }
#heatmap th { font-weight: normal; padding: 0 4px; white-space: nowrap; }
#heatmap thead th { writing-mode: vertical-rl; transform: rotate(180deg); text-align: left; }
.note { color: #666; font-size: 13px; }
</style>
</head>
<body>
<h2>Attention: __TITLE__</h2>
<p class="note">Left: the attending wordpiece; right: the wordpiece attended to. Line opacity is the
attention probability. Hover a token to keep only its lines.__TRUNCATED__</p>
<div id="controls">
<label>Layer <select id="layer"></select></label>
<label>Head <select id="head"></select></label>
</div>
<svg id="lines" xmlns="http://www.w3.org/2000/svg"></svg>
<table id="heatmap"></table>
<script id="attention-data" type="application/json">__DATA__</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("attention-data").textContent);
const tokens = data.tokens, probs = data.probabilities;
const L = probs.length, N = probs[0].length, T = tokens.length;
const ROW = 22, LEFT = 10, GAP = 260, WIDTH = 160;
const svg = document.getElementById("lines");
const ns = "http://www.w3.org/2000/svg";
const layerSelect = document.getElementById("layer"), headSelect = document.getElementById("head");
for (let l = 0; l < L; l++) layerSelect.add(new Option("layer " + l, l));
headSelect.add(new Option("all heads", "all"));
for (let h = 0; h < N; h++) headSelect.add(new Option("head " + h, h));
layerSelect.value = String(__LAYER__);
headSelect.value = __HEAD__;
svg.setAttribute("width", LEFT + WIDTH * 2 + GAP);
svg.setAttribute("height", T * ROW + 10);
let hovered = null;

function colour(h) { return "hsl(" + Math.round(360 * h / N) + ", 70%, 45%)"; }

function heads() {
  return headSelect.value === "all" ? [...Array(N).keys()] : [Number(headSelect.value)];
}

function draw() {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const layer = Number(layerSelect.value), shown = heads();
  const xFrom = LEFT + WIDTH, xTo = LEFT + WIDTH + GAP;
  for (const h of shown) {
    for (let i = 0; i < T; i++) {
      for (let j = 0; j < T; j++) {
        const p = probs[layer][h][i][j];
        if (p < 0.01) continue;
        const fromHovered = hovered && hovered.side === "from" && hovered.index === i;
        const toHovered = hovered && hovered.side === "to" && hovered.index === j;
        if (hovered && !fromHovered && !toHovered) continue;
        const line = document.createElementNS(ns, "line");
        line.setAttribute("x1", xFrom); line.setAttribute("y1", 10 + i * ROW);
        line.setAttribute("x2", xTo); line.setAttribute("y2", 10 + j * ROW);
        line.setAttribute("stroke", shown.length > 1 ? colour(h) : "#1f5fbf");
        line.setAttribute("stroke-width", 1 + 3 * p);
        line.setAttribute("stroke-opacity", Math.min(1, shown.length > 1 ? p : p * 1.2));
        svg.appendChild(line);
      }
    }
  }
  for (const side of ["from", "to"]) {
    tokens.forEach((token, i) => {
      const text = document.createElementNS(ns, "text");
      text.textContent = token;
      text.setAttribute("y", 10 + i * ROW);
      if (side === "from") { text.setAttribute("x", xFrom - 8); text.setAttribute("text-anchor", "end"); }
      else { text.setAttribute("x", xTo + 8); }
      if (hovered && hovered.side === side && hovered.index === i) text.classList.add("active");
      text.addEventListener("mouseenter", () => { hovered = {side: side, index: i}; draw(); });
      text.addEventListener("mouseleave", () => { hovered = null; draw(); });
      svg.appendChild(text);
    });
  }
  drawHeatmap(layer, shown);
}

function drawHeatmap(layer, shown) {
  const table = document.getElementById("heatmap");
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement("th"));
  for (const token of tokens) {
    const th = document.createElement("th");
    th.textContent = token;
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (let i = 0; i < T; i++) {
    const row = body.insertRow();
    const th = document.createElement("th"); th.textContent = tokens[i]; row.appendChild(th);
    for (let j = 0; j < T; j++) {
      let p = 0;
      for (const h of shown) p += probs[layer][h][i][j];
      p /= shown.length;
      const cell = row.insertCell();
      cell.style.background = "rgba(31, 95, 191, " + p.toFixed(3) + ")";
      cell.title = tokens[i] + " \\u2192 " + tokens[j] + ": " + p.toFixed(4);
    }
  }
}

layerSelect.addEventListener("change", draw);
headSelect.addEventListener("change", draw);
draw();
document.body.dataset.ready = "true";
</script>
</body>
</html>
"""


def write_attention_html(maps, path, title=None, layer=-1, head=None):
    """Writes the page for `maps` (AttentionMaps) to `path`, atomically, opening on `layer`
    (default: the last) and `head` (default: every head of the layer)."""
    layer = maps.check_layer(layer)
    head = None if head is None else maps.check_head(head)
    title = title or " ".join(maps.tokens)
    # "<" escaped so no text in the data can close the script element early.
    data = json.dumps(maps.to_dict(), ensure_ascii=False).replace("<", "\\u003c")
    truncated = " The text was truncated to fit the sequence length." if maps.truncated else ""
    values = {
        "TITLE": html.escape(title),
        "TRUNCATED": truncated,
        "LAYER": str(layer),
        "HEAD": json.dumps("all" if head is None else str(head)),
        "DATA": data,
    }
    # One pass, so a text that happens to contain a placeholder's name is left alone.
    page = re.sub(r"__(TITLE|TRUNCATED|LAYER|HEAD|DATA)__", lambda m: values[m.group(1)], _PAGE)
    write_text_atomically(page, path)
