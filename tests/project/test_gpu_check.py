"""scripts/gpu_check.py, the one prepared GPU run, works end to end (on a CPU, with tiny models)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_every_part(tmp_path):
    """--smoke runs every part of the GPU check on the CPU and writes its Markdown and JSON: greedy
    outputs of ar, pld and logitspec equal HF generate's, v(1) is 1, and S(K) is predicted per α."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["skipped"] == []
    for dtype in ("bf16", "fp16"):
        summary = report["speed"][dtype]["summary"]
        assert set(summary) == {"hf", "hf_pld", "ar", "pld", "logitspec"}  # no head: it needs the bundled model
        assert all(summary[m]["identical"] == 2 for m in summary)
    assert report["v"]["1"] == 1.0 and len(report["v"]) == 4
    assert set(report["big"]["S"]) == {"0.5", "0.6", "0.7", "0.8", "0.9"}
    assert report["big"]["c"] > 0
    assert "### Verify cost v(n)" in (tmp_path / "gpu_check.md").read_text()
