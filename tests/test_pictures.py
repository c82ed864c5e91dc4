"""Pictures (issue 42): ``inspect --html`` (the graph as litecl placed it, inline SVG) and
``bench --trace`` (Chrome trace-event JSON), checked against the model and the delegate:
node and partition counts, event nesting by Perfetto's importer rules, the sweep report's
links; on whichever fast device this machine has (conftest)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from conftest import any_fast_device, force_copies
from litecl.cli import main
from litecl.pictures import COL_W, ROW, TRACE_RUNS, trace_events
from models.builders import many_partitions_model, multi_op_model

SVG = "{http://www.w3.org/2000/svg}"
#: the stand-in for dp_net: 214 partitions, 545 nodes
MANY = 214


# -- the trace's rules ----------------------------------------------------------------------

def check_trace(doc: dict) -> dict:
    """Perfetto's JSON importer rules, as this trace uses them: every event has ph, ts, pid,
    tid and name; metadata events name a process or thread; complete events have dur >= 0
    and, per (pid, tid), each one lies inside the one it starts in or after it ends
    (times in integer ns, as Perfetto reads them). Returns (pid, tid) -> [events], each with
    "parent" (the event it nests in, or None). Raises AssertionError naming the fault."""
    tracks: dict = {}
    for e in doc["traceEvents"]:
        assert all(k in e for k in ("ph", "ts", "pid", "tid", "name")), e
        assert isinstance(e["name"], str) and type(e["pid"]) is int and type(e["tid"]) is int, e
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and isinstance(e["args"]["name"], str), e
            continue
        assert e["ph"] == "X" and isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, events in tracks.items():
        stack: list = []
        for e in sorted(events, key=lambda e: (int(e["ts"] * 1000), -int(e["dur"] * 1000))):
            start = int(e["ts"] * 1000)
            end = start + int(e["dur"] * 1000)
            while stack and stack[-1][0] <= start:
                stack.pop()
            assert not stack or end <= stack[-1][0], f"{e['name']} overlaps {stack[-1][1]['name']} on {key}"
            e["parent"] = stack[-1][1] if stack else None
            stack.append((end, e))
    named = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert set(tracks) <= named, "a thread without a name"
    return tracks


def test_the_checker_refuses_what_perfetto_would_not_nest():
    """The rules can fail: a child past its parent's end, a missing tid, a negative dur."""
    meta = [{"name": "thread_name", "ph": "M", "ts": 0, "pid": 1, "tid": 1, "args": {"name": "host"}}]
    ok = {"name": "a", "ph": "X", "ts": 1.0, "dur": 5.0, "pid": 1, "tid": 1}
    check_trace({"traceEvents": meta + [ok, dict(ok, name="b", ts=2.0, dur=4.0)]})
    for bad in (dict(ok, name="b", ts=2.0, dur=4.001), dict(ok, dur=-1.0), {k: v for k, v in ok.items() if k != "tid"}):
        with pytest.raises(AssertionError):
            check_trace({"traceEvents": meta + [ok, bad]})


def _record(ctx, number, t0, kernels, copies=0):
    """A profile_log dict: a partition invoke at host ns t0 with its commands, each 1 us."""
    cmds, t = [], t0 + 1000
    for k in range(copies):
        cmds.append(("write", "", 64, (), t, t + 100, t + 200, t + 1200))
        t += 1500
    for k in range(kernels):
        cmds.append(("kernel", f"ADD {k}", 0, (k,), t, t + 50, t + 100, t + 1100))
        t += 1500
    return {"ctx": ctx, "partition": number, "device": "dev", "host": (t0, t + 500),
            "spans": [("wait", t, t + 400)], "commands": cmds}


def test_trace_events_nest_without_a_device():
    """Synthetic invokes: partitions touching LiteRT's spans end to end, a device clock
    far from the host's; the events nest and count as recorded."""
    invokes = []
    for k in range(3):
        t0 = 10**9 + k * 10**6
        recs = [_record(7, 0, t0 + 2000, 2, copies=1), _record(7, 1, t0 + 2000 + 6500, 1),
                _record(9, 0, t0 + 20000, 1)]
        for r in recs:  # the device's clock: another origin
            r["commands"] = [c[:5] + tuple(v - 10**8 for v in c[5:]) for c in r["commands"]]
        invokes.append(((t0, t0 + 30000), recs))
    tracks = check_trace({"traceEvents": trace_events(invokes, {7: 0, 9: 1}, alone=[(2 * 10**9, 2 * 10**9 + 500)])})
    host, dev = tracks[(1, 1)], tracks[(1, 2)]
    assert [e["name"] for e in host if e["parent"] is None] == ["invoke 0", "invoke 1", "invoke 2"]
    top = [e["name"] for e in host if e["parent"] is not None and e["parent"]["name"] == "invoke 1"]
    assert top == ["LiteRT", "partition 0", "LiteRT", "partition 1", "LiteRT", "partition 0 (subgraph 1)", "LiteRT"]
    assert sum(e["name"] == "wait" for e in host) == 9
    assert [e["name"] for e in dev if e["parent"] is None].count("partition 0") == 3
    assert sum(e["name"].startswith("kernel:") for e in dev) == 12 and sum(e["name"] == "write 64 B" for e in dev) == 3
    assert len(tracks[(2, 1)]) == 1


# -- the graph ----------------------------------------------------------------------------

def test_graph_steps_follow_litert_partitioning_without_a_device():
    """LiteRT's partitioner runs a LiteRT node that waits for no partition before the
    first one (node 3 reads the input); keep_order keeps the model's order."""
    from types import SimpleNamespace as NS  # noqa: PLC0415

    from litecl.pictures import graph_steps  # noqa: PLC0415

    wiring = [("MUL", (0,), (1,)), ("ADD", (1,), (2,)), ("MUL", (2,), (3,)), ("MUL", (0,), (4,))]
    sg = NS(nodes=[NS(index=i, op=op, inputs=a, outputs=b) for i, (op, a, b) in enumerate(wiring)],
            tensors=[NS(type_name="FLOAT32")] * 5)
    rows = {1: {"partition": 0}}
    assert graph_steps(sg, rows, kept_order=False) == [0, 3, ("partition", 0, [1]), 2]
    assert graph_steps(sg, rows, kept_order=True) == [0, ("partition", 0, [1]), 2, 3]
    sg.tensors = sg.tensors[:3] + [NS(type_name="RESOURCE")] * 2  # nodes 2 and 3: LiteRT chains them itself
    assert graph_steps(sg, rows, kept_order=False) == [0, ("partition", 0, [1]), 2, 3]


def _inspect(capsys, model, *more) -> dict:
    assert main(["inspect", str(model), "--device", any_fast_device(), "--json", *map(str, more)]) == 0
    return json.loads(capsys.readouterr().out)


def _svgs(page: str) -> list:
    return [ET.fromstring(s) for s in re.findall(r"<svg .*?</svg>", page, re.S)]


def _check_page(page: str, rep: dict) -> list:
    """Each subgraph's SVG against inspect's JSON: every node once, CAST/ADD coloured by
    placement(), a box per partition with exactly its nodes. Returns the SVGs."""
    svgs = _svgs(page)
    assert len(svgs) == len(rep["graphs"])
    for svg, g in zip(svgs, rep["graphs"]):
        si = int(svg.get("data-subgraph"))
        assert si == g["subgraph"]
        nodes = svg.findall(f".//{SVG}g[@class='node']")
        assert sorted(int(n.get("data-index")) for n in nodes) == list(range(g["nodes"]))
        mine = {n["index"]: n for n in rep["nodes"] if n["subgraph"] == si}
        for n in nodes:
            row = mine.get(int(n.get("data-index")))
            want = "opencl" if row and row["placement"] == "opencl" else "kept" if row else ("litert", "delegate")
            assert n.get("data-kind") in want, (row, n.attrib)
            assert n.find(f"{SVG}title").text.startswith(f"node {n.get('data-index')}: ")
        boxes = svg.findall(f".//{SVG}g[@class='partition']")
        assert len(boxes) == g["partitions"] and sum(n.get("data-kind") == "opencl" for n in nodes) == g["claimed"]
        for b in boxes:
            inside = [int(n.get("data-index")) for n in b.findall(f"{SVG}g[@class='node']")]
            assert sorted(inside) == sorted(i for i, r in mine.items() if r["partition"] == int(b.get("data-partition")))
    return svgs


def _no_overlap(svg) -> None:
    """Rows never cover one another, and the picture fits a 1280-px window's width."""
    assert int(svg.get("width")) <= 1250
    rects = sorted((float(r.get("x")), float(r.get("y"))) for g in svg.iter(f"{SVG}g") if g.get("class") == "node"
                   for r in g.findall(f"{SVG}rect")[:1])
    for (x0, y0), (x1, y1) in zip(rects, rects[1:]):
        assert x1 != x0 or y1 - y0 >= ROW, (x0, y0, y1)
    assert all(x % 1 == 0 and x < int(svg.get("width")) - COL_W / 2 for x, _ in rects)


def test_inspect_html_of_movenet(capsys, tmp_path, shared_models):
    """MoveNet: 157 nodes, 24 on OpenCL in 20 partitions, the input's CAST marked with the
    bytes it reads and writes across its partition's boundary."""
    page = tmp_path / "movenet.html"
    rep = _inspect(capsys, shared_models / "movenet_singlepose_lightning_int8.tflite", "--html", page)
    text = page.read_text()
    (svg,) = _check_page(text, rep)
    assert {k: rep["graphs"][0][k] for k in ("subgraph", "nodes", "claimed", "partitions")} == {
        "subgraph": 0, "nodes": 157, "claimed": 24, "partitions": 20}
    _no_overlap(svg)
    first = svg.find(f".//{SVG}g[@data-index='0']")
    assert "\u2193108 KiB \u2191432 KiB" in "".join(first.itertext())  # uint8 [1,192,192,3] in, float32 out
    title = first.find(f"{SVG}title").text
    assert "kernel: CAST uint8->float32" in title and "in from LiteRT: serving_default_input:0 uint8[1, 192, 192, 3] " \
        "= 110,592 B" in title and "out to LiteRT: " in title
    assert "<script" not in text and "http" not in text.replace("http://www.w3.org/2000/svg", "")


def test_inspect_html_of_many_partitions(capsys, tmp_path):
    """The dp_net stand-in: 214 partitions in five columns, none split, every row apart."""
    model = tmp_path / "many.tflite"
    model.write_bytes(many_partitions_model(MANY))
    page = tmp_path / "many.html"
    rep = _inspect(capsys, model, "--html", page)
    (svg,) = _check_page(page.read_text(), rep)
    assert rep["graphs"][0]["partitions"] == MANY and rep["graphs"][0]["nodes"] == 545
    _no_overlap(svg)
    cols = {float(b.find(f"{SVG}rect").get("x")) for b in svg.iter(f"{SVG}g") if b.get("class") == "partition"}
    assert len(cols) == 5


def test_inspect_html_with_inputs_titles_the_shapes_run(capsys, tmp_path):
    """--inputs at other shapes: a CAST/ADD node's hover title heads with the shapes it ran
    at, as the text, the JSON and the title's own byte lines do (it headed with the
    declared ones: a fresh user)."""
    from models.builders import add_model  # noqa: PLC0415

    model, page, npz = tmp_path / "dyn.tflite", tmp_path / "dyn.html", tmp_path / "in.npz"
    model.write_bytes(add_model("float32", (2, 3), (2, 3), dynamic=True))
    np.savez(npz, input1=np.ones((5, 7), np.float32), input2=np.ones((5, 7), np.float32))
    rep = _inspect(capsys, model, "--html", page, "--inputs", npz)
    text = page.read_text()
    _check_page(text, rep)
    assert "node 0: ADD  float32[5, 7], float32[5, 7] -&gt; float32[5, 7]" in text, text
    assert "[2, 3]" not in text


def test_another_delegate_is_coloured(capsys, tmp_path):
    """--reference xnnpack: XNNPACK takes the MUL litecl leaves; it is drawn as another
    delegate's node, litecl's partitions stay boxed."""
    model = tmp_path / "m.tflite"
    model.write_bytes(multi_op_model("cast_mul_cast", (2, 3, 4)))
    page = tmp_path / "m.html"
    rep = _inspect(capsys, model, "--html", page, "--reference", "xnnpack")
    (svg,) = _check_page(page.read_text(), rep)
    kinds = {int(n.get("data-index")): n.get("data-kind") for n in svg.iter(f"{SVG}g") if n.get("class") == "node"}
    assert kinds == {0: "opencl", 1: "delegate", 2: "opencl", 3: "opencl"}


def test_inspect_html_of_a_while_loop(capsys, tmp_path):
    """A WHILE model: a picture per subgraph inspect shows (the loop's body too), each
    against its placement."""
    from conftest import tf_model  # noqa: PLC0415

    model = tmp_path / "w.tflite"
    model.write_bytes(tf_model("while_cast"))
    page = tmp_path / "w.html"
    rep = _inspect(capsys, model, "--html", page)
    svgs = _check_page(page.read_text(), rep)
    assert len(svgs) == len(rep["graphs"]) >= 2 and sum(g["claimed"] for g in rep["graphs"]) >= 1


@pytest.mark.parametrize("flag", ["--html", "--trace"])
def test_an_output_in_a_missing_folder_is_one_error_line(capsys, tmp_path, flag):
    model = tmp_path / "m.tflite"
    model.write_bytes(multi_op_model("cast_mul_cast"))
    cmd = "inspect" if flag == "--html" else "bench"
    assert main([cmd, str(model), flag, str(tmp_path / "no" / "x.out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot write") and "does not exist" in err[0], err


# -- the timeline -------------------------------------------------------------------------

def test_bench_trace_of_many_partitions(capsys, tmp_path):
    """The stand-in's trace: 3 invokes, each with its 214 partitions (each waited for, its
    kernels on the device's thread) between LiteRT's spans; LiteRT alone's 3 invokes."""
    model = tmp_path / "many.tflite"
    model.write_bytes(many_partitions_model(MANY))
    trace = tmp_path / "t.json"
    assert main(["bench", str(model), "--device", any_fast_device(), "--num_runs", "1", "--min_secs", "0",
                 "--warmup_min_secs", "0", "--profile_runs", "0", "--trace", str(trace)]) == 0
    assert f"trace events of {TRACE_RUNS} profiled invokes" in capsys.readouterr().out
    doc = json.loads(trace.read_text())
    tracks = check_trace(doc)
    host = tracks.pop((1, 1))
    invokes = [e for e in host if e["parent"] is None]
    assert [e["name"] for e in invokes] == [f"invoke {k}" for k in range(TRACE_RUNS)]
    for inv in invokes:
        kids = [e for e in host if e["parent"] is inv]
        parts = [e for e in kids if e["name"].startswith("partition ")]
        assert [e["name"] for e in parts] == [f"partition {p}" for p in range(MANY)]
        assert {e["name"] for e in kids} - {e["name"] for e in parts} == {"LiteRT"}
        assert all(any(w["parent"] is p and w["name"] == "wait" for w in host) for p in parts)
    (dev,) = [v for (pid, _), v in tracks.items() if pid == 1]
    spans = [e for e in dev if e["parent"] is None]
    assert len(spans) == MANY * TRACE_RUNS
    kernels = [e for e in dev if e["name"].startswith("kernel: ")]
    assert len(kernels) == MANY * TRACE_RUNS and all(e["parent"] is not None for e in kernels)
    assert len(tracks[(2, 1)]) == TRACE_RUNS and doc["otherData"]["legend"]


def test_trace_shows_copies_where_the_device_copies(tmp_path):
    """A device that copies (a CPU runtime made to copy, as a GPU does): each partition's
    writes and reads on the device's thread, of the tensors' bytes, inside its span; the
    host's staging memcpys inside the partition's host span."""
    import litecl  # noqa: PLC0415
    from litecl.pictures import trace_invokes  # noqa: PLC0415

    model = tmp_path / "m.tflite"
    model.write_bytes(multi_op_model("cast_mul_cast", (4, 8)))
    it = litecl.Interpreter(model_path=str(model), device=any_fast_device(), quiet=True)
    force_copies(it.delegate)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.arange(32, dtype=np.uint8).reshape(4, 8))
    names = {r["context"]: r["subgraph"] for r in it.delegate.subgraph_records()}
    tracks = check_trace({"traceEvents": trace_events(trace_invokes(it.delegate, it.invoke, runs=2), names)})
    got = [(e["parent"]["name"], "kernel" if e["name"].startswith("kernel: ") else e["name"])
           for e in tracks[(1, 2)] if e["parent"] is not None]
    # partition 0: CAST uint8 -> float32 (32 bytes in, 128 out); then LiteRT's MUL; partition
    # 1: ADD of a constant (uploaded once) and CAST float32 -> float16, fused (128 in, 64 out)
    want = [("partition 0", "write 32 B"), ("partition 0", "kernel"), ("partition 0", "read 128 B"),
            ("partition 1", "write 128 B"), ("partition 1", "kernel"), ("partition 1", "read 64 B")]
    assert got == want * 2
    inside = {e["name"] for e in tracks[(1, 1)] if e["parent"] is not None and e["parent"]["name"].startswith("part")}
    assert inside == {"wait", "stage in", "stage out"}  # tensors this small go through pinned memory


# -- the sweep report -----------------------------------------------------------------------

def test_sweep_links_each_models_inspect_page(tmp_path):
    """A sweep writes each check's inspect page into its folder; both reports link it."""
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "alt.tflite").write_bytes(multi_op_model("alternating"))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "sweep", str(zoo), "--device", any_fast_device(),
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ((sig, path),) = row["pages"]
    assert (out / path).is_file() and path.startswith("inspect/alt-")
    assert f'href="{path}"' in (out / "report.html").read_text() and f"[graph]({path})" in (out / "report.md").read_text()
    (svg,) = _svgs((out / path).read_text())
    assert len(svg.findall(f".//{SVG}g[@class='partition']")) == row["partitions"] == 3


# -- in a browser ---------------------------------------------------------------------------

def test_the_page_renders_in_headless_chromium(capsys, tmp_path, shared_models):
    """The MoveNet page as Chromium draws it: a 1280x800 screenshot that is not blank."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    page = tmp_path / "movenet.html"
    _inspect(capsys, shared_models / "movenet_singlepose_lightning_int8.tflite", "--html", page)
    png = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,800", f"--screenshot={png}",
                    page.as_uri()], capture_output=True, timeout=120, check=False)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 1280
    assert len(data) > 50_000  # a blank page compresses to a few KiB; MoveNet's rows to ~200 KiB
