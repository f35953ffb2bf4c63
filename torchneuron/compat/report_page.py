"""The batteries' report for people: one self-contained HTML file (no server, no network) with,
per battery, its totals, a bar chart of outcomes by family, and a table with a row per case
(status per stage, error, max difference, time) that sorts by any column and filters by text.
Data is embedded as JSON; a small script draws the tables and the SVG charts."""

from __future__ import annotations

import html
import json
import os

from . import outcomes


def _ops_rows(doc: dict) -> list[dict]:
    rows = []
    for unit in doc["units"]:
        for variant, v in unit["variants"].items():
            failures = v.get("failures") or []
            errors = [f["max_error"] for f in failures if isinstance(f.get("max_error"), (int, float))]
            layout = unit.get("layout", "strided")  # reports before sparse units had none
            op = unit["op"] if layout == "strided" else f"{unit['op']}@{layout}"
            rows.append({"name": f"{op} {unit['dtype']} {variant}",
                         "family": unit["category"], "stages": {variant: _ops_word(v["counts"])},
                         "error": (failures[0].get("message") or "")[:200] if failures else "",
                         "max_abs_error": max(errors) if errors else None,
                         "seconds": unit.get("seconds")})
    return rows


def _ops_word(counts: dict) -> str:
    if any(counts.get(s) for s in ("mismatch", "error", "crash", "timeout", "abandoned")):
        return "fail"
    return "pass" if counts.get("pass") else "not run"


def _record_rows(doc: dict, stages: list[str], name_key: str) -> list[dict]:
    rows = []
    for r in doc["records"]:
        errors = [v for v in (r.get("max_abs_error") or {}).values() if isinstance(v, (int, float))]
        rows.append({"name": r[name_key], "family": r["family"],
                     "stages": {s: r[s] for s in stages}, "error": r.get("cause") or "",
                     "max_abs_error": max(errors) if errors else None,
                     "seconds": round(sum(r["seconds"].values()), 3)})
    return rows


def _totals(battery: str, doc: dict) -> list[tuple[str, object]]:
    t = doc["totals"]
    if battery == "ops":
        return [("cases", t["cases"]), ("passed", t["passed"]), ("failed", t["failed"]),
                ("pass rate", f"{100 * t['pass_rate']:.2f}%")]
    if battery == "models":
        a = t["all_stages"]
        return [("model types", t["model_types"]), ("tried", t["tried"]),
                ("pass every stage on neuron", a["pass_on_neuron"])] + [
            (f"{s}: pass / ran on CPU", f"{v['pass_on_neuron']} / {v['ran_on_cpu']}")
            for s, v in t["stages"].items()]
    a = t["all_stages"]
    return [("cases", t["cases"]), ("run on CPU", a["runnable_on_cpu"]),
            ("pass every stage on neuron", a["pass_on_neuron"])] + [
        (f"{s}: pass / ran on CPU", f"{v['pass_on_neuron']} / {v['ran_on_cpu']}")
        for s, v in t["stages"].items()]


def data(folder: str) -> dict:
    """battery -> {stages, totals, rows, outcomes} for every report in `folder`."""
    out = {}
    words = outcomes.read(folder)
    for battery in outcomes.BATTERIES:
        path = os.path.join(folder, f"{battery}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            doc = json.load(f)
        if battery == "ops":
            rows, stages = _ops_rows(doc), list(doc.get("variants", []))
            for row in rows:
                row["outcome"] = row["stages"][next(iter(row["stages"]))]
        else:
            if battery == "models":
                from .models.check import STAGES

                stages, name_key = list(STAGES), "model_type"
            else:
                stages, name_key = doc["meta"]["stages"], "name"
            rows = _record_rows(doc, stages, name_key)
            for row in rows:
                row["outcome"] = words[battery][row["name"]]
        out[battery] = {"stages": stages, "totals": _totals(battery, doc), "rows": rows}
    return out


def write(folder: str, path: str) -> str:
    """Writes the page for the reports in `folder` to `path`; returns `path`."""
    page = TEMPLATE.replace("__TITLE__", html.escape(f"torchneuron compatibility: {folder}"))
    # "</" inside a script would end it early; JSON allows the escaped form.
    page = page.replace("__DATA__", json.dumps(data(folder)).replace("</", "<\\/"))
    with open(path, "w") as f:
        f.write(page)
    return path


TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
th.sortable{cursor:pointer;background:#f0f0f0}
.pass{background:#e3f4e3}.fail{background:#f9dcdc}.cpu_fail,.not\\ run,.n\\/a{color:#888}
.cases{max-height:480px;overflow:auto;display:block}
input.filter{width:24em;margin:.3em 0}
</style></head><body>
<h1>__TITLE__</h1>
<div id="batteries"></div>
<script id="data" type="application/json">__DATA__</script>
<script>
const DATA = JSON.parse(document.getElementById('data').textContent);
const COLORS = {'pass': '#2e7d32', 'fail': '#c62828', 'not run': '#9e9e9e'};
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function plot(name, rows) {
  const fams = {};
  for (const r of rows) { fams[r.family] = fams[r.family] || {'pass': 0, 'fail': 0, 'not run': 0};
                          fams[r.family][r.outcome] += 1; }
  const names = Object.keys(fams).sort();
  const most = Math.max(1, ...names.map(f => Object.values(fams[f]).reduce((a, b) => a + b, 0)));
  const ns = 'http://www.w3.org/2000/svg', bar = 16, left = 190, width = 520;
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', 'plot'); svg.setAttribute('id', 'plot-' + name);
  svg.setAttribute('width', left + width + 20); svg.setAttribute('height', names.length * (bar + 4) + 24);
  names.forEach((f, i) => {
    const y = i * (bar + 4);
    const label = document.createElementNS(ns, 'text');
    label.setAttribute('x', 0); label.setAttribute('y', y + bar - 3); label.setAttribute('font-size', 12);
    label.textContent = f.slice(0, 28); svg.appendChild(label);
    let x = left;
    for (const k of ['pass', 'fail', 'not run']) {
      const w = fams[f][k] / most * width;
      if (!w) continue;
      const r = document.createElementNS(ns, 'rect');
      r.setAttribute('x', x); r.setAttribute('y', y); r.setAttribute('width', w);
      r.setAttribute('height', bar); r.setAttribute('fill', COLORS[k]);
      r.setAttribute('class', 'bar');
      const t = document.createElementNS(ns, 'title'); t.textContent = f + ': ' + fams[f][k] + ' ' + k;
      r.appendChild(t); svg.appendChild(r); x += w;
    }
  });
  const key = document.createElementNS(ns, 'text');
  key.setAttribute('x', left); key.setAttribute('y', names.length * (bar + 4) + 16);
  key.setAttribute('font-size', 12); key.textContent = 'green: pass, red: neuron fail, grey: not run (CPU cannot run it either)';
  svg.appendChild(key);
  return svg;
}
function table(name, b) {
  const cols = ['name', 'family', ...b.stages, 'outcome', 'max_abs_error', 'seconds', 'error'];
  const t = el('table', {'class': 'cases', 'id': 'table-' + name});
  const head = el('tr');
  cols.forEach(c => { const th = el('th', {'class': 'sortable', 'data-col': c}, c); head.appendChild(th); });
  const thead = el('thead'); thead.appendChild(head); t.appendChild(thead);
  const body = el('tbody'); t.appendChild(body);
  const value = (r, c) => b.stages.includes(c) ? (r.stages[c] || '') : r[c];
  let sortCol = null, asc = true, filter = '';
  function draw() {
    let rows = b.rows.filter(r => !filter || JSON.stringify(r).toLowerCase().includes(filter));
    if (sortCol) rows = rows.slice().sort((x, y) => {
      const a = value(x, sortCol), c = value(y, sortCol);
      const cmp = (typeof a === 'number' && typeof c === 'number') ? a - c : String(a ?? '').localeCompare(String(c ?? ''));
      return asc ? cmp : -cmp; });
    body.replaceChildren(...rows.map(r => {
      const tr = el('tr', {'class': 'case'});
      for (const c of cols) {
        let v = value(r, c);
        if (typeof v === 'number') v = c === 'max_abs_error' ? v.toExponential(1) : v.toFixed(2);
        tr.appendChild(el('td', {'class': String(v ?? '')}, v ?? ''));
      }
      return tr; }));
  }
  head.querySelectorAll('th').forEach(th => th.addEventListener('click', () => {
    asc = sortCol === th.dataset.col ? !asc : true; sortCol = th.dataset.col; draw(); }));
  const input = el('input', {'class': 'filter', 'id': 'filter-' + name, 'placeholder': 'filter ' + name + ' rows'});
  input.addEventListener('input', () => { filter = input.value.toLowerCase(); draw(); });
  draw();
  return [input, t];
}
const root = document.getElementById('batteries');
for (const [name, b] of Object.entries(DATA)) {
  const sec = el('section', {'id': 'battery-' + name});
  sec.appendChild(el('h2', {}, name));
  const totals = el('table', {'class': 'totals', 'id': 'totals-' + name});
  for (const [k, v] of b.totals) { const tr = el('tr'); tr.appendChild(el('th', {}, k)); tr.appendChild(el('td', {}, v)); totals.appendChild(tr); }
  sec.appendChild(totals);
  sec.appendChild(plot(name, b.rows));
  sec.append(...table(name, b));
  root.appendChild(sec);
}
</script></body></html>
"""


if __name__ == "__main__":  # python -m torchneuron.compat.report_page [FOLDER] [PAGE]
    import sys

    folder = sys.argv[1] if len(sys.argv) > 1 else "reports"
    print(write(folder, sys.argv[2] if len(sys.argv) > 2 else os.path.join(folder, "compat.html")))
