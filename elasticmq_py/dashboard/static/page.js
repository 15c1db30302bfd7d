// What the dashboard's pages share (loaded first by each). Text from clients and operators is set
// as text, never parsed as HTML.
"use strict";
window.elasticmqPage = (function () {
  // An element with properties ("class", "data": dataset entries, "href"/"title": attributes,
  // anything else: a property) and children (strings become text nodes).
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === "class") e.className = v;
      else if (k === "data") for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = dv;
      else if (k === "href" || k === "title") e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) e.append(c === null || c === undefined ? "" : c);
    return e;
  }

  return { el };
})();
