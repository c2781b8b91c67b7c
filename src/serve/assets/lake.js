// The lake: what it covers (`dexlake status`), the findings of `dexlake check`, its history
// (`dexlake log`), its datasets with rows and sizes, and what the server follows.
"use strict";

(() => {
  const main = document.getElementById("main");
  main.append(dx.el("h1", {}, "The lake"));

  dx.section(main, "Datasets", async () => {
    const status = await dx.api("status");
    const rows = status.data.datasets.map((d) => ({
      dataset: d.dataset, files: d.files, bytes: d.bytes, rows: d.rows, first: d.first, last: d.last,
      targets: d.targets.length,
    }));
    return dx.el("div", {}, dx.el("p", { class: "muted" },
      `version ${status.data.version}, last commit ${status.data.committed_at ?? "–"}`), dx.table(rows));
  });

  dx.section(main, "Coverage (what the syncs fetched)", async () => {
    const status = await dx.api("status");
    const rows = status.data.datasets.flatMap((d) => d.targets.map((t) => ({ dataset: d.dataset, ...t })));
    return dx.table(rows);
  });

  dx.section(main, "Live", async () => {
    const follow = await dx.api("follow");
    if (!follow.following) return dx.el("p", { class: "muted" }, "not following (start the server with --follow)");
    return dx.el("div", {}, dx.fields({ interval: follow.interval, watermark: follow.watermark }),
      dx.el("p", {}, ...follow.tokens.map((t) => dx.el("a", { href: `/token/${t}` }, t + " "))));
  });

  dx.section(main, "Check", async () => {
    const check = await dx.api("check", { examples: 5 });
    const summary = { version: check.data.version, tokens: check.data.tokens, swaps: check.data.swaps };
    const kinds = Object.entries(check.data.findings || {});
    const counts = kinds.map(([kind, f]) => ({ finding: kind, count: f.count }));
    const examples = kinds.filter(([, f]) => f.examples.length).map(([kind, f]) =>
      dx.el("div", {}, dx.el("h3", {}, kind), dx.table(f.examples)));
    return dx.el("div", {}, dx.fields(summary), dx.table(counts), ...examples);
  });

  dx.section(main, "History", async () => {
    const history = await dx.api("history");
    const rows = history.data.records.map((r) => ({
      version: r.version, committed_at: r.committed_at, operation: r.operation,
      changes: Object.entries(r.datasets).map(([d, c]) =>
        `${d} +${c.files_added} files +${c.rows_added} rows -${c.files_removed} files -${c.rows_removed ?? "?"} rows`).join("; "),
      state_keys: (r.state || []).length,
    }));
    const note = history.data.unrecorded_before === null ? null
      : dx.el("p", { class: "muted" }, `commits before version ${history.data.unrecorded_before} have no record`);
    return dx.el("div", {}, note, dx.table(rows));
  });
})();
