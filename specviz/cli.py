"""Command line: `python -m specviz generate …` decodes one prompt, `python -m specviz bench …` compares methods,
`python -m specviz vllm-serve …` starts a vLLM server for a served target (vllm_serve.py).

Every usage error is one line on stderr, `specviz: error: …`, with exit code 2, so a script
can tell a bad argument from a crash. Arguments are checked before torch is touched, so a
typo fails at once; errors from loading or decoding (ValueError, ModelLoadError) are mapped
to the same one line. Progress of model loading goes to stderr, the result to stdout.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
from typing import Callable

from specviz.cli_args import _Parser, _positive_int, _temperature, _top_p, fail
from specviz.decoding.speed import label
from specviz.proposers import layer_skip, methods

# ANSI styles by token origin. Blue and orange stay apart under the common colour-vision
# deficiencies; bonus is marked by weight and underline rather than by a third hue.
STYLES = {"draft": "\033[34m", "resampled": "\033[38;5;208m", "bonus": "\033[1;4m", "target": ""}
RESET = "\033[0m"
LEGEND = (("draft", "accepted draft"), ("resampled", "resampled"), ("bonus", "bonus"), ("target", "target"))


def _layers(text: str) -> list[int]:
    try:
        return layer_skip.parse_layers(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="specviz", description="See and measure speculative decoding.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{generate,bench,advise,vllm-serve}")
    gen = sub.add_parser("generate", help="decode one prompt and print coloured text or a JSON trace",
                         description="Decode one prompt with one method and print the result.")
    gen.add_argument("--method", choices=methods(), default="logitspec", help="how drafts are made (default logitspec)")
    gen.add_argument("--target", default="bundled", help="target model spec: bundled, a hub id, a folder, "
                     "or vllm:http://HOST:PORT[|TOKENIZER] for a target served by vLLM")
    gen.add_argument("--draft", help="draft model spec, for --method draft "
                     "('head': the project's trained draft head for the bundled model)")
    gen.add_argument("--k", type=_positive_int, default=None,
                     help="most tokens drafted per cycle (default: the method's own, 8 for model drafts, "
                     "16 for pld and logitspec)")
    gen.add_argument("--adaptive-k", action="store_true",
                     help="grow K after full acceptance, shrink it after a rejection")
    gen.add_argument("--layers", type=_layers,
                     help="kept layers for --method layerskip: indices and ranges, e.g. 0-9+20-29")
    gen.add_argument("--temperature", type=_temperature, default=0.0, help="0 means greedy (default 0)")
    gen.add_argument("--top-p", type=_top_p, default=1.0, help="nucleus mass in (0, 1] (default 1)")
    gen.add_argument("--seed", type=int, default=0, help="seed of the one random generator (default 0)")
    gen.add_argument("--max-new-tokens", type=_positive_int, default=128, help="(default 128)")
    gen.add_argument("--raw", action="store_true", help="tokenize the prompt as-is, without the chat template")
    gen.add_argument("--device", help="torch device, e.g. cpu or cuda (default: cuda if present)")
    gen.add_argument("--dtype", help="weights dtype: fp32, bf16, fp16 or auto (auto: bf16 only where this CPU "
                     "computes it natively and a timed pass shows it faster; default fp32 on CPU)")
    prompt = gen.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="the prompt text")
    prompt.add_argument("--prompt-file", help="read the prompt from this file ('-' for stdin)")
    gen.add_argument("--json", action="store_true", help="print the RunTrace as JSON instead of text")
    gen.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                     help="colour tokens by origin: auto colours only a terminal (default auto)")
    gen.set_defaults(run=_cmd_generate)
    sub.add_parser("bench", add_help=False, help="compare methods and baselines on a prompt file "
                                                 "(python -m specviz bench --help)")
    sub.add_parser("advise", add_help=False, help="which draft, method and K for a target "
                                                  "(python -m specviz advise --help)")
    sub.add_parser("vllm-serve", add_help=False, help="start a vLLM server for a vllm: target "
                                                      "(python -m specviz vllm-serve --help)")
    return parser


def _check_combination(args: argparse.Namespace) -> None:
    """Options that only make sense together, checked before any model loads."""
    if args.method == "draft" and not args.draft:
        fail("--method draft needs --draft SPEC: a model of the target's family, or of another (drafted through text)")
    if args.draft and args.method != "draft":
        fail(f"--draft only applies to --method draft, not {args.method}")
    if args.layers is not None and args.method != "layerskip":
        fail(f"--layers only applies to --method layerskip, not {args.method}")
    if args.adaptive_k and args.method == "ar":
        fail("--adaptive-k needs a proposer; --method ar drafts nothing")


def _read_prompt(args: argparse.Namespace) -> str:
    if args.prompt is not None:
        text = args.prompt
    elif args.prompt_file == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(args.prompt_file, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            fail(f"cannot read --prompt-file {args.prompt_file!r}: {getattr(e, 'strerror', None) or e}")
    if not text.strip():
        fail("the prompt is empty")
    return text


def _draft_spec(args: argparse.Namespace) -> str | None:
    """The draft model to load; `--draft head` is the trained head, which is not loaded as a model."""
    from specviz.proposers import resolve_draft

    return resolve_draft(args.method, args.draft)[1]


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _decode_options(args: argparse.Namespace) -> dict:
    from specviz.proposers import resolve_draft

    options = dict(method=resolve_draft(args.method, args.draft)[0], k=args.k, temperature=args.temperature,
                   top_p=args.top_p, seed=args.seed, max_new_tokens=args.max_new_tokens, chat=not args.raw)
    if args.layers is not None:
        options["layers"] = args.layers
    if args.adaptive_k:
        options["adaptive_k"] = True
    return options


def _cmd_generate(args: argparse.Namespace) -> int:
    _check_combination(args)
    prompt = _read_prompt(args)
    import specviz  # heavy (torch, transformers): only once the arguments are known to be good
    from specviz.loading.loader import ModelLoadError

    try:
        target = specviz.load(args.target, device=args.device, dtype=args.dtype, progress=_progress)
        draft = None
        spec = _draft_spec(args)
        if spec:
            draft = specviz.load(spec, device=args.device, dtype=args.dtype, progress=_progress)
        trace = specviz.generate(target, prompt, draft=draft, **_decode_options(args))
    except (ValueError, ModelLoadError) as e:
        fail(e)
    if args.json:
        print(trace.to_json())
        return 0
    color = args.color == "always" or (
        args.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    print(colorize(token_pieces(target.decode, trace.token_ids), trace.origins, color))
    print(metrics_line(trace.metrics, trace.method))
    if color:
        labels, origins = [label for _, label in LEGEND], [origin for origin, _ in LEGEND]
        print("key: " + colorize(labels, origins, True, sep=" · "))
    return 0


# -- rendering: pure functions of a trace, tested without a model


def token_pieces(decode: Callable[[list[int]], str], ids: list[int]) -> list[str]:
    """Split decode(ids) into one piece per token, so that each piece can carry its token's colour.

    Pieces are differences of prefix decodes, so they join to exactly decode(ids). When a longer
    prefix rewrites the end of a shorter one (a half character shown as U+FFFD, then completed;
    a tokenizer's space cleanup), the rewritten text moves to the token that caused it.
    """
    pieces: list[str] = []
    done = ""
    for i in range(1, len(ids) + 1):
        text = decode(ids[:i])
        keep = len(os.path.commonprefix([done, text]))
        _drop_tail(pieces, len(done) - keep)
        pieces.append(text[keep:])
        done = text
    return pieces


def _drop_tail(pieces: list[str], n: int) -> None:
    """Remove the last n characters from the joined pieces, keeping one piece per token."""
    j = len(pieces) - 1
    while n > 0 and j >= 0:
        cut = min(n, len(pieces[j]))
        pieces[j] = pieces[j][: len(pieces[j]) - cut]
        n -= cut
        j -= 1


def colorize(pieces: list[str], origins: list[str], color: bool, sep: str = "") -> str:
    """Join pieces, each wrapped in the ANSI style of its origin when color is on."""
    if not color:
        return sep.join(pieces)
    out = []
    for piece, origin in itertools.zip_longest(pieces, origins[: len(pieces)], fillvalue="target"):
        style = STYLES.get(origin, "")
        out.append(f"{style}{piece}{RESET}" if style and piece else piece)
    return sep.join(out)


def metrics_line(metrics: dict, method: str) -> str:
    """One line of the run's metrics; α is left out when nothing was drafted."""
    m = metrics
    parts = [f"{m.get('tokens_per_s', 0.0):.1f} tokens/s",
             f"{m.get('new_tokens', 0)} tokens in {m.get('decode_s', 0.0):.2f} s",
             f"{m.get('cycles', 0)} cycles",
             f"{label('mean_accepted_tokens')} {m.get('mean_accepted_tokens', 0.0):.2f}"]
    drafted = m.get("drafted_tokens")
    alpha = label("acceptance_rate")
    parts.append(f"{alpha} {m.get('acceptance_rate', 0.0):.2f}" if drafted else f"{alpha} n/a (nothing drafted)")
    return f"{method}: " + " · ".join(parts)


def _cmd_bench(argv: list[str]) -> int:
    try:
        from specviz.loading.loader import ModelLoadError
        from specviz.measure import bench
        from specviz.viz.bench_report import report_html
    except ImportError as e:
        fail(f"the bench command is not available here ({e})")
    try:  # a bad question file, prompt file, model spec or --resume: one line (Ctrl-C: bench.main's own line)
        return bench.main(argv, report_html, parser_class=_Parser) or 0
    except (ValueError, ModelLoadError) as e:
        fail(e)
    except OSError as e:  # --out not writable, say
        fail(f"{e.strerror or e}: {e.filename!r}" if e.filename else e)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # the reader went away (`… | head`): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush does not fail again
        return 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe


def _main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:  # bench parses its own arguments
        return _cmd_bench(argv[1:])
    if argv[:1] == ["advise"]:  # and advise
        from specviz.advise_cli import cmd_advise  # its own module: the advisor's many options

        return cmd_advise(argv[1:])
    if argv[:1] == ["vllm-serve"]:  # so does vllm-serve, which passes the rest on to vLLM
        from specviz.loading.loader import local_source
        from specviz.served import vllm_serve

        try:
            return vllm_serve.main(argv[1:], resolve=local_source)
        except RuntimeError as e:
            fail(e)
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("specviz: interrupted", file=sys.stderr)
        return 130
