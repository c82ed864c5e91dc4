"""``litecl sweep --ray [ADDRESS]``: the sweep's model x device jobs as Ray tasks, each on a
node that offers the job's device (README: "On a Ray cluster").

A node offers its OpenCL devices as Ray resources (node_resources, ``litecl devices
--ray-resources``): ``litecl_device:SPEC`` for each spec that selects one there, as many units
as jobs the device takes at once. A task asks for one unit of its spec's (resource_of) and one
CPU. On the node it runs its job as the local sweep does (sweep._pool: forked, time limit) on
a copy of the model from the object store, once the node's device, driver, LiteRT and litecl
match the row's key. Rows are the local sweep's, plus ``ray_node``, ``host``, ``attempts``. A
spec no node offers is a refused row before anything is submitted; a task lost with its node or
worker is submitted again (MAX_ATTEMPTS in all); one whose device left with its node is an
error row, not a wait.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

from . import sweep
from .errors import LiteclError

__all__ = ["node_resources", "resource_of", "ray_sweep", "RESOURCE", "INSTALL"]

RESOURCE = "litecl_device:"
INSTALL = "pip install 'litecl[cluster]'"
#: a task lost with its node or worker is submitted at most this many times in all
MAX_ATTEMPTS = 3
#: how often (s) the sweep looks for devices that left the cluster while it waits
CHECK_S = 2.0
_ADDRESS = re.compile(r"auto|ray://\S+|\S+:\d+")


def resource_of(spec: str) -> str:
    """The Ray resource a job of device ``spec`` asks for: its name, lower case, profile aside.
    Raises DeviceError for a malformed spec."""
    from .device import parse_spec  # noqa: PLC0415

    return RESOURCE + parse_spec(spec)[0].strip().lower()


def node_resources() -> dict:
    """``{resource: units}`` of this machine's OpenCL devices (module docstring), for ``ray
    start --resources``. Raises DeviceError where there is no OpenCL device."""
    from .device import _all_devices, auto_device, probe_compiler, read_caps, specs_of  # noqa: PLC0415

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    auto, out = auto_device(), {}
    for d in _all_devices():
        if probe_compiler(d):  # it cannot build kernels here (PoCL 3.0 on AMD Zen 4/5): no job for it
            continue
        c = read_caps(d)
        units = 1 if c.is_gpu else max(cores // max(c.compute_units, 1), 1)
        specs = specs_of(d) + (["auto"] if auto is not None and auto.int_ptr == d.int_ptr else [])
        for s in specs:
            out.setdefault(resource_of(s), units)
    return out


def ray_sweep(args):
    """The sweep class for ``--ray ADDRESS``; raises LiteclError (one ``error:`` line) for an
    address that is not one, or where Ray is not installed."""
    if not _ADDRESS.fullmatch(args.ray):
        raise LiteclError(f"--ray takes ADDRESS (auto, HOST:PORT or ray://HOST:PORT), got {args.ray!r}; "
                          "put --ray after the models or write --ray=ADDRESS")
    try:
        import ray  # noqa: F401, PLC0415
    except ImportError:
        raise LiteclError(f"--ray needs Ray, which is not installed: {INSTALL}") from None
    return RaySweep


def _reachable(address: str, timeout_s: float = 10.0) -> None:
    """Raises LiteclError where HOST:PORT (or ray://HOST:PORT) takes no TCP connection:
    ray.init would retry it for ever."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as e:
        raise LiteclError(f"cannot connect to the Ray cluster at {address}: {e}") from None


# -- on the node ------------------------------------------------------------------------

_PROBES, _ENV = {}, {}  # this worker's probe of each spec, its LiteRT and litecl: made once


def _node_probe(spec: str, tmp: Path) -> dict:
    """sweep._probe of ``spec`` on this node, in a child of its own as the local sweep does
    (this process opens no device: the jobs fork from it), cached in this worker."""
    if spec not in _PROBES:
        got = {}
        sweep._pool([{"n": "probe", "device": spec}], sweep._probe, 1, sweep.PROBE_TIMEOUT_S, tmp,
                    lambda _j, f, _s: got.update(f))
        _PROBES[spec] = got if "status" not in got else {"error": f"device {spec}: opening it {got['reason']}"}
    return _PROBES[spec]


def _differs(job: dict, tmp: Path) -> str:
    """'' when this node's device, driver, LiteRT and litecl are those of the job's key, else how not."""
    from . import __version__  # noqa: PLC0415

    p, k = _node_probe(job["device"], tmp), job["key"]
    if p["error"]:
        return f"on node {socket.gethostname()}: {p['error']}"
    if not _ENV:
        _ENV.update(litert=sweep._litert_version(), litecl=__version__, source=sweep._source_hash())
    here = {"profile": p["profile"], "platform": p["platform"], "device_name": p["name"], "driver": p["driver"],
            **_ENV}
    bad = [f"{f} {v!r} (the key's: {k.get(f)!r})" for f, v in here.items() if v != k.get(f)]
    return "" if not bad else (f"node {socket.gethostname()} differs from where {job['device']} was probed: "
                               + ", ".join(bad) + "; give every node the same drivers and litecl, or sweep a spec "
                               "per kind")


def _plain(fn):
    def job(j: dict) -> dict:
        import faulthandler  # noqa: PLC0415

        faulthandler.disable()  # Ray's workers enable it: a crash's last output would be its dump
        return fn(j)
    return job


def _run_here(fn, job: dict, model: bytes | None, limit_s: float, tmp: Path) -> dict:
    """The job in a forked process (sweep._pool) on a copy of its model; reasons name the
    model's path where the sweep found it, as local rows do."""
    out, here = {}, job
    if model is not None:
        here = {**job, "path": str(tmp / Path(job["path"]).name)}
        Path(here["path"]).write_bytes(model)
    sweep._pool([here], _plain(fn), 1, limit_s, tmp, lambda _j, f, s: out.update(fields=f, seconds=s))
    if model is not None:
        text = json.dumps(out["fields"]).replace(json.dumps(here["path"])[1:-1], json.dumps(job["path"])[1:-1])
        out["fields"] = json.loads(text)
    return out


def _task(fn, job: dict, model: bytes | None, limit_s: float) -> dict:
    """One job on this node (a Ray task): its fields and seconds, and where it ran."""
    import ray  # noqa: PLC0415

    from . import bench, cli, compare, export, interpreter  # noqa: F401, PLC0415  (jobs fork with them)

    with tempfile.TemporaryDirectory(prefix="litecl-ray-") as tmp:
        why = _differs(job, Path(tmp)) if "key" in job else ""
        out = ({"fields": {"status": "error", "reason": why}, "seconds": 0.0} if why
               else _run_here(fn, job, model, limit_s, Path(tmp)))
    return {**out, "ray_node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}


# -- the driver -------------------------------------------------------------------------

class RaySweep(sweep._Sweep):
    """sweep._Sweep whose probes and jobs run as Ray tasks (module docstring)."""

    def run(self, write_report) -> int:
        import ray  # noqa: PLC0415

        self.ray, self.refs, self.tries = ray, {}, {}
        _reachable(self.args.ray)
        try:
            ray.init(address=self.args.ray, logging_level="ERROR", log_to_driver=False)
        except Exception as e:  # noqa: BLE001  (ConnectionError, RuntimeError, ValueError, ...)
            raise LiteclError(f"cannot connect to the Ray cluster at {self.args.ray}: "
                              f"{' '.join(str(e).split())[:300]}") from None
        try:
            self.task = ray.remote(num_cpus=1, max_retries=0)(_task)
            self.nodes = sum(n["Alive"] for n in ray.nodes())
            return super().run(write_report)
        finally:
            ray.shutdown()

    def _jobs(self) -> int:
        return self.args.jobs or 1 << 30  # Ray queues each task for a node with its device

    def _at_once(self) -> str:
        cap = f", at most {self.jobs} job(s) at once" if self.args.jobs else ""
        return f"on the Ray cluster at {self.args.ray} ({self.nodes} node(s){cap})"

    def _probe(self) -> dict:
        """Each spec opened on a node that offers it; one no node offers is an error at once."""
        have, probes, jobs = self.ray.cluster_resources(), {}, []
        for k, spec in enumerate(self.devices):
            why = self._missing(spec, have)
            probes[spec] = {"error": why}
            jobs += [] if why else [{"n": f"probe{k}", "device": spec}]
        self._remote_pool(jobs, sweep._probe, len(jobs), sweep.PROBE_TIMEOUT_S,
                          lambda job, fields, _s: probes.__setitem__(job["device"], fields))
        for spec, p in probes.items():
            if "status" in p:  # the probe itself crashed, hung or was lost
                probes[spec] = {"error": f"device {spec}: opening it {p['reason']}"}
        return probes

    def _missing(self, spec: str, have: dict, left: bool = False) -> str:
        """'' when a node of the cluster offers ``spec``'s resource, else why not."""
        from .errors import DeviceError  # noqa: PLC0415

        try:
            res = resource_of(spec)
        except DeviceError as e:
            return f"device {spec}: {e}"
        if res in have:
            return ""
        offers = ", ".join(sorted(r[len(RESOURCE):] for r in have if r.startswith(RESOURCE))) or "none"
        return (f"device {spec}: no node of the Ray cluster " + ("has it any more (its node left mid-run)"
                if left else f"offers it (resource {res!r}; the nodes offer: {offers}; litecl devices "
                "--ray-resources prints a node's)"))

    def _execute(self, jobs: list, fn, n: int) -> None:
        self._remote_pool(jobs, fn, n, self.args.timeout, self._add)

    def _submit(self, fn, job: dict, limit_s: float):
        model = None
        if "sha" in job:  # one copy of each model in the object store, for all its devices
            if job["sha"] not in self.refs:
                self.refs[job["sha"]] = self.ray.put(Path(job["path"]).read_bytes())
            model = self.refs[job["sha"]]
        self.tries[job["n"]] = self.tries.get(job["n"], 0) + 1
        return self.task.options(resources={resource_of(job["device"]): 1}).remote(fn, job, model, limit_s)

    def _remote_pool(self, jobs: list, fn, n: int, limit_s: float, done) -> None:
        """As sweep._pool: ``done(job, fields, seconds)`` as each task ends, ``n`` in flight."""
        queue, running, checked = list(jobs), {}, time.monotonic()
        try:
            while queue or running:
                while queue and len(running) < n:
                    job = queue.pop(0)
                    running[self._submit(fn, job, limit_s)] = job
                ready, _ = self.ray.wait(list(running), num_returns=1, timeout=CHECK_S)
                for ref in ready:
                    job = running.pop(ref)
                    res = self._result(ref, job)
                    if res is None:
                        queue.insert(0, job)
                    else:
                        done(job, {**res["fields"], "ray_node": res["ray_node"], "host": res["host"],
                                   "attempts": self.tries[job["n"]]}, res["seconds"])
                if time.monotonic() - checked > CHECK_S:
                    self._drop_gone(running, done)
                    checked = time.monotonic()
        finally:
            for ref in running:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref, force=True)

    def _result(self, ref, job: dict) -> dict | None:
        """The task's result; None where its node or worker died and it is to be submitted again."""
        ex = self.ray.exceptions
        try:
            return self.ray.get(ref)
        except (ex.NodeDiedError, ex.WorkerCrashedError, ex.ObjectLostError) as e:
            lost, tries = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", self.tries[job["n"]]
            if tries < MAX_ATTEMPTS and not self._missing(job["device"], self.ray.cluster_resources()):
                print(f"{job['device']} {job.get('name', 'probe')}: lost ({lost}); submitted again",
                      file=sys.stderr, flush=True)
                return None
            reason = f"lost its Ray node or worker {tries} time(s), last: {lost}"
        except ex.RayError as e:
            reason = f"the Ray task failed: {' '.join(str(e).split())[:300]}"
        return {"fields": {"status": "error", "reason": reason}, "seconds": 0.0, "ray_node": None, "host": None}

    def _drop_gone(self, running: dict, done) -> None:
        """Tasks waiting for a device no node has any more (its node died) end as error rows."""
        have = self.ray.cluster_resources()
        for ref, job in list(running.items()):
            why = self._missing(job["device"], have, left=True)
            if why:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref, force=True)
                del running[ref]
                done(job, {"status": "error", "reason": why, "ray_node": None, "host": None,
                           "attempts": self.tries[job["n"]]}, 0.0)
