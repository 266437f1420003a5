// The exercise page: the editor (CodeMirror 6), Run/Submit through the API, live progress from
// the submission's event stream, the result, the plots (views.js, loaded only when needed),
// the history with load-back and a diff of two attempts (@codemirror/merge).
// Every text from a submission or a verdict goes through textContent: nothing becomes markup.
import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { EditorState, Compartment, Prec } from "@codemirror/state";
import { python } from "@codemirror/lang-python";
import { oneDark } from "@codemirror/theme-one-dark";
import { el, clear, fmtTime } from "./dom.js";
import { renderResult, renderMetrics } from "./result.js";

const data = JSON.parse(document.getElementById("page-data").textContent);
const csrf = document.querySelector('meta[name="csrf-token"]').content;
const styleNonce = document.querySelector('meta[name="style-nonce"]').content;
const draftKey = `judge:draft:${data.slug}`;
const dark = window.matchMedia("(prefers-color-scheme: dark)");
const theme = new Compartment();
const $ = (id) => document.getElementById(id);

let saveTimer = null;
function saveDraft(code) {
  clearTimeout(saveTimer);
  saveTimer = setTimeout(() => {
    try {
      if (code === data.starter) localStorage.removeItem(draftKey);
      else localStorage.setItem(draftKey, code);
      $("draft-state").textContent = code === data.starter ? "" : "Draft saved in this browser.";
    } catch (e) { $("draft-state").textContent = "Could not save the draft in this browser."; }
  }, 250);
}

const run = (mode) => () => { send(mode); return true; };
const editor = new EditorView({
  parent: $("editor"),
  state: EditorState.create({
    doc: localStorage.getItem(draftKey) ?? data.starter,
    extensions: [
      Prec.highest(keymap.of([
        { key: "Mod-Enter", run: run("run") },
        { key: "Shift-Mod-Enter", run: run("submit") },
      ])),
      EditorView.cspNonce.of(styleNonce), basicSetup, python(), theme.of(dark.matches ? oneDark : []),
      EditorView.contentAttributes.of({ "aria-label": "your solution (Python)" }),
      EditorView.updateListener.of((u) => { if (u.docChanged) saveDraft(u.state.doc.toString()); }),
    ],
  }),
});
dark.addEventListener("change", () => {
  editor.dispatch({ effects: theme.reconfigure(dark.matches ? oneDark : []) });
  if (lastDoc) showPlots(lastDoc);
  if (referenceShown) showReference();
});
window.judgeEditor = editor;  // for the browser tests and the console
window.judgeReadyAt = performance.now();  // the bench's "interactive" mark (ms since navigation)

function setCode(code) {
  editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: code } });
}
$("reset").addEventListener("click", () => {
  if (editor.state.doc.toString() !== data.starter && !window.confirm("Replace your code with the starter?")) return;
  setCode(data.starter);
  localStorage.removeItem(draftKey);
  editor.focus();
});
$("run").addEventListener("click", () => send("run"));
$("submit").addEventListener("click", () => send("submit"));

let stream = null;
let lastDoc = null;
function setBusy(busy) { $("run").disabled = busy; $("submit").disabled = busy; }

async function send(mode) {
  if ($("run").disabled) return;
  setBusy(true);
  showing = null;
  clear($("progress")); clear($("result")); clear($("plots")); clear($("metrics"));
  $("status").textContent = mode === "run" ? "Sending (Run)…" : "Sending (Submit)…";
  let resp;
  try {
    resp = await fetch("/submit", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ exercise: data.slug, code: editor.state.doc.toString(), mode }),
    });
  } catch (e) {
    $("status").textContent = "The judge could not be reached."; setBusy(false); return;
  }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    $("status").textContent = `Not accepted for grading: ${body.detail || resp.status}`;
    setBusy(false); return;
  }
  follow(body.id, mode);
}

function follow(id, mode) {
  if (stream) stream.close();
  const tiers = new Map();
  $("status").textContent = `Queued (${mode}).`;
  stream = new EventSource(`/submissions/${id}/events`);
  stream.addEventListener("status", (ev) => {
    const s = JSON.parse(ev.data);
    $("status").textContent = s.status === "running" ? "Grading…" : `Status: ${s.status}`;
  });
  stream.addEventListener("test", (ev) => {
    const t = JSON.parse(ev.data);
    let ol = tiers.get(t.tier);
    if (!ol) {
      ol = el("ol");
      tiers.set(t.tier, ol);
      $("progress").append(el("li", { class: "tier", "data-tier": t.tier }, [el("strong", {}, t.tier), ol]));
    }
    ol.append(el("li", { class: `test ${t.status}`, "data-status": t.status }, `${t.name}: ${t.status}`));
  });
  stream.addEventListener("end", (ev) => {
    stream.close(); stream = null;
    const doc = JSON.parse(ev.data);
    lastDoc = doc;
    setBusy(false);
    show(doc);
    loadHistory();
  });
  stream.onerror = () => {
    if (stream && stream.readyState === EventSource.CLOSED) {
      $("status").textContent = "Lost the connection to the judge; reload to see the result.";
      setBusy(false);
    }
  };
}

let showing = null;  // the id of the submission whose result is on screen
function show(doc) {
  showing = doc.id;
  const v = doc.verdict;
  $("status").textContent = v ? `Done: ${v.verdict}.` : `Could not grade it: ${doc.message || doc.status}`;
  renderResult($("result"), doc);
  window.judgeShownId = doc.id;  // which submission that mark is of (the bench reads its finished_at)
  window.judgeShownAt = performance.timeOrigin + performance.now();  // the bench's "verdict shown" (epoch ms)
  if (v) plotsWhenDrawn(doc);
}

// the plots are drawn just after the verdict: one request, answered once they are kept
async function plotsWhenDrawn(doc) {
  if (doc.verdict.artifacts_pending) {
    $("plots").textContent = "Drawing the plots…";
    const r = await fetch(`/pages/submissions/${doc.id}/drawn`, { credentials: "same-origin" }).catch(() => null);
    if (!r || !r.ok) { $("plots").textContent = "Could not load the plots; reload to see them."; return; }
    doc = await r.json();
    if (showing !== doc.id) return;  // another attempt is on screen now
    if (doc.verdict.artifacts_pending) { $("plots").textContent = "The plots are not drawn yet; reload to see them."; return; }
  }
  if (lastDoc && lastDoc.id === doc.id) lastDoc = doc;
  await showPlots(doc);
  window.judgePlotsAt = performance.timeOrigin + performance.now();  // the bench's "plots drawn" (epoch ms)
}

async function showPlots(doc) {
  const v = doc.verdict;
  const views = v.artifacts.filter((a) => a.name.endsWith(".vl.json"));
  const images = v.artifacts.filter((a) => /^image\//.test(a.media_type));
  clear($("plots"));
  for (const a of images) {
    $("plots").append(el("figure", {}, [el("img", { src: `/submissions/${doc.id}/artifacts/${encodeURIComponent(a.name)}`, alt: `plot ${a.name}` })]));
  }
  if (views.length) {
    const { embedView } = await import("./views.js");
    for (const a of views) await embedView($("plots"), `/submissions/${doc.id}/artifacts/${encodeURIComponent(a.name)}`, dark.matches);
  }
  const metrics = v.artifacts.find((a) => a.name === "metrics.json");
  if (metrics) {
    const r = await fetch(`/submissions/${doc.id}/artifacts/metrics.json`, { credentials: "same-origin" });
    if (r.ok) renderMetrics($("metrics"), await r.json());
  }
}

let referenceShown = false;
async function showReference() {
  referenceShown = true;
  $("show-reference").hidden = true;
  clear($("reference-plots"));
  if (!data.previews.length) {
    $("reference-plots").append(el("p", { class: "hint" }, "The reference's preview is not ready yet."));
    return;
  }
  const { embedView } = await import("./views.js");
  for (const name of data.previews) await embedView($("reference-plots"), `/exercises/${data.slug}/previews/${encodeURIComponent(name)}`, dark.matches);
}

// --- history: load an attempt back, diff two ----------------------------------------------
async function codeOf(id) {
  const r = await fetch(`/pages/submissions/${id}/code`, { credentials: "same-origin" });
  if (!r.ok) throw new Error(`could not load ${id}`);
  return r.text();
}

async function loadHistory() {
  const r = await fetch(`/pages/exercises/${data.slug}/history`, { credentials: "same-origin" });
  if (!r.ok) return [];
  const rows = await r.json();
  const body = $("history").querySelector("tbody");
  clear(body);
  for (const h of rows) {
    const load = el("button", { type: "button", class: "load", "data-id": h.id }, "Load");
    load.addEventListener("click", async () => {
      setCode(await codeOf(h.id));
      $("status").textContent = `Loaded the attempt of ${fmtTime(h.created_at)} into the editor.`;
      editor.focus();
    });
    const pick = el("input", { type: "checkbox", class: "pick", "data-id": h.id, "aria-label": `compare the attempt of ${fmtTime(h.created_at)}` });
    pick.addEventListener("change", updateDiffButton);
    body.append(el("tr", { "data-id": h.id, "data-verdict": h.verdict || h.status }, [
      el("td", {}, fmtTime(h.created_at)), el("td", {}, h.mode),
      el("td", { class: `verdict ${h.verdict || h.status}` }, h.verdict || h.status),
      el("td", {}, [load]), el("td", {}, [pick]),
    ]));
  }
  updateDiffButton();
  $("history").dataset.loaded = "1";
  return rows;
}

function picked() { return [...document.querySelectorAll("#history .pick:checked")].map((x) => x.dataset.id); }
function updateDiffButton() { $("diff").disabled = picked().length !== 2; }

$("diff").addEventListener("click", async () => {
  const [newer, older] = picked();  // the table is newest first
  const [a, b] = await Promise.all([codeOf(older), codeOf(newer)]);
  const { showDiff } = await import("./diff.js");
  showDiff($("diff-view"), a, b, dark.matches, styleNonce);
});

// on load: the history, and the latest attempt when there is no draft (drafts alone get lost)
loadHistory().then(async (rows) => {
  if (localStorage.getItem(draftKey) === null && rows.length) {
    setCode(await codeOf(rows[0].id));
    $("draft-state").textContent = "No draft in this browser: your latest attempt is loaded.";
  }
});
// the plotting library (~400 KB compressed) loads only when a plot is shown
$("show-reference").addEventListener("click", showReference);
