"""The timing panel: speed of both runs, the speedup, acceptance and where the time went.

Reads the metric dicts of `trace.summarize` (RunTrace.metrics); nothing is re-measured here.
"""
from __future__ import annotations

from specviz.decoding.speed import label
from specviz.viz.panels import row, tint
from specviz.viz.style import BLUE, GREY, PURPLE, SKY, YELLOW, esc

MAX_POSITIONS = 16  # acceptance rows shown; deeper positions are rare and would crowd the panel
# time segments: metric key, label, colour (Okabe–Ito colours not used for token statuses)
SEGMENTS = (("draft_s", "draft", PURPLE), ("verify_s", "verify", SKY), ("other_s", "overhead", YELLOW))
NOT_YET = '<span style="opacity:0.7">not measured yet</span>'


def _get(m: dict | None, key: str) -> float | None:
    value = (m or {}).get(key)
    return float(value) if isinstance(value, (int, float)) else None


def _fmt(x: float | None, spec: str = ".1f", unit: str = "") -> str:
    return NOT_YET if x is None else f"{x:{spec}}{unit}"


def speedup(spec: dict | None, ar: dict | None) -> float | None:
    """Speculative tokens/s ÷ plain tokens/s, or None while either is missing."""
    s, a = _get(spec, "tokens_per_s"), _get(ar, "tokens_per_s")
    return s / a if s is not None and a else None


def _speed_table(spec: dict | None, ar: dict | None) -> str:
    rows = [row(["", "speculative", "autoregressive"], "th")]
    for key, name, fmt, unit in (("tokens_per_s", "tokens/s", ".1f", ""), ("new_tokens", "new tokens", ".0f", ""),
                                 ("decode_s", "decode time", ".2f", " s"), ("prefill_s", "prefill", ".2f", " s"),
                                 ("cycles", "cycles", ".0f", "")):
        rows.append(row([name, _fmt(_get(spec, key), fmt, unit), _fmt(_get(ar, key), fmt, unit)]))
    return f'<table style="border-collapse:collapse">{"".join(rows)}</table>'


def _speedup_line(spec: dict | None, ar: dict | None) -> str:
    s = speedup(spec, ar)
    if ar is None:
        return ("<div><b>Speedup:</b> needs the AR baseline: press <b>Run</b> (it measures one at the end) "
                "or <b>Measure AR baseline</b>.</div>")
    if s is None:
        return f"<div><b>Speedup:</b> {NOT_YET}</div>"
    verdict = "faster" if s >= 1 else "slower"
    return (f'<div style="font-size:16px"><b>Speedup: {s:.2f}×</b> ({verdict}; '
            f'{_get(spec, "tokens_per_s"):.1f} ÷ {_get(ar, "tokens_per_s"):.1f} tokens/s)</div>')


def _acceptance(spec: dict) -> str:
    alpha, mean = _get(spec, "acceptance_rate"), _get(spec, "mean_accepted_tokens")
    parts = [f"{label('mean_accepted_tokens')}: <b>{_fmt(mean, '.2f')}</b> tokens per cycle",
             f"{label('acceptance_rate')}: <b>{_fmt(alpha, '.2f')}</b>"]
    sent, share = _get(spec, "sent_per_cycle"), _get(spec, "cycles_sent_share")
    if sent is not None and share is not None:  # runs recorded before these metrics existed have neither
        parts.append(f"{label('sent_per_cycle')}: <b>{sent:.1f}</b> · {label('cycles_sent_share')}: <b>{share:.0%}</b>")
    hit = _get(spec, "retrieval_success")
    if hit is not None:
        parts.append(f"retrieval success: <b>{hit:.0%}</b>")
    return f'<div>{" · ".join(parts)}</div>'


def _by_position(spec: dict) -> str:
    rates = [r for r in (spec.get("acceptance_by_position") or []) if isinstance(r, (int, float))]
    if not rates:
        return f"<div>{label('acceptance_by_position')}: no draft depth judged yet.</div>"
    lines = []
    for d, r in enumerate(rates[:MAX_POSITIONS], start=1):
        lines.append(f'<div style="display:flex;align-items:center;gap:6px;font-size:12px">'
                     f'<span style="width:2.2em;text-align:right">{d}</span>'
                     f'<span style="width:120px;height:9px;background:{tint(GREY, 0.25)}">'
                     f'<span style="display:block;height:9px;width:{100 * r:.0f}%;background:{BLUE}"></span></span>'
                     f'<span>{r:.0%}</span></div>')
    more = f'<div style="font-size:12px">… {len(rates) - MAX_POSITIONS} deeper positions</div>' \
        if len(rates) > MAX_POSITIONS else ""
    return f"<div><div>{label('acceptance_by_position')}:</div>{''.join(lines)}{more}</div>"


def _time_split(spec: dict) -> str:
    total = _get(spec, "decode_s")
    if not total:
        return ""
    segs = [(name, _get(spec, key) or 0.0, colour) for key, name, colour in SEGMENTS]
    rest = total - sum(s for _, s, _ in segs)
    if rest > 1e-3 * total:  # traces recorded before decode_s left the prefill out
        segs.append(("prefill & rest", rest, GREY))
    bar = "".join(f'<span title="{esc(n)}" style="display:inline-block;height:12px;width:{100 * s / total:.1f}%;'
                  f'background:{c}"></span>' for n, s, c in segs if s > 0)
    key = " · ".join(f'<span style="color:{c}">■</span> {esc(n)} {s:.2f} s ({s / total:.0%})' for n, s, c in segs)
    return (f'<div><div>Time split of {total:.2f} s of decoding:</div><div style="width:100%;max-width:320px;'
            f'white-space:nowrap;line-height:0;border:1px solid {GREY}">{bar}</div>'
            f'<div style="font-size:12px">{key}</div>{_outside(spec)}</div>')


def _outside(spec: dict) -> str:
    """Time spent outside decoding, shown apart: the prefill and any cache rebuilds."""
    prefill, rebuild, rebuilds = _get(spec, "prefill_s"), _get(spec, "rebuild_s"), _get(spec, "rebuilds")
    parts = [] if prefill is None else [f"prefill {prefill:.2f} s (it chose the first token)"]
    if rebuilds:
        parts.append(f"KV cache rebuilt {rebuilds:.0f}× in {rebuild:.2f} s (a call that found no cache "
                     "prefilled the committed tokens again)")
    return f'<div style="font-size:12px">Not counted as decoding: {"; ".join(parts)}.</div>' if parts else ""


def _load_note(spec: dict | None, ar: dict | None) -> str:
    """Whether each run was measured beside other runs of this app. Time taken beside other people's runs is not a
    method's own speed, and the panel says so rather than letting the speedup claim it."""
    parts = []
    for name, m in (("Speculative run", spec), ("AR baseline", ar)):
        concurrent, cycles = _get(m, "cycles_concurrent"), _get(m, "cycles")
        if concurrent is None or not cycles:
            continue  # not measured, or a trace from before this was recorded
        if not concurrent:
            # only this app's runs are counted: other programs on the machine are not seen here
            parts.append(f"{name}: no other run in this app ran beside it.")
            continue
        text = (f"{name}: {concurrent:.0f} of {cycles:.0f} cycles ran while other runs used this machine "
                f"(up to {_get(m, 'most_concurrent'):.0f} at once), so its time includes their load")
        shared = _get(m, "shared_passes")
        if shared:
            text += (f"; {shared:.0f} verify passes were shared with other sessions (up to "
                     f"{_get(m, 'most_shared'):.0f} runs in one pass)")
        parts.append(text + ".")
    if not parts:
        return ""
    loaded = any("other runs" in p for p in parts)
    tail = (" The speedup compares times taken under different loads: measure again when the Space is quiet "
            "for the method's own speed.") if loaded and spec and ar else ""
    return f'<div style="font-size:12px">{esc(" ".join(parts) + tail)}</div>'


def _served_note(spec: dict | None, ar: dict | None) -> str:
    """For a target served by vLLM: who answered, which distribution both runs follow, and what the
    server's prefix cache saved."""
    parts = []
    if ar and ar.get("served_by"):
        parts.append(f"AR baseline: plain decoding by the vLLM server at {ar['served_by']} itself, timed here "
                     f"(prefill apart), following top-{ar.get('served_top_k', '?')}, then temperature, then top-p.")
    if spec and spec.get("served_requests"):
        total, cached = _get(spec, "served_prompt_tokens") or 0, _get(spec, "served_cached_tokens") or 0
        top_k = spec.get("served_top_k")
        follows = (f" The target distribution it follows is the server's top-{top_k} log-probabilities, then "
                   "temperature, then top-p.") if top_k else ""
        parts.append(f"Speculative run: {spec['served_requests']:.0f} verify requests to the vLLM server; of their "
                     f"{total:.0f} prompt tokens, {cached:.0f} were found in the server's prefix cache.{follows}")
    return f'<div style="font-size:12px">{esc(" ".join(parts))}</div>' if parts else ""


def metrics_html(spec: dict | None, ar: dict | None) -> str:
    """tokens/s of both runs, the speedup, τ, α, α_d by depth and
    the time split. `ar` None reads "AR baseline: not measured yet"."""
    parts = [_speed_table(spec, ar), _speedup_line(spec, ar), _load_note(spec, ar), _served_note(spec, ar)]
    if spec and not ar:
        parts.append("<div>AR baseline not measured yet: press <b>Measure AR baseline</b> (or Run) to time "
                     "plain decoding of this prompt. When nobody else is decoding, it is measured after a Step "
                     "by itself.</div>")
    if spec:
        parts += [_acceptance(spec), _by_position(spec), _time_split(spec)]
    else:
        parts.append("<div>Speculative run: not measured yet.</div>")
    body = "".join(f'<div style="margin:4px 0">{p}</div>' for p in parts if p)
    return f'<div class="sv-metrics" style="font-size:13px">{body}</div>'
