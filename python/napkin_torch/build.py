"""Building a diagram's operators with the napkin CLI and nvcc, cached on disk. Torch-free.

Steps (each a child process, no shell):
  napkin grad FILE -o grad.napkin           the forward with saved statistics, and the backward
  napkin emit FILE --target torch           the original diagram as a PyTorch module (signature, CPU)
  napkin emit grad.napkin --diagram D --target torch   the same for <name>_fwd and <name>_bwd
  napkin emit grad.napkin --diagram D --target cuda --hw HW --set a=N ...   per set of sizes
  nvcc -O3 -shared -Xcompiler -fPIC -gencode=... kernel.cu -o kernel.so     per set of sizes

Cache layout (root: $NAPKIN_TORCH_CACHE, else ~/.cache/napkin_torch):
  <root>/<diagram>-<key>/                   key: hash of the diagram's text and its grad, the
      grad.napkin, orig.py, fwd.py, bwd.py  options, hw and the napkin binary (version and bytes)
      <fwd|bwd>-<key2>/kernel.cu, kernel.so key2: that, the sizes, the arch and nvcc's version
Files appear whole (written aside, then renamed); concurrent builders of one entry wait on a lock.
"""
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11: the arch then comes from the table below only
    tomllib = None

from .signature import parse_torch_module

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent.parent  # python/napkin_torch -> the napkin checkout, when run from one

# Arch of the bundled hardware descriptions (hardware/*.toml `arch`), used where the .toml is not found.
KNOWN_ARCH = {"a100": "sm_80", "h100": "sm_90a", "h200": "sm_90a", "b200": "sm_100a", "rtx4090": "sm_89"}

NVCC_FLAGS = ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC")


class BuildError(RuntimeError):
    """A step of building an operator failed: the message names the command and quotes its output."""


def cache_root():
    """The cache folder: $NAPKIN_TORCH_CACHE if set, else ~/.cache/napkin_torch (not created here)."""
    env = os.environ.get("NAPKIN_TORCH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "napkin_torch"


def _executable(path):
    return path is not None and os.path.isfile(path) and os.access(path, os.X_OK)


def find_napkin(explicit=None):
    """Path of the napkin CLI: `explicit`, else $NAPKIN_BIN, else `napkin` on PATH, else the
    checkout's build/cli/napkin. Raises FileNotFoundError saying where it looked."""
    tried = []
    for cand in (explicit, os.environ.get("NAPKIN_BIN"), shutil.which("napkin"), str(REPO_DIR / "build" / "cli" / "napkin")):
        if cand:
            tried.append(cand)
            if _executable(cand):
                return os.path.abspath(cand)
    if explicit:
        raise FileNotFoundError(f"napkin_torch: napkin CLI '{explicit}' is not an executable file")
    raise FileNotFoundError("napkin_torch: no napkin CLI found (tried " + ", ".join(tried) +
                            "); build napkin or pass napkin=PATH or set NAPKIN_BIN")


def find_nvcc(explicit=None):
    """Path of nvcc: `explicit`, else $NAPKIN_NVCC, else nvcc on PATH, else $CUDA_PATH/bin/nvcc or
    /usr/local/cuda/bin/nvcc. Raises FileNotFoundError when none is executable."""
    cuda = os.environ.get("CUDA_PATH")
    for cand in (explicit, os.environ.get("NAPKIN_NVCC"), shutil.which("nvcc"), cuda and os.path.join(cuda, "bin", "nvcc"),
                 "/usr/local/cuda/bin/nvcc"):
        if cand and _executable(cand):
            return os.path.abspath(cand)
    raise FileNotFoundError("napkin_torch: no nvcc found (CUDA Toolkit 12.0 or later: on PATH, in CUDA_PATH, "
                            "or pass nvcc=PATH or set NAPKIN_NVCC)")


def run(cmd, what, cwd=None):
    """Runs `cmd` (a list, no shell); returns its standard output. Raises BuildError quoting the
    command and its standard error (the last 4000 characters) when it exits non-zero, and
    FileNotFoundError when the program does not exist."""
    proc = subprocess.run(list(map(str, cmd)), cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip()
        raise BuildError(f"napkin_torch: {what} failed (exit {proc.returncode}): {' '.join(map(str, cmd))}\n{err[-4000:]}")
    return proc.stdout


_identity_memo = {}


def file_digest(path):
    """sha256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tool_identity(path, version_args=("--version",)):
    """(version text, sha256 of the binary) of a tool, memoised by path, size and mtime: part of
    every cache key, so a rebuilt napkin (same version string, new code) builds anew."""
    st = os.stat(path)
    memo = (path, st.st_size, st.st_mtime_ns, tuple(version_args))
    if memo not in _identity_memo:
        version = run([path, *version_args], f"{os.path.basename(path)} {' '.join(version_args)}").strip()
        _identity_memo[memo] = (version, file_digest(path))
    return _identity_memo[memo]


def cache_key(*parts):
    """A 20-hex-digit key for JSON-serialisable `parts` (strings, numbers, lists, dicts)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def hardware_arch(hw, hardware_dir=None):
    """The CUDA arch (e.g. "sm_90a") of napkin hardware `hw`: a bundled name (h100, ...) or a
    .toml path. Reads the description's `arch` key; raises ValueError for an unknown name or a
    description without one."""
    path = Path(hw) if str(hw).endswith(".toml") else Path(hardware_dir or REPO_DIR / "hardware") / f"{hw}.toml"
    if path.is_file() and tomllib is not None:
        with open(path, "rb") as f:
            arch = tomllib.load(f).get("arch")
        if not isinstance(arch, str) or not re.fullmatch(r"sm_\d+[a-z]?", arch):
            raise ValueError(f"napkin_torch: {path} has no arch = \"sm_XY\" key")
        return arch
    if str(hw) in KNOWN_ARCH:
        return KNOWN_ARCH[str(hw)]
    raise ValueError(f"napkin_torch: unknown hardware '{hw}' (one of {', '.join(sorted(KNOWN_ARCH))}, or a .toml path)")


def gencode(arch):
    """nvcc's -gencode flag building SASS for `arch` ("sm_90a" -> compute_90a, sm_90a)."""
    m = re.fullmatch(r"sm_(\d+[a-z]?)", arch)
    if not m:
        raise ValueError(f"napkin_torch: '{arch}' is not an arch like sm_90a")
    return f"-gencode=arch=compute_{m.group(1)},code={arch}"


def nvcc_command(nvcc, arch, source, output):
    """The nvcc command line that builds emitted CUDA `source` into the shared library `output`."""
    return [str(nvcc), *NVCC_FLAGS, gencode(arch), "-o", str(output), str(source)]


def grad_command(napkin, file, output, diagram=None, wrt=None, save=None, memory_budget=None, hw="h100"):
    """`napkin grad` writing the forward-with-statistics and backward of `file` to `output`.
    wrt, save: sequences of names or None (napkin's defaults: every floating-point input; the
    statistics only). memory_budget: bytes (saves what the model says pays, priced on `hw`).
    Raises ValueError when both save and memory_budget are given."""
    cmd = [str(napkin), "grad", str(file), "-o", str(output)]
    if diagram:
        cmd += ["--diagram", diagram]
    if wrt:
        cmd += ["--wrt", ",".join(wrt)]
    if save is not None and memory_budget is not None:
        raise ValueError("napkin_torch: pass save or memory_budget, not both")
    if save:
        cmd += ["--save", ",".join(save)]
    if memory_budget is not None:
        cmd += ["--memory-budget", repr(float(memory_budget)), "--hw", str(hw)]
    return cmd


def emit_command(napkin, file, target, output, diagram=None, hw=None, sizes=()):
    """`napkin emit` of `file` (one `diagram` of it) for `target` ("torch" or "cuda") to `output`;
    sizes: (axis, size) pairs given as --set axis=size."""
    cmd = [str(napkin), "emit", str(file), "--target", target, "-o", str(output)]
    if diagram:
        cmd += ["--diagram", diagram]
    if hw:
        cmd += ["--hw", str(hw)]
    for a, n in sizes:
        cmd += ["--set", f"{a}={int(n)}"]
    return cmd


_GRAD_DIAGRAMS = re.compile(r"^diagram\s+(\S+)_(fwd|bwd)\s*$", re.M)


def grad_diagram_names(text):
    """(forward, backward) diagram names in a `napkin grad` file. Raises ValueError when it does
    not have exactly one <name>_fwd and one <name>_bwd of the same name."""
    found = {}
    for m in _GRAD_DIAGRAMS.finditer(text):
        found.setdefault(m.group(2), []).append(m.group(1))
    fwd, bwd = found.get("fwd", []), found.get("bwd", [])
    if len(fwd) != 1 or len(bwd) != 1 or fwd[0] != bwd[0]:
        raise ValueError(f"napkin_torch: the grad file has forwards {fwd} and backwards {bwd}; expected one <name>_fwd and <name>_bwd")
    return fwd[0] + "_fwd", bwd[0] + "_bwd"


# napkin dtype -> the C type the CUDA emitter stores it as (emit/cuda/context.cpp, ctype).
CTYPE = {"fp32": "float", "bf16": "__nv_bfloat16", "fp16": "__half"}

_MAKE_ARGS = re.compile(r"static Args make_args\(const void\* const\* in, void\* const\* out, const int64_t\* sizes, void\* workspace\) \{(.*?)\n\s*\}", re.S)
_SIZE = re.compile(r"a\.N_(\w+) = sizes\[(\d+)\];")
_PTR = re.compile(r"if \((in|out)\) a\.(\w+) = static_cast<(?:const )?([\w:]+)\*>\((?:in|out)\[(\d+)\]\);")


def entry_point_layout(cu_text):
    """How an emitted .cu file's C entry point reads its arrays: (axes in sizes[] order, inputs as
    (name, C type) in in[] order, outputs likewise), from its make_args. Raises BuildError when
    the file has no single make_args (not napkin's CUDA, or a napkin whose convention changed)."""
    blocks = _MAKE_ARGS.findall(cu_text)
    if len(blocks) != 1:
        raise BuildError(f"napkin_torch: the emitted CUDA has {len(blocks)} make_args blocks, expected 1")
    body = blocks[0]
    axes = [a for a, i in sorted(_SIZE.findall(body), key=lambda m: int(m[1]))]
    ptrs = {"in": [], "out": []}
    for kind, name, ctype, i in _PTR.findall(body):
        ptrs[kind].append((int(i), name.removeprefix("napkin_copy_of_"), ctype))
    return axes, [(n, t) for _, n, t in sorted(ptrs["in"])], [(n, t) for _, n, t in sorted(ptrs["out"])]


def check_entry_point(cu_text, sig):
    """Raises BuildError unless the emitted CUDA's entry point takes sig's axes, inputs and outputs
    in sig's order and dtypes: the layout napkin_torch passes its pointers and sizes in."""
    axes, ins, outs = entry_point_layout(cu_text)
    want = (list(sig.axis_names), [(n, CTYPE.get(sig.dtypes[n])) for n in sig.inputs], [(n, CTYPE.get(sig.dtypes[n])) for n in sig.outputs])
    if (axes, ins, outs) != want:
        raise BuildError(f"napkin_torch: the CUDA entry point of {sig.name} takes sizes {axes}, inputs {ins}, outputs {outs}; "
                         f"its PyTorch module says {want[0]}, {want[1]}, {want[2]}")


@contextmanager
def locked(folder):
    """Holds an exclusive lock on `folder`/.lock (created with the folder) for the block."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_atomic(path, text):
    """Writes `text` to `path` through a temporary file in its folder and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class DiagramBuild:
    """The on-disk build of one diagram: its grad file, torch modules and CUDA libraries.

    file: the .napkin file. hw: napkin hardware (name or .toml path) the kernels are derived
    for. diagram: which diagram of the file (default: its last). wrt, save, memory_budget:
    passed to napkin grad. napkin, nvcc: tool paths (found by find_napkin / find_nvcc when
    None; nvcc only when a CUDA library is built). cache: the cache root (default cache_root()).
    Construction runs napkin grad and the torch emits (fast, cached) and raises BuildError,
    FileNotFoundError or signature.SignatureError on failure."""

    def __init__(self, file, hw="h100", diagram=None, wrt=None, save=None, memory_budget=None, napkin=None, nvcc=None, cache=None):
        self.file = Path(file)
        if not self.file.is_file():
            raise FileNotFoundError(f"napkin_torch: no diagram file '{file}'")
        self.hw = str(hw)
        self.napkin = find_napkin(napkin)
        self._nvcc = nvcc
        self.arch = hardware_arch(self.hw, self.hardware_dir())
        self.napkin_id = tool_identity(self.napkin)
        root = Path(cache).expanduser() if cache else cache_root()
        with tempfile.TemporaryDirectory(prefix="napkin_torch.") as tmp:
            grad_path = Path(tmp) / "grad.napkin"
            self.grad_log = run(grad_command(self.napkin, self.file, grad_path, diagram, wrt, save, memory_budget, self.hw), "napkin grad")
            self.grad_text = grad_path.read_text()
        self.fwd_name, self.bwd_name = grad_diagram_names(self.grad_text)
        self.key = cache_key("diagram", self.file.read_text(), self.grad_text, diagram, self.hw, self.arch, self.napkin_id)
        self.dir = root / f"{self.fwd_name[:-4]}-{self.key}"
        with locked(self.dir):
            if not (self.dir / "grad.napkin").is_file():
                write_atomic(self.dir / "grad.napkin", self.grad_text)
            for part, src, name in (("orig", self.file, diagram), ("fwd", self.dir / "grad.napkin", self.fwd_name),
                                    ("bwd", self.dir / "grad.napkin", self.bwd_name)):
                out = self.dir / f"{part}.py"
                if not out.is_file():
                    tmp = self.dir / f"{part}.py.tmp"
                    run(emit_command(self.napkin, src, "torch", tmp, name), f"napkin emit --target torch ({part})")
                    os.replace(tmp, out)
        self.modules = {p: self.dir / f"{p}.py" for p in ("orig", "fwd", "bwd")}
        self.signatures = {p: parse_torch_module(path.read_text(), str(path)) for p, path in self.modules.items()}

    def hardware_dir(self):
        """The hardware/ folder of the napkin checkout the CLI was built from, if found."""
        for cand in (Path(self.napkin).resolve().parent.parent.parent / "hardware", REPO_DIR / "hardware"):
            if cand.is_dir():
                return cand
        return None

    def library_dir(self, part, sizes):
        """The folder of the CUDA library of `part` ("fwd" or "bwd") at `sizes` ((axis, size) pairs)."""
        nvcc = find_nvcc(self._nvcc)
        key = cache_key("cuda", self.key, part, list(sizes), self.arch, list(NVCC_FLAGS), tool_identity(nvcc, ("--version",))[0])
        return self.dir / f"{part}-{key}", nvcc

    def cuda_library(self, part, sizes):
        """Path of the shared library of `part` ("fwd" or "bwd") emitted at `sizes` ((axis, size)
        pairs, the non-derived axes), built with nvcc on first use. Raises BuildError with the
        failing command's output, FileNotFoundError without nvcc."""
        folder, nvcc = self.library_dir(part, sizes)
        lib = folder / "kernel.so"
        if lib.is_file():
            return lib
        name = self.fwd_name if part == "fwd" else self.bwd_name
        with locked(folder):
            if lib.is_file():
                return lib
            run(emit_command(self.napkin, self.dir / "grad.napkin", "cuda", folder / "kernel.cu.tmp", name, self.hw, sizes),
                f"napkin emit --target cuda ({name})")
            check_entry_point((folder / "kernel.cu.tmp").read_text(), self.signatures[part])
            os.replace(folder / "kernel.cu.tmp", folder / "kernel.cu")
            tmp = folder / "kernel.so.tmp"
            log = run(nvcc_command(nvcc, self.arch, folder / "kernel.cu", tmp), f"nvcc ({name})")
            (folder / "nvcc.log").write_text(log)
            os.replace(tmp, lib)
        return lib
