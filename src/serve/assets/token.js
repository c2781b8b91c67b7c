// A token: candlesticks with volume (zoom, pan, crosshair with the bar's values) of the bars
// chosen on the page (`/api/bars`), its price stats (`/api/price_stats`), the coverage of
// what is shown with its gaps marked, and, when the server follows the token, the bars as
// they close (`/api/events`, server-sent events that resume from the last bar received).
//
// The page keeps what it shows for whoever checks it: `window.dexlakeBars` (the closed bars,
// each the API's row as answered), `window.dexlakeOpen` (the open bar), `window.dexlakeArrivals`
// (when each bar the follow closed while the page was connected arrived, ms since the epoch,
// by its time; not the bars a connection caught up with), `window.dexlakeOpenLog` (when each
// open bar arrived, with its time and count; the latest 100,000), `window.dexlakeState`.
"use strict";

(() => {
  const token = dx.address();
  const main = document.getElementById("main");
  const params = new URLSearchParams(location.search);
  window.dexlakeBars = [];
  window.dexlakeOpen = null;
  window.dexlakeArrivals = {};
  window.dexlakeOpenLog = [];
  window.dexlakeState = { loaded: false, live: false, events: 0, reconnects: 0 };

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
  function draw() {
    const all = [...window.dexlakeBars];
    const open = window.dexlakeOpen;
    if (open && (!all.length || dx.seconds(open.timestamp) > dx.seconds(all[all.length - 1].timestamp))) all.push(open);
    candles.setData(all.map(point));
    volume.setData(all.map(volumePoint));
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
  async function load() {
    const kind = kindSelect.value;
    const size = sizeInput.value.trim();
    events?.close();
    events = null;
    const follow = await dx.api("follow").catch(() => ({ following: false }));
    const live = kind === "time" && follow.following && follow.tokens.includes(token) && Number(size) === follow.interval;
    const query = { token, [kinds[kind]]: size, from: fromInput.value.trim(), to: toInput.value.trim() };
    // Live: the closed bars only (up to the watermark's bar); the stream sends the rest.
    if (live && follow.watermark && !query.to) {
      query.to = Math.floor(dx.seconds(follow.watermark) / follow.interval) * follow.interval;
    }
    let answer;
    try {
      answer = await dx.api("bars", query);
    } catch (e) {
      if (e.status !== 404 || !live) throw e;
      answer = { version: null, data: [], coverage: {}, warnings: [] };
    }
    window.dexlakeBars = answer.data;
    window.dexlakeOpen = null;
    draw();
    // The latest 300 bars in view (zoom out or pan for the rest).
    const shown = answer.data.length;
    if (shown > 300) chart.timeScale().setVisibleLogicalRange({ from: shown - 300, to: shown + 5 });
    else chart.timeScale().fitContent();
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
      draw();
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
      draw();
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
