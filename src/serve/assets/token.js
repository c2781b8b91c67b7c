// A token: candlesticks with volume (zoom, pan, crosshair with the bar's values) of the bars
// chosen on the page (`/api/bars`), its price stats (`/api/price_stats`), the coverage of
// what is shown with its gaps marked, and, when the server follows the token, the bars as
// they close (`/api/events`, server-sent events that resume from the last bar received).
//
// Time bars load in spans of `SPAN` buckets: first the latest (up to the follow's watermark
// when live, else up to the token's last swap in `/api/status`), then, as the chart is panned
// or zoomed towards its left edge, the span before the first bar held, down to the token's
// first swap. Tick, volume and dollar bars (whose edges depend on where they start)
// and a range given on the page load whole.
//
// The page keeps what it shows for whoever checks it: `window.dexlakeBars` (the closed bars
// it holds, a contiguous span in time order, each the API's row as answered),
// `window.dexlakeOpen` (the open bar), `window.dexlakeArrivals` (when each bar the follow
// closed while the page was connected arrived, ms since the epoch, by its time; not the bars
// a connection caught up with), `window.dexlakeOpenLog` (when each open bar arrived, with its
// time and count; the latest 100,000), `window.dexlakeState` (`loaded` once the first bars
// are shown, `older` the spans loaded since, `complete` once the page holds every bar it
// asked for).
"use strict";

(() => {
  const token = dx.address();
  const main = document.getElementById("main");
  const params = new URLSearchParams(location.search);
  window.dexlakeBars = [];
  window.dexlakeOpen = null;
  window.dexlakeArrivals = {};
  window.dexlakeOpenLog = [];
  window.dexlakeState = { loaded: false, live: false, events: 0, reconnects: 0, older: 0 };
  // Time buckets asked per request.
  const SPAN = 600;

  const kinds = { time: "interval", tick: "ticks", volume: "base_volume", dollar: "usd_volume" };
  const kindSelect = dx.el("select", { name: "kind" }, Object.keys(kinds).map((k) => dx.el("option", { value: k }, k)));
  const sizeInput = dx.el("input", { name: "size", size: 8 });
  const fromInput = dx.el("input", { name: "from", placeholder: "RFC 3339 or Unix s", size: 22 });
  const toInput = dx.el("input", { name: "to", placeholder: "RFC 3339 or Unix s", size: 22 });
  const liveBadge = dx.el("span", { class: "live off" }, "not live");
  const form = dx.el("form", { class: "controls" },
    dx.el("label", {}, "bars", kindSelect),
    dx.el("label", {}, "size (seconds, ticks, base or USD volume)", sizeInput),
    dx.el("label", {}, "from", fromInput), dx.el("label", {}, "to", toInput),
    dx.el("button", {}, "show"), liveBadge);
  const legend = dx.el("div", { class: "legend" });
  const chartBox = dx.el("div", { id: "chart" }, legend);
  const status = dx.el("div", { class: "muted" });
  const coverage = dx.el("div");
  main.append(dx.el("h1", {}, "Token ", token), dx.el("section", {}, form, chartBox, status),
    dx.el("section", {}, dx.el("h2", {}, "Coverage of what is shown"), coverage));
  dx.section(main, "Price stats", async () => {
    const answer = await dx.api("price_stats", { tokens: token });
    return dx.el("div", {}, dx.provenance(answer), dx.table(answer.data));
  });

  const chart = LightweightCharts.createChart(chartBox, {
    autoSize: true,
    layout: { background: { color: "#ffffff" }, textColor: "#1d232a" },
    timeScale: { timeVisible: true, secondsVisible: true },
    crosshair: { mode: LightweightCharts.CrosshairMode.Normal },
  });
  const candles = chart.addCandlestickSeries({ priceFormat: { type: "price", precision: 8, minMove: 1e-8 } });
  const volume = chart.addHistogramSeries({ priceScaleId: "volume", priceFormat: { type: "volume" } });
  chart.priceScale("volume").applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });
  chart.subscribeCrosshairMove((param) => {
    const bar = param.time === undefined ? null : barAt(param.time);
    legend.textContent = bar
      ? `${bar.timestamp}  O ${dx.num(bar.open)}  H ${dx.num(bar.high)}  L ${dx.num(bar.low)}  C ${dx.num(bar.close)}  V ${dx.num(bar.volume)}  n ${bar.count ?? "–"}`
      : "";
  });

  // Time-ordered chart points of a bar (its time in Unix seconds, as the chart takes it).
  const point = (b) => ({ time: dx.seconds(b.timestamp), open: b.open, high: b.high, low: b.low, close: b.close });
  const volumePoint = (b) => ({ time: dx.seconds(b.timestamp), value: b.volume ?? 0,
    color: b.close >= b.open ? "rgba(38,166,154,.5)" : "rgba(239,83,80,.5)" });
  function barAt(time) {
    if (window.dexlakeOpen && dx.seconds(window.dexlakeOpen.timestamp) === time) return window.dexlakeOpen;
    return window.dexlakeBars.find((b) => dx.seconds(b.timestamp) === time);
  }
  // The time of the chart's last point (a closed bar or the open one).
  let plotted = null;
  function draw() {
    const all = [...window.dexlakeBars];
    const open = window.dexlakeOpen;
    if (open && (!all.length || dx.seconds(open.timestamp) > dx.seconds(all[all.length - 1].timestamp))) all.push(open);
    candles.setData(all.map(point));
    volume.setData(all.map(volumePoint));
    plotted = all.length ? dx.seconds(all[all.length - 1].timestamp) : null;
  }
  // A bar at or after the chart's last point, without redrawing the rest (live bars arrive
  // many a second on a busy token).
  function plot(bar) {
    const time = dx.seconds(bar.timestamp);
    if (plotted !== null && time < plotted) return draw();
    candles.update(point(bar));
    volume.update(volumePoint(bar));
    plotted = time;
  }
  function markGaps(answer) {
    const markers = [];
    const rows = [];
    for (const target of answer.coverage?.targets || []) {
      for (const gap of target.missing || []) {
        rows.push({ target: target.target, missing_from: gap.from ?? null, missing_to: gap.to ?? null });
        if (gap.from) markers.push({ time: dx.seconds(gap.from), position: "aboveBar", color: "#c62828", shape: "arrowDown", text: "gap" });
      }
    }
    return { markers, rows };
  }

  let events = null;
  // The older bars still to load: what to ask (without `from`, `to`), the lake's first time
  // (Unix seconds) and the bar width; null when the page holds all it asked for.
  let older = null;
  let loadingOlder = false;

  // The token's first and last swap in the lake (`/api/status`, Unix seconds), or null.
  async function span() {
    const answer = await dx.api("status");
    const swaps = (answer.data.datasets || []).find((d) => d.dataset === "swaps");
    const target = swaps?.targets?.find((t) => t.target === `token=${token}`) || swaps;
    return target?.first && target?.last ? { first: dx.seconds(target.first), last: dx.seconds(target.last) } : null;
  }

  async function askBars(query) {
    try {
      return await dx.api("bars", query);
    } catch (e) {
      if (e.status !== 404) throw e;
      return { version: null, data: [], coverage: {}, warnings: [] };
    }
  }

  // The span before the first bar held (or the next older one holding a bar), the view kept
  // where the user looks.
  async function loadOlder() {
    if (!older || loadingOlder) return;
    const asked = older;
    loadingOlder = true;
    try {
      const held = window.dexlakeBars;
      let to = held.length ? dx.seconds(held[0].timestamp) : asked.to;
      let got = [];
      while (!got.length && to > asked.first) {
        const from = to - SPAN * asked.width;
        got = (await askBars({ ...asked.query, from, to })).data;
        to = from;
      }
      // The page was loaded again meanwhile: these bars belong to another view.
      if (older !== asked) return;
      if (to <= asked.first) {
        older = null;
        window.dexlakeState.complete = true;
      }
      if (!got.length) return;
      const range = chart.timeScale().getVisibleLogicalRange();
      window.dexlakeBars = [...got, ...window.dexlakeBars];
      window.dexlakeState.older += 1;
      draw();
      if (range) chart.timeScale().setVisibleLogicalRange({ from: range.from + got.length, to: range.to + got.length });
      status.textContent = `${window.dexlakeBars.length} bars`;
    } finally {
      loadingOlder = false;
    }
  }
  chart.timeScale().subscribeVisibleLogicalRangeChange((range) => {
    if (range && older && range.from < 50) loadOlder().catch((e) => status.append(dx.el("span", { class: "error" }, e.message)));
  });

  async function load() {
    const kind = kindSelect.value;
    const size = sizeInput.value.trim();
    events?.close();
    events = null;
    const follow = await dx.api("follow").catch(() => ({ following: false }));
    const live = kind === "time" && follow.following && follow.tokens.includes(token) && Number(size) === follow.interval;
    const query = { token, [kinds[kind]]: size, from: fromInput.value.trim(), to: toInput.value.trim() };
    older = null;
    let next = null;
    // Live: the closed bars only (up to the watermark's bar); the stream sends the rest.
    if (live && follow.watermark && !query.to) {
      query.to = Math.floor(dx.seconds(follow.watermark) / follow.interval) * follow.interval;
    }
    // Time bars without a range given: the latest span, older ones on demand.
    const width = Number(size);
    if (kind === "time" && !fromInput.value.trim() && !toInput.value.trim() && Number.isInteger(width) && width > 0) {
      const lake = await span();
      if (lake) {
        const to = query.to === "" ? (Math.floor(lake.last / width) + 1) * width : query.to;
        query.from = Math.max(to - SPAN * width, Math.floor(lake.first / width) * width);
        query.to = to;
        if (query.from > lake.first) next = { query: { token, interval: size }, first: lake.first, width, to: query.from };
      }
    }
    let answer;
    try {
      answer = await dx.api("bars", query);
    } catch (e) {
      if (e.status !== 404 || !(live || next)) throw e;
      answer = { version: null, data: [], coverage: {}, warnings: [] };
    }
    window.dexlakeBars = answer.data;
    window.dexlakeOpen = null;
    draw();
    // The latest 300 bars in view (zoom out or pan for the rest).
    const shown = answer.data.length;
    if (shown > 300) chart.timeScale().setVisibleLogicalRange({ from: shown - 300, to: shown + 5 });
    else chart.timeScale().fitContent();
    older = next;
    window.dexlakeState.complete = next === null;
    const gaps = markGaps(answer);
    candles.setMarkers(gaps.markers.sort((a, b) => a.time - b.time));
    coverage.replaceChildren(dx.provenance(answer), gaps.rows.length ? dx.table(gaps.rows) : dx.el("p", {}, "no gap in what the lake fetched for these bars"));
    status.textContent = `${answer.data.length} bars`;
    history.replaceState(null, "", `?${new URLSearchParams({ kind, size })}`);
    window.dexlakeState.loaded = true;
    if (live) follow_(follow);
    else { liveBadge.className = "live off"; liveBadge.textContent = "not live"; window.dexlakeState.live = false; }
  }

  // The live bars: the stream resumes after the last closed bar shown (`since`, then the
  // browser's `Last-Event-ID` on each reconnection).
  function follow_(follow) {
    const last = window.dexlakeBars[window.dexlakeBars.length - 1];
    const since = last ? dx.seconds(last.timestamp) : null;
    const url = `/api/events?${new URLSearchParams(since === null ? { token } : { token, since })}`;
    events = new EventSource(url);
    window.dexlakeState.live = true;
    events.addEventListener("hello", (e) => {
      const hello = JSON.parse(e.data);
      liveBadge.className = "live";
      liveBadge.textContent = `live · watermark ${hello.watermark ?? "–"}`;
      window.dexlakeState.connected = Date.now();
      window.dexlakeState.caughtUp = false;
      window.dexlakeState.reconnects += 1;
    });
    events.addEventListener("bar", (e) => {
      const bar = JSON.parse(e.data);
      const time = dx.seconds(bar.timestamp);
      const bars = window.dexlakeBars;
      const lastTime = bars.length ? dx.seconds(bars[bars.length - 1].timestamp) : -Infinity;
      window.dexlakeState.events += 1;
      if (time <= lastTime) {
        // Not expected (the server sends each bar once, in order): kept visible for a check.
        window.dexlakeState.repeated = (window.dexlakeState.repeated || 0) + 1;
        return;
      }
      if (window.dexlakeState.caughtUp) window.dexlakeArrivals[time] = Date.now();
      bars.push(bar);
      if (window.dexlakeOpen && dx.seconds(window.dexlakeOpen.timestamp) <= time) window.dexlakeOpen = null;
      plot(bar);
      status.textContent = `${bars.length} bars`;
    });
    events.addEventListener("openbar", (e) => {
      const open = JSON.parse(e.data);
      window.dexlakeOpen = open.bar;
      if (open.bar) {
        window.dexlakeOpenLog.push({ at: Date.now(), time: dx.seconds(open.bar.timestamp), count: open.bar.count });
        if (window.dexlakeOpenLog.length > 100000) window.dexlakeOpenLog.shift();
      }
      // The stream sends the bars it caught up with before its first `openbar`.
      window.dexlakeState.caughtUp = true;
      liveBadge.textContent = `live · watermark ${open.watermark ?? "–"}`;
      const bars = window.dexlakeBars;
      const closed = bars.length ? dx.seconds(bars[bars.length - 1].timestamp) : -Infinity;
      if (open.bar && dx.seconds(open.bar.timestamp) > closed) plot(open.bar);
      else if (plotted !== null && plotted > closed) draw();
    });
    events.addEventListener("error", () => {
      liveBadge.className = "live off";
      liveBadge.textContent = "reconnecting…";
    });
  }

  kindSelect.value = params.get("kind") in kinds ? params.get("kind") : "time";
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load().catch((e) => { status.textContent = ""; status.append(dx.el("span", { class: "error" }, e.message)); });
  });
  dx.api("follow").catch(() => ({ following: false })).then((follow) => {
    sizeInput.value = params.get("size") || (follow.following && follow.tokens.includes(token) ? follow.interval : 3600);
    return load();
  }).catch((e) => status.append(dx.el("span", { class: "error" }, e.message)));
})();
