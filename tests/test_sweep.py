"""``litecl sweep``: rows with reasons (crash, hang, corrupt file, unusable device), resume,
--jobs, the report; on whichever fast device this machine has (conftest)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SHARED_MODELS, any_fast_device
from litecl.sweep import FAULT_ENV, default_jobs, find_models, read_results
from models.builders import chain_model, multi_op_model

NO_DEVICE = "no-such-opencl-device"
INT64 = ["int32", "int64", ("add", 2), "float32"]


def sweep(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litecl.cli", "sweep", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


def rows_by(folder) -> dict:
    """(model name, device, kind) -> row, without the fields that tell when and how fast."""
    return {(r["name"], r["device"], r["kind"]): {k: v for k, v in r.items() if k not in ("seconds", "when")}
            for r in read_results(folder)}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("zoo")
    (d / "int64_chain.tflite").write_bytes(chain_model(INT64, (4, 5)))
    (d / "alternating.tflite").write_bytes(multi_op_model("alternating"))
    (d / "crash.tflite").write_bytes(multi_op_model("cast_mul_cast"))
    (d / "hang.tflite").write_bytes(multi_op_model("reshape_cast"))
    (d / "corrupt.tflite").write_bytes(multi_op_model("fanout_mixed")[:150])
    shared = SHARED_MODELS / "multi_signature_model.tflite"
    if shared.exists():
        (d / "sub").mkdir()
        (d / "sub" / shared.name).write_bytes(shared.read_bytes())
    return d


@pytest.fixture(scope="module")
def first(zoo, tmp_path_factory):
    """One sweep with a crash, a hang (test-only fault switch), a corrupt file and a device
    that does not exist; (devices, output folder, its process)."""
    dev = any_fast_device()
    devices = [dev, f"{dev}:profile=noint64", NO_DEVICE]
    out = tmp_path_factory.mktemp("out")
    r = sweep(zoo, *[x for d in devices for x in ("--device", d)], "--out", out, "--timeout", 4, "--jobs", 2,
              env={FAULT_ENV: "crash:crash.tflite,hang:hang.tflite"})
    return devices, out, r


def test_rows_carry_their_reasons(first, zoo):
    (dev, noint64, _), out, r = first
    assert r.returncode == 1, r.stderr  # errors among the rows: 1, not the end of the run
    rows = rows_by(out)
    models = len(list(zoo.rglob("*.tflite")))
    assert len(rows) == 3 * models
    for d in (dev, noint64):
        crash, hang = rows[("crash.tflite", d, "check")], rows[("hang.tflite", d, "check")]
        assert crash["status"] == "error" and "crashed (SIGSEGV)" in crash["reason"], crash
        assert hang["status"] == "error" and "hung: no result after 4 s" in hang["reason"], hang
        bad = rows[("corrupt.tflite", d, "check")]
        assert bad["status"] == "refused" and "verifier refused" in bad["reason"], bad
        ok = rows[("alternating.tflite", d, "check")]
        assert ok["status"] == "exact" and ok["opencl_nodes"] > 0 and ok["outputs"], ok
        assert {n["placement"] for n in ok["placement"]} == {"opencl"}
    assert all(r["status"] == "refused" and NO_DEVICE in r["reason"] for (_, d, _), r in rows.items() if d == NO_DEVICE)
    assert f"device {NO_DEVICE} could not be used, so its rows are refused: " in r.stdout, r.stdout
    # placement with reasons: int64 stays on LiteRT under noint64, and says why
    full, cut = rows[("int64_chain.tflite", dev, "check")], rows[("int64_chain.tflite", noint64, "check")]
    assert full["status"] == cut["status"] == "exact"
    assert cut["opencl_nodes"] < full["opencl_nodes"]
    assert any(n["placement"] == "litert" and "64-bit integers" in n["reason"] for n in cut["placement"]), cut
    if (SHARED_MODELS / "multi_signature_model.tflite").exists():  # every signature compared
        multi = rows[("sub/multi_signature_model.tflite", dev, "check")]
        assert multi["status"] == "exact" and len(multi["signatures"]) >= 2, multi
    assert "crash: exact" not in r.stderr and re.search(r"\[\d+/\d+\] ", r.stderr)  # plain progress lines


def test_second_run_does_nothing_and_a_changed_model_only_its_rows(first, zoo):
    devices, out, _ = first
    args = [zoo, *[x for d in devices for x in ("--device", d)], "--out", out, "--timeout", 4]
    env = {FAULT_ENV: "crash:crash.tflite,hang:hang.tflite"}
    before = rows_by(out)
    r = sweep(*args, env=env)
    assert " 0 run now" in r.stdout, r.stdout + r.stderr
    assert rows_by(out) == before
    (zoo / "alternating.tflite").write_bytes(multi_op_model("alternating", (3, 5)))  # changed
    r = sweep(*args, env=env)
    assert f" {len(devices)} run now" in r.stdout, r.stdout + r.stderr
    after = rows_by(out)
    assert after.keys() == before.keys()
    changed = {k for k in after if after[k]["id"] != before[k]["id"]}
    assert changed == {("alternating.tflite", d, "check") for d in devices}
    assert len(read_results(out)) == len(after)  # one row per model x device: the old ones went
    assert list(dict.fromkeys(r["device"] for r in read_results(out))) == devices  # --device order


def test_jobs_two_gives_the_rows_of_one(zoo, tmp_path):
    dev = any_fast_device()
    outs = []
    for n in (1, 2):
        out = tmp_path / f"j{n}"
        r = sweep(zoo, "--device", dev, "--device", f"{dev}:profile=noint64", "--out", out, "--jobs", n)
        assert r.returncode == 0 and f"with at most {n} job(s)" in r.stdout, r.stdout + r.stderr  # refused: still 0
        outs.append(rows_by(out))
    assert outs[0] == outs[1]


def test_a_device_that_cannot_be_used_fails_the_sweep(zoo, tmp_path):
    """Every row exact but a --device that matches nothing (a typo): its rows are refused and
    the sweep exits 1, naming it (it exited 0, so a CI sweep with a typo passed)."""
    dev = any_fast_device()
    r = sweep(zoo / "alternating.tflite", "--device", dev, "--device", NO_DEVICE, "--out", tmp_path)
    rows = rows_by(tmp_path)
    assert rows[("alternating.tflite", dev, "check")]["status"] == "exact", rows
    assert rows[("alternating.tflite", NO_DEVICE, "check")]["status"] == "refused", rows
    assert r.returncode == 1 and f"device {NO_DEVICE} could not be used" in r.stdout, r.stdout + r.stderr
    r = sweep(zoo / "alternating.tflite", "--device", dev, "--out", tmp_path)
    assert r.returncode == 0 and " 0 run now" in r.stdout, r.stdout + r.stderr


def test_columns_keep_their_order_when_fewer_devices_are_swept(first, zoo):
    devices, out, _ = first
    r = sweep(zoo / "alternating.tflite", "--device", devices[1], "--out", out)
    assert " 0 run now" in r.stdout, r.stdout + r.stderr
    assert list(dict.fromkeys(r["device"] for r in read_results(out))) == devices


def test_report_matrix_anchors_and_plots(first):
    _, out, _ = first
    r = sweep("--report", out)
    assert r.returncode == 0, r.stderr
    page = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    rows = read_results(out)
    cells = re.findall(r'<td class="(exact|differs|error|refused)" title="([^"]*)">(.*?)</td>', page)
    assert len(cells) == len(rows)
    ids = set(re.findall(r'id="([\w-]+)"', page))
    links = re.findall(r'href="#([\w-]+)"', page)
    assert links and set(links) <= ids
    assert all(t for _, t, _ in cells)  # every cell says why on hover
    error_cells = [(t, body) for s, t, body in cells if s == "error"]
    assert error_cells and all("href" in body for _, body in error_cells)
    assert any("crashed (SIGSEGV)" in t for t, _ in error_cells)
    assert "position:sticky" in page and "<thead>" in page
    assert page.count("<svg") >= 1 and "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert "| model |" in md and "](#why-" in md and '<a id="kept-1"></a>' in md


def test_bench_rows(zoo, tmp_path):
    dev = any_fast_device()
    r = sweep(zoo / "alternating.tflite", "--device", dev, "--out", tmp_path, "--bench", "--num-runs", 5)
    assert r.returncode == 0, r.stdout + r.stderr
    (b,) = [x for x in read_results(tmp_path) if x["kind"] == "bench"]
    assert b["status"] == "ok" and b["ratio_median"] > 0 and b["floor_us"] > 0 and b["partitions"] >= 1
    assert b["floors_per_partition"] is not None
    assert "<circle" in (tmp_path / "report.html").read_text()
    r = sweep(zoo / "alternating.tflite", "--device", dev, "--out", tmp_path, "--bench", "--num-runs", 5)
    assert " 0 run now" in r.stdout


def test_bad_input_is_one_error_line(tmp_path, zoo):
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, env, want in (
            ([zoo, "--out", tmp_path], {}, "needs MODELS, at least one --device"),
            ([tmp_path / "missing.tflite", "--device", "x", "--out", tmp_path], {}, "not found"),
            ([empty, "--device", "x", "--out", tmp_path], {}, "no model found"),
            ([zoo / "alternating.tflite", empty, "--device", "x", "--out", tmp_path], {}, f"no model found in {empty}"),
            ([zoo, "--device", "x", "--out", tmp_path], {FAULT_ENV: "explode:a"}, "test-only"),
            (["--report", empty], {}, "no results"),
            (["--report", empty, zoo], {}, "give no MODELS"),
            ([zoo, "--device", "x", "--out", tmp_path, "--timeout", 0], {}, "--timeout"),
            ([zoo, "--device", " ", "--out", tmp_path], {}, "--device is empty")):  # was a column of refused rows
        r = sweep(*args, env=env)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), (args, r.stderr)
        assert want in r.stderr, (want, r.stderr)


def test_find_models_files_folders_lists(tmp_path):
    (tmp_path / "f").mkdir()
    a = tmp_path / "f" / "a.tflite"
    a.write_bytes(b"x")
    b = tmp_path / "b.bin"
    b.write_bytes(b"\0\0\0\0TFL3rest")  # a flatbuffer by its identifier
    lst = tmp_path / "models.txt"
    lst.write_text("# zoo\nf\n\nb.bin\n")
    assert [n for _, n in find_models([str(lst)])] == ["a.tflite", "b.bin"]
    lst.write_bytes("\ufeff".encode() + f"{a}\r\nb.bin\n".encode())  # an editor's BOM, CRLF: the first path kept whole
    assert [n for _, n in find_models([str(lst)])] == ["a.tflite", "b.bin"]
    assert [n for _, n in find_models([str(tmp_path / "f"), str(b)])] == ["a.tflite", "b.bin"]
    (tmp_path / "junk").write_bytes(b"\xff\xfe\0")
    with pytest.raises(ValueError, match="neither a model"):
        find_models([str(tmp_path / "junk")])


def test_default_jobs():
    cpu = {"error": "", "gpu": False, "compute_units": 2, "platform": "P", "name": "c"}
    gpu = {"error": "", "gpu": True, "compute_units": 132, "platform": "N", "name": "g"}
    cores = len(os.sched_getaffinity(0))
    assert default_jobs({"a": cpu}) == max(cores // 2, 1)
    assert default_jobs({"a": gpu, "b": dict(gpu)}) == 1  # one job per GPU, the same GPU twice
    assert default_jobs({"a": cpu, "b": gpu}) == max(cores // 2, 1) + 1
    assert default_jobs({"a": {"error": "no device"}}) == 1
    assert json.dumps(default_jobs({})) == "1"


def test_report_from_results_alone(tmp_path):
    """No device: hand-written rows of every status (a difference included) and a bench row."""
    def row(name, device, status, reason="", kind="check", **extra):
        key = {"device": device, "kind": kind, "reference": "builtin", "placement": "all", "litecl": "0",
               "source": "s", "litert": "2.3.0"}
        return {"id": f"{name}{device}{kind}", "key": key, "path": str(tmp_path / "z" / name), "name": name, "device": device,
                "kind": kind, "status": status, "reason": reason, "seconds": 0.5, **extra}
    nodes = {"nodes": 9, "opencl_nodes": 1, "partitions": 1, "cast_add_nodes": 2,
             "placement": [{"op": "ADD", "placement": "opencl", "reason": ""},
                           {"op": "CAST", "placement": "litert", "reason": "int64 needs 64-bit integers"}]}
    rows = [row("a.tflite", "d1", "exact", **nodes), row("a.tflite", "d2", "differs", "output 'y' differs", **nodes),
            row("b.tflite", "d1", "error", "crashed (SIGSEGV)"), row("b.tflite", "d2", "refused", "verifier <x>"),
            row("0.tflite", "d1", "exact", **nodes),
            row("a.tflite", "d1", "ok", kind="bench", ratio_median=1.5, floors_per_partition=0.25,
                litecl_median_us=15.0, litert_median_us=10.0, partitions=2, floor_us=10.0)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "{cut sho")
    (tmp_path / "z").mkdir()
    for name in ("a.tflite", "b.tflite"):  # 0.tflite's file is gone: its rows are marked
        (tmp_path / "z" / name).write_bytes(b"")
    r = sweep("--report", tmp_path)
    assert r.returncode == 0, r.stderr
    page, md = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    cells = dict(re.findall(r'<td class="(\w+)" title="[^"]*">(.*?)</td>', page))
    assert set(cells) == {"exact", "differs", "error", "refused"}
    assert 'href="#kept-1"' in cells["exact"] and "href=\"#why-" in cells["differs"]
    assert "verifier &lt;x&gt;" in page and "<x>" not in page  # escaped
    assert page.index(">b.tflite<") < page.index(">0.tflite<")  # rows with an error or a difference first
    assert page.count("<svg") == 3 and "1.5" in page and "litecl median us" in md
    assert "| b.tflite | [error](#why-" in md and "1.50 | 2 | 10.0 | 0.25 |" in md
    # a model whose file is gone (its rows kept in results.jsonl): marked in both (a fresh user)
    assert md.startswith("# litecl sweep: 3 models x 2 devices (1 of them no longer on disk, marked gone)\n"), md
    assert "| 0.tflite (gone) | [exact]" in md and "| a.tflite | " in md and ">0.tflite (gone)<" in page
    assert "(1 of them no longer on disk, marked gone)</h1>" in page


def test_a_model_litert_cannot_run_at_its_declared_shapes_is_refused_with_what_to_do(tmp_path):
    """An ADD of x [2] and y [3] (signature dims -1): LiteRT cannot prepare it at its
    declared shapes. The row is refused, and its reason names what runs it at others
    (compare's hint named --inputs, which sweep has not); the progress line cuts the
    reason at a word, marked."""
    from models.builders import unpreparable_add_model  # noqa: PLC0415

    m = tmp_path / "add.tflite"
    m.write_bytes(unpreparable_add_model())
    r = sweep(m, "--device", any_fast_device(), "--out", tmp_path / "o")
    (row,) = read_results(tmp_path / "o")
    assert row["status"] == "refused" and "a sweep runs no others: litecl compare MODEL --inputs FILE.npz" \
        in row["reason"] and "give inputs it runs with" not in row["reason"], row
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("[1/1] ")]
    assert re.search(r"\(LiteRT without the delegate cannot run the model: .*\w \.\.\.\) \d+\.\d s$", line), line


def test_a_hung_row_runs_again_under_a_longer_timeout(tmp_path):
    """A row killed at --timeout is kept by a sweep with the same limit, and run again by
    one with a longer limit (a fresh user's: "0 run now, 1 unchanged" after raising
    --timeout; only --force, which reruns every row, cleared it)."""
    dev = any_fast_device()
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "hang.tflite").write_bytes(multi_op_model("reshape_cast"))
    env = {FAULT_ENV: "hang:hang.tflite"}
    out = tmp_path / "out"
    for limit, ran, said in ((1, 1, "after 1 s"), (1, 0, "after 1 s"), (2, 1, "after 2 s")):
        r = sweep(zoo, "--device", dev, "--out", out, "--timeout", limit, env=env)
        assert f" {ran} run now" in r.stdout, r.stdout + r.stderr
        (row,) = read_results(out)
        assert row["status"] == "error" and said in row["reason"], row


def test_models_of_one_name_from_two_folders_are_told_apart(tmp_path):
    """za/model.tflite and zb/model.tflite given as two MODELS: each row, progress line and
    report row names its folder too (both read "model.tflite")."""
    dev = any_fast_device()
    for sub, op in (("za", "alternating"), ("zb", "reshape_cast")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "model.tflite").write_bytes(multi_op_model(op))
    out = tmp_path / "out"
    r = sweep(tmp_path / "za", tmp_path / "zb", "--device", dev, "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(r["name"] for r in read_results(out)) == ["za/model.tflite", "zb/model.tflite"]
    assert "za/model.tflite" in r.stderr and "zb/model.tflite" in (out / "report.md").read_text()


def test_bad_variables_and_report_paths_are_one_error_and_killed_jobs_run_again(tmp_path):
    """A LITECL_* variable every job reads that is bad: one error line before any job (it
    made an error row per model x device that later sweeps kept); --report naming a file:
    one error line (internal NotADirectoryError); a row of a job killed from outside
    (retry: an interrupt, the OOM killer) runs again at the next sweep."""
    dev = any_fast_device()
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "m.tflite").write_bytes(multi_op_model("alternating"))
    out = tmp_path / "out"
    r = sweep(zoo, "--device", dev, "--out", out, env={"LITECL_CACHE_MAX_BYTES": "abc"})
    assert r.returncode == 2 and r.stderr.strip().startswith("error: LITECL_CACHE_MAX_BYTES"), r.stderr
    assert not (out / "results.jsonl").exists()
    r = sweep("--report", zoo / "m.tflite")
    assert r.returncode == 2 and "not a folder" in r.stderr, r.stderr
    assert sweep(zoo, "--device", dev, "--out", out).returncode == 0
    (row,) = read_results(out)
    row.update(status="error", reason="killed (SIGKILL) from outside the job", retry=True)
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    r = sweep(zoo, "--device", dev, "--out", out)
    assert " 1 run now" in r.stdout and read_results(out)[0]["status"] == "exact", r.stdout + r.stderr


def test_a_hand_edited_row_is_left_out_with_a_warning(tmp_path):
    """A results.jsonl row edited by hand into something sweep does not write (seconds
    "abc", a field gone): a warning line naming it, the row left out and its job run again
    (each was an internal error of every later sweep and of --report)."""
    dev = any_fast_device()
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "m.tflite").write_bytes(multi_op_model("alternating"))
    out = tmp_path / "out"
    assert sweep(zoo, "--device", dev, "--out", out).returncode == 0
    (row,) = read_results(out)
    for edit in ({"seconds": "abc"}, {"name": None}, {"status": "foo"}):
        (out / "results.jsonl").write_text(json.dumps({**row, **edit}) + "\n")
        r = sweep(zoo, "--device", dev, "--out", out)
        assert r.returncode == 0 and " 1 run now" in r.stdout, (edit, r.stdout, r.stderr)
        assert "are not rows as litecl sweep writes them; left out" in r.stderr, (edit, r.stderr)
    (out / "results.jsonl").write_text(json.dumps(row) + "\n" + json.dumps({**row, "seconds": "abc"}) + "\n")
    r = sweep("--report", out)
    assert r.returncode == 0 and "left out" in r.stderr, r.stderr


def test_report_md_cells_are_plain_text():
    """A model file named like HTML is text in report.md (a Markdown viewer rendered a
    fresh user's <img onerror=...>.tflite); the cell separator is escaped."""
    from litecl.report import _md

    assert _md("<img src=x onerror=alert(1)>|a.tflite") == "&lt;img src=x onerror=alert(1)&gt;\\|a.tflite"


def test_a_link_to_nothing_in_a_swept_folder_is_named(tmp_path, capsys):
    """A *.tflite link to nothing in a folder: one warning line naming it (it was skipped
    without a word; given directly it is an error)."""
    (tmp_path / "a.tflite").write_bytes(multi_op_model("alternating"))
    (tmp_path / "gone.tflite").symlink_to(tmp_path / "missing.tflite")
    assert [n for _, n in find_models([str(tmp_path)])] == ["a.tflite"]
    assert "gone.tflite: no model file there" in capsys.readouterr().err


def test_a_file_that_now_holds_another_s_content_leaves_no_stale_row(tmp_path):
    """b.tflite refused as junk, then overwritten with a.tflite's bytes: the next sweep
    skips it as a's content and drops its old row (the report kept "refused: 5 bytes is
    too short" beside a console saying refused 0, a fresh user's)."""
    dev = any_fast_device()
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "a.tflite").write_bytes(multi_op_model("alternating"))
    (zoo / "b.tflite").write_bytes(b"junk!")
    out = tmp_path / "out"
    sweep(zoo, "--device", dev, "--out", out)
    assert {r["name"] for r in read_results(out)} == {"a.tflite", "b.tflite"}
    (zoo / "b.tflite").write_bytes((zoo / "a.tflite").read_bytes())
    r = sweep(zoo, "--device", dev, "--out", out)
    assert r.returncode == 0 and "1 file(s) skipped, the same content as another" in r.stdout, r.stdout
    assert [r["name"] for r in read_results(out)] == ["a.tflite"]
    assert "b.tflite" not in (out / "report.md").read_text()


def test_a_file_reached_twice_is_swept_once_and_kept(tmp_path):
    """A folder and a list naming a file in it, or one path given twice, reach one file:
    it is swept once, its row kept in results.jsonl and the report, and the next sweep
    runs nothing (a fresh user's: its row was dropped as its own duplicate, every rerun ran
    it again, and "a.tflite a.tflite" ended in "error: no results", exit 2)."""
    dev = any_fast_device()
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "a.tflite").write_bytes(multi_op_model("alternating"))
    listed = tmp_path / "list.txt"
    listed.write_text(f"{zoo / 'a.tflite'}\n")
    for k, items in enumerate(([zoo, listed], [zoo / "a.tflite", zoo / "a.tflite"])):
        out = tmp_path / f"out{k}"
        for again in (False, True):
            r = sweep(*items, "--device", dev, "--out", out)
            assert r.returncode == 0 and "skipped" not in r.stdout, (r.stdout, r.stderr)
            assert [x["name"] for x in read_results(out)] == ["a.tflite"]
            assert "a.tflite" in (out / "report.md").read_text()
            assert ("0 run now, 1 unchanged" in r.stdout) == again, r.stdout


def test_a_last_line_cut_short_does_not_swallow_the_next_row(tmp_path):
    """results.jsonl ending mid-row (a kill -9 or a full disk mid-write): the next sweep's
    first row went onto that fragment and was lost, while the console said "exact 1" (a
    fresh user's report). The row now starts a line of its own, and every row of the run
    is in the file and the report."""
    dev = any_fast_device()
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "a.tflite").write_bytes(multi_op_model("alternating"))
    out = tmp_path / "out"
    assert sweep(zoo / "a.tflite", "--device", dev, "--out", out).returncode == 0
    with open(out / "results.jsonl", "a", encoding="utf-8") as f:
        f.write('{"id": "abc", "key": {"model_sha')  # a row cut short
    (zoo / "b.tflite").write_bytes(chain_model(INT64, (4, 5)))
    r = sweep(zoo / "b.tflite", "--device", dev, "--out", out)
    assert r.returncode == 0 and "exact 1" in r.stdout, r.stdout + r.stderr
    assert sorted(x["name"] for x in read_results(out)) == ["a.tflite", "b.tflite"]
    assert "b.tflite" in (out / "report.md").read_text()


def test_a_full_disk_is_one_error_line_naming_the_file(tmp_path, monkeypatch, capsys):
    """A row's write that fails for want of space (ENOSPC, a fresh user's 64 KiB tmpfs) is
    `error: DIR/results.jsonl: No space left on device`, exit 2, not "internal error"; any
    other write without a file name, `error: writing a file: No space left on device`."""
    import errno  # noqa: PLC0415

    from litecl import cli  # noqa: PLC0415
    from litecl import sweep as S  # noqa: PLC0415

    import builtins  # noqa: PLC0415

    def opener(path, *a, **k):  # results.jsonl on a full disk, every other file as it is
        return Full() if str(path).endswith("results.jsonl") and a[:1] == ("a+b",) else builtins.open(path, *a, **k)

    class Full:

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def seek(self, *a):
            return 0

        def tell(self):
            return 0

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "a.tflite").write_bytes(multi_op_model("alternating"))
    monkeypatch.setattr(S, "open", opener, raising=False)  # _add's file
    rc = cli.main(["sweep", str(zoo), "--device", NO_DEVICE, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    want = f"{tmp_path / 'o' / 'results.jsonl'}: No space left on device"
    assert rc == 2 and err[-1].startswith("error: ") and want.endswith(err[-1][len("error: ") + 3:]), err
    monkeypatch.undo()

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(S._Sweep, "run", full)
    rc = cli.main(["sweep", str(zoo), "--device", NO_DEVICE, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1] == "error: writing a file: No space left on device", err


def test_an_oversized_file_is_refused_without_reading_it(tmp_path):
    """A file over the 2 GiB model bound (a sparse 20 GB one) is refused at once: the sweep
    hashed all of it first (17-50 s, a fresh user's report)."""
    import time  # noqa: PLC0415

    zoo = tmp_path / "zoo"
    zoo.mkdir()
    with open(zoo / "huge.tflite", "wb") as f:
        f.write(b"\0\0\0\0TFL3")
        f.truncate(100 << 30)  # sparse: no disk space; hashing it takes >= 40 s at any SHA-256 speed
    t = time.monotonic()
    r = sweep(zoo, "--device", any_fast_device(), "--out", tmp_path / "o")
    took = time.monotonic() - t
    (row,) = read_results(tmp_path / "o")
    assert row["status"] == "refused" and "at most 2147483647 supported" in row["reason"], row
    assert took < 15, took  # the sweep alone: 1-6 s
