// Building DOM from data only: text through textContent, attributes through setAttribute.
export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of Array.isArray(children) ? children : [children]) {
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
export function clear(node) { while (node.firstChild) node.firstChild.remove(); }
export function fmtTime(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "";
}
