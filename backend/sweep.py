"""``litecl sweep``: every model of a zoo on every device, each job in its own process,
results kept as JSON lines so that a rerun does only what is new or changed.

A check job (model x ``--device`` spec; the flag repeats, as a spec may hold commas) runs
in a forked process with a time limit (``--timeout``): the model verifier, ``litecl compare
--json`` (every signature, against ``--reference``), ``litecl inspect --json`` per compared
signature (placement with reasons; its ``--html`` page into DIR/inspect/, which the report
links). Its ``status``: ``exact``, ``differs``, ``refused`` (the
verifier refused the model, LiteRT alone cannot run it, or litecl cannot use the device)
or ``error`` (litecl failed, or the process crashed, or hung past its limit and was
killed), with the ``reason``. ``--bench`` adds, after the checks and one at a time with
nothing beside it, a ``litecl bench --json`` row (``ok`` or ``error``) per model that ran,
with the device's round-trip floor for the per-partition cost in floors.

``DIR/results.jsonl`` gets each row as its job ends. A row's ``key`` holds what its result
depends on: the model's SHA-256, the device spec and profile, the device's platform, name
and driver version, the LiteRT version, reference, placement, litecl's version and a hash
of its source (bench rows: the runs too); a job whose key a row of the same model path has
is not run again unless ``--force``. At the end each model path x device x kind keeps its
current row, and report.py writes the report.

Test-only fault switch: ``LITECL_SWEEP_FAULT=crash:NAME,hang:NAME`` makes the job of each
model file named NAME die of SIGSEGV (a runtime crash) or sleep past its time limit (a
hang) where it would run the model; such rows carry ``fault`` in their key.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import select
import signal
import sys
import time
from pathlib import Path

from .cli_common import NOT_ENOUGH_MEMORY
from .errors import LiteclError

__all__ = ["run", "find_models", "read_results", "RESULTS", "FAULT_ENV"]

RESULTS = "results.jsonl"
#: the folder, in the sweep's, of each check's inspect pages (litecl inspect --html)
PAGES = "inspect"
#: test-only: ``crash:NAME,hang:NAME`` (model file names) faults those models' jobs
FAULT_ENV = "LITECL_SWEEP_FAULT"
#: seconds a device probe (opening a spec in a child) may take
PROBE_TIMEOUT_S = 120.0
#: how often the parent looks at its running jobs where it cannot wait on their pidfds (s)
POLL_S = 0.02


# -- models -----------------------------------------------------------------------------

def _is_model(p: Path) -> bool:
    """A .tflite name, or a TFLite flatbuffer ('TFL3' at byte 4)."""
    if p.suffix == ".tflite":
        return True
    with open(p, "rb") as f:
        return f.read(8)[4:8] == b"TFL3"


def _folder(p: Path) -> list:
    """(path, name under ``p``) of the *.tflite files under folder ``p``; the ones that
    are no file (a link to nothing, a folder named so) are named in one warning line."""
    found = sorted(p.rglob("*.tflite"))
    odd = [q.relative_to(p).as_posix() for q in found if not q.is_file()]
    if odd:
        print(f"warning: {p}: {', '.join(odd[:5])}{' ...' if len(odd) > 5 else ''}: no model file there (a "
              "link to nothing, or a folder); skipped", file=sys.stderr)
    return [(q, q.relative_to(p).as_posix()) for q in found if q.is_file()]


def find_models(items: list, listed: bool = False) -> list[tuple[Path, str]]:
    """(path, name) of each model file MODELS name: a file (a .tflite name or a TFLite
    flatbuffer; any file a list names), a folder (its ``*.tflite`` files, recursively,
    sorted; name: the path under it) or a list file (UTF-8, one file or folder a line,
    relative to the list; blank lines and ``#`` comments skipped). Raises LiteclError for
    a path that does not exist or is not a regular file or folder, a folder without a
    model, or a list not text."""
    out = []
    for p in map(Path, items):
        if p.is_dir():
            got = _folder(p)
            if not got:  # given beside others, it was skipped without a word
                raise LiteclError(f"no model found in {p} (folders are searched for *.tflite)")
            out += got
        elif not p.is_file():
            raise LiteclError(f"model, folder or list not found: {p}" if not p.exists()
                              else f"{p} is not a regular file or a folder")
        elif listed or _is_model(p):
            out.append((p, p.name))
        else:
            try:
                lines = [ln.strip() for ln in p.read_text(encoding="utf-8-sig").splitlines()]  # a BOM: an editor's
            except UnicodeDecodeError:
                raise LiteclError(f"{p} is neither a model (.tflite, or 'TFL3' at byte 4) nor a "
                                  "list of paths (UTF-8 text, one a line)") from None
            out += find_models([p.parent / ln for ln in lines if ln and not ln.startswith("#")], True)
    return out


def _sha256(p: Path) -> str:
    """The file's SHA-256; for one over model.MAX_MODEL_BYTES, which every job refuses, a
    hash of its path, size and time instead (a 20 GB sparse file took 17-50 s of hashing
    before its refusal: a fresh user's report)."""
    from .model import MAX_MODEL_BYTES  # noqa: PLC0415

    h = hashlib.sha256()
    st = p.stat()
    if st.st_size > MAX_MODEL_BYTES:
        h.update(f"oversized|{p.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode("utf-8", "surrogateescape"))
        return h.hexdigest()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _source_hash() -> str:
    """A hash of litecl's own source (backend/ but the report, ops/, the C runtime): rows
    made by other code are redone."""
    from . import ops  # noqa: PLC0415

    h = hashlib.sha256()
    for root in (Path(__file__).parent, Path(ops.__file__).parent):
        for f in sorted(root.rglob("*")):
            if f.suffix in (".py", ".c", ".h") and "__pycache__" not in f.parts and f.name != "report.py":
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _litert_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    with contextlib.suppress(PackageNotFoundError):
        return version("ai-edge-litert")
    return "unknown"


def _faults() -> dict:
    """$LITECL_SWEEP_FAULT (test-only) as {model file name: "crash" | "hang"}."""
    out = {}
    for part in filter(None, (s.strip() for s in os.environ.get(FAULT_ENV, "").split(","))):
        kind, _, name = part.partition(":")
        if kind not in ("crash", "hang") or not name:
            raise LiteclError(f"{FAULT_ENV} (test-only) takes crash:NAME or hang:NAME, comma-separated; got {part!r}")
        out[name] = kind
    return out


# -- one job, in its own process --------------------------------------------------------

def _cli(argv: list) -> tuple[int, str, str]:
    """``litecl ARGV`` in this process: (exit status, stdout, its error line or stderr's tail)."""
    from .cli import main  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    errors = [ln[7:] for ln in err.getvalue().splitlines() if ln.startswith("error: ")]
    return code, out.getvalue(), errors[-1] if errors else err.getvalue().strip()[-300:]


def _fault(job: dict) -> None:
    if job.get("fault") == "crash":
        import ctypes  # noqa: PLC0415

        ctypes.string_at(0)  # SIGSEGV, as a runtime crashing inside LiteRT would
    if job.get("fault") == "hang":
        while True:
            time.sleep(60)


def _litert_alone(job: dict) -> str:
    """'' when LiteRT alone (the job's reference) runs the model on seeded inputs, else why not."""
    from .compare import make_interpreter, random_inputs, run_outputs  # noqa: PLC0415

    try:
        it = make_interpreter(Path(job["path"]).read_bytes(), None, job["reference"])
        run_outputs(it, random_inputs(it.get_input_details()))
    except Exception as e:  # noqa: BLE001  (LiteRT's RuntimeError/ValueError, numpy's, ...)
        return " ".join(str(e).split())[:300] or type(e).__name__
    return ""


#: compare's error lines that mean the model cannot be run at all, not that litecl failed
_REFUSALS = ("LiteRT without the delegate cannot run the model", NOT_ENOUGH_MEMORY)


def _placement(job: dict, opts: list, signatures: list) -> tuple[dict, dict, list]:
    """``litecl inspect --json --html`` of each signature: ({(subgraph, node): placement
    row}, {subgraph: graph_info row}, [[signature, the inspect page's path in the sweep's
    folder]]), each once. Raises LiteclError with inspect's error line."""
    nodes, graphs, pages = {}, {}, []
    for sig in signatures:
        page = _page_name(job, sig)
        code, out, err = _cli(["inspect", job["path"], "--json", *opts, "--html", Path(job["out"]) / page]
                              + (["--signature", sig] if sig is not None else []))
        if code:
            raise LiteclError(err)
        ins = json.loads(out)
        pages.append([sig, page])
        graphs.update((g["subgraph"], g) for g in ins["graphs"])
        nodes.update(((n["subgraph"], n["index"]), {k: n[k] for k in ("subgraph", "index", "op", "placement",
                                                                     "partition", "reason")}) for n in ins["nodes"])
    return nodes, graphs, pages


def _page_name(job: dict, sig) -> str:
    """Where a job's inspect page goes, in the sweep's folder: PAGES/ and a name telling
    the model (file name and content), device, reference, placement and signature apart."""
    parts = [Path(job["path"]).stem, job["sha"][:10], job["device"], job["reference"], job["placement"]]
    name = "-".join(re.sub(r"[^A-Za-z0-9_.]+", "_", str(p)) for p in parts + ([sig] if sig is not None else []))
    return f"{PAGES}/{name}.html"


def _check(job: dict) -> dict:
    """The check row's fields: the verifier, compare (every signature), placement."""
    from .errors import ModelError  # noqa: PLC0415
    from .model import load_model  # noqa: PLC0415

    try:
        load_model(job["path"])
    except ModelError as e:
        return {"status": "refused", "reason": f"the model verifier refused it: {e}"}
    _fault(job)
    opts = ["--device", job["device"], "--reference", job["reference"], "--placement", job["placement"]]
    code, out, err = _cli(["compare", job["path"], "--json", *opts])
    if code == 2:
        if err.startswith(_REFUSALS):  # compare's hint names its --inputs, which a sweep has not
            return {"status": "refused", "reason": err.replace(
                "give inputs it runs with --inputs FILE.npz", "a sweep runs no others: litecl compare MODEL "
                "--inputs FILE.npz runs it on inputs it takes")}
        why = _litert_alone(job)
        return ({"status": "refused", "reason": f"LiteRT alone cannot run it: {why}"} if why
                else {"status": "error", "reason": err})
    rep = json.loads(out)
    sigs = rep.get("signatures") or [rep]
    try:
        (Path(job["out"]) / PAGES).mkdir(exist_ok=True)
        nodes, graphs, pages = _placement(job, opts, [s["signature"] for s in sigs])
    except LiteclError as e:
        return {"status": "error", "reason": f"inspect: {e}"}
    outs = [dict(o, signature=s["signature"]) for s in sigs for o in s["outputs"]]
    bad = [o for o in outs if not o["bit_exact"]]
    reason = "; ".join(f"output {o['name']!r} differs in {o['mismatched']} element(s), max abs diff "
                       f"{o['max_abs_diff']}" for o in bad)[:500]
    for o in outs:  # JSON has no NaN or inf (the reason names them)
        mad = o["max_abs_diff"]
        o["max_abs_diff"] = mad if isinstance(mad, (int, float)) and math.isfinite(mad) else None
    diffs = [o["max_abs_diff"] for o in bad if o["max_abs_diff"] is not None]
    return {"status": "differs" if bad else "exact", "reason": reason,
            "max_abs_diff": max(diffs, default=0.0 if not bad else None),
            "nodes": sum(g["nodes"] for g in graphs.values()),
            "opencl_nodes": sum(g["claimed"] for g in graphs.values()),
            "partitions": sum(g["partitions"] for g in graphs.values()),
            "cast_add_nodes": len(nodes), "signatures": [s["signature"] for s in sigs],
            "outputs": [{k: o[k] for k in ("signature", "name", "dtype", "shape", "bit_exact", "max_abs_diff",
                                           "mismatched")} for o in outs],
            "placement": list(nodes.values()), "pages": pages}


_FLOOR_KERNEL = ("__kernel void c(__global const float4* a, __global float4* b) "
                 "{ b[get_global_id(0)] = a[get_global_id(0)]; }")


def round_trip_us(spec: str, runs: int = 300) -> float:
    """The device's round-trip floor in microseconds: a 16 KiB write, a copy kernel and a
    blocking 16 KiB read on its queue, the median of ``runs`` after 50 warm-up rounds
    (benchmarks/bench_delegate.round_trip_us, the unit of docs/PERFORMANCE.md). Raises
    DeviceError where the spec opens no device."""
    import numpy as np  # noqa: PLC0415
    import pyopencl as cl  # noqa: PLC0415

    from .device import open_device  # noqa: PLC0415

    dev = open_device(spec)
    q, h = dev.queue, np.zeros(4096, np.float32)
    a, b = (cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, h.nbytes) for _ in range(2))
    k = cl.Kernel(cl.Program(dev.context, _FLOOR_KERNEL).build(), "c")
    k.set_args(a, b)
    ts = []
    for _ in range(runs + 50):
        t = time.perf_counter()
        cl.enqueue_copy(q, a, h, is_blocking=False)
        cl.enqueue_nd_range_kernel(q, k, (1024,), None)
        cl.enqueue_copy(q, h, b, is_blocking=True)
        ts.append(time.perf_counter() - t)
    return float(np.median(ts[50:])) * 1e6


def _bench(job: dict) -> dict:
    """The bench row's fields: ``litecl bench --json`` (litecl and LiteRT alone in
    alternating runs) and the floor."""
    import tempfile  # noqa: PLC0415

    _fault(job)
    floor = round_trip_us(job["device"])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.json")
        code, _, err = _cli(["bench", job["path"], "--device", job["device"], "--reference", job["reference"],
                             "--placement", job["placement"], "--num_runs", job["num_runs"],
                             "--profile_runs", 0, "--json", path])
        if code:
            return {"status": "error", "reason": err}
        with open(path) as f:
            rep = json.load(f)
    lit, ref = rep["runs"]["median"], rep["litert"]["median"]
    parts = sum(g["partitions"] for g in rep["graphs"])
    # bench times one signature (a model of several: the primary subgraph's), the check
    # every one: the row says which
    return {"status": "ok", "reason": "", "litecl_median_us": lit, "litert_median_us": ref,
            "signature": rep.get("signature"),
            "ratio_median": rep["ratio_median"], "partitions": parts, "floor_us": floor,
            "floors_per_partition": (lit - ref) / parts / floor if parts and floor else None,
            "init_ms": rep["init_ms"], "litert_init_ms": rep["litert_init_ms"]}


def _probe(job: dict) -> dict:
    """The device a spec opens: platform, name, driver, profile, compute units, GPU or
    not, and why litecl cannot use it ('' when it can)."""
    from .device import open_device  # noqa: PLC0415

    try:
        c = open_device(job["device"]).caps
    except LiteclError as e:
        return {"error": f"device {job['device']}: {e}"}
    return {"platform": c.platform, "name": c.name, "driver": c.driver, "profile": c.profile,
            "compute_units": c.compute_units, "gpu": c.is_gpu,
            "error": c.compiler_error and f"device {job['device']} cannot build kernels: {c.compiler_error}"}


class _Child:
    """One forked process running ``fn(job) -> dict``, its result written as JSON to a
    file; its stdout and stderr (LiteRT's and the runtime's own lines) go to a log. The
    fork comes before this process opens any OpenCL device."""

    def __init__(self, fn, job: dict, tmp: Path, limit_s: float):
        self.job, self.limit_s, self.start = job, limit_s, time.monotonic()
        self.out, self.log = tmp / f"{job['n']}.json", tmp / f"{job['n']}.log"
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:
            self._child(fn)
        with contextlib.suppress(OSError):
            os.setpgid(self.pid, self.pid)  # as the child does: no race with kill()
        self.fd = None  # readable when the process ends (Linux 5.3): the pool waits on it
        with contextlib.suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(self.pid)

    def _child(self, fn) -> None:
        code = 70
        try:
            os.setpgid(0, 0)  # its own group: the terminal's Ctrl-C goes to the sweep only
            import ctypes  # noqa: PLC0415

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: dies with the sweep
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, signal.SIG_DFL)
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            row = fn(self.job)
            self.out.write_text(json.dumps(row))
            code = 0
        except BaseException:  # noqa: BLE001  (into the log; the parent names the exit)
            import traceback  # noqa: PLC0415

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _log_tail(self) -> str:
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return f"; last output: {lines[-1][:200]}" if lines else ""

    def poll(self) -> dict | None:
        """The job's fields once its process ended or was killed at its time limit, else None."""
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0 and time.monotonic() - self.start < self.limit_s:
            return None
        if self.fd is not None:
            os.close(self.fd)
        if pid == 0:
            self.kill()
            return {"status": "error", "reason": f"hung: no result after {self.limit_s:g} s (--timeout), killed",
                    "limit_s": self.limit_s}
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
            if sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGHUP):  # sent from outside
                return {"status": "error", "reason": f"killed ({name}) from outside the job; a later sweep runs "
                                                     "it again", "retry": True}
            return {"status": "error", "reason": f"crashed ({name}) in LiteRT or the OpenCL runtime{self._log_tail()}"}
        try:
            return json.loads(self.out.read_text())
        except (OSError, ValueError):
            return {"status": "error", "reason": f"exited with status {os.WEXITSTATUS(status)} without a "
                                                 f"result{self._log_tail()}"}

    def kill(self) -> None:
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                target()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _pool(jobs: list, fn, n: int, limit_s: float, tmp: Path, done) -> None:
    """Run ``fn`` on each job in its own process, ``n`` at a time; ``done(job, fields,
    seconds)`` as each ends. A KeyboardInterrupt kills the running ones."""
    queue, running = list(jobs), []
    try:
        while queue or running:
            while queue and len(running) < n:
                running.append(_Child(fn, queue.pop(0), tmp, limit_s))
            fds = [c.fd for c in running]
            wait = max(min(c.start + c.limit_s for c in running) - time.monotonic(), 0.0)
            if None in fds:
                time.sleep(min(POLL_S, wait))
            else:
                select.select(fds, [], [], min(wait, 60.0))
            for c in list(running):
                fields = c.poll()
                if fields is not None:
                    running.remove(c)
                    done(c.job, fields, time.monotonic() - c.start)
    finally:
        for c in running:
            c.kill()


# -- results ----------------------------------------------------------------------------

def read_results(folder) -> list[dict]:
    """The rows of FOLDER/results.jsonl in file order ([] when there is none); a line that
    is not a JSON object (a write cut short) or not a row as sweep writes them (a hand
    edit: a field missing or of another type) is skipped, the latter said once in a
    ``warning:`` line on stderr (each was an internal error of every later sweep)."""
    try:
        lines = (Path(folder) / RESULTS).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    rows, odd = [], []
    for n, line in enumerate(lines, 1):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and "key" in r:
            if _row_ok(r):
                rows.append(r)
            else:
                odd.append(n)
    if odd:
        print(f"warning: {Path(folder) / RESULTS}: line(s) {', '.join(map(str, odd[:5]))}"
              f"{' ...' if len(odd) > 5 else ''} are not rows as litecl sweep writes them; left out",
              file=sys.stderr)
    return rows


#: a row's fields and their types, as _Sweep._add writes them (key: as _plan makes it)
_ROW_FIELDS = {"id": str, "path": str, "name": str, "device": str, "kind": str, "status": str,
               "reason": str, "seconds": (int, float)}
_KEY_FIELDS = {"device": str, "kind": str, "reference": str, "placement": str}
_STATUSES = ("exact", "differs", "error", "refused", "ok")


def _row_ok(r: dict) -> bool:
    k = r.get("key")
    return (all(isinstance(r.get(f), t) for f, t in _ROW_FIELDS.items()) and isinstance(k, dict)
            and all(isinstance(k.get(f), t) for f, t in _KEY_FIELDS.items()) and r["status"] in _STATUSES)


def identity(row: dict) -> tuple:
    """What one row answers: model path, device spec, kind, reference, placement."""
    k = row["key"]
    return row["path"], k["device"], k["kind"], k["reference"], k["placement"]


def _key_id(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


class _Progress:
    """A tqdm bar on a terminal (one that tells its width), else a line per finished job on stderr."""

    def __init__(self, total: int, what: str):
        self.n, self.total, self.bar = 0, total, None
        if total and sys.stderr.isatty() and os.get_terminal_size(sys.stderr.fileno()).columns:
            with contextlib.suppress(ImportError):
                import tqdm  # noqa: PLC0415

                tqdm.tqdm.monitor_interval = 0  # no monitor thread: the sweep forks
                self.bar = tqdm.tqdm(total=total, desc=what, unit="job", file=sys.stderr, dynamic_ncols=True)

    def step(self, row: dict) -> None:
        self.n += 1
        # a file name that is not UTF-8 (surrogates) escaped, as any stderr writes it
        text = f"{row['device']} {row['name']}: {row['status']}".encode("utf-8", "backslashreplace").decode()
        if self.bar is not None:
            self.bar.set_postfix_str(text[-60:], refresh=False)
            self.bar.update()
        else:
            r = row["reason"].encode("utf-8", "backslashreplace").decode()  # cut at a word, marked, not
            # mid-phrase (the report has it whole)
            why = f" ({r if len(r) <= 120 else r[:120].rsplit(' ', 1)[0] + ' ...'})" if r else ""
            print(f"[{self.n}/{self.total}] {text}{why} {row['seconds']:.1f} s", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- the sweep --------------------------------------------------------------------------

def default_jobs(probes: dict) -> int:
    """Cores (this process's affinity) // the most threads one usable CPU device runs
    (its compute units), plus one per usable GPU; at least 1."""
    ok = [p for p in probes.values() if not p["error"]]
    threads = max([p["compute_units"] for p in ok if not p["gpu"]], default=0)
    gpus = {(p["platform"], p["name"]) for p in ok if p["gpu"]}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max((cores // max(threads, 1) if threads else 0) + len(gpus), 1)


def run(args) -> int:
    """``litecl sweep`` (cli.py's namespace). Returns the exit status: 0 when every row of
    the models and devices swept is exact or refused for its model (bench rows: ok), else
    1, also when a --device could not be used (its rows refused). Raises LiteclError for
    bad input (cli prints one ``error:`` line, exit 2)."""
    from .report import write_report  # noqa: PLC0415

    if args.report is not None:
        if args.models or args.device or args.out or getattr(args, "ray", None) is not None:
            raise LiteclError("--report DIR writes the report of DIR's results alone: give no MODELS, --device, "
                              "--out or --ray")
        if not Path(args.report).is_dir():
            raise LiteclError(f"--report {args.report}: not a folder (give the --out folder of a sweep)")
        print("wrote {} and {}".format(*write_report(args.report)))
        return 0
    sweep = _Sweep
    if getattr(args, "ray", None) is not None:
        from .sweep_ray import ray_sweep  # noqa: PLC0415

        sweep = ray_sweep(args)  # the address checked and Ray imported, or one error line
    if not args.models or not args.device or not args.out:
        raise LiteclError("litecl sweep needs MODELS, at least one --device SPEC and --out DIR (or --report DIR alone)")
    if not args.timeout > 0:
        raise LiteclError(f"--timeout must be more than 0 seconds, got {args.timeout:g}")
    if any(not d.strip() for d in args.device):  # a column of refused rows in every later report
        raise LiteclError("--device is empty: give a device spec (auto, gpu, cpu, pocl, intel, ...: litecl devices)")
    # the variables every job reads: a bad one is one error line here, not an error row
    # per model x device that a later sweep keeps (a fresh user's LITECL_CACHE_MAX_BYTES=abc)
    from .cache import max_bytes  # noqa: PLC0415
    from .errors import env_flag  # noqa: PLC0415
    from .hostcopy import host_threads  # noqa: PLC0415

    max_bytes(), host_threads()
    for flag in ("LITECL_QUIET", "LITECL_NO_CACHE", "LITECL_NO_SUPERVISOR", "LITECL_DEBUG"):
        env_flag(flag)
    faults = _faults()
    try:
        found = find_models(args.models)
    except OSError as e:
        raise LiteclError(f"cannot read {e.filename}: {e.strerror}") from None
    if not found:
        raise LiteclError(f"no model found in {', '.join(args.models)} (folders are searched for *.tflite)")
    import fcntl  # noqa: PLC0415

    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        lock = open(Path(args.out) / ".lock", "a")  # noqa: SIM115  (held while the sweep runs)
    except OSError as e:
        raise LiteclError(f"cannot write to {args.out}: {e.strerror or e}") from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LiteclError(f"another litecl sweep is writing {args.out}") from None
        return sweep(args, found, faults).run(write_report)


def _distinct_names(models: list) -> None:
    """Give models of one name from different MODELS arguments (za/model.tflite, zb/model.tflite)
    as many of their last path components as tell them apart, in place: progress lines
    and the report name each row's model."""
    by: dict = {}
    for m in models:
        by.setdefault(m["name"], []).append(m)
    for same in (g for g in by.values() if len(g) > 1):
        parts = [Path(m["path"]).parts for m in same]
        for k in range(2, max(map(len, parts)) + 1):
            names = ["/".join(p[-k:]) for p in parts]
            if len(set(names)) == len(names):
                break
        for m, n in zip(same, names):
            m["name"] = n


class _Sweep:
    """One sweep: the models (one per content), the device probes, the jobs to run, the
    rows found and made (``current``: identity -> row)."""

    def __init__(self, args, found: list, faults: dict):
        from . import __version__  # noqa: PLC0415

        self.args, self.faults, self.t0 = args, faults, time.monotonic()
        self.out = Path(args.out)
        # a file reached twice (a folder and a list naming a file in it, a path given
        # twice) is one file: were it its own duplicate, _compact dropped its rows
        found = list({str(path.resolve()): (path, name) for path, name in reversed(found)}.values())[::-1]
        self.found, self.models, seen = len(found), [], set()
        self.dups: set = set()  # files skipped as another's content: their earlier rows go (_compact)
        for path, name in found:  # the same content twice is swept once
            sha = _sha256(path)
            if sha not in seen:
                seen.add(sha)
                self.models.append({"path": str(path.resolve()), "name": name, "sha": sha,
                                    "size": path.stat().st_size})
            else:
                self.dups.add(str(path.resolve()))
        _distinct_names(self.models)
        self.devices = list(dict.fromkeys(args.device))
        self.env = {"litert": _litert_version(), "litecl": __version__, "source": _source_hash()}
        self.old = {(r["path"], r["id"]): r for r in read_results(self.out)}
        self.current, self.ran, self.kept, self.progress = {}, 0, 0, None
        self._tail_ok = False  # results.jsonl checked to end in a newline (_add)

    def run(self, write_report) -> int:
        import tempfile  # noqa: PLC0415

        from . import bench, cli, compare, export, interpreter  # noqa: F401, PLC0415  (jobs fork with them)

        with tempfile.TemporaryDirectory(prefix="litecl-sweep-") as tmp:
            self.tmp = Path(tmp)
            self.probes = self._probe()
            self.jobs = self._jobs()
            largest = sorted(self.models, key=lambda m: -m["size"])  # longest first: the pool packs better
            todo = self._plan("check", [(m, d) for m in largest for d in self.devices])
            self._run_all("sweep", todo, _check, self.jobs)
            if self.args.bench:
                ran = [(m, d) for m in self.models for d in self.devices
                       if self.current[(m["path"], d, "check", self.args.reference, self.args.placement)]["status"]
                       in ("exact", "differs")]
                self._run_all("bench", self._plan("bench", ran, {"num_runs": self.args.num_runs}), _bench, 1)
        self._compact()
        return self._summary(*write_report(self.out))

    def _probe(self) -> dict:
        """Each spec opened in a child of its own (a runtime may crash on it)."""
        probes = {}
        for k, spec in enumerate(self.devices):
            _pool([{"n": f"probe{k}", "device": spec}], _probe, 1, PROBE_TIMEOUT_S, self.tmp,
                  lambda job, fields, _s: probes.__setitem__(job["device"], fields))
            if "status" in probes[spec]:  # the probe itself crashed or hung
                probes[spec] = {"error": f"device {spec}: opening it {probes[spec]['reason']}"}
        return probes

    def _jobs(self) -> int:
        """How many jobs run at once: --jobs, else default_jobs."""
        return self.args.jobs or default_jobs(self.probes)

    def _at_once(self) -> str:
        return f"with at most {self.jobs} job(s) at once"

    def _execute(self, jobs: list, fn, n: int) -> None:
        """``fn`` on each job, ``n`` at a time, each row to _add as it ends (sweep_ray's seam)."""
        _pool(jobs, fn, n, self.args.timeout, self.tmp, self._add)

    def _plan(self, kind: str, pairs: list, extra: dict | None = None) -> list:
        """The jobs of ``kind`` for (model, spec) pairs with no row of their key yet (or all, --force)."""
        a, todo = self.args, []
        for m, spec in pairs:
            p = self.probes[spec]
            key = {"model_sha256": m["sha"], "device": spec, "profile": p.get("profile"), "platform": p.get("platform"),
                   "device_name": p.get("name"), "driver": p.get("driver"), "litert": self.env["litert"],
                   "reference": a.reference, "placement": a.placement, "litecl": self.env["litecl"],
                   "source": self.env["source"], "kind": kind, **(extra or {})}
            fault = self.faults.get(Path(m["path"]).name)
            key.update({"fault": fault} if fault else {})
            job = {**m, **(extra or {}), "n": f"{kind}{len(todo)}", "id": _key_id(key), "key": key, "device": spec,
                   "out": str(self.out.resolve()),
                   "reference": a.reference, "placement": a.placement, "fault": fault}
            row = self.old.get((m["path"], job["id"]))
            # a job killed at a shorter --timeout than this sweep's, or from outside (an
            # interrupt, the OOM killer), runs again (it may finish now)
            if row is not None and not a.force and not row.get("retry") \
                    and not row.get("limit_s", a.timeout) < a.timeout:
                self.current[identity(row)] = row
                self.kept += 1
            else:
                todo.append(job)
        return todo

    def _run_all(self, what: str, jobs: list, fn, n: int) -> None:
        """Jobs on an unusable device become refused rows at once; the others run, ``n`` at a time."""
        self.progress = _Progress(len(jobs), what)
        try:
            for job in jobs:
                if self.probes[job["device"]]["error"]:
                    self._add(job, {"status": "refused", "reason": self.probes[job["device"]]["error"]}, 0.0)
            self._execute([j for j in jobs if not self.probes[j["device"]]["error"]], fn, n)
        finally:
            self.progress.close()

    def _add(self, job: dict, fields: dict, seconds: float) -> None:
        row = {"id": job["id"], "key": job["key"], "path": job["path"], "name": job["name"], "device": job["device"],
               "kind": job["key"]["kind"], "status": "error", "reason": "", **fields, "seconds": round(seconds, 3),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.current[identity(row)] = row  # the report's, whatever the file keeps (_compact)
        path = self.out / RESULTS
        try:
            with open(path, "a+b") as f:
                if not self._tail_ok:  # a last line cut short (kill -9, a full disk): the row on a line of its own
                    f.seek(0, os.SEEK_END)
                    if f.tell() and (f.seek(-1, os.SEEK_END), f.read(1))[1] != b"\n":
                        f.write(b"\n")
                    self._tail_ok = True
                f.write((json.dumps(row) + "\n").encode("utf-8"))
        except OSError as e:  # named (a write error has no file name: "internal error" before)
            self._tail_ok = False
            raise OSError(e.errno, e.strerror, str(path)) from None
        self.ran += 1
        self.progress.step(row)

    def _compact(self) -> None:
        """results.jsonl rewritten: one row per key, of each identity swept now only its current
        row, by device: those of earlier sweeps in their order, then new ones in --device order
        (the report's column order; rows were appended as jobs ended)."""
        mine = {(r["path"], r["id"]) for r in self.current.values()}
        # a file now holding another's content is swept as that one: its rows of what it
        # held before would stay in the report (a fresh user's "refused: 5 bytes" of a file
        # since replaced)
        rows = {(r["path"], r["id"]): r for r in read_results(self.out)
                if r["path"] not in self.dups and (identity(r) not in self.current or (r["path"], r["id"]) in mine)}
        rows.update(((r["path"], r["id"]), r) for r in self.current.values())  # each row of now, also one
        # whose line was lost (a fresh user's torn last line swallowed the next sweep's first row)
        order = {d: k for k, d in enumerate(dict.fromkeys([r["device"] for r in self.old.values()] + self.devices))}
        rows = sorted(rows.values(), key=lambda r: order.get(r["device"], len(order)))
        tmp = self.out / (RESULTS + ".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        os.replace(tmp, self.out / RESULTS)

    def _summary(self, md: Path, page: Path) -> int:
        rows = list(self.current.values())
        tally = {s: sum(r["status"] == s for r in rows if r["kind"] == "check") for s in ("exact", "differs", "error", "refused")}
        bench = [r["status"] for r in rows if r["kind"] == "bench"]
        dup = self.found - len(self.models)
        print(f"swept {len(self.models)} model(s) x {len(self.devices)} device(s) in {time.monotonic() - self.t0:.1f} s "
              f"{self._at_once()}: {self.ran} run now, {self.kept} unchanged since an earlier sweep"
              + (f"; {dup} file(s) skipped, the same content as another" if dup else ""))
        print("checks: " + ", ".join(f"{k} {v}" for k, v in tally.items())
              + (f"; bench: {bench.count('ok')} ok, {len(bench) - bench.count('ok')} error" if self.args.bench else ""))
        print(f"wrote {self.out / RESULTS}, {md} and {page}")
        # a device given that could not be used (a typo, a runtime not installed) refuses
        # each of its rows: the sweep did not check what it was asked to
        unusable = {d: self.probes[d]["error"] for d in self.devices if self.probes.get(d, {}).get("error")}
        for d, why in unusable.items():
            print(f"device {d} could not be used, so its rows are refused: {why}")
        ok = tally["differs"] == tally["error"] == 0 and bench.count("ok") == len(bench)
        return 0 if ok and not unusable else 1
