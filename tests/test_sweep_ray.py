"""``litecl sweep --ray``: on a local Ray cluster started here (a head and a second node,
each offering other devices as Ray resources) the rows are the local sweep's, each job on a
node that offers its device; a device no node offers is a refused row; a node killed
mid-run costs only its tasks. Needs Ray: pip install 'litecl[cluster]'."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DEVICE_STATUS, ROOT, any_fast_device
from litecl import __version__
from litecl.sweep import FAULT_ENV, read_results
from litecl.sweep_ray import INSTALL, resource_of
from models.builders import chain_model, multi_op_model

RAY = Path(sys.executable).parent / "ray"
PORT = 6391  # the GCS port of the cluster started here (not Ray's default 6379)
NODE3_PORT, NODE4_PORT = 6392, 6393  # node manager ports of the nodes the tests kill
#: the dead node is noticed in ~3 s, not the default ~15 (Ray's health check of nodes)
HEAD_ENV = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
RUNTIME = ("seconds", "when", "ray_node", "host", "attempts")  # what differs between two sweeps of one job
FAULTS = {FAULT_ENV: "crash:crash.tflite,hang:hang.tflite"}


def litecl(*args, env=None, timeout=240, **kw):
    return subprocess.run([sys.executable, "-m", "litecl.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})}, **kw)


def ray_cli(*args, env=None):
    r = subprocess.run(["nice", "-n", "10", str(RAY), *map(str, args)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def start_node(resources: dict, *extra, env=None):
    ray_cli("start", *extra, "--num-cpus", 1, "--object-store-memory", 200_000_000, "--disable-usage-stats",
            "--resources", json.dumps(resources), env=env)


def rows_by(folder, drop=RUNTIME) -> dict:
    return {(r["name"], r["device"]): {k: v for k, v in r.items() if k not in drop} for r in read_results(folder)}


def nodes() -> dict:
    """Alive node id -> its litecl resources, as Ray's state tells."""
    code = ("import json, ray; ray.init(address='127.0.0.1:%d', logging_level='ERROR', log_to_driver=False); "
            "print(json.dumps({n['NodeID']: sorted(k for k in n['Resources'] if k.startswith('litecl_device:')) "
            "for n in ray.nodes() if n['Alive']}))" % PORT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])


def two_specs() -> tuple[str, str]:
    """Two specs of fast devices: PoCL and Intel where both build kernels, else two names of one."""
    a = any_fast_device()
    usable = [s for s in ("pocl", "intel") if not DEVICE_STATUS.get(s) and s != a]
    if usable:
        return a, usable[0]
    from litecl.device import open_device, specs_of  # noqa: PLC0415

    return a, next(s for s in specs_of(open_device(a).device) if s != a)


@pytest.fixture(scope="module")
def cluster():
    """(device spec of the head, of the second node): each node offers only its own."""
    pytest.importorskip("ray", reason=f"Ray is not installed: {INSTALL}")
    a, b = two_specs()
    try:
        start_node({resource_of(a): 1}, "--head", "--port", PORT, "--include-dashboard=false", env=HEAD_ENV)
        start_node({resource_of(b): 1}, "--address", f"127.0.0.1:{PORT}")
        yield a, b
    finally:
        subprocess.run([str(RAY), "stop", "--force"], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("zoo")
    (d / "int64_chain.tflite").write_bytes(chain_model(["int32", "int64", ("add", 2), "float32"], (4, 5)))
    (d / "alternating.tflite").write_bytes(multi_op_model("alternating"))
    (d / "crash.tflite").write_bytes(multi_op_model("cast_mul_cast"))
    (d / "hang.tflite").write_bytes(multi_op_model("reshape_cast"))
    (d / "corrupt.tflite").write_bytes(multi_op_model("fanout_mixed")[:150])
    return d


def test_rows_of_the_local_sweep_each_on_a_node_with_its_device(cluster, zoo, tmp_path):
    a, b = cluster
    missing = "oclgrind"  # this machine has it, but no node offers it: the resources decide
    devices = [a, b, f"{b}:profile=noint64"]
    flags = [x for d in devices for x in ("--device", d)] + ["--timeout", 5]
    ray = ["--ray", f"127.0.0.1:{PORT}"]
    t = time.monotonic()
    r = litecl("sweep", zoo, *flags, "--device", missing, "--out", tmp_path / "ray", *ray, env=FAULTS)
    took = time.monotonic() - t
    assert r.returncode == 1 and "on the Ray cluster at 127.0.0.1:%d (2 node(s))" % PORT in r.stdout, r.stdout + r.stderr
    local = litecl("sweep", zoo, *flags, "--out", tmp_path / "local", env=FAULTS)
    assert local.returncode == 1, local.stdout + local.stderr
    got, want = rows_by(tmp_path / "ray"), rows_by(tmp_path / "local")
    assert len(got) == 5 * 4 and len(want) == 5 * 3
    for k, row in got.items():
        if k[1] == missing:
            assert row["status"] == "refused" and "no node of the Ray cluster offers it" in row["reason"], row
            assert row["key"]["driver"] is None  # a later sweep where a node offers it runs it
        else:
            assert row == want[k], (k, row, want[k])
    statuses = {(n, d): row["status"] for (n, d), row in got.items() if d == b}
    assert statuses == {("alternating.tflite", b): "exact", ("int64_chain.tflite", b): "exact",
                        ("crash.tflite", b): "error", ("hang.tflite", b): "error", ("corrupt.tflite", b): "refused"}
    # placed by resource: each job ran on the node offering its spec, the head's and the other's apart
    where = nodes()
    ran = {a: set(), b: set()}
    for row in read_results(tmp_path / "ray"):
        if row["device"] != missing:
            assert resource_of(row["device"]) in where[row["ray_node"]] and row["attempts"] == 1, row
            ran[row["device"].split(":")[0]].add(row["ray_node"])
    assert len(ran[a]) == len(ran[b]) == 1 and ran[a] != ran[b]
    # each resumes the other: nothing to run
    for out, on in ((tmp_path / "ray", []), (tmp_path / "local", ray)):
        again = litecl("sweep", zoo, *flags, "--out", out, *on, env=FAULTS)
        assert " 0 run now" in again.stdout, again.stdout + again.stderr
    print(f"ray sweep of {len(got)} jobs: {took:.1f} s")


def raylet_of(port: int) -> int:
    """The pid of the raylet started with node manager port ``port``."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                args = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if args[0].endswith(b"/raylet") and f"--node_manager_port={port}".encode() in args:
                return int(p.name)
    raise AssertionError(f"no raylet with node manager port {port}")


def descendants(pid: int) -> set:
    parent = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                parent[int(p.name)] = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = set(), [pid]
    while todo:
        kids = [c for c, pp in parent.items() if pp == todo[-1]]
        todo.pop()
        out.update(kids)
        todo += kids
    return out


def sweep_and_kill(resources: dict, port: int, zoo: Path, devices: list, out: Path) -> tuple[dict, str]:
    """Start a node offering ``resources``, sweep, kill the node (its raylet, SIGKILL) while a
    job of it has run for 1 s; (rows by (name, device), the sweep's stderr)."""
    start_node(resources, "--address", f"127.0.0.1:{PORT}", "--node-manager-port", port)
    raylet = raylet_of(port)
    argv = ["sweep", zoo, *[x for d in devices for x in ("--device", d)], "--out", out, "--timeout", 6,
            "--ray", f"127.0.0.1:{PORT}"]
    proc = subprocess.Popen([sys.executable, "-m", "litecl.cli", *map(str, argv)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **KILL_FAULTS})
    seen, deadline = {}, time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        jobs = {j for w in descendants(raylet) for j in descendants(w)}  # forked by the node's workers
        now = time.monotonic()
        seen = {j: seen.get(j, now) for j in jobs}
        if any(now - t0 > 1.0 for t0 in seen.values()):  # a hang job: it runs at the kill
            os.kill(raylet, 9)
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"no job ran on the node for 1 s: {proc.communicate()}")
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 1, stdout + stderr
    assert len(read_results(out)) == len(devices) * 4, stdout + stderr
    return rows_by(out, drop=()), stderr


KILL_FAULTS = {FAULT_ENV: "hang:hang.tflite,hang:hang2.tflite"}
KILL_WANT = {"alternating.tflite": "exact", "int64_chain.tflite": "exact", "hang.tflite": "error",
             "hang2.tflite": "error"}


@pytest.fixture()
def kill_zoo(zoo, tmp_path) -> Path:
    """Two models that hang (one runs on the node to kill, whichever way Ray places them) and two quick ones."""
    d = tmp_path / "kill_zoo"
    d.mkdir()
    for name in ("alternating", "int64_chain", "hang"):
        (d / f"{name}.tflite").write_bytes((zoo / f"{name}.tflite").read_bytes())
    (d / "hang2.tflite").write_bytes(multi_op_model("cast_mul_cast"))
    return d


def test_a_killed_nodes_tasks_are_redone_on_another(cluster, kill_zoo, tmp_path):
    """A third node offers the second node's device; each takes one job at a time, so the
    third runs one that hangs (6 s), and is killed under it: that job is done again on the
    second node, every row is the one it should be."""
    _, b = cluster
    rows, stderr = sweep_and_kill({resource_of(b): 1}, NODE3_PORT, kill_zoo, [b], tmp_path)
    alive = nodes()
    assert len(alive) == 2, alive
    for (name, _), row in rows.items():
        assert row["status"] == KILL_WANT[name] and row["ray_node"], row  # those done before the kill included
    redone = [r for r in rows.values() if r["attempts"] == 2]
    assert len(redone) == 1 and "hung: no result after 6 s" in redone[0]["reason"], rows
    assert redone[0]["ray_node"] in alive, (redone, alive)  # on the second node
    assert f"{b} {redone[0]['name']}: lost (NodeDiedError" in stderr and "submitted again" in stderr, stderr
    print("redone:", [(r["name"], r["device"], r["status"], r["attempts"]) for r in redone])


def test_a_device_that_left_with_its_node_is_a_row_not_a_wait(cluster, kill_zoo, tmp_path):
    """A fourth node offers a device (another name of the second node's) no other node does;
    killed under a job, its lost and waiting jobs end as rows saying so."""
    _, b = cluster
    from litecl.device import open_device, specs_of  # noqa: PLC0415

    c = next(s for s in specs_of(open_device(b).device) if resource_of(s) != resource_of(b))
    t = time.monotonic()
    rows, _ = sweep_and_kill({resource_of(c): 1}, NODE4_PORT, kill_zoo, [c], tmp_path)
    left = [r for r in rows.values() if r["status"] == "error" and (
        "no node of the Ray cluster has it any more" in r["reason"] or "lost its Ray node" in r["reason"])]
    assert left and all(r["status"] == KILL_WANT[n] for (n, _), r in rows.items() if r not in left), rows
    assert time.monotonic() - t < 90
    print("left:", [(r["name"], r["attempts"], r["reason"][:60]) for r in left])


def test_without_ray_or_a_cluster_one_error_line(tmp_path, zoo):
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no ray here')\n")
    cases = [([zoo, "--device", "pocl", "--out", tmp_path, "--ray"], {"PYTHONPATH": fake.parent}, INSTALL),
             (["--ray", zoo, "--device", "pocl", "--out", tmp_path], {}, "put --ray after the models")]
    with contextlib.suppress(ImportError):
        import ray  # noqa: F401, PLC0415

        cases.append(([zoo, "--device", "pocl", "--out", tmp_path, "--ray=127.0.0.1:1"], {}, "cannot connect"))
    for args, env, want in cases:
        r = litecl("sweep", *args, env=env)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), (args, r.stderr)
        assert want in r.stderr, (want, r.stderr)
    assert not (tmp_path / "results.jsonl").exists()


def test_ray_resources_name_this_machines_devices():
    r = litecl("devices", "--ray-resources")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    dev = any_fast_device()
    assert resource_of(dev) in res and all(k.startswith("litecl_device:") and v >= 1 for k, v in res.items())
    assert resource_of(" Intel:profile=mobile+noint64") == "litecl_device:intel"


def test_ray_resources_leave_out_a_device_that_cannot_build_kernels(monkeypatch):
    """A device whose compiler fails litecl's probe (pip's PoCL 3.0 on AMD Zen 4/5) is
    offered to no job (it was: "litecl_device:pthread-amd epyc")."""
    import litecl.device as dv
    from litecl.sweep_ray import node_resources

    real = dv.probe_compiler
    monkeypatch.setattr(dv, "probe_compiler", lambda d: "broken" if "Oclgrind" in d.platform.name else real(d))
    res = node_resources()
    assert res and not any("oclgrind" in k for k in res), res


def test_a_node_unlike_the_key_gives_an_error_row_saying_how(tmp_path):
    """No device: the worker's cached probe of a spec stands in for the node's."""
    from litecl import sweep, sweep_ray  # noqa: PLC0415

    probe = {"error": "", "profile": None, "platform": "P", "name": "D", "driver": "2.0"}
    key = {"profile": None, "platform": "P", "device_name": "D", "driver": "1.0", "litert": sweep._litert_version(),
           "litecl": __version__, "source": sweep._source_hash()}
    sweep_ray._PROBES["fake-spec"] = probe
    try:
        why = sweep_ray._differs({"device": "fake-spec", "key": key}, tmp_path)
        assert "differs from where fake-spec was probed: driver '2.0' (the key's: '1.0')" in why, why
        assert sweep_ray._differs({"device": "fake-spec", "key": {**key, "driver": "2.0"}}, tmp_path) == ""
    finally:
        del sweep_ray._PROBES["fake-spec"]
