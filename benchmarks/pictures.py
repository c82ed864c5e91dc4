"""The pictures of issue 42, as committed in benchmarks/results/pictures/: for MoveNet (int8,
../shared/models) and a stand-in for dp_net (models.builders.many_partitions_model: 214
partitions), ``litecl inspect --html`` and ``litecl bench --trace``; MoveNet's trace again
with the device made to copy (as a GPU does: the CPU runtimes read LiteRT's memory in
place, so their traces have no copies); and screenshots in headless Chromium: each page at
1280x800 and whole, each trace in speedscope (a Chrome trace-event viewer that runs
offline: ``npm pack speedscope`` and pass its dist/release folder as --speedscope), the
host's thread and the OpenCL queue's.

    python benchmarks/pictures.py --device pocl --out benchmarks/results/pictures --speedscope DIR
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from common import SHARED, run_script

from models.builders import many_partitions_model

CHROMIUM = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]


def litecl(*args) -> None:
    subprocess.run([sys.executable, "-m", "litecl.cli", *map(str, args)], check=True, stdout=subprocess.DEVNULL)


def shot(url: str, png: Path, size: str, wait_ms: int = 0) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([shutil.which("chromium"), *CHROMIUM, f"--user-data-dir={profile}", f"--window-size={size}",
                        *([f"--virtual-time-budget={wait_ms}"] if wait_ms else []), f"--screenshot={png}", url],
                       check=True, capture_output=True, timeout=300)


def copying_trace(model: Path, device: str, out: Path) -> None:
    """MoveNet's trace with the delegate's memory policy set to copies."""
    import numpy as np  # noqa: PLC0415

    import litecl as lc  # noqa: PLC0415
    from litecl import delegate as dm  # noqa: PLC0415
    from litecl.pictures import write_trace  # noqa: PLC0415

    it = lc.Interpreter(model_path=str(model), device=device, quiet=True)
    it.delegate.memory = dm._Memory(False, 0)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.random.default_rng(0).integers(0, 255, d["shape"]).astype(d["dtype"]))
    for _ in range(3):
        it.invoke()
    names = {r["context"]: r["subgraph"] for r in it.delegate.subgraph_records()}
    write_trace(out, it.delegate, it.invoke, names=names, about={"model": str(model), "memory": "copies (forced)"})


def window(trace: Path, tid: int, first: int, last: int, out: Path) -> None:
    """Invoke 1 of the trace from 100 us before partition ``first`` to 100 us after
    partition ``last`` (their spans on the host's thread), process 1's thread ``tid`` alone
    (speedscope shows one thread at a time and the whole trace at first): events overlapping
    the window, cut to it."""
    doc = json.loads(trace.read_text())
    host = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 1 and e["tid"] == 1]
    inv = next(e for e in host if e["name"] == "invoke 1")
    parts = {e["name"]: e for e in host if e["name"].startswith("partition ") and inv["ts"] <= e["ts"] <= inv["ts"] + inv["dur"]}
    lo, hi = parts[f"partition {first}"]["ts"] - 100, parts[f"partition {last}"]["ts"] + parts[f"partition {last}"]["dur"] + 100
    keep = [e for e in doc["traceEvents"] if e["pid"] == 1 and e["tid"] in (0, tid)]
    cut = []
    for e in keep:
        if e["ph"] == "X":
            s, t = max(e["ts"], lo), min(e["ts"] + e["dur"], hi)
            if s >= t:
                continue
            e = dict(e, ts=round(s - lo, 3), dur=round(t - s, 3))
        cut.append(e)
    doc["traceEvents"] = cut
    out.write_text(json.dumps(doc))


def speedscope_shots(viewer: Path, traces: list, out: Path) -> None:
    """Each trace in speedscope's time-ordered view, served from 127.0.0.1 (it fetches the file)."""
    with tempfile.TemporaryDirectory() as root:
        shutil.copytree(viewer, root, dirs_exist_ok=True)
        for t in traces:
            shutil.copy(t, root)
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        handler = functools.partial(Quiet, directory=root)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            for t in traces:
                url = f"http://127.0.0.1:{server.server_port}/index.html#profileURL={t.name}&view=time-ordered"
                shot(url, out / (t.name.replace(".json", "") + ".png"), "1280,800", wait_ms=10000)
        finally:
            server.shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", help="litecl device spec (default: auto)")
    ap.add_argument("--out", type=Path, default=Path("pictures_out"), help="output folder (default pictures_out)")
    ap.add_argument("--speedscope", type=Path, help="speedscope's dist/release folder (default: no trace screenshots)")
    a = ap.parse_args(argv)
    a.out = a.out.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    many = a.out / "many_partitions_214.tflite"
    many.write_bytes(many_partitions_model(214))
    models = {"movenet": SHARED / "movenet_singlepose_lightning_int8.tflite", "many_partitions_214": many}
    for name, model in models.items():
        page = a.out / f"{name}.html"
        litecl("inspect", model, "--device", a.device, "--html", page)
        litecl("bench", model, "--device", a.device, "--num_runs", 20, "--profile_runs", 0,
               "--trace", a.out / f"{name}.trace.json")
        shot(page.as_uri(), a.out / f"{name}.png", "1280,800")
        height = max(int(h) for h in re.findall(r'<svg [^>]*height="(\d+)"', page.read_text())) + 260
        shot(page.as_uri(), a.out / f"{name}_whole.png", f"1280,{height}")
    copying_trace(models["movenet"], a.device, a.out / "movenet_copies.trace.json")
    many.unlink()
    if a.speedscope:
        views = [("movenet.trace.json", 1, 14, 19, "movenet_trace_host.json"),
                 ("many_partitions_214.trace.json", 1, 0, 9, "many_partitions_214_trace_host.json"),
                 ("movenet_copies.trace.json", 2, 0, 0, "movenet_copies_trace_queue.json")]
        for name, tid, first, last, view in views:
            window(a.out / name, tid, first, last, a.out / view)
        speedscope_shots(a.speedscope, [a.out / v[-1] for v in views], a.out)
        for v in views:
            (a.out / v[-1]).unlink()
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main))
