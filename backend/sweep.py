"""``litecl sweep``: every model of a zoo on every device, each check in its own process,
results kept as JSON lines so a rerun does only what is new or changed.

For each model x device (``--device`` repeats: a spec may hold commas) one job runs in a
forked process with a time limit (``--timeout``): the model verifier, ``litecl compare
--json`` (every signature, against ``--reference``), then ``litecl inspect --json`` per
compared signature (placement with reasons). With ``--bench`` each model that ran gets a
``litecl bench --json`` row too, after the checks and one at a time, nothing else running
(timings taken beside other jobs are not comparable), and the device's round-trip floor
(a 16 KiB write, a copy kernel and a blocking read: benchmarks/bench_delegate.py's) to
give the per-partition cost in floors.

A row's ``status``: ``exact`` (every output bit for bit), ``differs``, ``refused`` (the
verifier refused the model, LiteRT alone cannot run it, or litecl cannot use the device:
the reason says which) or ``error`` (litecl failed, the job crashed, or it hung past its
time limit and was killed). Bench rows: ``ok`` or ``error``.

Results: ``DIR/results.jsonl``, one row a line, appended as each job ends (a sweep cut
short keeps what it finished). A row's ``key`` holds what its result depends on: the
model's SHA-256, the device spec and profile, the device's platform, name and driver
version, the LiteRT version, reference, placement, litecl's version and a hash of its
source (and for bench rows the number of runs); a job whose key a row of the same model
path holds already is not run again unless ``--force``. At the end each model path x
device x kind keeps one row (the current key's) and the report is written (report.py).

Jobs run ``--jobs N`` at once (default: the cores divided by the threads one CPU device
uses, its compute units, plus one per GPU), longest model first; the rows are the same
as one at a time. Progress: a tqdm bar on a terminal (tqdm is in the ``bench`` extra),
else one line per finished job on stderr.

Test-only fault switch: ``LITECL_SWEEP_FAULT=crash:NAME,hang:NAME`` makes the job process
of each model file named NAME die of SIGSEGV (a runtime crash) or sleep until its time
limit (a hang) where it would run the model; a row made under it has ``fault`` in its key.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import sys
import time
from pathlib import Path

from .errors import LiteclError

__all__ = ["run", "find_models", "read_results", "RESULTS", "FAULT_ENV"]

RESULTS = "results.jsonl"
#: test-only: ``crash:NAME,hang:NAME`` (model file names) faults those models' jobs
FAULT_ENV = "LITECL_SWEEP_FAULT"
#: seconds a device probe (opening a spec in a child) may take
PROBE_TIMEOUT_S = 120.0
#: how often the parent looks at its running jobs (s)
POLL_S = 0.02


# -- models -----------------------------------------------------------------------------

def _is_model(p: Path) -> bool:
    """A .tflite name, or a TFLite flatbuffer ('TFL3' at byte 4)."""
    if p.suffix == ".tflite":
        return True
    with open(p, "rb") as f:
        return f.read(8)[4:8] == b"TFL3"


def find_models(items: list[str]) -> list[tuple[Path, str]]:
    """(path, name) of each model file MODELS name: a file (a .tflite name or a TFLite
    flatbuffer), a folder (its ``*.tflite`` files, recursively, sorted; name: the path
    under the folder) or a list file (UTF-8 text, one file or folder a line, relative to
    the list's folder; blank lines and ``#`` comments skipped). Raises LiteclError for a
    path that does not exist, is no regular file or folder, or a list that is not text."""
    out = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            out += [(q, q.relative_to(p).as_posix()) for q in sorted(p.rglob("*.tflite")) if q.is_file()]
        elif not p.is_file():
            raise LiteclError(f"model, folder or list not found: {item}" if not p.exists()
                              else f"{item} is not a regular file or a folder")
        elif _is_model(p):
            out.append((p, p.name))
        else:
            try:
                lines = p.read_text(encoding="utf-8").splitlines()
            except UnicodeDecodeError:
                raise LiteclError(f"{item} is neither a model (.tflite, or 'TFL3' at byte 4) nor a "
                                  "list of paths (UTF-8 text, one a line)") from None
            entries = [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]
            for e in entries:
                q = p.parent / e
                if q.is_dir():
                    out += [(r, r.relative_to(q).as_posix()) for r in sorted(q.rglob("*.tflite")) if r.is_file()]
                elif q.is_file():
                    out.append((q, q.name))
                else:
                    raise LiteclError(f"{item}: listed path not found: {e}")
    return out


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _source_hash() -> str:
    """A hash of litecl's own source (backend/, ops/, the C runtime): rows made by other
    code are redone."""
    from . import ops  # noqa: PLC0415

    h = hashlib.sha256()
    for root in (Path(__file__).parent, Path(ops.__file__).parent):
        for f in sorted(root.rglob("*")):
            if f.suffix in (".py", ".c", ".h") and "__pycache__" not in f.parts:
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _litert_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("ai-edge-litert")
    except PackageNotFoundError:
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
_REFUSALS = ("LiteRT without the delegate cannot run the model", "random inputs need")


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
        if err.startswith(_REFUSALS):
            return {"status": "refused", "reason": err}
        why = _litert_alone(job)
        return ({"status": "refused", "reason": f"LiteRT alone cannot run it: {why}"} if why
                else {"status": "error", "reason": err})
    rep = json.loads(out)
    sigs = rep.get("signatures") or [rep]
    nodes, graphs = {}, {}
    for s in sigs:
        code, out, err = _cli(["inspect", job["path"], "--json", *opts]
                              + (["--signature", s["signature"]] if s["signature"] is not None else []))
        if code:
            return {"status": "error", "reason": f"inspect: {err}"}
        ins = json.loads(out)
        graphs.update((g["subgraph"], g) for g in ins["graphs"])
        nodes.update(((n["subgraph"], n["index"]), {k: n[k] for k in ("subgraph", "index", "op", "placement",
                                                                     "partition", "reason")}) for n in ins["nodes"])
    outs = [dict(o, signature=s["signature"]) for s in sigs for o in s["outputs"]]
    bad = [o for o in outs if not o["bit_exact"]]
    diffs = [o["max_abs_diff"] for o in bad if o["max_abs_diff"] is not None and o["max_abs_diff"] == o["max_abs_diff"]]
    return {"status": "differs" if bad else "exact",
            "reason": "; ".join(f"output {o['name']!r} differs in {o['mismatched']} element(s), max abs "
                                f"diff {o['max_abs_diff']}" for o in bad)[:500],
            "max_abs_diff": max(diffs, default=0.0 if not bad else None),
            "nodes": sum(g["nodes"] for g in graphs.values()),
            "opencl_nodes": sum(g["claimed"] for g in graphs.values()),
            "partitions": sum(g["partitions"] for g in graphs.values()),
            "cast_add_nodes": len(nodes), "signatures": [s["signature"] for s in sigs],
            "outputs": [{k: o[k] for k in ("signature", "name", "dtype", "shape", "bit_exact", "max_abs_diff",
                                           "mismatched")} for o in outs],
            "placement": list(nodes.values()), "invoke_path": rep["invoke_path"]}


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
    q, ctx = dev.queue, dev.context
    k = cl.Kernel(cl.Program(ctx, _FLOOR_KERNEL).build(), "c")
    h = np.zeros(4096, np.float32)
    a, b = (cl.Buffer(ctx, cl.mem_flags.READ_WRITE, h.nbytes) for _ in range(2))
    k.set_args(a, b)
    ts = []
    for i in range(runs + 50):
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
    return {"status": "ok", "reason": "", "litecl_median_us": lit, "litert_median_us": ref,
            "ratio_median": rep["ratio_median"], "partitions": parts, "floor_us": floor,
            "floors_per_partition": (lit - ref) / parts / floor if parts and floor else None,
            "init_ms": rep["init_ms"], "litert_init_ms": rep["litert_init_ms"], "invoke_path": rep["invoke_path"]}


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
        if pid == 0:
            if time.monotonic() - self.start < self.limit_s:
                return None
            self.kill()
            return {"status": "error", "reason": f"hung: no result after {self.limit_s:g} s (--timeout), killed"}
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
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
            time.sleep(POLL_S)
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
    is not a JSON object (a write cut short) is skipped."""
    rows = []
    with contextlib.suppress(FileNotFoundError):
        with open(Path(folder) / RESULTS, encoding="utf-8") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    row = json.loads(line)
                    if isinstance(row, dict) and "key" in row:
                        rows.append(row)
    return rows


def identity(row: dict) -> tuple:
    """What one row answers: model path, device spec, kind, reference, placement."""
    k = row["key"]
    return row["path"], k["device"], k["kind"], k["reference"], k["placement"]


def _key_id(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


class _Progress:
    """A tqdm bar on a terminal, else one line per finished job on stderr."""

    def __init__(self, total: int, what: str):
        self.n, self.total, self.bar = 0, total, None
        if total and sys.stderr.isatty():
            with contextlib.suppress(ImportError):
                import tqdm  # noqa: PLC0415

                tqdm.tqdm.monitor_interval = 0  # no monitor thread: the sweep forks
                self.bar = tqdm.tqdm(total=total, desc=what, unit="job", file=sys.stderr, dynamic_ncols=True)

    def step(self, row: dict) -> None:
        self.n += 1
        text = f"{row['device']} {row['name']}: {row['status']}"
        if self.bar is not None:
            self.bar.set_postfix_str(text[-60:], refresh=False)
            self.bar.update()
        else:
            why = f" ({row['reason'][:120]})" if row["reason"] else ""
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


def _preload() -> None:
    """Import what jobs use before forking them (not opening any device): each job's
    process then starts with it."""
    from . import bench, cli, compare, export, interpreter  # noqa: F401, PLC0415


def run(args) -> int:
    """``litecl sweep`` (argparse namespace from cli.py). Returns the exit status: 0 when
    every row of the models and devices swept is exact or refused (bench rows: ok), 1
    otherwise. Raises LiteclError for bad input (cli prints one ``error:`` line, exit 2)."""
    from .report import write_report  # noqa: PLC0415

    if args.report is not None:
        if args.models or args.device or args.out:
            raise LiteclError("--report DIR writes the report of DIR's results alone: give no MODELS, --device or --out")
        md, html = write_report(args.report)
        print(f"wrote {md} and {html}")
        return 0
    if not args.models or not args.device or not args.out:
        raise LiteclError("litecl sweep needs MODELS, at least one --device SPEC and --out DIR "
                          "(or --report DIR alone)")
    if not args.timeout > 0:
        raise LiteclError(f"--timeout must be more than 0 seconds, got {args.timeout:g}")
    faults = _faults()
    found = find_models(args.models)
    if not found:
        raise LiteclError(f"no model found in {', '.join(args.models)} (folders are searched for *.tflite)")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = open(out / ".lock", "a")  # noqa: SIM115  (held for the whole sweep)
    except OSError as e:
        raise LiteclError(f"cannot write to {args.out}: {e.strerror or e}") from None
    import fcntl  # noqa: PLC0415

    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise LiteclError(f"another litecl sweep is writing {args.out}") from None
    with lock:
        return _sweep(args, found, faults, out, write_report)


def _sweep(args, found: list, faults: dict, out: Path, write_report) -> int:
    import tempfile  # noqa: PLC0415

    t0 = time.monotonic()
    models, seen = [], set()
    for path, name in found:  # the same content twice is swept once
        sha = _sha256(path)
        if sha not in seen:
            seen.add(sha)
            models.append({"path": str(path.resolve()), "name": name, "sha": sha, "size": path.stat().st_size})
    devices = list(dict.fromkeys(args.device))
    from . import __version__  # noqa: PLC0415

    env = {"litert": _litert_version(), "litecl": __version__, "source": _source_hash()}
    _preload()
    rows = read_results(out)
    have = {(r["path"], r["id"]) for r in rows}
    results = out / RESULTS
    current, counts = {}, {"run": 0, "kept": 0}

    def keep(row):  # a row of this sweep, new or found
        current[identity(row)] = row

    def add(job, fields, seconds):
        row = {"id": job["id"], "key": job["key"], "path": job["path"], "name": job["name"],
               "device": job["device"], "kind": job["key"]["kind"], "status": "error", "reason": "",
               **fields, "seconds": round(seconds, 3), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        with open(results, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        keep(row)
        counts["run"] += 1
        progress.step(row)

    def plan(kind, pairs, extra=None):
        """The jobs of ``kind`` for (model, device spec) pairs whose key has no row yet."""
        todo, by_id = [], {(r["path"], r["id"]): r for r in rows}
        for m, spec in pairs:
            p = probes[spec]
            key = {"model_sha256": m["sha"], "device": spec, "profile": p.get("profile"),
                   "platform": p.get("platform"), "device_name": p.get("name"), "driver": p.get("driver"),
                   "litert": env["litert"], "reference": args.reference, "placement": args.placement,
                   "litecl": env["litecl"], "source": env["source"], "kind": kind, **(extra or {})}
            if faults.get(Path(m["path"]).name):
                key["fault"] = faults[Path(m["path"]).name]
            job = {"n": f"{kind}{len(todo)}", "id": _key_id(key), "key": key, **m,
                   "device": spec, "reference": args.reference, "placement": args.placement,
                   "fault": key.get("fault"), **(extra or {})}
            if (m["path"], job["id"]) in have and not args.force:
                keep(by_id[(m["path"], job["id"])])
                counts["kept"] += 1
            else:
                todo.append(job)
        return todo

    with tempfile.TemporaryDirectory(prefix="litecl-sweep-") as tmp:
        tmp = Path(tmp)
        probes = {}
        for spec in devices:  # each spec opened in a child: a runtime may crash on it
            _pool([{"n": f"probe{len(probes)}", "device": spec}], _probe, 1, PROBE_TIMEOUT_S, tmp,
                  lambda job, f, s: probes.__setitem__(job["device"], f))
            p = probes[spec]
            if "status" in p:  # the probe itself crashed or hung
                probes[spec] = {"error": f"device {spec}: opening it {p['reason']}"}
        jobs = plan("check", [(m, d) for m in sorted(models, key=lambda m: -m["size"]) for d in devices])
        n = args.jobs or default_jobs(probes)
        progress = _Progress(len(jobs), "sweep")
        for job in [j for j in jobs if probes[j["device"]]["error"]]:  # no process needed
            add(job, {"status": "refused", "reason": probes[job["device"]]["error"]}, 0.0)
        _pool([j for j in jobs if not probes[j["device"]]["error"]], _check, n, args.timeout, tmp, add)
        progress.close()
        if args.bench:
            ran = [(m, d) for m in models for d in devices
                   if current[(m["path"], d, "check", args.reference, args.placement)]["status"] in ("exact", "differs")]
            jobs = plan("bench", ran, {"num_runs": args.num_runs})
            progress = _Progress(len(jobs), "bench")
            _pool(jobs, _bench, 1, args.timeout, tmp, add)  # one at a time: nothing beside it
            progress.close()
    mine = {(r["path"], r["id"]) for r in current.values()}
    kept = [r for r in read_results(out) if identity(r) not in current or (r["path"], r["id"]) in mine]
    last = {(r["path"], r["id"]): k for k, r in enumerate(kept)}  # one row per key: the latest
    tmpfile = results.with_suffix(".tmp")
    tmpfile.write_text("".join(json.dumps(r) + "\n" for k, r in enumerate(kept) if last[(r["path"], r["id"])] == k))
    os.replace(tmpfile, results)
    md, html = write_report(out)
    tally = {s: sum(r["status"] == s for r in current.values() if r["kind"] == "check")
             for s in ("exact", "differs", "error", "refused")}
    benched = [r for r in current.values() if r["kind"] == "bench"]
    print(f"swept {len(models)} model(s) x {len(devices)} device(s) in {time.monotonic() - t0:.1f} s "
          f"with {n} job(s) at once: {counts['run']} run now, {counts['kept']} unchanged since an earlier sweep"
          + (f"; {len(found) - len(models)} file(s) skipped, the same content as another" if len(found) > len(models) else ""))
    print("checks: " + ", ".join(f"{k} {v}" for k, v in tally.items())
          + (f"; bench: {sum(r['status'] == 'ok' for r in benched)} ok, {sum(r['status'] != 'ok' for r in benched)} error"
             if args.bench else ""))
    print(f"wrote {results}, {md} and {html}")
    return 0 if tally["differs"] == tally["error"] == 0 and all(r["status"] == "ok" for r in benched) else 1
