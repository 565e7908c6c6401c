"""napkin_torch: napkin diagrams as PyTorch operators, forward and backward, with autograd.

    import napkin_torch
    attn = napkin_torch.load("diagrams/library/attention.napkin", hw="h100")
    O = attn(Q, K, V)          # Q, K, V: [b, h, q, d] CUDA tensors (cast to the declared bf16)
    O.sum().backward()         # Q.grad, K.grad, V.grad from napkin's backward kernels

load() runs `napkin grad` (the forward with its saved statistics and the backward, as diagrams),
and the kernels of each are emitted with `napkin emit --target cuda` for the sizes of the tensors
they are called with and built with nvcc, once per set of sizes (cached on disk, see build.py).
The operators are torch.library custom ops with fake implementations: they run inside
torch.compile(fullgraph=True) without graph breaks. CPU tensors run the PyTorch module napkin
emits for each diagram (fp32), so the package works and can be tested without a GPU.

The torch-free parts (signature, build) import without torch; load() needs torch.
"""
from .build import BuildError, DiagramBuild, cache_root, find_napkin, find_nvcc
from .signature import Signature, SignatureError

__version__ = "0.1.0"
__all__ = ["load", "Operator", "BuildError", "SignatureError", "Signature", "DiagramBuild", "cache_root", "find_napkin", "find_nvcc"]

_loaded = {}


def load(path, hw="h100", *, diagram=None, wrt=None, save=None, memory_budget=None, napkin=None, nvcc=None, cache=None):
    """The diagram in `path` as a differentiable PyTorch operator (an Operator).

    path: a .napkin file. hw: napkin hardware the kernels are derived for ("h100", "h200",
    "a100", "b200", "rtx4090" or a .toml description); it also picks nvcc's arch.
    diagram: which diagram of the file (default: the last). wrt: names of the inputs to get
    gradients (default: every floating-point input). save / memory_budget: napkin grad's choice
    of forward values to store rather than recompute (names; or bytes, priced on hw at the
    file's declared sizes). napkin, nvcc: paths of the tools (default: found as find_napkin and
    find_nvcc say; nvcc is needed only for CUDA tensors). cache: the cache folder (default:
    $NAPKIN_TORCH_CACHE or ~/.cache/napkin_torch).

    Loading the same diagram with the same options twice returns the same Operator (its
    torch.library operators are defined once per process). Raises FileNotFoundError (no file,
    no napkin), BuildError (napkin grad or emit failed: the message quotes napkin's located
    error), SignatureError (dtypes napkin_torch cannot store) and ImportError without torch."""
    from .ops import Operator

    build = DiagramBuild(path, hw=hw, diagram=diagram, wrt=wrt, save=save, memory_budget=memory_budget, napkin=napkin, nvcc=nvcc, cache=cache)
    if build.key not in _loaded:
        _loaded[build.key] = Operator(build)
    return _loaded[build.key]


def __getattr__(name):
    if name == "Operator":
        from .ops import Operator
        return Operator
    raise AttributeError(f"module 'napkin_torch' has no attribute '{name}'")
