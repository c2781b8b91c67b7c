// The screener: a search-profiles request edited on the page, answered locally by
// `/api/search` (`dexlake search`), its profiles as a sortable table linking to the tokens.
"use strict";

(() => {
  const main = document.getElementById("main");
  const example = { filter: { "market.liquidity": { $gte: 0 } }, sort: { field: "market.liquidity", direction: "desc" }, limit: 50 };
  const saved = new URLSearchParams(location.search).get("request");
  const request = dx.el("textarea", { name: "request", spellcheck: "false" }, saved || JSON.stringify(example, null, 2));
  const form = dx.el("form", {}, request, dx.el("button", {}, "search"));
  const body = dx.el("div");
  main.append(dx.el("h1", {}, "Screener"), dx.el("section", {}, dx.el("p", { class: "muted" },
    "The search-profiles request (docs/api.md): filter, sort, limit, options."), form), body);

  // A profile's fields one level deep (`market.price_usd`), so each is a column.
  function flat(profile) {
    const row = {};
    for (const [k, v] of Object.entries(profile)) {
      if (v && typeof v === "object" && !Array.isArray(v)) {
        for (const [k2, v2] of Object.entries(v)) row[`${k}.${k2}`] = v2;
      } else row[k] = v;
    }
    return row;
  }
  function show() {
    body.replaceChildren();
    dx.section(body, "Profiles", async () => {
      const answer = await dx.api("search", {}, request.value);
      const rows = answer.data.map(flat);
      return dx.el("div", {}, dx.provenance(answer), dx.el("p", { class: "muted" }, `${answer.count} profiles`), dx.table(rows));
    });
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    history.replaceState(null, "", `?${new URLSearchParams({ request: request.value })}`);
    show();
  });
  show();
})();
