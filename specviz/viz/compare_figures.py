"""The Compare table and chart, the theory curve with the measured point, the cost profile v(n)
and the batch-size curve.

Built from plain data only: Comparison row dicts, a waterfall.Analysis, a costs.CostProfile and a
batch_effect.BatchEffect. Configuration labels are typed by people, model names may be too, and
token texts come from models, so all of them are escaped.
"""
from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from specviz.decoding import speed
from specviz.pricing.cost_profile import as_planned
from specviz.viz import assumed_curve
from specviz.viz.style import BLUE, GREEN, GREY, ORANGE, VERMILLION, base_layout, esc, esc_plot, note_figure, num, quote

if TYPE_CHECKING:  # data types only: the modules that make them time models (transformers)
    from specviz.measure.batch_effect import BatchEffect
    from specviz.measure.waterfall import Analysis
    from specviz.pricing.cost_profile import CostProfile

TABLE_HEAD = ("#", "configuration", "tokens/s", "× AR", speed.label("mean_accepted_tokens"),
              speed.label("acceptance_rate"), "cycles", "wall s", "output check")


# -- the table -----------------------------------------------------------------------------------
def _check_cell(row: dict) -> str:
    if row.get("method") == "ar":
        return "reference"  # the AR run is what the others are checked against
    if row.get("lossless") is True:
        return '<span class="sv-badge sv-badge-ok" title="same tokens as the AR run">lossless ✓</span>'
    if row.get("lossless") is False:
        return f'<span class="sv-badge sv-badge-alarm">⚠ differs at token {row["differs_at"]}</span>'
    if row.get("greedy"):
        return "–"
    return '<span class="sv-badge sv-badge-na" title="sampled runs differ by design">sampled</span>'


def _cells(row: dict) -> list[str]:
    speed = row.get("speedup")
    return [str(row["index"]) if row["index"] > 0 else "AR", esc(row["label"]),
            num(row.get("tokens_per_s")), "–" if speed is None else f"{num(speed)}×",
            num(row.get("mean_accepted_tokens")), num(row.get("alpha")),
            "–" if row.get("cycles") is None else str(row["cycles"]), num(row.get("wall_s")), _check_cell(row)]


def _alarm(row: dict) -> str:
    text = (f"⚠ Row {row['index']} is greedy but its output differs from the AR run at token {row['differs_at']}: "
            f"{quote(row.get('run_token', ''))} here, {quote(row.get('ar_token', ''))} in the AR run. Greedy "
            "speculative decoding must match plain greedy decoding token for token, so this is a bug or a "
            "near-tie that the two pass shapes round differently.")
    return f'<tr class="sv-cmp-alarm-row" role="alert"><td colspan="{len(TABLE_HEAD)}">{esc(text)}</td></tr>'


def nothing_sent(row: dict) -> str | None:
    """Why a speculative row drafted nothing, in words (None when it drafted): its α of 0 and one
    token per cycle would otherwise read as a perfect draft failing."""
    if row.get("method") == "ar" or row.get("drafted_tokens") != 0:
        return None
    if row.get("method") == "draft" and row.get("draft") == row.get("target"):
        why = ("a draft call costs as much as the target's own step, so plain steps are cheaper and the "
               "planner sent no draft")
    elif row.get("offered_tokens"):
        why = (f"the proposer offered {row['offered_tokens']} draft tokens, but the planner judged none worth "
               "its verify cost, so every cycle was a plain step")
    else:
        why = "the proposer found nothing to offer (no match to copy, no draft), so every cycle was a plain step"
    return f"No draft sent: {why}. α and tokens per cycle say nothing about the draft's quality here."


def _row_html(row: dict) -> str:
    if row.get("error"):
        label = f"{esc(row['label'])}: " if row.get("label") else ""
        return (f'<tr class="sv-cmp-row sv-cmp-error"><td>{row["index"]}</td>'
                f'<td colspan="{len(TABLE_HEAD) - 1}">✕ {label}{esc(row["error"])}</td></tr>')
    if row.get("pending"):
        return (f'<tr class="sv-cmp-row sv-cmp-pending"><td>{row["index"]}</td><td>{esc(row["label"])}</td>'
                f'<td colspan="{len(TABLE_HEAD) - 2}">waiting…</td></tr>')
    alarm = row.get("lossless") is False
    cls = "sv-cmp-row sv-cmp-alarm" if alarm else "sv-cmp-row"
    html = f'<tr class="{cls}">' + "".join(f"<td>{c}</td>" for c in _cells(row)) + "</tr>"
    note = nothing_sent(row)
    if note:
        html += f'<tr class="sv-cmp-note-row"><td></td><td colspan="{len(TABLE_HEAD) - 1}">{esc(note)}</td></tr>'
    return html + (_alarm(row) if alarm else "")


def compare_table_html(rows: list[dict], baselines: list[dict] = ()) -> str:
    """Configurations first (one tbody row each, alarms right below), then the AR baselines."""
    if not rows:
        return '<p class="sv-cmp-empty">No configurations yet: fill the rows above and press Compare.</p>'
    head = "".join(f"<th>{h}</th>" for h in TABLE_HEAD)
    body = "".join(_row_html(r) for r in rows)
    base = "".join(f'<tr class="sv-cmp-baseline">{"".join(f"<td>{c}</td>" for c in _cells(b))}</tr>'
                   for b in baselines if not b.get("error") and not b.get("pending"))
    return (f'<table class="sv-cmp-table"><thead><tr>{head}</tr></thead><tbody class="sv-cmp-configs">{body}'
            f'</tbody><tbody class="sv-cmp-baselines">{base}</tbody></table>')


QUESTION_CHARS = 140  # the start of a question above its rows: enough to recognise it, one line wide


def question_table_html(rows: list[dict], baselines: list[dict] = ()) -> str:
    """Compare's table on several questions: under a heading row per question (its id, category and the
    start of its text, escaped), that question's configurations, then its AR baseline."""
    if not rows:
        return compare_table_html([])
    head = "".join(f"<th>{h}</th>" for h in TABLE_HEAD)
    body = ""
    for qid in dict.fromkeys(r["question_id"] for r in rows):
        mine = [r for r in rows if r["question_id"] == qid]
        text = " ".join((mine[0].get("question") or "").split())
        text = text if len(text) <= QUESTION_CHARS else text[: QUESTION_CHARS - 1] + "…"
        body += (f'<tr class="sv-cmp-question"><th colspan="{len(TABLE_HEAD)}" scope="rowgroup">Question '
                 f'{esc(str(qid))} · {esc(mine[0].get("category") or "")}: <span class="sv-cmp-qtext">'
                 f'{esc(text)}</span></th></tr>')
        body += "".join(_row_html(r) for r in mine)
        body += "".join(f'<tr class="sv-cmp-baseline">{"".join(f"<td>{c}</td>" for c in _cells(b))}</tr>'
                        for b in baselines if b.get("question_id") == qid and not b.get("error")
                        and not b.get("pending"))
    return f'<table class="sv-cmp-table sv-cmp-questions"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def speedup_figure(rows: list[dict]) -> go.Figure:
    """One bar per measured configuration; the dotted line at 1× is its AR baseline."""
    done = [r for r in rows if r.get("speedup") is not None and not r.get("error")]
    title = "Speedup over plain (AR) decoding, same target and temperature"
    if not done:
        return note_figure(title, "No measured configuration yet.")
    names = [esc_plot(f"#{r['index']} {r['label']}") for r in done]
    ys = [r["speedup"] for r in done]
    fig = go.Figure(go.Bar(x=names, y=ys, marker_color=[BLUE if y >= 1 else VERMILLION for y in ys],
                           marker_pattern_shape=["" if y >= 1 else "/" for y in ys],
                           text=[f"{y:.2f}×" for y in ys], textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}<br>%{y:.2f}× AR<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dot", line_color=GREY, annotation_text="AR = 1×")
    base_layout(fig, title, "", "× AR tokens/s")
    fig.update_yaxes(rangemode="tozero")
    return fig


# -- theory ---------------------------------------------------------------------------------------
def predict_at_k(a: Analysis) -> float:
    """The curve's value at the run's K (the run's K may lie off the curve's axis)."""
    return dict(a.curve).get(a.k, a.predicted)


def theory_figure(a: Analysis) -> go.Figure:
    """S(K) predicted for K = 1…16 by the model of speed, with the run's measured point, the prediction
    at its K, the planner's pick when it planned, and the best fixed K. Past the deepest depth D the
    run drafted to, the curve is dashed inside its band (acceptance from none to all past D)."""
    ks, ss = zip(*assumed_curve.measured_part(a))
    axis = "tree depth K" if a.kind == "tree" else "K (draft tokens per cycle)"
    fig = go.Figure(go.Scatter(x=ks, y=ss, mode="lines+markers", name="predicted S(K)", line_color=BLUE,
                               hovertemplate="K=%{x}: %{y:.2f}× predicted<extra></extra>"))
    assumed_curve.draw(fig, a)
    fig.add_scatter(x=[a.k], y=[predict_at_k(a)], mode="markers", name=f"predicted at K={a.k}",
                    marker=dict(symbol="circle-open", size=14, color=BLUE, line_width=2))
    if a.measured is not None:
        fig.add_scatter(x=[a.k], y=[a.measured], mode="markers", name="measured",
                        marker=dict(symbol="star", size=16, color=VERMILLION),
                        hovertemplate="measured: %{y:.2f}×<extra></extra>")
    if a.planned and a.auto:
        fig.add_scatter(x=[max(a.auto[0], 0.5)], y=[a.auto[1]], mode="markers", name="K auto (the planner's pick)",
                        marker=dict(symbol="square-open", size=13, color=ORANGE, line_width=2),
                        hovertemplate="K auto: %{y:.2f}× predicted<extra></extra>")
    fig.add_scatter(x=[a.best[0]], y=[a.best[1]], mode="markers+text", name=f"best K={a.best[0]}",
                    marker=dict(symbol="diamond", size=13, color=GREEN), text=[f"best K={a.best[0]}"],
                    textposition="top center")
    fig.add_hline(y=1.0, line_dash="dot", line_color=GREY, annotation_text="plain decoding")
    title = f"Model against measurement: {esc_plot(a.method)}, α = {a.alpha:.2f}, c = {num(a.c)}"
    base_layout(fig, title, axis, "speedup over plain decoding (×)")
    fig.update_yaxes(rangemode="tozero")
    return fig


MISS_EXPLAINED = 0.20  # a prediction further off than this names the waterfall step that moved most


def miss(a: Analysis) -> float | None:
    """measured ÷ predicted − 1: how far the run landed from the model's prediction."""
    if a.measured is None or a.predicted <= 0:
        return None
    return a.measured / a.predicted - 1


def _largest_step(a: Analysis) -> str:
    """The waterfall step that moved S the most, in words (the first bar is where it starts)."""
    steps = [(abs(after["value"] / before["value"] - 1) if before["value"] > 0 else 0.0, after)
             for before, after in zip(a.waterfall, a.waterfall[1:])]
    if not steps:
        return ""
    _, step = max(steps, key=lambda s: s[0])
    return f" The step that moved it most is '{step['name']}': {step['sentence']}"


def theory_sentence(a: Analysis) -> str:
    """What the model of speed predicted for this run, what it measured, and where the gap comes from."""
    what = (f"the planner's pick (K auto: {'plain steps' if a.auto and a.auto[0] == 0 else f'depth {a.auto[0]}'})"
            if a.planned and a.auto else f"K = {a.k}")
    text = (f"From {speed.label('acceptance_by_position')}, c = {num(a.c)}, the cost profile's v(n) and the "
            f"measured overhead per cycle, the model predicts {a.predicted:.2f}× at {what}")
    off = miss(a)
    if off is None:
        text += "."
    else:
        shown = f"{off:+.0%}" if abs(off) >= 0.005 else "within 1 %"
        text += f"; the run measured {a.measured:.2f}× ({shown})."
        if abs(off) > MISS_EXPLAINED:
            text += _largest_step(a)
    best = (" No fixed K beats plain decoding here: every cycle costs more than the tokens it wins."
            if a.best[1] < 1 else f" The best fixed K is {a.best[0]}, at {a.best[1]:.2f}×.")
    return text + best + assumed_curve.sentence(a)


def theory_html(a: Analysis) -> str:
    """The measured quantities in a small table, labelled as the glossary names them, then the sentence."""
    items = [(speed.label("acceptance_rate"), num(a.alpha)),
             (speed.label("mean_accepted_tokens"), num(a.tau)),
             (speed.label("c"), num(a.c)),
             (f"{speed.label('v(n)')}, n = {a.verify_tokens + 1:.0f} (cost profile)", num(a.v_k)),
             ("v in the run's own verify passes", num(a.v_run)),
             ("predicted S" + (" (K auto)" if a.planned else f" at K = {a.k}"), f"{num(a.predicted)}×"),
             ("measured speedup", "–" if a.measured is None else f"{num(a.measured)}×"),
             ("best fixed K (predicted)", f"{a.best[0]} ({num(a.best[1])}×)")]
    rows = "".join(f"<tr><th scope='row'>{esc(k)}</th><td>{v}</td></tr>" for k, v in items)
    return (f'<table class="sv-theory-table">{rows}</table>'
            f'<p class="sv-narration sv-theory-why">{esc(theory_sentence(a))}</p>')


# -- the waterfall ---------------------------------------------------------------------------------
def waterfall_figure(a: Analysis) -> go.Figure:
    """S after each step from the paper's formula to the measurement: grey start, green where a step
    raised it, vermillion where it lowered it, blue for the measured end; each bar's sentence in its hover."""
    title = "From the paper's S(K) to the measured speedup"
    bars = a.waterfall
    if not bars:
        return note_figure(title, "This recording has no waterfall: put a run on the curve to draw one.")
    ys = [b["value"] for b in bars]
    colours = [GREY] + [GREEN if y >= prev else VERMILLION for prev, y in zip(ys, ys[1:])]
    colours[-1] = BLUE
    hover = ["<br>".join(textwrap.wrap(esc_plot(b["sentence"]), 60)) for b in bars]
    fig = go.Figure(go.Bar(x=[b["name"] for b in bars], y=ys, marker_color=colours, text=[f"{y:.2f}×" for y in ys],
                           textposition="outside", cliponaxis=False, customdata=hover,
                           hovertemplate="%{customdata}<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dot", line_color=GREY, annotation_text="plain decoding")
    base_layout(fig, title, "one replacement at a time (hover for what changed)", "speedup over plain decoding (×)")
    fig.update_yaxes(rangemode="tozero")
    return fig


def waterfall_html(a: Analysis) -> str:
    """The waterfall's steps as a numbered list: S after each, and the sentence that says what changed."""
    if not a.waterfall:
        return ""
    items = "".join(f"<li><b>{esc(b['name'])}: {b['value']:.2f}×</b> {esc(b['sentence'])}</li>" for b in a.waterfall)
    return f'<ol class="sv-waterfall">{items}</ol>'


# -- the cost profile -------------------------------------------------------------------------------
COST_CAPTION = ("This is the curve the planner uses to decide how many draft tokens to send: it ranks the "
                "draft nodes by their chance P to be accepted and sends the m most likely, m giving the most "
                "expected tokens per unit of time, (1 + Σ P) / v(m + 1), and none when a plain step is cheaper.")


def cost_source(prof: CostProfile) -> str:
    """Where the curve came from: read back from a cache, measured now, or a fixed prior never timed."""
    if not prof.measured_at:
        return "a fixed prior, not measured here"
    return f"{'read from the cache' if prof.cached else 'measured now'} (timed {prof.measured_at})"


def cost_figure(prof: CostProfile, run_tokens: float | None = None) -> go.Figure:
    """v(n) at every measured n, seconds per pass in the hover; `run_tokens` marks a verify pass of
    that many tokens (a run's drafts plus its newest token) on the curve. Where noise broke the
    order (a pass timed dearer than a larger one, or below a one-token pass), a dashed line shows
    what the planner counts instead (cost_profile.as_planned)."""
    title = "Cost of a target pass, v(n)"
    if not prof.v:
        return note_figure(title, "This cost profile has no measured pass.")
    ns = sorted(prof.v)
    fig = go.Figure(go.Scatter(
        x=ns, y=[prof.v[n] for n in ns], mode="lines+markers", name="measured v(n)", line_color=BLUE,
        customdata=[[prof.pass_s * prof.v[n] * 1e3] for n in ns],
        hovertemplate="%{x} tokens: %{y:.2f}× a one-token pass, %{customdata[0]:.1f} ms<extra></extra>"))
    planner_v = as_planned(prof, ns[-1])  # what the planner reads where noise broke the order
    if any(abs(planner_v[n - 1] - prof.v[n]) > 1e-9 * prof.v[n] for n in ns):
        fig.add_scatter(x=list(range(1, ns[-1] + 1)), y=planner_v, mode="lines", name="as the planner reads it",
                        line=dict(color=ORANGE, dash="dash", shape="hv"),
                        hovertemplate="%{x} tokens: the planner counts %{y:.2f}×<extra></extra>")
    if run_tokens is not None and run_tokens >= 1:
        fig.add_scatter(x=[run_tokens], y=[prof(run_tokens)], mode="markers", name="this run's verify pass",
                        marker=dict(symbol="star", size=15, color=VERMILLION),
                        hovertemplate="%{x:.1f} tokens: %{y:.2f}×<extra></extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color=GREY, annotation_text="one-token pass")
    where = " · ".join(esc_plot(x) for x in (prof.model, prof.device, prof.dtype, prof.hardware) if x)
    detail = (f"{esc_plot(cost_source(prof))}; one-token pass {prof.pass_s * 1e3:.1f} ms, "
              f"cache of {prof.prefix_len} tokens")
    base_layout(fig, f"{title}: {where}<br><span style='font-size:11px'>{detail}</span>",
                "n, tokens in the pass", "× one-token pass")
    fig.update_xaxes(type="log", tickvals=ns, ticktext=[str(n) for n in ns])
    fig.update_yaxes(rangemode="tozero")
    return fig


def cost_caption_html() -> str:
    """The one-line caption under the cost figure: what the planner does with the curve."""
    return f'<p class="sv-narration sv-cost-caption">{esc(COST_CAPTION)}</p>'


# -- batch size -----------------------------------------------------------------------------------
def batch_figure(effect: BatchEffect) -> go.Figure:
    """verify(K+1 tokens) / step(1 token) per batch size; K+1 is where a pass is fully compute-bound."""
    fig = go.Figure(go.Scatter(
        x=effect.batch_sizes, y=effect.ratio, mode="lines+markers", name=f"verify {effect.k + 1} tokens / 1 step",
        line_color=BLUE, customdata=[[s * 1e3, v * 1e3] for s, v in zip(effect.pass_s, effect.verify_s)],
        hovertemplate="batch %{x}: %{y:.2f}×<br>step %{customdata[0]:.1f} ms, verify %{customdata[1]:.1f} ms"
                      "<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dot", line_color=GREEN, annotation_text="free verify (memory-bound)")
    fig.add_hline(y=effect.k + 1, line_dash="dash", line_color=ORANGE, annotation_text="compute-bound: K+1×")
    title = f"Cost of verifying K+1 = {effect.k + 1} tokens by batch size: {esc_plot(effect.model)}"
    base_layout(fig, title, "batch size", "× one plain step")
    fig.update_xaxes(type="log", tickvals=effect.batch_sizes, ticktext=[str(b) for b in effect.batch_sizes])
    fig.update_yaxes(rangemode="tozero")
    return fig


def batch_html(effect: BatchEffect) -> str:
    """Where and when it was measured, and what the two ends of the curve say."""
    r = effect.ratio
    where = (f"{effect.model} · {effect.dtype} · {effect.hardware} · cache of {effect.prefix_len} tokens · "
             f"{'cached result from ' if effect.cached else 'measured '}{effect.measured_at}")
    text = (f"At batch {effect.batch_sizes[0]} a verify pass of {effect.k + 1} tokens costs {r[0]:.2f}× a plain "
            f"step; at batch {effect.batch_sizes[-1]} it costs {r[-1]:.2f}×. The closer this gets to "
            f"{effect.k + 1}×, the less idle compute is left for speculative decoding to use.")
    return f'<p class="sv-batch-where">{esc(where)}</p><p class="sv-narration">{esc(text)}</p>'
