"""What the ``litecl`` commands share (cli.py and the cli_*.py modules of its commands):
the argument parser's error handling and argument types, the ``error:`` line, reading
``--inputs`` .npz files and making random inputs, opening a model in litecl.Interpreter,
and the placement report lines.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and every multi-word flag in both spellings:
    ``--full-range`` and ``--full_range``, ``--num_runs`` and ``--num-runs`` (users mix
    benchmark_model's underscores with the usual hyphens). The first spelling given is
    the one help shows first and names the attribute. A value that starts with a minus and
    a digit is a value (``--shapes -1,3 4``: Python 3.11's argparse took "-1,3" for an
    option and said "expected 2 arguments"; 3.13's reads it so)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._negative_number_matcher = re.compile(r"-\.?\d")

    def error(self, message):  # argparse's own exit status is 2 already; keep one line
        raise _Usage(message)

    def add_argument(self, *names, **kwargs):
        spelled = list(names)
        for n in names:
            if n.startswith("--") and ("-" in n[2:] or "_" in n[2:]):
                for other in ("--" + n[2:].replace("_", "-"), "--" + n[2:].replace("-", "_")):
                    if other not in spelled:
                        spelled.append(other)
        return super().add_argument(*spelled, **kwargs)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _arg_int(lo: int, what: str, hi: int | None = None):
    """argparse type: an integer >= lo (and <= hi)."""
    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v
    return conv


def _arg_secs(text: str, positive: bool = False) -> float:
    """argparse type: a finite number of seconds >= 0 (``positive``: > 0)."""
    what = "> 0" if positive else ">= 0"
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds {what}, got {text!r}") from None
    if not (v >= 0 and np.isfinite(v)) or (positive and v == 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds {what}, got {text}")
    return v


def _arg_limit(text: str) -> float:
    """argparse type: a time limit, a finite number of seconds > 0."""
    return _arg_secs(text, positive=True)


_NON_NEGATIVE = _arg_int(0, "an integer >= 0")
_POSITIVE = _arg_int(1, "an integer >= 1")
#: bench --num_runs's bound: every timed run's time is kept for the median and percentiles,
#: litecl's and LiteRT's (a float and its list slot, 32 bytes each): 64 MB at this bound
MAX_NUM_RUNS = 1_000_000
#: bench --profile_runs's bound: profiled runs wait for every kernel and have no time limit
MAX_PROFILE_RUNS = 10_000

_NPZ_WANTED = "expected a .npz archive of arrays keyed by input name (numpy.savez(path, name=array))"


def _load_npz(path: str) -> dict:
    if not os.path.exists(path):
        raise _Usage(f"inputs file not found: {path}")
    if os.path.isdir(path):
        raise _Usage(f"cannot read inputs file {path}: it is a directory; {_NPZ_WANTED}")
    from .model import special_file_kind  # noqa: PLC0415

    kind = special_file_kind(path)
    if kind:  # opening a FIFO blocks until a writer comes; /dev/zero never ends
        raise _Usage(f"cannot read inputs file {path}: it is {kind}, not a regular file; {_NPZ_WANTED}")
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as e:
        raise _Usage(f"cannot read inputs file {path}: {e.strerror or e}") from None
    if head.startswith(b"\x93NUMPY"):
        raise _Usage(f"cannot read inputs file {path}: it is a .npy file holding one array, "
                     f"not an .npz archive; {_NPZ_WANTED}")
    if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip archive (an empty one)
        raise _Usage(f"cannot read inputs file {path}: not an .npz archive; {_NPZ_WANTED}")
    try:
        z = np.load(path, allow_pickle=False)
        if not hasattr(z, "files"):  # not an NpzFile after all
            raise ValueError("not an .npz archive")
        with z:
            got = {k: z[k] for k in z.files}
        bad = [k for k, v in got.items() if not isinstance(v, np.ndarray)]  # numpy returns a
        if bad:                                                           # non-.npy member as bytes
            raise ValueError(f"entry {bad[0]!r} is no .npy array")
        return got
    except MemoryError:
        raise
    except Exception as e:  # BadZipFile, zlib.error, object arrays (pickles), EOFError...
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise _Usage(f"cannot read inputs file {path} as .npz: {msg}") from None


def shown(text: str) -> str:
    """``text`` (a name from the model) as the terminal may show it: control characters
    escaped (a crafted tensor name could clear the screen or repaint a line)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _check_writable(path: str, what: str, reads=()) -> None:
    """Refuse an output path that cannot be written, or that is one of the files the
    command reads (``reads``: the model, the inputs file; None entries skipped), before
    any work is done."""
    full = os.path.abspath(path)
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        raise _Usage(f"cannot write {what} {path}: it is a directory")
    for r in reads:
        try:
            same = r is not None and os.path.exists(full) and os.path.samefile(full, r)
        except OSError:
            same = False
        if same:
            raise _Usage(f"cannot write {what} {path}: it is {r}, which this command reads "
                         "(writing would destroy it)")
    from .model import special_file_kind  # noqa: PLC0415

    kind = special_file_kind(full)
    if kind and "FIFO" in kind:  # opening a FIFO for writing blocks until a reader comes
        try:  # a FIFO someone reads (`--json /dev/stdout | jq`) is fine
            os.close(os.open(full, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: nobody reads it
            raise _Usage(f"cannot write {what} {path}: it is {kind} that nobody reads "
                         "(writing would block); give a regular file") from None
        return
    if kind and "socket" in kind:
        raise _Usage(f"cannot write {what} {path}: it is {kind}, not a regular file")
    if not os.path.exists(parent):
        raise _Usage(f"cannot write {what} {path}: folder {parent} does not exist")
    if not os.path.isdir(parent):
        raise _Usage(f"cannot write {what} {path}: {parent} is not a folder")
    ok = os.access(full, os.W_OK) if os.path.exists(full) else os.access(parent, os.W_OK | os.X_OK)
    if not ok:
        raise _Usage(f"cannot write {what} {path}: permission denied")
    # permission bits do not tell everything (root, read-only or pseudo file systems such
    # as /proc): open it for appending, which changes nothing, or create it and remove it
    existed = os.path.exists(full)
    try:
        with open(full, "ab" if existed else "xb"):
            pass
    except OSError as e:
        raise _Usage(f"cannot write {what} {path}: {e.strerror or e}") from None
    if not existed:
        os.remove(full)


def _npz_path(path: str) -> str:
    """The file numpy.savez writes for ``path`` (it appends .npz when missing)."""
    return path if path.endswith(".npz") else path + ".npz"


def _device_json(dev) -> dict:
    c = dev.caps
    return {"platform": c.platform, "name": c.name, "profile": c.profile or None}


def _device_line(dev) -> str:
    c = dev.caps
    return f"{c.platform}: {c.name}" + (f" (profile {c.profile})" if c.profile else "")


def _subgraph_of(interp, sig) -> int:
    if sig is None:
        return 0
    return next(s.subgraph for s in interp._model.signatures if s.key == sig)


def _reachable(interp, si: int) -> set:
    """Subgraph ``si`` and the subgraphs its nodes call (control flow), transitively."""
    subs = interp._model.subgraphs
    seen, todo = set(), [si]
    while todo:
        s = todo.pop()
        if s in seen or not 0 <= s < len(subs):
            continue
        seen.add(s)
        for n in subs[s].nodes:
            todo.extend(n.subgraph_refs())
    return seen


def _report(interp, sig):
    """The delegate's report restricted to the subgraph that runs (signature ``sig``,
    else subgraph 0) and the subgraphs it calls: (placement rows, graph_info rows,
    subgraph set)."""
    keep = _reachable(interp, _subgraph_of(interp, sig))
    d, me = interp.delegate, id(interp)  # this interpreter's contexts (Delegate.owning)
    rows = [p for p in d.placement(me) if p["subgraph"] in keep]
    # one interpreter: inspect's JSON "graphs" keep their keys, without the delegate's numbering
    graphs = [{k: v for k, v in g.items() if k != "interpreter"} for g in d.graph_info(me) if g["subgraph"] in keep]
    return rows, graphs, keep


class _Only:
    """A Delegate's placement() and graph_info() restricted to some subgraphs (what
    ``summary_lines`` reads)."""

    def __init__(self, delegate, keep: set):
        self._d, self._keep = delegate, keep

    def placement(self, owner=None) -> list[dict]:
        return [r for r in self._d.placement(owner) if r["subgraph"] in self._keep]

    def graph_info(self, owner=None) -> list[dict]:
        return [g for g in self._d.graph_info(owner) if g["subgraph"] in self._keep]


def _summary(interp, keep: set) -> list[str]:
    from .interpreter import summary_lines  # noqa: PLC0415

    return summary_lines(_Only(interp.delegate, keep), id(interp))


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


#: how the memory refusals below begin (sweep.py counts a model so refused as "refused",
#: not as litecl's error)
NOT_ENOUGH_MEMORY = "not enough memory"


def _check_reference_fits(outputs: list) -> None:
    """Refuse to run LiteRT alone beside litecl's interpreter when the outputs litecl gave
    (``outputs``: [(name, array)]) would not fit again: LiteRT alone holds each in its
    arena and in the copy get_tensor returns (a 1 GiB output peaked at ~6 GiB in compare
    before diff_report walked chunks, ~4.5 GiB after: a fresh user's report; the OOM
    killer, or "out of memory" blamed on litecl, was the answer)."""
    need = 2 * sum(int(getattr(v, "nbytes", 0)) for _, v in outputs)
    avail = _available_bytes()
    if avail is not None and need > avail:
        big = max(outputs, key=lambda o: int(getattr(o[1], "nbytes", 0)))
        raise _Usage(f"{NOT_ENOUGH_MEMORY}: LiteRT alone's run, to compare with, needs about {need / 2**30:.1f} "
                     f"GiB for its outputs (output {big[0]!r} {list(np.shape(big[1]))}: its arena and the copy "
                     f"it returns) beside litecl's, and {avail / 2**30:.1f} GiB is available; litecl run runs "
                     "the model without LiteRT alone")


def _check_fits(details: list[dict]) -> None:
    """Refuse random inputs that cannot fit in memory (a mutated or absurd input shape),
    rather than being killed by the kernel's OOM killer half-way."""
    need = sum(int(np.prod(d["shape"], dtype=np.float64)) * np.dtype(d["dtype"]).itemsize
               for d in details)
    avail = _available_bytes()
    # numpy draws float64 before converting, and LiteRT and the device hold copies
    if avail is not None and 4 * need > avail:
        big = max(details, key=lambda d: float(np.prod(d["shape"], dtype=np.float64)))
        raise _Usage(f"{NOT_ENOUGH_MEMORY}: random inputs of {need / 2**30:.1f} GiB (input {big['name']!r} "
                     f"{[int(x) for x in big['shape']]}) need about {4 * need / 2**30:.1f} GiB with their copies "
                     f"(float64 draws, LiteRT's and the device's), and {avail / 2**30:.1f} GiB is available; "
                     "pass --inputs")


def _check_shape(d: dict, v: np.ndarray, resize: bool) -> None:
    """A given input may change only the dimensions that are -1 in its shape_signature
    (LiteRT's strict resize), unless --resize."""
    want = [int(x) for x in d["shape"]]
    got = list(v.shape)
    if got == want or resize:
        return
    sig = [int(x) for x in d.get("shape_signature", d["shape"])]
    if len(sig) == len(got) and all(s == -1 or s == g for s, g in zip(sig, got)):
        return
    fixed = "its shape is fixed" if sig == want else \
        f"only the dimensions that are -1 in its shape_signature {sig} may change"
    raise _Usage(f"input {d['name']!r} expects shape {want}, got {got} ({fixed}); "
                 "pass --resize to resize it anyway")


def _inputs_for(details: list[dict], given: dict | None, seed: int, resize: bool = False,
                full_range: bool = False, interp=None, sig=None) -> dict:
    from .compare import random_inputs  # noqa: PLC0415

    if given is None:
        _check_fits(details)
        return _fit_sub_byte(random_inputs(details, seed, full_range=full_range), details, interp, sig)
    names = [d["name"] for d in details]
    unknown = sorted(set(given) - set(names))
    if unknown:
        hint = ""
        sigs = interp.get_signature_list() if interp is not None and sig is None else {}
        by_sig = {n for v in sigs.values() for n in v["inputs"]}  # names of a signature's inputs?
        keys = [k for k, v in sigs.items() if set(given) <= set(v["inputs"])]
        if len(keys) == 1:
            hint = f" (those are the inputs of signature {keys[0]!r}: pass --signature {keys[0]})"
        elif keys:  # compare runs every signature; run and bench run one
            hint = (f" (signatures {', '.join(repr(k) for k in keys)} take those inputs: pass --signature "
                    "with one of them)")
        elif set(unknown) & by_sig:  # a signature's names beside others: only the others are unknown
            takes = "; ".join(f"signature {k!r} takes {sorted(v['inputs'])}" for k, v in sigs.items())
            strange = [n for n in unknown if n not in by_sig]
            if strange:
                raise _Usage(f"unknown input name(s) {strange}; the model's inputs are {names} ({takes})")
            raise _Usage(f"--inputs mixes signature input name(s) {sorted(set(unknown) & by_sig)} with the model's "
                         f"{sorted(set(given) & set(names))}: name them one way (the model's inputs are {names}; "
                         f"{takes})")
        raise _Usage(f"unknown input name(s) {unknown}; the model's inputs are {names}{hint}")
    missing = [n for n in names if n not in given]
    if missing:
        raise _Usage(f"missing input(s) {missing}; the model's inputs are {names}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # one array would feed both (a model the converter does not write, but valid)
        raise _Usage(f"the model has several inputs named {twice[0]!r}: an --inputs file cannot tell them "
                     "apart (leave --inputs out for seeded random inputs)")
    out = {}
    for d in details:
        v = np.asarray(given[d["name"]])
        want = np.dtype(d["dtype"])
        if v.dtype != want and v.dtype.newbyteorder("=") == want:
            v = v.astype(want)  # the other byte order: its values, as Interpreter.set_tensor
        if v.dtype != want:
            got = (f"raw {v.dtype.itemsize}-byte values ({v.dtype.str}: how an .npz stores bfloat16 and "
                   "other ml_dtypes types, which LiteRT's inputs are not)") if v.dtype.kind == "V" else v.dtype
            raise _Usage(f"input {d['name']!r} expects {want}, got {got}")
        _check_shape(d, v, resize)
        out[d["name"]] = v
    return out


def _open(args, given: dict | None = None):
    """litecl.Interpreter (LiteRT's Interpreter with litecl.Delegate) for the command's
    model and options. The delegate is quiet: the commands print its report themselves
    (stderr stays one `error:` line on failure). Under --placement auto with ``given``
    inputs (--inputs), the model's dynamic inputs are declared at their shapes first
    (reader.with_input_shapes): auto prices each node at the shapes it runs at, not at
    the declared ones (a [-1, 1000] CAST run at [2000, 1000] was kept on LiteRT as
    "LiteRT ~0 us")."""
    from .interpreter import Interpreter  # noqa: PLC0415

    if given and getattr(args, "placement", "all") == "auto":
        from .interpreter import _verified  # noqa: PLC0415
        from .reader import with_input_shapes  # noqa: PLC0415

        raw = with_input_shapes(_verified(args.model, None), {k: np.shape(v) for k, v in given.items()})
        return Interpreter(model_content=raw, device=args.device,
                           reference=getattr(args, "reference", "builtin"),
                           num_threads=getattr(args, "num_threads", None), placement="auto", quiet=True)
    return Interpreter(model_path=args.model, device=args.device,
                       reference=getattr(args, "reference", "builtin"),
                       num_threads=getattr(args, "num_threads", None),
                       placement=getattr(args, "placement", "all"), quiet=True)


def _fit_sub_byte(inputs: dict, details: list[dict], interp, sig) -> dict:
    """Seeded int4/uint4 inputs drawn in their range: their details say int8/uint8 (as
    LiteRT's), and set_tensor refuses values outside it (as LiteRT does)."""
    if interp is None:
        return inputs
    tensors = interp._model.subgraphs[_subgraph_of(interp, sig)].tensors
    for k, d in enumerate(details):
        t = tensors[int(d["index"])]
        if t.dtype is not None and t.dtype.packed_bits:
            v = inputs[d["name"]]
            rng = np.random.default_rng(k)
            inputs[d["name"]] = rng.integers(t.dtype.min, t.dtype.max + 1, v.shape).astype(v.dtype)
    return inputs


def _details_by_name(interp, signature):
    if signature is None:
        return interp.get_input_details()
    r = interp.get_signature_runner(signature)
    return [dict(d, name=k) for k, d in r.get_input_details().items()]


def _unique_names(outs: list) -> dict:
    """[(name, array)] -> {name: array}, a repeated name suffixed with its output
    position (``name#1``), for printing and .npz keys."""
    seen = {n for n, _ in outs}
    dup = {n for n in seen if sum(m == n for m, _ in outs) > 1}
    return {(f"{n}#{k}" if n in dup else n): v for k, (n, v) in enumerate(outs)}


def _signature_note(interp, sig) -> str:
    """Where ``sig`` is None (subgraph 0 runs) in a model of several signatures, a line
    saying so and naming them, else "" (run and bench ran subgraph 0 without a word)."""
    sigs = interp._model.signatures
    if sig is not None or len(sigs) < 2:
        return ""
    own = [s.key for s in sigs if s.subgraph == 0]
    which = f" (signature {own[0]!r})" if len(own) == 1 else ""
    return (f"subgraph 0{which} ran; the model has signatures {', '.join(repr(s.key) for s in sigs)}: "
            "--signature runs another")


def _pick_signature(interp, sig, given=None):
    """The signature key to run, or None for subgraph 0's own inputs and outputs:
    ``sig`` (--signature, checked); else the first signature when subgraph 0 has no
    inputs; else, when the inputs ``given`` (--inputs, by name) are not subgraph 0's but
    are the signature inputs of the model's only signature, that one (as LiteRT's
    get_signature_runner() takes the only signature without a key). With several
    signatures, _inputs_for's error names the one to pass."""
    sigs = interp.get_signature_list()
    if sig is not None:
        if sig not in sigs:
            raise _Usage(f"unknown signature {sig!r}; the model has {', '.join(sigs) or 'none'}")
        return sig
    if not interp._model.subgraphs[0].inputs and sigs:
        return next(iter(sigs))
    if given is not None and len(sigs) == 1:
        (key, io), = sigs.items()
        if not set(given) <= {d["name"] for d in interp.get_input_details()} and set(given) <= set(io["inputs"]):
            return key
    return None
