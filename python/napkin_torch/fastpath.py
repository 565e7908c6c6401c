"""napkin_torch's C part: csrc/fastpath.cpp, the C++ road of an eager call (see that file), built
against the running torch with the C++ compiler (no ninja, no setuptools) and cached on disk.

Built on first use (about a minute: torch's headers), into
<cache root>/fastpath-<key>/napkin_torch_fast.so, key: the source's bytes, torch's version and
CUDA version, Python's version, the compiler's version and the flags. module() returns the loaded
module, or None where it cannot be built or loaded: then napkin_torch warns once with the reason
and every call takes the Python road (same kernels, same results, more host time).
NAPKIN_TORCH_FASTPATH=0 turns it off (no warning). The command-line helpers are torch-free.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import warnings
from pathlib import Path

from .build import BuildError, cache_key, cache_root, file_digest, find_nvcc, locked, run

SOURCE = Path(__file__).resolve().parent / "csrc" / "fastpath.cpp"
MODULE = "napkin_torch_fast"
CXX_FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC")
# torch's libraries the module links (the CUDA stream and guard live in c10_cuda).
LIBRARIES = ("c10", "c10_cuda", "torch", "torch_cpu", "torch_cuda", "torch_python")


def find_cxx():
    """The C++ compiler: $CXX, else c++ or g++ on PATH. Raises FileNotFoundError when none is found."""
    for cand in (os.environ.get("CXX"), "c++", "g++"):
        path = cand and shutil.which(cand)
        if path:
            return path
    raise FileNotFoundError("napkin_torch: no C++ compiler for the fast path (set CXX, or install g++)")


def compile_command(cxx, source, output, include_dirs, library_dirs, defines):
    """The command line building `source` into the Python extension `output` (a list, no shell):
    include_dirs as -isystem, defines as -D (NAME=VALUE, quotes kept literally), each library
    folder as -L and an rpath, then LIBRARIES."""
    cmd = [str(cxx), *CXX_FLAGS]
    cmd += [f"-D{d}" for d in defines]
    for folder in include_dirs:
        cmd += ["-isystem", str(folder)]
    cmd += [str(source), "-o", str(output)]
    for folder in library_dirs:
        cmd += [f"-L{folder}", f"-Wl,-rpath,{folder}"]
    return cmd + [f"-l{lib}" for lib in LIBRARIES]


def torch_build_flags(torch, cuda_include):
    """(include folders, library folders, defines) that build an extension of `torch` (the module)
    the way torch.utils.cpp_extension does: torch's headers, Python's, CUDA's `cuda_include`;
    torch/lib; the C++ ABI and pybind11 ABI torch was built with."""
    from torch.utils import cpp_extension
    includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"], str(cuda_include)]
    libraries = [str(Path(torch.__file__).resolve().parent / "lib")]
    defines = [f"TORCH_EXTENSION_NAME={MODULE}", "TORCH_API_INCLUDE_EXTENSION_H",
               f"_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, f"_PYBIND11_{name}", None)
        if value is not None:
            defines.append(f'PYBIND11_{name}="{value}"')
    return includes, libraries, defines


def build(torch, cache=None):
    """Path of the built module for `torch`, compiling it on first use (locked, written aside and
    renamed). Raises BuildError quoting the compiler, FileNotFoundError without a compiler or nvcc."""
    cxx = find_cxx()
    cuda_include = Path(find_nvcc()).resolve().parent.parent / "include"
    includes, libraries, defines = torch_build_flags(torch, cuda_include)
    cxx_version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    key = cache_key("fastpath", file_digest(SOURCE), torch.__version__, torch.version.cuda, sys.version, cxx_version,
                    list(CXX_FLAGS), defines, includes)
    folder = (Path(cache).expanduser() if cache else cache_root()) / f"fastpath-{key}"
    out = folder / f"{MODULE}.so"
    if out.is_file():
        return out
    with locked(folder):
        if not out.is_file():
            tmp = folder / f"{MODULE}.so.tmp"
            run(compile_command(cxx, SOURCE, tmp, includes, libraries, defines), "building napkin_torch's fast path (c++)")
            os.replace(tmp, out)
    return out


_state = {"module": None, "tried": False, "reason": None}
_lock = threading.Lock()


def module():
    """The fast path's module (napkin_torch_fast), built and loaded on first call; None where it
    is off or failed, with reason() saying why (warned once)."""
    if _state["tried"]:
        return _state["module"]
    with _lock:
        if _state["tried"]:
            return _state["module"]
        if os.environ.get("NAPKIN_TORCH_FASTPATH", "1") == "0":
            _state["reason"] = "turned off by NAPKIN_TORCH_FASTPATH=0"
        else:
            try:
                import torch
                path = build(torch)
                spec = importlib.util.spec_from_file_location(MODULE, str(path))
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                _state["module"] = mod
            except (BuildError, FileNotFoundError, ImportError, OSError) as e:
                _state["reason"] = str(e)
                warnings.warn(f"napkin_torch: the C++ fast path is unavailable, eager calls take the Python road "
                              f"(same kernels, more host time per call): {e}", RuntimeWarning, stacklevel=3)
        _state["tried"] = True
        return _state["module"]


def reason():
    """Why module() is None ("" while it is loaded or not yet tried)."""
    return _state["reason"] or ""
