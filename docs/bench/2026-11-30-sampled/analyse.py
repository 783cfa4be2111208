"""Per-variant and per-prompt tables from a bench.json: `python analyse.py bench.json > per_prompt.md`.

Ratios are of per-prompt medians (tok/s), geometric means over the prompts; "x ar" is against our
plain loop in the same run. new tokens is the first repeat's length (under sampling HF's varies).
"""
import json
import math
import statistics as st
import sys

r = json.load(open(sys.argv[1]))
res, variants = r["results"], r["variants"]
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
ours = [v for v in variants if not v.startswith("hf")]
ratio = lambda p, v, a: res[p][v]["tokens_per_s"] / res[p][a]["tokens_per_s"]
print("| variant | tok/s (median) | × HF plain (geomean) | worst prompt × HF | × HF prompt lookup | × our ar "
      "| tokens per pass | α | new tokens (mean) |\n|---|---|---|---|---|---|---|---|---|")
for v in variants:
    rat = {p: ratio(p, v, "hf") for p in res}
    w = min(rat, key=rat.get)
    pl = f"{gm([ratio(p, v, 'hf_pld') for p in res]):.2f}" if "hf_pld" in variants else "–"
    tpp = f"{st.mean(res[p][v]['new_tokens'] / res[p][v]['cycles'] for p in res):.2f}" if v in ours else "–"
    a = f"{r['summary'][v]['acceptance_rate']:.2f}" if v in ours and v != "ar" else "–"
    print(f"| {v} | {r['summary'][v]['tokens_per_s_median']:.1f} | {gm(list(rat.values())):.2f} | {rat[w]:.2f} ({w}) "
          f"| {pl} | {gm([ratio(p, v, 'ar') for p in res]):.2f} | {tpp} | {a} "
          f"| {st.mean(res[p][v]['new_tokens'] for p in res):.1f} |")
print("\nPer prompt: tok/s (× HF plain / × our ar), median of repeats\n")
print("| prompt | " + " | ".join(variants) + " | fastest of ours |\n|" + "---|" * (len(variants) + 2))
for p in res:
    cells = [f"{res[p][v]['tokens_per_s']:.1f} ({ratio(p, v, 'hf'):.2f}/{ratio(p, v, 'ar'):.2f})" for v in variants]
    print(f"| {p} | " + " | ".join(cells) + f" | {max(ours, key=lambda v: res[p][v]['tokens_per_s'])} |")
