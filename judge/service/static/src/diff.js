// Two attempts side by side, read-only (@codemirror/merge).
import { MergeView } from "@codemirror/merge";
import { EditorView, basicSetup } from "codemirror";
import { EditorState } from "@codemirror/state";
import { python } from "@codemirror/lang-python";
import { oneDark } from "@codemirror/theme-one-dark";
import { clear } from "./dom.js";

let current = null;
export function showDiff(parent, older, newer, dark, nonce) {
  if (current) current.destroy();
  clear(parent);
  const ext = [EditorView.cspNonce.of(nonce), basicSetup, python(), EditorState.readOnly.of(true), EditorView.editable.of(false), dark ? oneDark : []];
  current = new MergeView({ a: { doc: older, extensions: ext }, b: { doc: newer, extensions: ext }, parent,
                           collapseUnchanged: { margin: 3, minSize: 6 } });  // the changes, not the whole file
}
