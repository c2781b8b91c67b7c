// A wallet: its PnL per token under the cost method chosen on the page, its lots, its equity
// curve and ratios (`/api/pnl`, the answers of `dexlake pnl`).
"use strict";

(() => {
  const wallet = dx.address();
  const main = document.getElementById("main");
  const params = new URLSearchParams(location.search);
  const method = dx.el("select", { name: "method" }, ["fifo", "lifo", "hifo", "avg"].map((m) => dx.el("option", { value: m }, m)));
  method.value = params.get("method") || "fifo";
  const period = dx.el("input", { name: "period", value: params.get("period") || "1d", size: 6 });
  const form = dx.el("form", { class: "controls" },
    dx.el("label", {}, "cost method", method), dx.el("label", {}, "period of the curve", period), dx.el("button", {}, "show"));
  const body = dx.el("div");
  main.append(dx.el("h1", {}, "Wallet ", wallet), dx.el("section", {}, form), body);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    history.replaceState(null, "", `?${new URLSearchParams({ method: method.value, period: period.value })}`);
    show();
  });

  function show() {
    body.replaceChildren();
    const ask = { wallet, method: method.value };
    dx.section(body, "PnL per token", async () => {
      const answer = await dx.api("pnl", ask);
      return dx.el("div", {}, dx.provenance(answer), dx.table(answer.data));
    });
    const curve = dx.section(body, "Equity curve", async () => {
      const answer = await dx.api("pnl", { ...ask, performance: true, curve: true, period: period.value });
      const box = dx.el("div", { id: "chart", style: "height: 320px" });
      setTimeout(() => {
        const chart = LightweightCharts.createChart(box, { autoSize: true, timeScale: { timeVisible: true } });
        const line = chart.addLineSeries({ color: "#2962ff" });
        line.setData(answer.data.map((r) => ({ time: dx.seconds(r.period_start), value: r.equity })));
        chart.timeScale().fitContent();
      });
      return dx.el("div", {}, dx.provenance(answer), box);
    });
    curve.dataset.kind = "curve";
    dx.section(body, "Ratios", async () => {
      const answer = await dx.api("pnl", { ...ask, performance: true, period: period.value });
      return dx.el("div", {}, dx.table(answer.data));
    });
    dx.section(body, "Lots", async () => {
      const answer = await dx.api("pnl", { ...ask, lots: true });
      return dx.el("div", {}, dx.table(answer.data));
    });
  }
  show();
})();
