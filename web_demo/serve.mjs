// Serves a built web demo on 127.0.0.1 only, on a free port unless --port is given, and
// prints the URL. Static files only (GET and HEAD), no directory listings, nothing outside
// the folder; wasm gets application/wasm so browsers can compile it while it streams.
//
//   node web_demo/serve.mjs web_demo/dist [--port 8000]
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8", ".json": "application/json; charset=utf-8", ".txt": "text/plain; charset=utf-8",
  ".wasm": "application/wasm", ".tflite": "application/octet-stream", ".png": "image/png",
};

const argv = process.argv.slice(2);
const root = path.resolve(argv[0] ?? "");
const portFlag = argv.indexOf("--port");
const port = portFlag >= 0 ? Number(argv[portFlag + 1]) : 0;
if (!argv[0] || !fs.existsSync(root) || !fs.statSync(root).isDirectory() || !Number.isInteger(port)) {
  console.error("usage: node web_demo/serve.mjs BUILT_DIR [--port N]  (BUILT_DIR: what build.mjs wrote)");
  process.exit(2);
}

const server = http.createServer((request, response) => {
  if (request.method !== "GET" && request.method !== "HEAD") {
    response.writeHead(405, { Allow: "GET, HEAD" }).end();
    return;
  }
  let pathname;
  try {
    pathname = decodeURIComponent(new URL(request.url, "http://127.0.0.1").pathname);
  } catch {
    response.writeHead(400).end("bad path");
    return;
  }
  const file = path.join(root, pathname.endsWith("/") ? pathname + "index.html" : pathname);
  if (file !== root && !file.startsWith(root + path.sep)) {
    response.writeHead(403).end("outside the demo folder");
    return;
  }
  fs.stat(file, (error, stat) => {
    if (error || !stat.isFile()) {
      response.writeHead(404, { "Content-Type": "text/plain; charset=utf-8" }).end(`not found: ${pathname}`);
      return;
    }
    response.writeHead(200, {
      "Content-Type": TYPES[path.extname(file)] ?? "application/octet-stream",
      "Content-Length": stat.size,
      "Cache-Control": "no-store",
    });
    if (request.method === "HEAD") response.end();
    else fs.createReadStream(file).pipe(response);
  });
});

server.listen(port, "127.0.0.1", () => {
  console.log(`Serving ${root} at http://127.0.0.1:${server.address().port}/`);
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => server.close(() => process.exit(0)));
