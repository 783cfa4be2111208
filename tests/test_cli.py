"""The command line: usage errors are one line and exit code 2; output joins back to the trace's text."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specviz import cli

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specviz", *args], cwd=ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=timeout)


def assert_one_line_error(stderr: str, *words: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("specviz: error: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("args, word", [
    (["--k", "0"], "--k"),
    (["--temperature", "nan"], "--temperature"),
    (["--method", "beam"], "--method"),
])
def test_bad_argument_is_one_line_and_exit_2(args, word):
    """`python -m specviz generate` with K=0, a NaN temperature or an unknown method exits 2
    with exactly one line on stderr that names the option, and prints nothing on stdout."""
    proc = run_cli("generate", "--prompt", "hi", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert_one_line_error(proc.stderr, word)


def test_load_error_is_one_line_and_exit_2():
    """A target spec that is neither a folder nor a hub id raises ModelLoadError inside
    specviz.load; the command line turns it into one line and exit code 2, not a traceback."""
    proc = run_cli("generate", "--method", "ar", "--target", "/no/such/model/folder", "--prompt", "hi")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert_one_line_error(proc.stderr, "/no/such/model/folder")


@pytest.mark.parametrize("args, word", [
    (["--top-p", "1.5", "--prompt", "x"], "--top-p"),
    (["--top-p", "0", "--prompt", "x"], "--top-p"),
    (["--temperature", "-1", "--prompt", "x"], "--temperature"),
    (["--max-new-tokens", "0", "--prompt", "x"], "--max-new-tokens"),
    (["--method", "layerskip", "--layers", "0,x", "--prompt", "x"], "--layers"),
    (["--method", "draft", "--prompt", "x"], "--draft"),
    (["--method", "pld", "--draft", "bundled", "--prompt", "x"], "--draft"),
    (["--method", "pld", "--layers", "0,1", "--prompt", "x"], "--layers"),
    (["--method", "ar", "--adaptive-k", "--prompt", "x"], "--adaptive-k"),
    (["--prompt", "x", "--prompt-file", "p.txt"], "--prompt-file"),
    (["--prompt-file", "/no/such/prompt.txt"], "/no/such/prompt.txt"),
    (["--prompt", "   "], "empty"),
    ([], "--prompt"),
])
def test_bad_combination_fails_before_any_model_loads(args, word, capsys):
    """Each bad value or combination ends in SystemExit(2) with one `specviz: error:` line
    naming the culprit, before any model is loaded (so the check is instant)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", *args])
    assert exit_info.value.code == 2
    assert_one_line_error(capsys.readouterr().err, word)


def byte_decoder(table: dict[int, bytes]):
    return lambda ids: b"".join(table[i] for i in ids).decode("utf-8", errors="replace")


def test_pieces_join_to_the_text_and_split_characters_go_to_the_completing_token():
    """With a byte-level vocabulary where 'é' is two tokens, the first byte's piece is empty,
    the second carries 'é', and the pieces join to exactly the decoded text."""
    decode = byte_decoder({1: b"h", 2: b"\xc3", 3: b"\xa9", 4: b"!"})
    pieces = cli.token_pieces(decode, [1, 2, 3, 4])
    assert pieces == ["h", "", "é", "!"]
    assert "".join(pieces) == decode([1, 2, 3, 4])


def test_pieces_survive_a_decoder_that_rewrites_earlier_text():
    """When a longer decode rewrites what a shorter one produced (here ' .' → '.'), pieces
    still number one per token and join to the final text."""
    words = {1: "Hi", 2: " ", 3: ".", 4: " ok"}
    decode = lambda ids: "".join(words[i] for i in ids).replace(" .", ".")  # noqa: E731
    pieces = cli.token_pieces(decode, [1, 2, 3, 4])
    assert len(pieces) == 4
    assert "".join(pieces) == "Hi. ok"


def test_colours_follow_origins_and_strip_back_to_the_text():
    """Accepted-draft, resampled and bonus pieces each get their own ANSI style, plain target
    pieces get none, and removing the escapes gives back the uncoloured text."""
    pieces, origins = ["a", "b", "c", "d"], ["draft", "resampled", "bonus", "target"]
    coloured = cli.colorize(pieces, origins, color=True)
    for piece, origin in zip(pieces[:3], origins[:3]):
        assert f"{cli.STYLES[origin]}{piece}{cli.RESET}" in coloured
    assert coloured.endswith(f"{cli.RESET}d")
    assert ANSI.sub("", coloured) == "abcd" == cli.colorize(pieces, origins, color=False)
    assert len({cli.STYLES[o] for o in origins}) == 4


def test_metrics_line_shows_alpha_only_when_something_was_drafted():
    """The metrics line reports tokens/s, cycles and mean accepted tokens, and α only for runs
    that drafted tokens (plain decoding has no acceptance rate)."""
    base = dict(tokens_per_s=12.5, new_tokens=10, decode_s=0.8, cycles=4, mean_accepted_tokens=2.5)
    spec = cli.metrics_line({**base, "acceptance_rate": 0.75, "drafted_tokens": 8}, "pld")
    plain = cli.metrics_line({**base, "acceptance_rate": 0.0, "drafted_tokens": 0}, "ar")
    assert "12.5 tokens/s" in spec and "4 cycles" in spec and "2.50" in spec and "α (acceptance rate) 0.75" in spec
    assert "α (acceptance rate) n/a" in plain


@pytest.mark.bundled
@pytest.mark.slow
def test_json_and_coloured_text_agree_on_the_bundled_model():
    """On the bundled model, greedy prompt lookup printed with --json gives a RunTrace of at
    most --max-new-tokens tokens with one origin each, and the coloured text mode prints the
    same text once the ANSI escapes are removed, followed by a metrics line."""
    common = ["generate", "--method", "pld", "--prompt", "Count: one, two, three, four,", "--max-new-tokens", "8"]
    as_json = run_cli(*common, "--json")
    assert as_json.returncode == 0, as_json.stderr
    trace = json.loads(as_json.stdout)
    assert 1 <= len(trace["token_ids"]) <= 8
    assert len(trace["origins"]) == len(trace["token_ids"])
    coloured = run_cli(*common, "--color", "always")
    assert coloured.returncode == 0, coloured.stderr
    plain = ANSI.sub("", coloured.stdout)
    assert plain.startswith(trace["text"] + "\n")
    assert "tokens/s" in plain.splitlines()[-2]  # the metrics line, then the colour key


@pytest.mark.bundled
def test_value_error_from_the_engine_is_one_line():
    """A layer list the layer-skip proposer rejects (it must keep layer 0) surfaces as one
    `specviz: error:` line and exit code 2 after the model loads, not as a traceback."""
    proc = run_cli("generate", "--method", "layerskip", "--layers", "1,2", "--prompt", "hi")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("specviz: error: ")]
    assert len(errors) == 1 and "layer" in errors[0]
    assert proc.stderr.strip().splitlines()[-1] == errors[0]


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback():
    """`python -m specviz advise --from … | head -1`: when the reader has closed the pipe, the command
    stops with exit code 141 (SIGPIPE's) and writes nothing on stderr, where Python's default is a
    BrokenPipeError traceback. (The reader closes before the report is written, so that the write
    always meets a closed pipe rather than a buffer with room.)"""
    proc = subprocess.Popen([sys.executable, "-m", "specviz", "advise", "--from",
                             str(ROOT / "assets" / "recorded_advice.json")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    proc.stdout.close()  # no reader is left: the first write fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_advises_check_best_keeps_its_old_name_as_a_hidden_alias():
    """`advise --check-best N` sets how many picks are measured for real; `--check N`, its name
    before 2026-12-06, still does, and the help shows only the new name; the default stays 2."""
    from specviz.advise_cli import _advise_parser

    ap = _advise_parser()
    assert ap.parse_args(["--check-best", "3"]).check_best == 3
    assert ap.parse_args(["--check", "1"]).check_best == 1
    assert ap.parse_args([]).check_best == 2
    shown = ap.format_help()
    assert "--check-best" in shown and "--check " not in shown and "--check\n" not in shown
