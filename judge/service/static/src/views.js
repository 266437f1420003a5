// The plots: a Vega-Lite view (the judge's .vl.json artifact, data inline), compiled by
// vega-lite and drawn by vega as SVG. CSP-safe: every expression is interpreted
// (vega-interpreter), never compiled with new Function, and no library adds a <style>.
import { compile } from "vega-lite";
import { parse, View } from "vega";
import { expressionInterpreter } from "vega-interpreter";
import { el } from "./dom.js";

const DARK = {  // text and axes readable on the page's dark background; marks keep the spec's colours
  background: null, title: { color: "#e6edf3", subtitleColor: "#9198a1" },
  axis: { domainColor: "#9198a1", gridColor: "#30363d", tickColor: "#9198a1", labelColor: "#c9d1d9", titleColor: "#e6edf3" },
  legend: { labelColor: "#c9d1d9", titleColor: "#e6edf3" }, header: { labelColor: "#c9d1d9", titleColor: "#e6edf3" },
  view: { stroke: "#30363d" },
};

export async function embedView(parent, url, dark) {
  const fig = el("figure", { class: "view" });
  parent.append(fig);
  const r = await fetch(url, { credentials: "same-origin" });
  if (!r.ok) { fig.append(el("p", { class: "error" }, `could not load ${url}`)); return; }
  const spec = await r.json();
  const target = el("div", { class: "view-target" });
  fig.append(target);
  if (spec.description) fig.append(el("figcaption", {}, spec.description));
  try {
    const vg = compile(spec, dark ? { config: DARK } : {}).spec;
    const view = new View(parse(vg, null, { ast: true }), { expr: expressionInterpreter, renderer: "svg", container: target, hover: true });
    await view.runAsync();
  } catch (e) {
    fig.append(el("p", { class: "error" }, `the plot could not be drawn: ${e.message}`));
  }
}
