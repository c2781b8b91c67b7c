// What every page shares: the API's requests, elements, tables (sortable), numbers and times
// as the answers give them, and the error box. A page computes no answer: it shows the API's.
"use strict";

const dx = (() => {
  /** GET (or POST with `body`) /api/{route}; the answer's JSON, or an Error with its text. */
  async function api(route, params = {}, body) {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== false && v !== "") query.set(k, v === true ? "" : v);
    }
    const url = `/api/${route}${query.toString() ? "?" + query : ""}`;
    const init = body === undefined ? {} : { method: "POST", body, headers: { "Content-Type": "application/json" } };
    const response = await fetch(url, init);
    const answer = await response.json();
    if (!response.ok) {
      const e = new Error(answer.error || `${response.status}`);
      e.status = response.status;
      throw e;
    }
    return answer;
  }

  /** An element: `el("td", {class: "text"}, "child", node)`. */
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  /** A number for the eye (the API's value rounded to 6 significant digits). */
  function num(x) {
    if (typeof x !== "number") return x;
    if (x === 0 || (Math.abs(x) >= 1e-4 && Math.abs(x) < 1e12)) {
      return Number.isInteger(x) ? x.toLocaleString("en") : x.toPrecision(6).replace(/\.?0+$/, "");
    }
    return x.toExponential(4);
  }

  /** Unix seconds of an RFC 3339 time. */
  const seconds = (t) => Math.floor(Date.parse(t) / 1000);

  /** The page an address in a column links to. */
  function link(column, value) {
    if (typeof value !== "string") return null;
    if (/wallet/.test(column)) return `/wallet/${encodeURIComponent(value)}`;
    if (/^(token|token_address|address|base_token|quote_token)$/.test(column)) return `/token/${encodeURIComponent(value)}`;
    return null;
  }

  function cell(column, value) {
    if (value === null || value === undefined) return el("td", { class: "muted" }, "–");
    if (typeof value === "object") return el("td", { class: "text" }, JSON.stringify(value));
    const href = link(column, value);
    if (href) return el("td", { class: "text" }, el("a", { href }, value));
    return el("td", { class: typeof value === "number" ? "" : "text" }, num(value));
  }

  /** A table of `rows` (objects), every column sortable by a click on its header. */
  function table(rows, columns) {
    columns = columns || [...new Set(rows.flatMap((r) => Object.keys(r)))];
    const body = el("tbody");
    let order = { column: null, dir: 1 };
    const head = columns.map((c) => el("th", {
      class: "sortable" + (typeof rows[0]?.[c] === "number" ? "" : " text"),
      onclick: () => sort(c),
    }, c));
    function fill(list) {
      body.replaceChildren(...list.map((r) => el("tr", {}, columns.map((c) => cell(c, r[c])))));
    }
    function sort(column) {
      order = { column, dir: order.column === column ? -order.dir : 1 };
      const key = (r) => r[column];
      const sorted = [...rows].sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * order.dir;
      });
      head.forEach((h, i) => h.className = "sortable" + (columns[i] === column ? (order.dir > 0 ? " sorted-asc" : " sorted-desc") : ""));
      fill(sorted);
    }
    fill(rows);
    if (!rows.length) return el("p", { class: "muted" }, "no rows");
    return el("table", {}, el("thead", {}, el("tr", {}, head)), body);
  }

  /** A definition list of an object's fields. */
  function fields(object) {
    return el("dl", { class: "kv" }, Object.entries(object).flatMap(([k, v]) => [
      el("dt", {}, k), el("dd", {}, v !== null && typeof v === "object" ? JSON.stringify(v) : num(v ?? "–")),
    ]));
  }

  /** A section with a title, filled by `body()` (an element or a promise of one); an error
   *  of the API is shown in its place. */
  function section(parent, title, body) {
    const content = el("div", {}, el("span", { class: "muted" }, "loading…"));
    const node = el("section", {}, el("h2", {}, title), content);
    parent.append(node);
    Promise.resolve().then(body).then(
      (filled) => content.replaceChildren(filled),
      (e) => content.replaceChildren(el("p", { class: "error" }, e.message)),
    );
    return node;
  }

  /** The answer's lake version and coverage warnings, as a line. */
  function provenance(answer) {
    const warnings = (answer.warnings || []).map((w) => w.text);
    return el("p", { class: "muted" }, `lake version ${answer.version}`,
      warnings.length ? el("span", { class: "error" }, " · " + warnings.join(" · ")) : null);
  }

  /** The path's last part (the address of a token or wallet page). */
  const address = () => decodeURIComponent(location.pathname.split("/").filter(Boolean).pop() || "");

  document.getElementById("goto")?.addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.target;
    const value = form.address.value.trim();
    const kind = event.submitter?.value || "token";
    if (value) location.href = `/${kind}/${encodeURIComponent(value)}`;
  });

  return { api, el, num, seconds, table, fields, section, provenance, address };
})();
