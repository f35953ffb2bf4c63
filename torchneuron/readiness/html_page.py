"""The readiness report as one self-contained HTML page (no server, no network): the headline
figures, the five changes, a bar chart of the steps' wall times (SVG), the memory against each
target's HBM, and the per-op table of the priced step. Everything is rendered here, in Python,
so the page needs no script to show it."""

from __future__ import annotations

import html
from typing import Any

from .report import FIT_WORDS

GiB = 1 << 30


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _step_chart(rows: list[dict[str, Any]]) -> str:
    """One bar per step, its height the step's wall time; a step with syncs, fallbacks or
    recompiles is drawn in the warning colour."""
    if not rows:
        return '<p id="steps-none">No step ended (no optimizer.step() and no module forward).</p>'
    width, height = 720, 160
    top = max(r["seconds"] for r in rows) or 1.0
    bar = width / len(rows)
    bars = []
    for i, r in enumerate(rows):
        h = max(1.0, r["seconds"] / top * (height - 20))
        flagged = r["host_fallbacks"] or r["recompiles"]
        bars.append(
            f'<rect class="step-bar{" flagged" if flagged else ""}" x="{i * bar:.2f}" '
            f'y="{height - h:.2f}" width="{max(bar - 1, 0.5):.2f}" height="{h:.2f}">'
            f'<title>step {r["step"]}: {r["seconds"]:.4f} s, {r["syncs"]} syncs, '
            f'{r["host_fallbacks"]} host fallbacks, {r["recompiles"]} recompiles</title></rect>')
    return (f'<svg id="step-chart" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="wall time per step">'
            + "".join(bars) + "</svg>")


def _memory(report: dict[str, Any]) -> str:
    peak = report["accounting"]["memory"]["peak_bytes"]
    rows = []
    for name, m in report["estimate"]["machines"].items():
        share = min(1.0, peak / m["hbm_bytes"]) if m["hbm_bytes"] else 0.0
        rows.append(f'<tr class="memory-row"><td>{_esc(name)}</td><td>{peak / GiB:.3f} GiB</td>'
                    f'<td>{m["hbm_bytes"] / GiB:.0f} GiB</td>'
                    f'<td><div class="gauge"><div style="width:{100 * share:.2f}%"></div></div>'
                    f'</td><td>{FIT_WORDS[m["fits"]]}</td></tr>')
    return ('<table id="memory"><tr><th>target</th><th>peak</th><th>HBM per rank</th><th></th>'
            '<th></th></tr>' + "".join(rows) + "</table>")


def _table(table_id: str, columns: list[str], rows: list[list[Any]], row_class: str) -> str:
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    body = "".join(f'<tr class="{row_class}">' + "".join(f"<td>{_esc(v)}</td>" for v in row)
                   + "</tr>" for row in rows)
    return f'<table id="{table_id}"><tr>{head}</tr>{body}</table>'


def render(report: dict[str, Any]) -> str:
    acc = report["accounting"]
    headline = [["status", report["status"]], ["steps", report["steps"]["count"]],
                ["host fallback calls", acc["host_fallbacks"]["calls"]],
                ["host syncs", acc["syncs"]["count"]], ["recompiles", acc["recompiles"]]]
    for name, m in report["estimate"]["machines"].items():
        mfu = "n/a" if m["mfu_graph"] is None else f"{100 * m['mfu_graph']:.1f}%"
        headline.append([f"{name} step (compiled graph)",
                         f"{m['step_seconds_graph'] * 1e3:.3f} ms, MFU {mfu}"])
    error = ""
    if report["error"]:
        error = (f'<section id="error"><h2>The script failed</h2><pre>'
                 f'{_esc(report["error"]["traceback"] or report["error"]["message"])}</pre>'
                 "</section>")
    if not report["touched_neuron"]:
        error += ('<p id="no-neuron">The script never used the neuron device: nothing of it '
                  "would run on Trainium.</p>")
    if report.get("ranks"):
        error += "<h2>Ranks</h2>" + _table(
            "ranks", ["rank", "status", "steps", "host fallbacks", "syncs", "recompiles",
                      "peak bytes", "trn2 step s"],
            [[r["rank"], r["status"], r["steps"], r["host_fallbacks"], r["syncs"],
              r["recompiles"], r["peak_bytes"], f"{r['trn2_step_seconds_graph']:.3e}"]
             for r in report["ranks"]], "rank-row")
    changes = _table("changes", ["#", "where", "what", "change"],
                     [[i, c["location"] or "(whole run)", c["what"], c["change"]]
                      for i, c in enumerate(report["changes"], 1)], "change")
    ops = _table("ops", ["op", "calls", "FLOPs"] + [f"{m} s" for m in report["estimate"]["machines"]],
                 [[r["op"], r["calls"], r["flops"]]
                  + [f"{r.get(m + '_seconds', 0.0):.3e}" for m in report["estimate"]["machines"]]
                  for r in report["ops"]], "op-row")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>torchneuron readiness: {_esc(report["script"])}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 2px 8px; text-align: left; }}
.step-bar {{ fill: #4a7ebb; }} .step-bar.flagged {{ fill: #d9822b; }}
.gauge {{ width: 200px; height: 10px; background: #eee; }}
.gauge div {{ height: 10px; background: #4a7ebb; }}
</style></head><body>
<h1>torchneuron readiness: {_esc(report["script"])}</h1>
{error}
{_table("headline", ["figure", "value"], headline, "headline-row")}
<h2>The changes that matter most</h2>{changes}
<h2>Wall time per step (software NeuronCore)</h2>{_step_chart(report["steps"]["rows"])}
<h2>Memory</h2>{_memory(report)}
<h2>The ops of one step, priced as one compiled graph</h2>{ops}
</body></html>
"""
