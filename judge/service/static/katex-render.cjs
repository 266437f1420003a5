// Renders TeX to MathML with KaTeX, for judge/service/spec_html.py (run with node, once per spec).
// stdin: JSON [{"tex": "...", "display": true|false}, ...]
// stdout: JSON [{"html": "<span class=\"katex\">…</span>"} | {"error": "KaTeX's message"}, ...]
// MathML output: no inline style attributes (the page's CSP forbids them) and no fonts to ship.
"use strict";
const katex = require("katex");
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const items = JSON.parse(input);
  const out = items.map(({ tex, display }) => {
    try {
      return { html: katex.renderToString(tex, { displayMode: !!display, output: "mathml",
                                                 throwOnError: true, strict: "error", trust: false }) };
    } catch (e) {
      return { error: String(e && e.message ? e.message : e) };
    }
  });
  process.stdout.write(JSON.stringify(out));
});
