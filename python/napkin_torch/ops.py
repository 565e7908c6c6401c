"""napkin diagrams as PyTorch operators with autograd (needs torch; see __init__.load).

Each loaded diagram becomes two custom operators (torch >= 2.4, torch.library.custom_op):
  napkin::<name>_fwd_<key>(inputs...) -> (outputs..., saved statistics...)
  napkin::<name>_bwd_<key>(backward inputs...) -> (gradients...)
each with a fake implementation (shapes and dtypes from the diagram's declarations, for
torch.compile and meta tensors), and autograd on the forward that calls the backward. Their
implementation on CUDA tensors runs the kernels napkin emits for the tensors' sizes (built and
cached on first use, see build.py) through their C entry point; on CPU tensors it runs the
module `napkin emit --target torch` wrote, in fp32 (its reference mode), rounding the outputs to
their declared dtypes. Eager calls on real tensors take a shorter road to the same
computation: a torch.autograd.Function with the same forward, saved tensors and backward, without
the dispatcher's Python layers (what torch.compile and fake tensors see stays the custom ops);
with torch < 2.4 that Function is the only road (eager only). Each part's launch at a set of
input shapes (library, output shapes, sizes, workspace bytes) is found once and reused, so a
call costs its dtype checks, allocations and the launch itself.
"""
import contextlib
import ctypes
import importlib.util
import threading

import torch

from . import fastpath
from .signature import STORAGE, SignatureError, pair

# torch 2.4 brought custom_op(name, fn, schema=...) with register_fake and register_autograd.
_HAS_CUSTOM_OP = hasattr(torch, "library") and hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd")
NAMESPACE = "napkin"


def _compiling():
    """True while torch.compile (dynamo) traces: the custom ops are what it must see."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        return compiler.is_compiling()
    dynamo = getattr(torch, "_dynamo", None)
    return bool(dynamo is not None and hasattr(dynamo, "is_compiling") and dynamo.is_compiling())


_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", None)
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _eager(tensors):
    """True for a call napkin_torch may run without the dispatcher: not traced (torch.compile,
    torch.func transforms) and every argument a plain tensor or Parameter (no fake, functional
    or other subclass tensors, which the custom ops' registrations handle)."""
    if _compiling() or (_functorch_active is not None and _functorch_active()):
        return False
    return all(type(t) in _PLAIN for t in tensors)


def torch_dtype(napkin_dtype):
    """The torch dtype a napkin dtype ("bf16", "fp16", "fp32") is stored in; SignatureError otherwise."""
    if napkin_dtype not in STORAGE:
        raise SignatureError(f"napkin_torch stores fp32, bf16 and fp16 arrays only, not {napkin_dtype}")
    return getattr(torch, STORAGE[napkin_dtype])


class CudaLibrary:
    """One emitted diagram built as a shared library (emit/cuda_emitter.hpp's C entry points:
    napkin_run, napkin_workspace_bytes, napkin_last_error)."""

    def __init__(self, path):
        self.path = str(path)
        lib = ctypes.CDLL(self.path)
        lib.napkin_run.argtypes = [ctypes.c_void_p] * 5
        lib.napkin_run.restype = ctypes.c_int
        lib.napkin_workspace_bytes.argtypes = [ctypes.c_void_p]
        lib.napkin_workspace_bytes.restype = ctypes.c_size_t
        lib.napkin_last_error.restype = ctypes.c_char_p
        self.lib = lib
        # The entry points' addresses, for the C++ fast path (fastpath.py); the CDLL stays loaded with self.
        self.run_address = ctypes.cast(lib.napkin_run, ctypes.c_void_p).value
        self.error_address = ctypes.cast(lib.napkin_last_error, ctypes.c_void_p).value

    def sizes_array(self, sizes):
        """`sizes` (every axis's size, in declaration order) as the int64 array napkin_run reads."""
        return (ctypes.c_int64 * max(len(sizes), 1))(*[int(s) for s in sizes])

    def workspace_bytes(self, sizes_array):
        """Bytes of workspace the kernels need at `sizes_array` (from sizes_array)."""
        return int(self.lib.napkin_workspace_bytes(sizes_array))

    def launch(self, in_ptrs, out_ptrs, sizes_array, workspace_ptr, device_index):
        """Launches every kernel on the current CUDA stream of device `device_index`.

        in_ptrs, out_ptrs: device addresses (ints) of contiguous arrays in the diagram's order and
        dtypes, 16-byte aligned; sizes_array: from sizes_array; workspace_ptr: an address of
        workspace_bytes bytes (0 when none). Raises RuntimeError with the library's message when
        a launch fails (errors inside a kernel surface at the next synchronisation)."""
        ins = (ctypes.c_void_p * max(len(in_ptrs), 1))(*in_ptrs)
        outs = (ctypes.c_void_p * max(len(out_ptrs), 1))(*out_ptrs)
        guard = torch.cuda.device(device_index) if _current_device() != device_index else contextlib.nullcontext()
        with guard:
            rc = self.lib.napkin_run(ins, outs, sizes_array, workspace_ptr or None, _current_stream(device_index))
        if rc != 0:
            raise RuntimeError(f"napkin_torch: {self.path}: {self.lib.napkin_last_error().decode(errors='replace')}")


# The current device and the raw handle of its current stream: torch's C bindings where this torch
# has them (torch.cuda.current_stream(dev).cuda_stream builds a Stream object: 3.8 us a call on
# the H200 host of session 22), else the public API.
_raw_device = getattr(torch._C, "_cuda_getDevice", None)
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_device():
    return _raw_device() if _raw_device is not None else torch.cuda.current_device()


def _current_stream(index):
    return _raw_stream(index) if _raw_stream is not None else torch.cuda.current_stream(index).cuda_stream


class _Launch:
    """What running one part of an operator at one set of input shapes on CUDA needs, found once
    (Operator._launch) so that each call only checks dtypes and devices, allocates its outputs
    and launches: the library, the expected input dtypes, the outputs' shapes and dtypes, the
    sizes array and the workspace's bytes."""

    __slots__ = ("lib", "in_dtypes", "outs", "sizes", "workspace", "empty", "fast")

    def __init__(self, lib, in_dtypes, outs, sizes, workspace, in_shapes=None, size_list=()):
        self.lib, self.in_dtypes, self.outs, self.sizes, self.workspace = lib, in_dtypes, outs, sizes, workspace
        self.empty = any(0 in shape for shape, _ in outs)
        # The same launch for the C++ fast path (fastpath.py), where it is built: None otherwise.
        self.fast = None
        mod = fastpath.module() if in_shapes is not None else None
        if mod is not None:
            name = lambda dt: str(dt).removeprefix("torch.")  # noqa: E731
            self.fast = mod.make_launch(lib.run_address, lib.error_address, lib.path, [name(d) for d in in_dtypes],
                                        [list(sh) for sh in in_shapes], [list(sh) for sh, _ in outs], [name(d) for _, d in outs],
                                        [int(n) for n in size_list], int(workspace))

    def fits(self, args, index):
        """True when every tensor of `args` has its expected dtype and lives on CUDA device `index`."""
        for t, want in zip(args, self.in_dtypes):
            if t.dtype != want or t.get_device() != index:
                return False
        return True

    def __call__(self, args, dev, index):
        """The outputs (new tensors) of the part on `args`, launched on `index`'s current stream.
        Inputs not contiguous or not 16-byte aligned (the kernels' vector loads) are copied."""
        keep, ptrs = [], []
        for t in args:
            if not t.is_contiguous():
                t = t.contiguous()
            p = t.data_ptr()
            if p % 16:
                t = t.clone()
                p = t.data_ptr()
            keep.append(t)
            ptrs.append(p)
        outs = [torch.empty(shape, dtype=dtype, device=dev) for shape, dtype in self.outs]
        if not self.empty:
            ws = torch.empty(self.workspace, dtype=torch.uint8, device=dev) if self.workspace else None
            self.lib.launch(ptrs, [t.data_ptr() for t in outs], self.sizes, ws.data_ptr() if ws is not None else 0, index)
        return tuple(outs)


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _schema(n_in, n_out):
    args = ", ".join(f"Tensor a{i}" for i in range(n_in))
    outs = "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    return f"({args}) -> {outs}"


class Operator:
    """A diagram as a differentiable PyTorch operator: `op(*tensors)` returns its outputs.

    Made by napkin_torch.load. Call it with one tensor per diagram input, in the diagram's order
    (`op.inputs`), all on one device (CUDA: napkin's kernels; CPU: the emitted PyTorch module).
    Each tensor is cast to its declared dtype (`op.dtypes`; a differentiable cast) and made
    contiguous; its shape gives the axis sizes (an axis in two inputs must agree). Returns one
    tensor (one output) or a tuple in `op.outputs` order, in the declared dtypes. Gradients flow
    to the inputs listed in `op.wrt`. Raises SignatureError (a ValueError) for a wrong number of
    tensors, ranks or sizes, TypeError for a non-tensor, BuildError when napkin or nvcc fails."""

    def __init__(self, build):
        self.build = build
        sig = build.signatures
        self.pair = pair(sig["orig"], sig["fwd"], sig["bwd"])
        self.pair.fwd.check_storable()
        self.pair.bwd.check_storable()
        self.name = sig["orig"].name
        self.inputs = self.pair.fwd.inputs
        self.outputs = self.pair.user_outputs
        self.dtypes = {k: self.pair.fwd.dtypes[k] for k in self.inputs + self.outputs}
        self.wrt = self.pair.wrt
        self._libs = {}
        self._modules = {}
        self._launches = {}  # (part, input shapes) -> _Launch, filled by _launch
        # Forward input shapes -> the C++ fast path's Op (fastpath.py), made once a call at those
        # shapes has run forward and backward by the Python road (_pair_fast); fast_calls counts
        # the eager calls that took it.
        self._fast = {}
        self.fast_calls = 0
        self._lock = threading.Lock()
        fwd, bwd = self.pair.fwd, self.pair.bwd
        self._in_dtypes = tuple(torch_dtype(fwd.dtypes[n]) for n in fwd.inputs)
        # Per backward input, once for both roads: ("cotangent", index of the forward output, its
        # dtype name), or ("output" | "input", forward position, None) for a value the forward saves
        # (an output shadows an input of its name, as _setup_context's by_name does).
        wiring = []
        for n in bwd.inputs:
            src = self.pair.from_forward.get(n)
            if src is None:
                wiring.append(("cotangent", fwd.outputs.index(self.pair.cotangent[n]), bwd.dtypes[n]))
            else:
                wiring.append(("output", fwd.outputs.index(src), None) if src in fwd.outputs else ("input", fwd.inputs.index(src), None))
        # The Python road: ("saved", None, None) or ("cotangent", index, torch dtype); ctx saves _saved_names.
        self._bwd_args = tuple((kind, k, torch_dtype(dt)) if kind == "cotangent" else ("saved", None, None) for kind, k, dt in wiring)
        self._saved_names = tuple(self.pair.from_forward[n] for n in bwd.inputs if n in self.pair.from_forward)
        self._grad_slots = tuple(fwd.inputs.index(self.pair.grads[n]) for n in bwd.outputs)
        # The C++ road (fastpath.cpp): (kind, forward position, the cotangent's storage type or "").
        self._fast_wiring = [(kind, k, STORAGE[dt] if kind == "cotangent" else "") for kind, k, dt in wiring]
        tag = f"{build.key[:10]}"
        self.fwd_op = self._define(f"{self.pair.fwd.name}_{tag}", "fwd")
        self.bwd_op = self._define(f"{self.pair.bwd.name}_{tag}", "bwd")
        if self.fwd_op is not None:
            self.fwd_op.register_autograd(self._backward, setup_context=self._setup_context)
        # Eager calls on real tensors run this autograd.Function (the same _compute, _setup_context
        # and _backward as the custom ops, without the dispatcher's Python layers: about 20 us a
        # call less, session 22); torch.compile traces the custom ops (see __call__).
        self._function = self._autograd_function()

    def __repr__(self):
        return (f"<napkin_torch.Operator {self.name}({', '.join(self.inputs)}) -> ({', '.join(self.outputs)}); "
                f"d/d{{{', '.join(self.wrt)}}}; hw {self.build.hw}>")

    # -- the two operators ---------------------------------------------------------------------

    def _define(self, opname, part):
        """The custom op computing `part` ("fwd" or "bwd"), or None where torch lacks custom_op."""
        if not _HAS_CUSTOM_OP:
            return None
        sig = self.pair.fwd if part == "fwd" else self.pair.bwd

        def impl(*args):
            out = self._compute(part, args)
            return out[0] if len(out) == 1 else out

        op = torch.library.custom_op(f"{NAMESPACE}::{opname}", impl, mutates_args=(),
                                     schema=_schema(len(sig.inputs), len(sig.outputs)))

        def fake(*args):
            sizes = sig.sizes({n: t.shape for n, t in zip(sig.inputs, args)})
            out = tuple(args[0].new_empty(sig.shape(o, sizes), dtype=torch_dtype(sig.dtypes[o])) for o in sig.outputs)
            return out[0] if len(out) == 1 else out

        op.register_fake(fake)
        return op

    def _call(self, part, args):
        """`part`'s outputs on `args`, as a tuple: its custom operator where torch traces (torch.compile,
        fake or functional tensors), else its computation directly (eager, real tensors)."""
        op = self.fwd_op if part == "fwd" else self.bwd_op
        if op is None or _eager(args):
            return self._compute(part, args)
        out = op(*args)
        return out if isinstance(out, tuple) else (out,)

    def _setup_context(self, ctx, inputs, output):
        output = output if isinstance(output, tuple) else (output,)
        fwd = self.pair.fwd
        by_name = dict(zip(fwd.inputs, inputs))
        by_name.update(zip(fwd.outputs, output))
        ctx.save_for_backward(*[by_name[n] for n in self._saved_names])
        ctx.napkin_input_dtypes = [t.dtype for t in inputs]
        ctx.napkin_shapes = tuple(t.shape for t in inputs)
        ctx.napkin_output_meta = [(t.shape, t.device) for t in output]
        # Outputs nobody differentiates (the saved statistics and activations) keep a None
        # cotangent: autograd would otherwise fill a zero tensor for each, every step (session 19:
        # 21 bf16 fills, 0.33 ms of a training step). _backward zero-fills only the cotangents the
        # backward diagram reads.
        if hasattr(ctx, "set_materialize_grads"):
            ctx.set_materialize_grads(False)

    def _backward(self, ctx, *grads):
        """Cotangents of every forward output (statistics included, ignored) -> gradients of the
        forward's inputs (None for those not in wrt)."""
        saved = iter(ctx.saved_tensors)
        args = []
        for kind, k, want in self._bwd_args:
            if kind == "saved":
                args.append(next(saved))
                continue
            g = grads[k]
            if g is None:
                shape, device = ctx.napkin_output_meta[k]
                g = torch.zeros(shape, dtype=want, device=device)
            elif g.dtype != want:
                g = g.to(want)
            args.append(g)
        outs = self._call("bwd", args)
        if args and _eager(args) and args[0].is_cuda and ctx.napkin_shapes not in self._fast:
            self._pair_fast(ctx.napkin_shapes, tuple(t.shape for t in args))
        result = [None] * len(self.pair.fwd.inputs)
        for i, g in zip(self._grad_slots, outs):
            want = ctx.napkin_input_dtypes[i]
            result[i] = g if g.dtype == want else g.to(want)
        return tuple(result)

    def _autograd_function(self):
        """The same forward and backward as an autograd.Function: what eager calls on real tensors
        run (see _eager), and all calls where torch lacks custom_op (torch.compile would break
        the graph there)."""
        op = self

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                out = op._compute("fwd", inputs)
                op._setup_context(ctx, inputs, out)
                return out

            @staticmethod
            def backward(ctx, *grads):
                return op._backward(ctx, *grads)

        Fn.__name__ = f"napkin_{self.name}"
        return Fn

    # -- running -------------------------------------------------------------------------------

    def _pair_fast(self, fwd_shapes, bwd_shapes):
        """Makes the fast path's Op for forward input shapes `fwd_shapes` once both parts have a
        C++ launch (the backward's at `bwd_shapes`); nothing where the fast path is unavailable."""
        f, b = self._launches.get(("fwd", fwd_shapes)), self._launches.get(("bwd", bwd_shapes))
        if f is None or b is None or f.fast is None or b.fast is None:
            return
        op = fastpath.module().make_op(self.name, f.fast, b.fast, self._fast_wiring, list(self._grad_slots))
        with self._lock:
            self._fast[fwd_shapes] = op

    def __call__(self, *tensors):
        if self._fast:
            # The C++ road (fastpath.py): eager calls at shapes already run forward and backward,
            # every tensor already in its declared dtype on one CUDA device; else the Python road.
            try:
                op = self._fast.get(tuple(t.shape for t in tensors))
            except AttributeError:
                op = None
            if op is not None and _eager(tensors):
                out = fastpath.module().apply(op, list(tensors))
                if out is not None:
                    self.fast_calls += 1
                    user = out[:len(self.outputs)]
                    return user[0] if len(user) == 1 else tuple(user)
        fwd = self.pair.fwd
        if len(tensors) != len(fwd.inputs):
            raise SignatureError(f"{self.name} takes {len(fwd.inputs)} tensors ({', '.join(fwd.inputs)}), got {len(tensors)}")
        args = []
        for name, t, want in zip(fwd.inputs, tensors, self._in_dtypes):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self.name}: input '{name}' is a {type(t).__name__}, not a torch.Tensor")
            if t.device != tensors[0].device:
                raise SignatureError(f"{self.name}: input '{name}' is on {t.device}, '{fwd.inputs[0]}' on {tensors[0].device}")
            if t.dtype != want:
                t = t.to(want)
            args.append(t.contiguous())
        if ("fwd", tuple(t.shape for t in args)) not in self._launches:
            fwd.sizes({n: t.shape for n, t in zip(fwd.inputs, args)})  # raises on shapes that do not fit
        if self.fwd_op is not None and not _eager(args):
            out = self._call("fwd", args)
        else:
            out = self._function.apply(*args)
            out = out if isinstance(out, tuple) else (out,)
        user = out[:len(self.outputs)]
        return user[0] if len(user) == 1 else tuple(user)

    def _compute(self, part, args):
        """Outputs of `part` ("fwd" or "bwd") on real tensors `args` (one device), as a tuple."""
        dev = args[0].device
        if dev.type == "cuda":
            index = args[0].get_device()
            launch = self._launches.get((part, tuple(t.shape for t in args)))
            if launch is None or not launch.fits(args, index):
                launch = self._launch(part, args)
            return launch(args, dev, index)
        sig = self._checked(part, args)[0]
        if dev.type != "cpu":
            raise SignatureError(f"{sig.name}: napkin_torch runs on CUDA and CPU tensors, not {dev.type}")
        res = self.module(part).run(dict(zip(sig.inputs, args)), None, reference=True)
        ptrs = {t.data_ptr() for t in args}
        outs = []
        for o in sig.outputs:
            t = res[o].to(torch_dtype(sig.dtypes[o])).contiguous()
            outs.append(t.clone() if t.data_ptr() in ptrs else t)
        return tuple(outs)

    def _checked(self, part, args):
        """(signature, axis sizes) of `part` on `args` after every check: one device, the declared
        dtypes, shapes that fit (SignatureError otherwise)."""
        sig = self.pair.fwd if part == "fwd" else self.pair.bwd
        sizes = sig.sizes({n: t.shape for n, t in zip(sig.inputs, args)})
        dev = args[0].device
        for n, t in zip(sig.inputs, args):
            if t.device != dev:
                raise SignatureError(f"{sig.name}: input '{n}' is on {t.device}, '{sig.inputs[0]}' on {dev}")
            if t.dtype != torch_dtype(sig.dtypes[n]):
                raise SignatureError(f"{sig.name}: input '{n}' is {t.dtype}; the diagram declares {sig.dtypes[n]}")
        return sig, sizes

    def _launch(self, part, args):
        """The _Launch of `part` at the shapes of `args` (CUDA tensors), after _checked's checks;
        builds the library on first use and remembers the launch for these shapes."""
        sig, sizes = self._checked(part, args)
        lib = self.library(part, sig.settable(sizes))
        size_list = [sizes[a] for a in sig.axis_names]
        sz = lib.sizes_array(size_list)
        outs = tuple((tuple(int(n) for n in sig.shape(o, sizes)), torch_dtype(sig.dtypes[o])) for o in sig.outputs)
        launch = _Launch(lib, tuple(torch_dtype(sig.dtypes[n]) for n in sig.inputs), outs, sz, lib.workspace_bytes(sz),
                         in_shapes=tuple(tuple(t.shape) for t in args), size_list=size_list)
        with self._lock:
            self._launches[(part, tuple(t.shape for t in args))] = launch
        return launch

    def library(self, part, sizes):
        """The loaded CUDA library of `part` ("fwd" or "bwd") at `sizes` ((axis, size) pairs of the
        axes not derived from others), built on first use."""
        key = (part, tuple(sizes))
        with self._lock:
            if key not in self._libs:
                self._libs[key] = CudaLibrary(self.build.cuda_library(part, sizes))
            return self._libs[key]

    def module(self, part):
        """The PyTorch module napkin emitted for `part`: "orig" (the diagram), "fwd" or "bwd"."""
        with self._lock:
            if part not in self._modules:
                self._modules[part] = _load_module(self.build.modules[part], f"napkin_torch_{part}_{self.build.key}")
            return self._modules[part]

    def prepare(self, *tensors):
        """Builds (or finds in the cache) the CUDA libraries of the forward and backward for the
        sizes `tensors` (the operator's inputs, or any tensors of their shapes) give, so that
        the first call does not pay for nvcc. Returns the two library paths."""
        sizes = self.pair.fwd.sizes({n: t.shape for n, t in zip(self.pair.fwd.inputs, tensors)})
        settable = self.pair.fwd.settable(sizes)
        return tuple(self.build.cuda_library(p, settable) for p in ("fwd", "bwd"))

    def reference(self, *tensors, fp32=True):
        """The diagram computed by plain PyTorch ops (the module `napkin emit --target torch`
        wrote), differentiable by torch autograd: the reference napkin's operator is checked
        against. fp32=True computes in fp32 and returns fp32 (reference mode); False computes as
        eager PyTorch does in the declared dtypes. Returns what __call__ returns."""
        orig = self.pair.fwd
        if len(tensors) != len(orig.inputs):
            raise SignatureError(f"{self.name} takes {len(orig.inputs)} tensors ({', '.join(orig.inputs)}), got {len(tensors)}")
        res = self.module("orig").run(dict(zip(orig.inputs, tensors)), None, reference=fp32)
        out = tuple(res[o] for o in self.outputs)
        return out[0] if len(out) == 1 else out
