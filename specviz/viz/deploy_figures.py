"""The Advise tab's deploy section: each deployable pick as a serving engine's own configuration and
the command that starts the engine with it, what does not deploy, K by requests at once, and the
checks on the engines (predicted against measured, with the machine each number came from).

Built from an advice.Survey only (specviz.advise.deploy writes the configurations), so the recorded
survey and an uploaded one paint the same way. Everything from the survey is escaped: an upload's
candidate labels, model names, machines and messages are a visitor's text. The configurations and
commands themselves go to code boxes (plain text, never HTML) and are returned here as strings.
"""
from __future__ import annotations

import re

from specviz.advise import advice, deploy
from specviz.advise.engine_check import MISS, EngineCheck
from specviz.viz.style import esc

CHECK_COMMAND = "python -m specviz advise --from survey.json --check-on vllm,hf --out DIR"
PLACEHOLDER = re.compile(r"\b(MODEL|DRAFT|PROMPT)\b")  # deploy/'s stand-ins for what only the user knows
STANDS_FOR = {"MODEL": "your target", "DRAFT": "your draft model", "PROMPT": "your prompt"}


def picks(survey: advice.Survey) -> list[str]:
    """The deployable candidates' labels, best first (each once)."""
    return list(dict.fromkeys(d.candidate for d in deploy.deployments(survey)))


def _where(survey: advice.Survey) -> str:
    when = f", {survey.measured_at}" if survey.measured_at else ""
    return f"{survey.machine}{when}"


def intro_html(survey: advice.Survey) -> str:
    """The heading, where the predictions come from, and a sentence per candidate no engine has."""
    head = '<h3 class="sv-h" id="sv-adv-deploy-head">Deploying it</h3>'
    if not survey.measured:
        return head + '<p class="sv-batch-where">No candidate measured yet, so there is nothing to deploy.</p>'
    if picks(survey):
        engines = f"{', '.join(deploy.ENGINES[:-1])} and {deploy.ENGINES[-1]}"
        text = (f"Only prompt lookup (pld) and a draft model exist outside SpecViz; each is written below for "
                f"{engines} at the K the survey ranked it at. The predicted speedups are "
                f"SpecViz's, from this survey's acceptance and pass costs measured on {_where(survey)}: an engine "
                "on another machine runs at its own costs, which a check on the engine (below) measures.")
    else:
        text = ("No measured candidate deploys to an engine: only prompt lookup (pld) and a draft model exist "
                "outside SpecViz. Add pld or a draft model to the candidates.")
    lis = "".join(f"<li>{esc(x)}</li>" for x in deploy.not_deployable(survey))
    rest = f'<h4 class="sv-h">Not deployable</h4><ul class="sv-advice-list">{lis}</ul>' if lis else ""
    return f'{head}<p class="sv-cmp-intro">{esc(text)}</p>{rest}'


def _info(survey: advice.Survey, d: deploy.Deployment) -> str:
    said = (f"<p class='sv-deploy-pick'><strong>{esc(d.candidate)} at K = {d.k} on {esc(d.engine)}</strong>: "
            f"predicted {d.predicted:.2f}× over plain decoding (SpecViz's prediction, from the survey measured on "
            f"{esc(_where(survey))}).</p>")
    if d.note:
        said += f"<p class='sv-advice-flag sv-deploy-note'>⚠ {esc(d.note)}</p>"
    found = sorted(set(PLACEHOLDER.findall(d.command)), key=list(STANDS_FOR).index)
    if found:
        said += ("<p class='sv-batch-where'>In the command, "
                 + ", ".join(f"{w} stands for {STANDS_FOR[w]}" for w in found) + ".</p>")
    return said + f"<p class='sv-batch-where sv-deploy-source'>Option names checked in: {esc(d.source)}.</p>"


def pick_views(survey: advice.Survey | None, candidate: str | None) -> list[str]:
    """For each engine in deploy.ENGINES: (what it is, as HTML; the configuration; the command), of
    `candidate` (default: the best that deploys), flattened into one list of 3 × len(ENGINES)."""
    if survey is None or not survey.measured:
        return ["", "", ""] * len(deploy.ENGINES)
    out: list[str] = []
    rows = deploy.deployments(survey)
    labels = list(dict.fromkeys(d.candidate for d in rows))
    chosen = candidate if candidate in labels else (labels[0] if labels else None)
    for engine in deploy.ENGINES:
        d = next((d for d in rows if d.candidate == chosen and d.engine == engine), None)
        if d is None:
            out += [f"<p class='sv-batch-where'>No measured candidate deploys to {esc(engine)}.</p>", "", ""]
        else:
            out += [_info(survey, d), d.config, d.command]
    return out


def _inline(line: str) -> str:
    """A markdown line with `code` spans as HTML, everything escaped."""
    parts = line.split("`")
    return "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p) for i, p in enumerate(parts))


def concurrency_views(survey: advice.Survey | None) -> tuple[str, str]:
    """deploy.by_concurrency_text as (HTML: its sentences and table, escaped; its vLLM command, or
    '' when there is none), so the command can go to a code box with a copy button."""
    if survey is None or not survey.measured:
        return "", ""
    html, code, table, fenced = ['<h4 class="sv-h">K by requests at once</h4>'], [], [], False
    for line in deploy.by_concurrency_text(survey).splitlines() + [""]:
        if line.strip() == "```":
            fenced = not fenced
        elif fenced:
            code.append(line)
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                table.append(cells)
        else:
            if table:
                head, *body = table
                html.append("<table class='sv-advice-table sv-deploy-bybatch'><thead><tr>"
                            + "".join(f"<th>{esc(c)}</th>" for c in head) + "</tr></thead><tbody>"
                            + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in body)
                            + "</tbody></table>")
                table = []
            if line.strip():
                html.append(f"<p class='sv-cmp-intro'>{_inline(line)}</p>")
    return "".join(html), "\n".join(code)


def _rates(xs: list) -> str:
    return ", ".join(f"{float(x):.2f}" for x in xs) or "–"


def _outcome(c: EngineCheck) -> str:
    if c.error:
        return f'<div class="sv-advice-flag">stopped: {esc(c.error)}</div>'
    if c.flag:
        return f'<div class="sv-advice-flag">⚠ {esc(c.flag)}</div>'
    return f"within {MISS:.0%}" if c.measured else "–"


def checks_html(survey: advice.Survey | None) -> str:
    """survey.engine_checks as a table, predicted against measured, each row with its machine; or
    one line saying how to run a check."""
    head = '<h4 class="sv-h" id="sv-adv-checks-head">Checked on the engines: predicted against measured</h4>'
    if survey is None:
        return ""
    checks = [EngineCheck.from_dict(c) for c in survey.engine_checks]
    if not checks:
        return (f"{head}<p class='sv-batch-where sv-adv-no-checks'>This survey has no check on an engine. To run "
                f"one: <code>{esc(CHECK_COMMAND)}</code>, then load DIR/survey.json here (Replay a survey.json).</p>")
    rows = []
    for c in checks:
        same = "" if c.same_text else " <span class='sv-batch-where'>(tokens differ from plain)</span>"
        rows.append(f"<tr><td>{esc(c.engine)}</td><td>{esc(c.candidate)}, K = {c.k}</td>"
                    f"<td class='sv-deploy-config'><code>{esc(c.config)}</code></td><td>{c.concurrency}</td>"
                    f"<td>{c.prompts}</td><td>{c.predicted:.2f}×</td><td>{c.measured:.2f}×{same}</td>"
                    f"<td>{_rates(c.predicted_marginal)} / {_rates(c.measured_marginal)}</td>"
                    f"<td>{esc(c.machine)}<br><span class='sv-batch-where'>{esc(c.measured_at)}</span></td>"
                    f"<td>{_outcome(c)}</td></tr>")
    table = ("<div class='sv-deploy-scroll'><table class='sv-advice-table sv-deploy-checks'><thead><tr>"
             "<th>engine</th><th>candidate</th>"
             "<th>configuration</th><th>requests at once</th><th>prompts</th>"
             "<th title='from the survey&#39;s acceptance and the engine&#39;s own step costs'>predicted</th>"
             "<th>measured</th><th>acceptance by position: survey / engine</th><th>machine</th>"
             "<th>flag or error</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
    said = (f"Each check predicts from the survey's acceptance by position (measured by SpecViz on "
            f"{_where(survey)}) and the engine's own step costs, timed on the machine in its row, then measures the "
            f"same configuration on that engine there; a miss of more than {MISS:.0%} is flagged with its likely "
            "reason.")
    return f"{head}<p class='sv-cmp-intro'>{esc(said)}</p>{table}"
