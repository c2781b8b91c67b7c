// The leaderboard: the wallets ranked by PnL (`/api/leaderboard`, `dexlake pnl --top N`).
"use strict";

(() => {
  const main = document.getElementById("main");
  const params = new URLSearchParams(location.search);
  const top = dx.el("input", { name: "top", value: params.get("top") || "50", size: 5 });
  const method = dx.el("select", { name: "method" }, ["fifo", "lifo", "hifo", "avg"].map((m) => dx.el("option", { value: m }, m)));
  method.value = params.get("method") || "fifo";
  const form = dx.el("form", { class: "controls" },
    dx.el("label", {}, "top", top), dx.el("label", {}, "cost method", method), dx.el("button", {}, "rank"));
  const body = dx.el("div");
  main.append(dx.el("h1", {}, "Leaderboard"), dx.el("section", {}, form), body);
  function show() {
    body.replaceChildren();
    dx.section(body, "Wallets by PnL", async () => {
      const answer = await dx.api("leaderboard", { top: top.value, method: method.value });
      return dx.el("div", {}, dx.provenance(answer), dx.table(answer.data));
    });
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    history.replaceState(null, "", `?${new URLSearchParams({ top: top.value, method: method.value })}`);
    show();
  });
  show();
})();
