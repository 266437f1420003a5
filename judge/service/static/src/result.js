// The verdict, as the page shows it: each tier, each failed test with its message, the seed,
// the resources used; and the metrics table. Text only (textContent), never markup.
import { el, clear } from "./dom.js";

export function renderResult(root, doc) {
  clear(root);
  const v = doc.verdict;
  if (!v) {
    root.append(el("p", { class: "verdict error", id: "verdict", "data-verdict": "error" }, `The judge could not grade it: ${doc.message || doc.status}`));
    return;
  }
  root.append(el("p", { class: `verdict ${v.verdict}`, id: "verdict", "data-verdict": v.verdict },
    `${v.verdict === "accepted" ? "Accepted" : v.verdict === "rejected" ? "Rejected" : "Error"} (${v.mode})`));
  if (v.error) root.append(el("p", { class: "error" }, `${v.error.kind}: ${v.error.message}`));
  const tiers = el("ul", { class: "tiers" });
  for (const t of v.tiers) {
    const failed = t.tests.filter((x) => x.status === "failed" || x.status === "error");
    const passed = t.tests.filter((x) => x.status === "passed").length;
    const li = el("li", { class: `tier ${t.status}`, "data-tier": t.tier, "data-status": t.status },
      [el("strong", {}, t.tier), ` ${t.status}: ${passed}/${t.tests.length} passed`]);
    if (failed.length) {
      const ul = el("ul", { class: "failures" });
      for (const f of failed) {
        const item = el("li", { class: "failure", "data-test": f.name }, [el("code", {}, f.name), " ", el("span", { class: "status" }, f.status)]);
        if (f.message) item.append(el("pre", { class: "message" }, f.message));
        if (f.misconception) item.append(el("p", { class: "misconception" }, `Likely mistake: ${f.misconception.why}` + (f.misconception.spec_section ? ` (see "${f.misconception.spec_section}")` : "")));
        ul.append(item);
      }
      li.append(ul);
    }
    tiers.append(li);
  }
  root.append(tiers);
  const r = v.resources;
  root.append(el("dl", { class: "facts" }, [
    el("dt", {}, "seed"), el("dd", { id: "seed" }, String(v.seed)),
    el("dt", {}, "CPU"), el("dd", {}, `${r.cpu_ms.toFixed(0)} ms`),
    el("dt", {}, "wall"), el("dd", {}, `${r.wall_ms.toFixed(0)} ms`),
    el("dt", {}, "peak memory"), el("dd", {}, `${r.peak_rss_mb.toFixed(0)} MB`),
    el("dt", {}, "calls"), el("dd", {}, String(r.calls)),
  ]));
  if (v.output) root.append(el("details", {}, [el("summary", {}, "output"), el("pre", {}, v.output)]));
}

// metrics.json: a table of its scalar values (name, value); arrays shown by their length
function flatten(prefix, value, rows) {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(prefix ? `${prefix}.${k}` : k, v, rows);
  } else if (Array.isArray(value)) {
    rows.push([prefix, value.every((x) => typeof x === "number") && value.length <= 8 ? value.map(fmt).join(", ") : `${value.length} values`]);
  } else {
    rows.push([prefix, fmt(value)]);
  }
}
const fmt = (x) => (typeof x === "number" ? (Number.isInteger(x) ? String(x) : x.toPrecision(4)) : String(x));

export function renderMetrics(root, metrics) {
  clear(root);
  const rows = [];
  flatten("", metrics, rows);
  const body = el("tbody", {}, rows.slice(0, 200).map(([k, v]) => el("tr", {}, [el("th", { scope: "row" }, k), el("td", {}, v)])));
  root.append(el("table", { class: "metrics", id: "metrics-table" }, [el("thead", {}, [el("tr", {}, [el("th", { scope: "col" }, "metric"), el("th", { scope: "col" }, "value")])]), body]));
}
