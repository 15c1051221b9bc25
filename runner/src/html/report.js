// Draws the timeline and the list of every test from the JSON in #data.
// Text goes in with textContent only: nothing from the data is parsed as markup.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("data").textContent);
  var tests = data.tests, pods = data.pods;
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function ms(d) {
    if (d < 1000) return d + " ms";
    if (d < 60000) return (d / 1000).toFixed(1) + " s";
    return Math.floor(d / 60000) + "m " + String(Math.floor((d % 60000) / 1000)).padStart(2, "0") + "s";
  }
  function first(s) { return s ? String(s).split("\n")[0] : ""; }

  // ---- the timeline
  var tl = document.getElementById("timeline");
  // What happened when: tests, their resources, the pods' phases (the tests
  // phase is its tests, and its build is the gap before them).
  var busy = [];
  tests.forEach(function (t) {
    if (t.start > 0) busy.push([t.start, t.start + t.dur]);
    t.res.forEach(function (r) { busy.push([r.from, r.to]); });
    // A fault never undone has no end of its own: the run's is drawn.
    (t.faults || []).forEach(function (f) { if (f.from > 0) busy.push([f.from, f.open ? f.from : f.to]); });
  });
  pods.forEach(function (p) { p.spans.forEach(function (s) { busy.push([s.from, s.to]); }); });
  busy.sort(function (a, b) { return a[0] - b[0]; });
  var bars = [];
  if (busy.length) {
    var LANE = 24, HEAD = 20, AXIS = 20, GAP = 56, NODE = 26;
    var runEnd = busy.reduce(function (m, b) { return Math.max(m, b[1]); }, 0);
    var width = Math.max(tl.clientWidth - 8, 600);
    var total = runEnd - busy[0][0];
    // Idle stretches (a build, pods run one after another) longer than a
    // tenth of the whole are drawn as a fixed-width break, so that the
    // tests are not squeezed into a corner.
    var minGap = Math.max(total / 10, 1000);
    var segs = [];
    busy.forEach(function (b) {
      var last = segs[segs.length - 1];
      if (last && b[0] - last[1] <= minGap) last[1] = Math.max(last[1], b[1]);
      else segs.push([b[0], b[1]]);
    });
    var active = segs.reduce(function (n, s) { return n + Math.max(s[1] - s[0], 1); }, 0);
    var scale = (width - 4 - GAP * (segs.length - 1)) / active;
    var offs = [], o = 0;
    segs.forEach(function (s) { offs.push(o); o += Math.max(s[1] - s[0], 1) * scale + GAP; });
    var x = function (t) {
      for (var i = segs.length - 1; i >= 0; i--) {
        if (t >= segs[i][0]) return offs[i] + Math.min(t - segs[i][0], Math.max(segs[i][1] - segs[i][0], 1)) * scale;
      }
      return 0;
    };
    var steps = [100, 250, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 1800000, 3600000];
    var step = steps.find(function (s) { return active / s <= 12; }) || 3600000;
    segs.forEach(function (s, i) {
      for (var t = 0; t <= s[1] - s[0]; t += step) {
        var a = el("div", "axis", "+" + ms(s[0] - segs[0][0] + t));
        a.style.left = x(s[0] + t) + "px";
        tl.appendChild(a);
      }
      if (i > 0) {
        var g = el("div", "gap", "⋯ " + ms(s[0] - segs[i - 1][1]) + " ⋯");
        g.style.left = (offs[i] - GAP) + "px";
        g.style.width = GAP + "px";
        tl.appendChild(g);
      }
    });
    var y = AXIS;
    var podTop = [], nodeTop = [];
    pods.forEach(function (p, i) {
      var head = el("div", "pod-head", p.label);
      head.style.top = y + "px";
      tl.appendChild(head);
      y += HEAD;
      p.spans.forEach(function (s) {
        var b = el("div", "span" + (s.verdict === "fail" ? " fail" : ""), s.phase);
        b.style.left = x(s.from) + "px";
        b.style.width = Math.max(x(s.to) - x(s.from), 2) + "px";
        b.style.top = y + "px";
        b.title = s.phase + " (" + s.verdict + ", " + ms(s.to - s.from) + "): " + s.evidence;
        b.dataset.phase = s.phase;
        b.dataset.pod = i;
        tl.appendChild(b);
      });
      y += 18;
      podTop[i] = y;
      y += Math.max(p.lanes, 1) * LANE + 6;
      // Below the tests, a lane per node that had faults: its label, then
      // the bars of the faults injected into it.
      nodeTop[i] = [];
      (p.node_lanes || []).forEach(function (label, k) {
        var h = el("div", "node-head", label);
        h.style.top = y + "px";
        tl.appendChild(h);
        nodeTop[i][k] = y + 11;
        y += NODE;
      });
    });
    tl.style.height = y + "px";
    tests.forEach(function (t, i) {
      if (t.lane === null || t.start <= 0) return;
      var top = podTop[t.pod] + t.lane * LANE;
      // The wait for the pod lock (an exclusive test had the pod) is a
      // dotted line before the bar, which starts when the test took it.
      var wait = t.wait || 0, from = t.start + wait;
      if (wait > 0) {
        var w = el("div", "lockwait");
        w.style.left = x(t.start) + "px";
        w.style.width = Math.max(x(from) - x(t.start), 1) + "px";
        w.style.top = top + "px";
        w.title = t.name + " waited " + ms(wait) + " for the pod's " + t.lock + " lock";
        w.dataset.test = t.name;
        w.addEventListener("click", function () { show(i); });
        tl.appendChild(w);
      }
      var b = el("div", "bar " + t.outcome);
      b.style.left = x(from) + "px";
      b.style.width = Math.max(x(t.start + t.dur) - x(from), 2) + "px";
      b.style.top = top + "px";
      b.title = t.name + (t.desc ? "\n" + t.desc : "") + "\n" + t.outcome.replace("_", " ") + " in " + ms(t.dur - wait) +
        (wait > 0 ? " after " + ms(wait) + " waiting for the pod lock" : "") + (t.msg ? "\n" + first(t.msg) : "");
      b.dataset.test = t.name;
      b.dataset.outcome = t.outcome;
      b.dataset.index = i;
      if (t.flaky) b.dataset.flaky = "1";
      b.addEventListener("click", function () { show(i); });
      tl.appendChild(b);
      bars.push(b);
      t.res.forEach(function (r, k) {
        if (k > 2) return;
        var l = el("div", "life" + (r.settled ? "" : " leaked"));
        l.style.left = x(r.from) + "px";
        l.style.width = Math.max(x(r.to) - x(r.from), 2) + "px";
        l.style.top = (top + 13 + k * 3) + "px";
        l.title = r.kind + " " + r.name + ": " + r.fate + " after " + ms(r.to - r.from);
        l.dataset.test = t.name;
        l.dataset.resource = r.name;
        l.dataset.fate = r.fate;
        l.dataset.outcome = t.outcome;
        if (t.flaky) l.dataset.flaky = "1";
        l.addEventListener("click", function () { show(i); });
        tl.appendChild(l);
        bars.push(l);
      });
    });
    tests.forEach(function (t, i) {
      (t.faults || []).forEach(function (f) {
        if (f.lane === null || !(f.from > 0)) return;
        var b = el("div", "bar fault " + f.state + (f.open ? " open" : ""));
        b.style.left = x(f.from) + "px";
        b.style.width = Math.max(x(f.open ? runEnd : f.to) - x(f.from), 2) + "px";
        b.style.top = nodeTop[t.pod][f.lane] + "px";
        b.title = f.title;
        b.dataset.test = t.name;
        b.dataset.fault = f.fault;
        b.dataset.node = f.node;
        b.dataset.outcome = t.outcome;
        if (t.flaky) b.dataset.flaky = "1";
        // As a test's bar: the test that injected it opens.
        b.addEventListener("click", function () { show(i); });
        tl.appendChild(b);
        bars.push(b);
      });
    });
  } else {
    tl.appendChild(el("p", "hint", "No test ran: nothing to draw."));
  }

  var details = document.getElementById("details");
  function show(i) {
    var t = tests[i];
    details.hidden = false;
    details.textContent = "";
    details.appendChild(el("h3", null, t.name));
    details.appendChild(el("p", null, t.outcome.replace("_", " ") + (t.kind ? " (" + t.kind + ")" : "") + " in " + ms(t.dur) + " · " + t.bin +
      (t.attempts > 1 ? " · attempt " + t.attempts + " of " + t.attempts + (t.flaky ? ", flaky (see Flaky)" : "") : "")));
    if (t.desc) details.appendChild(el("p", "desc", t.desc));
    if (t.msg) details.appendChild(el("pre", "message", t.msg));
    t.res.forEach(function (r) {
      details.appendChild(el("div", null, r.kind + " " + r.name + ": " + r.fate + " after " + ms(r.to - r.from)));
    });
    (t.faults || []).forEach(function (f) {
      details.appendChild(el("div", "fault-line" + (f.open ? " bad" : ""), "fault " + f.fault + " on node " + f.node + ": " + f.fate));
    });
  }

  // ---- every test, filtered by outcome and name
  var body = document.querySelector("#tests tbody");
  var order = tests.map(function (_, i) { return i; });
  var rank = { failed: 0, unexpected_pass: 1, expected_failure: 2, skipped: 3, passed: 4 };
  order.sort(function (a, b) {
    return rank[tests[a].outcome] - rank[tests[b].outcome] || (tests[a].name < tests[b].name ? -1 : 1);
  });
  var rows = order.map(function (i) {
    var t = tests[i];
    var tr = el("tr");
    tr.dataset.outcome = t.outcome;
    tr.dataset.name = t.name.toLowerCase();
    if (t.flaky) tr.dataset.flaky = "1";
    tr.appendChild(el("td", "o " + t.outcome, t.outcome.replace("_", " ") + (t.flaky ? " (flaky)" : "")));
    tr.appendChild(el("td", null, t.name));
    tr.appendChild(el("td", "bin", t.bin));
    tr.appendChild(el("td", null, ms(t.dur)));
    tr.appendChild(el("td", "msg", first(t.msg)));
    tr.addEventListener("click", function () { show(i); details.scrollIntoView(); });
    body.appendChild(tr);
    return tr;
  });
  var outcome = document.getElementById("filter-outcome");
  var name = document.getElementById("filter-name");
  var count = document.getElementById("filter-count");
  // "flaky" is no outcome: it selects the tests that passed on a retry.
  function picked(e, o) { return !o || e.dataset.outcome === o || (o === "flaky" && e.dataset.flaky === "1"); }
  function filter() {
    var o = outcome.value, n = name.value.trim().toLowerCase(), shown = 0;
    rows.forEach(function (tr) {
      var ok = picked(tr, o) && (!n || tr.dataset.name.indexOf(n) >= 0);
      tr.hidden = !ok;
      if (ok) shown++;
    });
    bars.forEach(function (b) {
      var ok = picked(b, o) && (!n || b.dataset.test.toLowerCase().indexOf(n) >= 0);
      b.classList.toggle("dim", !ok);
    });
    count.textContent = shown + " of " + rows.length + " tests";
    // The filter is in the address, so that a filtered page can be linked.
    var h = new URLSearchParams();
    if (o) h.set("outcome", o);
    if (n) h.set("name", n);
    try { history.replaceState(null, "", h.toString() ? "#" + h.toString() : location.pathname); } catch (e) { /* a browser that refuses is no reason to stop */ }
  }
  var given = new URLSearchParams(location.hash.slice(1));
  if (given.get("outcome")) outcome.value = given.get("outcome");
  if (given.get("name")) name.value = given.get("name");
  outcome.addEventListener("change", filter);
  name.addEventListener("input", filter);
  filter();
})();
