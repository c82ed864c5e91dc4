"""The ``litecl`` command line: devices, inspect, run, compare, bench, kernel, export, sweep, --version.

Every command that runs a model runs it in LiteRT's own Interpreter with litecl.Delegate
(litecl.Interpreter) and reads the delegate's report (placement(), graph_info(),
partitions()): one source of truth for what runs where. Errors print one ``error: ...``
line on stderr and exit with status 2 (set LITECL_DEBUG=1 for a traceback). ``compare``
exits 1 when any output differs from LiteRT without the delegate.

This module holds the parser, the supervising parent and the error mapping; the commands
are cli_inspect.py's (devices, inspect), cli_run.py's (run, compare, bench, export,
sweep) and cli_kernel.py's (kernel, kernel-add), and cli_common.py holds what they share.
"""
from __future__ import annotations

import argparse
import errno
import os
import sys

from .cli_common import (MAX_NUM_RUNS, MAX_PROFILE_RUNS, _NON_NEGATIVE, _POSITIVE, _arg_int, _arg_limit, _arg_secs,
                         _fail, _Parser, _Usage)
from .cli_inspect import cmd_devices, cmd_inspect
from .cli_kernel import _arg_qparam, _arg_shape, cmd_kernel, cmd_kernel_add
from .cli_run import cmd_bench, cmd_compare, cmd_export, cmd_run, cmd_sweep

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from . import __version__  # noqa: PLC0415

    p = _Parser(prog="litecl", description="Run TFLite models in LiteRT with litecl's OpenCL "
                "delegate (CAST and ADD on OpenCL, everything else on LiteRT); compare with LiteRT "
                "alone bit for bit.")
    p.add_argument("--version", action="version", version=f"litecl {__version__}",
                   help="print litecl's version and exit")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser,
                           help="what to do (litecl COMMAND --help for its options)")
    sub.required = True
    dev_help = ("OpenCL device: auto (default), gpu, cpu, pocl, intel, oclgrind, nvidia or a "
                "name substring (litecl devices lists each device's spec), optionally with :profile=mobile|mobile-fp16|nofp64|nofp16|strict|noint64 "
                "(default: $LITECL_DEVICE or auto)")
    model_help = "path of the .tflite model"
    seed_help = "seed of the random inputs used when --inputs is not given (an integer >= 0; default 0)"
    resize_help = ("resize fixed-shape inputs to the shapes the --inputs file holds (without it, "
                   "only dimensions that are -1 in an input's shape_signature may differ from "
                   "the model's shape, as in LiteRT's strict resize)")
    full_range_help = ("random inputs over the full range: every integer type (int32 and "
                       "int64 included) uniform over all its values, floats (and complex parts) "
                       "random bit patterns, so NaN, inf and subnormals appear; bool stays a "
                       "fair coin. Integer inputs used as indices are then out of range. "
                       "Default: normal floats, 8-bit integers over their range, 16-bit and "
                       "wider in [0, 10) (they are often indices)")
    sig_help = ("signature key to run (default: subgraph 0, or the first signature when "
                "subgraph 0 has no inputs, or the only signature when --inputs names its inputs)")
    ref_choices = ("builtin", "ref", "xnnpack")
    placement_help = ("all (default): every node that can run on OpenCL does; auto: only where the "
                      "cost model (the device's measured bandwidth and round trip against LiteRT's) "
                      "expects it to be faster, the rest stays on LiteRT")
    threads_help = ("LiteRT's num_threads for the nodes it runs (an integer >= 1, as LiteRT; "
                    "default LiteRT's)")
    reference_help = ("LiteRT's op resolver, with and without the delegate: builtin (default: its "
                      "builtin kernels without XNNPACK), ref (its reference kernels, BUILTIN_REF) "
                      "or xnnpack (its default configuration: XNNPACK takes the nodes litecl leaves)")
    threads_type = _arg_int(1, "an integer >= 1 and <= 2147483647 (LiteRT's C int)", 2**31 - 1)

    def add_placement(s):
        s.add_argument("--placement", choices=("all", "auto"), default="all", help=placement_help)

    s = sub.add_parser("devices", help="list OpenCL devices and their capabilities")
    s.add_argument("--json", action="store_true", help="print the devices as a JSON list")
    s.add_argument("--check", action="store_true",
                   help="run litecl's self-test of every kernel family on every device (each in a child "
                        "process) and say which families a device computes wrong")
    s.add_argument("--ray-resources", action="store_true",
                   help="print this node's devices as Ray custom resources, the argument of ray start "
                        "--resources for litecl sweep --ray (one litecl_device:SPEC per spec that selects a device)")
    s.set_defaults(fn=cmd_devices)

    s = sub.add_parser("inspect", help="show where each CAST/ADD node runs (OpenCL or LiteRT) and why")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    s.add_argument("--signature", metavar="KEY",
                   help="show only the nodes of this signature's subgraph (and the subgraphs it calls)")
    s.add_argument("--json", action="store_true",
                   help="print JSON: model, device {platform, name, profile}, signature, nodes, "
                   "graphs, summary, fused, notes")
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    s.add_argument("--html", metavar="FILE", help="also write the graph as litecl placed it to this HTML file "
                   "(one offline file: nodes in execution order, coloured by where they run, partitions boxed)")
    s.add_argument("--inputs", metavar="NPZ",
                   help=".npz of inputs keyed by input tensor (or signature input) name: the model runs once "
                   "on them, so placement and kernels are those of their shapes (default: the declared shapes, "
                   "no run)")
    add_placement(s)
    s.set_defaults(fn=cmd_inspect)

    def add_input_args(s):  # what run and compare share: the inputs and how the model runs
        s.add_argument("--inputs", metavar="NPZ",
                       help=".npz of inputs keyed by input tensor (or signature input) name")
        s.add_argument("--seed", type=_NON_NEGATIVE, default=None, help=seed_help)
        s.add_argument("--full-range", action="store_true", help=full_range_help)
        s.add_argument("--resize", action="store_true", help=resize_help)
        s.add_argument("--signature", metavar="KEY", help=sig_help)
        s.add_argument("--num_threads", type=threads_type, default=None, metavar="N", help=threads_help)
        add_placement(s)

    s = sub.add_parser("run", help="run a model (seeded random inputs unless --inputs)")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    add_input_args(s)
    s.add_argument("--output", metavar="NPZ",
                   help="write outputs to this .npz, keyed by output name (.npz is appended when missing)")
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("compare", help="run LiteRT with and without litecl's delegate on the same "
                       "inputs; exit 1 on any difference")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    add_input_args(s)
    s.add_argument("--json", action="store_true",
                   help="print JSON: model, device {platform, name, profile}, signature, "
                   "reference, all_bit_exact, opencl_nodes, nodes, partitions, outputs; several "
                   "signatures compared: model, device, reference, all_bit_exact and signatures, "
                   "a list of {signature, all_bit_exact, opencl_nodes, nodes, partitions, outputs}")
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    s.set_defaults(fn=cmd_compare)

    s = sub.add_parser("bench", help="benchmark_model-style timings of LiteRT with and without the "
                       "delegate, and the delegated launches' kernel times")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    s.add_argument("--signature", metavar="KEY", help=sig_help)
    s.add_argument("--inputs", metavar="NPZ", help=".npz of inputs keyed by input name (default: seeded random)")
    s.add_argument("--resize", action="store_true", help=resize_help)
    s.add_argument("--seed", type=_NON_NEGATIVE, default=None, help=seed_help)
    s.add_argument("--num_threads", type=threads_type, default=None, metavar="N", help=threads_help)
    add_placement(s)
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    s.add_argument("--warmup_runs", type=_arg_int(0, f"an integer >= 0 and <= {MAX_NUM_RUNS}", MAX_NUM_RUNS),
                   default=1, metavar="N",
                   help=f"warm-up runs, at least (an integer from 0 to {MAX_NUM_RUNS:,}: each run's time is "
                        "kept; default 1; one run is always done)")
    s.add_argument("--warmup_min_secs", type=_arg_secs, default=0.5, metavar="SECS",
                   help="warm up for at least this many seconds (>= 0; default 0.5)")
    s.add_argument("--num_runs", type=_arg_int(1, f"an integer >= 1 and <= {MAX_NUM_RUNS}", MAX_NUM_RUNS),
                   default=50, metavar="N",
                   help=f"timed runs, at least (an integer from 1 to {MAX_NUM_RUNS:,}: each run's time "
                        "is kept for the median, litecl's and LiteRT's; default 50)")
    s.add_argument("--min_secs", type=_arg_secs, default=1.0, metavar="SECS",
                   help="time runs for at least this many seconds (>= 0; default 1)")
    s.add_argument("--max_secs", type=_arg_secs, default=150.0, metavar="SECS",
                   help="stop warm-up and timed runs after this many seconds each, even "
                   "before --warmup_runs/--num_runs (>= 0; default 150)")
    s.add_argument("--profile_runs", type=_arg_int(0, f"an integer >= 0 and <= {MAX_PROFILE_RUNS}", MAX_PROFILE_RUNS),
                   default=10, metavar="N",
                   help="profiled runs averaged in the per-launch table of event-profiled kernel "
                   f"times (an integer from 0 to {MAX_PROFILE_RUNS:,}: --max_secs does not bound them; "
                   "0: no table; default 10)")
    s.add_argument("--json", metavar="FILE",
                   help="also write the results to this JSON file (checked before the benchmark runs)")
    s.add_argument("--trace", metavar="FILE", help="also write a few profiled invokes as Chrome trace-event JSON "
                   "(Perfetto, chrome://tracing): partitions, copies, kernels, waits, LiteRT's spans between")
    s.set_defaults(fn=cmd_bench)

    target_help = ("generate for this device type: its launch row (ops/tiling.py LAUNCH) and code "
                   "path, whatever --device is (default: the device's own type)")
    s = sub.add_parser("export", help="write a native TFLite delegate for a model: C99 sources with "
                       "its kernels (OpenCL C and program binaries), build.sh, delegate_options.json "
                       "and a manifest of the launches")
    s.add_argument("model", help=model_help)
    s.add_argument("--out", required=True, metavar="DIR",
                   help="folder to write the delegate's sources, build.sh, delegate_options.json, "
                   "manifest.json, the .cl files and the constants to: a new or empty folder, or one "
                   "holding an earlier litecl export (only the files its manifest.json lists are replaced)")
    s.add_argument("--device", help=dev_help + "; kernels are built and checked there")
    s.add_argument("--target", choices=("gpu", "cpu"), help=target_help)
    s.add_argument("--signature", metavar="KEY", help=sig_help)
    s.add_argument("--placement", choices=("all", "auto"), default="all",
                   help="which nodes the delegate takes: all (every node litecl lowers; default) "
                   "or auto (only where the cost model expects OpenCL to be faster)")
    s.add_argument("--inputs", metavar="NPZ",
                   help=".npz keyed by input tensor (or signature input) name: the model is planned at "
                   "these arrays' shapes (only their shapes are read) instead of its own (the app then "
                   "resizes its inputs to them)")
    s.set_defaults(fn=cmd_export)

    s = sub.add_parser("sweep", help="check many models on many devices (verifier, placement, compare; "
                       "--bench timings), each in its own process, resumable; --report DIR: the report alone")
    s.add_argument("models", nargs="*", metavar="MODEL",
                   help="a .tflite file, a folder (searched for *.tflite) or a list file (one path a line)")
    s.add_argument("--device", action="append", metavar="SPEC", help="an OpenCL device spec as --device of the "
                   "other commands (litecl devices lists them), :profile=NAME allowed; repeat the flag for more "
                   "devices (a spec may hold commas); at least one")
    s.add_argument("--out", metavar="DIR", help="folder of results.jsonl, report.md and report.html")
    s.add_argument("--report", metavar="DIR", help="only write DIR/report.md and report.html from DIR's results")
    s.add_argument("--jobs", type=_POSITIVE, metavar="N", help="jobs at once (default: cores divided by the "
                   "threads one CPU device uses, plus one per GPU)")
    s.add_argument("--timeout", type=_arg_limit, default=600.0, metavar="SECS",
                   help="time limit of each job's process (default 600): a job past it is killed, an error row")
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    add_placement(s)
    s.add_argument("--bench", action="store_true", help="also time litecl against LiteRT (litecl bench) on each "
                   "model that ran, one job at a time after the checks")
    s.add_argument("--num_runs", type=_POSITIVE, default=50, metavar="N", help="--bench's timed runs (default 50)")
    s.add_argument("--force", action="store_true", help="redo jobs whose results are already in DIR")
    s.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                   help="run the jobs on a Ray cluster (default ADDRESS: auto, the one this machine is a node of; "
                        "else HOST:PORT or ray://HOST:PORT), each on a node whose ray start --resources offers its "
                        "device (litecl devices --ray-resources); needs pip install 'litecl[cluster]'")
    s.set_defaults(fn=cmd_sweep)

    s = sub.add_parser("kernel", help="print a generated kernel")
    ks = s.add_subparsers(dest="kind", metavar="KIND", parser_class=_Parser,
                          help="which kernel")
    ks.required = True
    c = ks.add_parser("cast", help="the CAST SRC -> DST chain and OpenCL source")
    types = "bool, int8, uint8, int16, uint16, int32, uint32, int64, float16, float32, float64, complex64"
    c.add_argument("src", help=f"source tensor type: {types}")
    c.add_argument("dst", help=f"destination tensor type: {types}")
    c.add_argument("--device", help=dev_help)
    c.add_argument("--target", choices=("gpu", "cpu"), help=target_help)
    c.add_argument("--build", action="store_true", help="also build it on the device")
    c.set_defaults(fn=cmd_kernel)
    c = ks.add_parser("add", help="the ADD kernel of a dtype, shapes, activation and quantization")
    c.add_argument("dtype", help="tensor type: float32, float16, int32, int64, or int8, uint8, int16 (quantized)")
    c.add_argument("--shapes", nargs=2, type=_arg_shape, default=[(16,), (16,)], metavar=("A", "B"),
                   help="the two input shapes, comma-separated dims (2,3,4; [] for a scalar), "
                        "broadcast like numpy (default 16 16)")
    c.add_argument("--activation", choices=("NONE", "RELU", "RELU6", "RELU_N1_TO_1"), default="NONE",
                   help="fused activation (default NONE)")
    c.add_argument("--quant", nargs=3, type=_arg_qparam, metavar=("S1:Z1", "S2:Z2", "SOUT:ZOUT"),
                   help="per-tensor (scale, zero point) of input 1, input 2 and the output: needed "
                        "for int8/uint8, optional for int16 (without it int16 ADD wraps, as LiteRT's)")
    c.add_argument("--pot-scale-int16", action="store_true",
                   help="AddOptions.pot_scale_int16 (int16 with power-of-two scales takes LiteRT's "
                        "POT path; default off, as the TFLite converter writes it)")
    c.add_argument("--device", help=dev_help)
    c.add_argument("--target", choices=("gpu", "cpu"), help=target_help)
    c.add_argument("--build", action="store_true", help="also build it on the device")
    c.set_defaults(fn=cmd_kernel_add)
    return p


#: A yes/no variable (errors.env_flag): on, commands run in the litecl process itself,
#: without the supervising parent that turns a crash into an error line (see _supervised).
NO_SUPERVISOR_ENV = "LITECL_NO_SUPERVISOR"
#: The error line's start when the process running a command died of a signal.
CRASH_PREFIX = "the process running the model crashed"
#: How a runtime's own crash handler starts what it prints as the process dies (LLVM's,
#: which Intel's CPU runtime installs: "PLEASE submit a bug report to
#: https://software.intel.com/..."; then "Stack dump:" and frames). From such a line on,
#: the supervisor holds the child's stderr: dropped when the child dies of a signal (the
#: error line names the crash; LITECL_DEBUG=1 keeps them), passed on otherwise.
_CRASH_BANNERS = (b"PLEASE submit a bug report", b"Stack dump:")


def _supervised(args) -> int:  # noqa: C901
    """Run the command in a forked child and wait for it: LiteRT runs the model, and the
    OpenCL runtime litecl's delegate kernels, in-process, so a crash there (SIGSEGV, SIGABRT) would
    end `litecl` with no error line. The child does the work (stdout shared, stderr relayed
    line by line: _relay_stderr);
    when it dies of a signal the parent prints one `error:` line and exits 2. The fork
    comes before any OpenCL device is opened (after the arguments are parsed). SIGINT and
    SIGTERM given to the parent are passed on; the child dies with its parent (Linux
    PR_SET_PDEATHSIG), so a killed `litecl` leaves nothing running."""
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    from .errors import env_flag  # noqa: PLC0415

    sys.stdout.flush()
    sys.stderr.flush()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do the work
        os.close(err_r)
        os.dup2(err_w, 2)
        os.close(err_w)
        # Ctrl-C ends the child at once (the parent says "interrupted (SIGINT)"): raised as
        # KeyboardInterrupt it could land inside a delegate callback LiteRT called, where
        # Python prints it as an ignored exception with a traceback
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # ignored as inherited (`cmd &`): kept
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            import ctypes  # noqa: PLC0415

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:  # noqa: BLE001  (not Linux: no parent-death signal)
            pass
        code = 2
        try:
            code = _dispatch(args)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 2)
    def _forward(s, _f):
        try:
            os.kill(pid, s)
        except ProcessLookupError:  # the child is gone already
            pass
    os.close(err_w)
    held: list = []
    relay = threading.Thread(target=_relay_stderr, args=(err_r, held), daemon=True)
    relay.start()
    forward = {sig: signal.signal(sig, _forward) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
               if signal.getsignal(sig) is not signal.SIG_IGN}  # one ignored as inherited stays so (a shell's `cmd &`)
    try:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
    finally:
        for sig, old in forward.items():
            signal.signal(sig, old)
    relay.join(5)  # a process the child started may still hold the pipe: not waited for
    if held and (not os.WIFSIGNALED(status) or env_flag("LITECL_DEBUG")):
        _write_err(b"".join(held))
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        if sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the shell's code: 128 + its number
            _fail(f"interrupted ({name})")
            return 128 + sig
        if sig == signal.SIGKILL:  # not a crash, and no Ctrl-C: the OOM killer, or kill -9
            return _fail(f"the child running `litecl {args.cmd}` was killed (SIGKILL): by another process "
                         "or by the kernel's out-of-memory killer (`dmesg` names it)")
        return _fail(f"{CRASH_PREFIX} ({name}) in LiteRT or the OpenCL runtime while running "
                     f"`litecl {args.cmd}` on {getattr(args, 'model', '?')}; litecl refuses the "
                     "models LiteRT is known to crash on, so please report this one")
    return os.WEXITSTATUS(status)


def _relay_stderr(fd: int, held: list) -> None:
    """Pass the child's stderr on line by line, holding every line from a runtime's crash
    banner on (_CRASH_BANNERS) in ``held``."""
    with os.fdopen(fd, "rb", buffering=0) as f:
        buf = b""
        while chunk := f.read(65536):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            out = []
            for ln in lines:
                if held or ln.lstrip().startswith(_CRASH_BANNERS):
                    held.append(ln + b"\n")
                else:
                    out.append(ln + b"\n")
            if out:
                _write_err(b"".join(out))
        if buf and held:
            held.append(buf)
        elif buf:
            _write_err(buf)


def _write_err(data: bytes) -> None:
    try:
        sys.stderr.flush()
        while data:
            data = data[os.write(2, data):]
    except OSError:  # stderr closed: nothing to say it on
        pass


def main(argv=None) -> int:
    """The command line. With ``argv`` None (the ``litecl`` program), the commands that run
    a model (inspect, run, compare, bench, export) run in a supervised child (``_supervised``)
    unless $LITECL_NO_SUPERVISOR is on; an explicit ``argv`` runs in this process. A yes/no
    variable (LITECL_NO_SUPERVISOR, LITECL_DEBUG, LITECL_QUIET, LITECL_NO_CACHE) holding no
    yes/no word is an error line."""
    from .errors import LiteclError, env_flag  # noqa: PLC0415

    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else 0
    except _Usage as e:
        return _fail(str(e))
    if hasattr(args, "seed"):  # random inputs' options beside --inputs, which gives them: refused
        chosen = [o for o, on in (("--full-range", getattr(args, "full_range", False)),
                                  ("--seed", args.seed is not None)) if on]
        if getattr(args, "inputs", None) and chosen:
            return _fail(f"{' and '.join(chosen)} choose{'s' if len(chosen) == 1 else ''} random inputs, "
                         "but --inputs gives them: pass one or the other")
        args.seed = 0 if args.seed is None else args.seed
    try:
        # every yes/no variable now, not while _internal reports another error; LITECL_QUIET
        # too, which the commands do not read (they pass quiet=True), so a bad value is
        # refused here as in Python
        for name in ("LITECL_DEBUG", "LITECL_QUIET", "LITECL_NO_CACHE"):
            env_flag(name)
        supervise = not env_flag(NO_SUPERVISOR_ENV)
    except LiteclError as e:
        return _fail(str(e))
    if argv is None and args.fn in (cmd_inspect, cmd_run, cmd_compare, cmd_bench, cmd_export) \
            and supervise and hasattr(os, "fork"):
        return _supervised(args)
    if argv is None:
        _exit_on_sigint()
    return _dispatch(args)


def _exit_on_sigint() -> None:
    """The ``litecl`` program run in-process: Ctrl-C prints one ``error: interrupted
    (SIGINT)`` line and exits 130 (the shell's 128 + 2) at once. As a KeyboardInterrupt it could land inside a
    delegate callback LiteRT called, which Python prints as an ignored exception with a
    traceback, and LiteRT then reports a failed node."""
    import signal  # noqa: PLC0415

    def stop(_s, _f):
        try:
            sys.stdout.flush()
        finally:
            os.write(2, b"error: interrupted (SIGINT)\n")
            os._exit(128 + signal.SIGINT)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # ignored as inherited (a shell's `cmd &`): kept
        signal.signal(signal.SIGINT, stop)


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    """warnings.showwarning for the command line: ``warning: ...`` on one line of stderr,
    without the source file and line Python's default shows."""
    text = " ".join(str(message).split())
    print(f"warning: {text[len('litecl: '):] if text.startswith('litecl: ') else text}",
          file=file or sys.stderr)


def _raised_by_litert(e: BaseException) -> bool:
    """Whether ``e`` was raised inside LiteRT's Python package (its binding's errors,
    e.g. "Didn't find op for builtin opcode 'CAST' version '31'"), not by litecl or numpy."""
    import ai_edge_litert  # noqa: PLC0415

    tb, last = e.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    pkg = os.path.dirname(ai_edge_litert.__file__)
    return last is not None and os.path.abspath(last.tb_frame.f_code.co_filename).startswith(pkg + os.sep)


def _dispatch(args) -> int:
    """Run the parsed command, mapping every error to one `error:` line (exit 2) and every
    warning to one `warning:` line."""
    import warnings  # noqa: PLC0415

    warnings.showwarning = _one_line_warning
    for flag in ("inputs", "output", "json", "html", "trace"):  # an unset shell variable: not "no file"
        v = getattr(args, flag, None)
        if isinstance(v, str) and not v.strip():
            return _fail(f"--{flag} is empty: name the file (or leave the option out)")
    out, sys.stdout = sys.stdout, _ReaderMayLeave(sys.stdout)
    try:
        return _run(args)
    finally:
        sys.stdout = out


class _ReaderMayLeave:
    """stdout for a command: once its reader left (``litecl bench ... | head``), what is
    printed goes nowhere and the command runs on, writing its files (--json: the command
    stopped at the first print past the pipe's buffer and wrote none, exit 0)."""

    def __init__(self, f):
        self._f = f

    def write(self, text: str) -> int:
        try:
            try:
                return self._f.write(text)
            except UnicodeEncodeError:  # a file name that is not UTF-8, a stdout of another
                enc = getattr(self._f, "encoding", None) or "utf-8"  # encoding: escaped, as stderr's
                return self._f.write(text.encode(enc, "backslashreplace").decode(enc))
        except BrokenPipeError:
            _silence_stdout()
            return len(text)

    def flush(self) -> None:
        try:
            self._f.flush()
        except BrokenPipeError:
            _silence_stdout()

    def __getattr__(self, name):
        return getattr(self._f, name)


def _run(args) -> int:
    """``args.fn(args)`` with every error mapped to one line (_dispatch)."""
    from .errors import LiteclError  # noqa: PLC0415

    try:
        return args.fn(args)
    except _Usage as e:
        return _fail(str(e))
    except LiteclError as e:
        return _fail(str(e))
    except RuntimeError as e:  # LiteRT reports failed invokes of its own nodes this way
        return _fail(f"LiteRT: {' '.join(str(e).split())[:300]}")
    except ValueError as e:  # LiteRT's own refusals (an op version or a type it lacks)
        if isinstance(e, UnicodeDecodeError) and _raised_by_litert(e):
            # get_input_details / get_output_details decode every name as UTF-8
            return _fail(f"LiteRT's Python API cannot read a tensor name of this model: it is not UTF-8 "
                         f"({bytes(e.object[max(e.start - 20, 0):e.end + 20])!r}); the commands name "
                         "inputs and outputs through that API (the Python API runs the model)")
        if _raised_by_litert(e):
            return _fail(f"LiteRT: {' '.join(str(e).split())[:300]}")
        return _internal(e)
    except MemoryError:
        return _fail("out of memory (does the model or an input hold a huge tensor?)")
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130  # the shell's code for SIGINT
    except BrokenPipeError:  # `litecl ... | head`: the reader left; files the command writes are written
        _silence_stdout()
        return 0
    except OSError as e:  # a file the command names (a name over the file system's limit, ...)
        if e.filename is None:  # a write with no file name: storage's errors are the user's to fix
            full = e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)
            return _fail(f"writing a file: {e.strerror}") if full else _internal(e)
        name = os.fsdecode(e.filename) if isinstance(e.filename, (str, bytes, os.PathLike)) else str(e.filename)
        return _fail(f"{name if len(name) <= 80 else '...' + name[-77:]}: {e.strerror or e}")  # its end: the file's name
    except Exception as e:  # never a traceback for the user
        return _internal(e)


def _silence_stdout() -> None:
    """stdout to /dev/null after its reader left, so the interpreter's flush at exit
    raises no second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _internal(e: Exception) -> int:
    from .errors import LiteclError, env_flag  # noqa: PLC0415

    try:
        debug = env_flag("LITECL_DEBUG")
    except LiteclError:  # main() refused it already; a caller of _dispatch gets the one line
        debug = False
    if debug:
        import traceback  # noqa: PLC0415

        traceback.print_exception(type(e), e, e.__traceback__)  # then exit 2, as any error
        sys.stderr.flush()
        return 2
    return _fail(f"internal error ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                 "set LITECL_DEBUG=1 for a traceback")


if __name__ == "__main__":
    sys.exit(main())
