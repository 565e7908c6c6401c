"""napkin diagrams as PyTorch operators with autograd (needs torch; see __init__.load).

Each loaded diagram becomes two custom operators (torch >= 2.4, torch.library.custom_op):
  napkin::<name>_fwd_<key>(inputs...) -> (outputs..., saved statistics...)
  napkin::<name>_bwd_<key>(backward inputs...) -> (gradients...)
each with a fake implementation (shapes and dtypes from the diagram's declarations, for
torch.compile and meta tensors), and autograd on the forward that calls the backward. Their
implementation on CUDA tensors runs the kernels napkin emits for the tensors' sizes (built and
cached on first use, see build.py) through their C entry point; on CPU tensors it runs the
module `napkin emit --target torch` wrote, in fp32 (its reference mode), rounding the outputs to
their declared dtypes. With torch < 2.4 the same is a torch.autograd.Function (eager only).
"""
import ctypes
import importlib.util
import threading

import torch

from .signature import STORAGE, SignatureError, pair

# torch 2.4 brought custom_op(name, fn, schema=...) with register_fake and register_autograd.
_HAS_CUSTOM_OP = hasattr(torch, "library") and hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd")
NAMESPACE = "napkin"


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

    def run(self, inputs, outputs, sizes):
        """Launches every kernel on the current CUDA stream of the inputs' device.

        inputs, outputs: contiguous CUDA tensors in the diagram's order, of its dtypes (outputs
        allocated by the caller). sizes: every axis's size in declaration order. Raises
        RuntimeError with the library's message when a launch fails (errors inside a kernel
        surface at the next synchronisation)."""
        sz = (ctypes.c_int64 * len(sizes))(*[int(s) for s in sizes])
        dev = inputs[0].device if inputs else outputs[0].device
        ws_bytes = self.lib.napkin_workspace_bytes(sz)
        ws = torch.empty(max(int(ws_bytes), 1), dtype=torch.uint8, device=dev)
        ins = (ctypes.c_void_p * max(len(inputs), 1))(*[t.data_ptr() for t in inputs])
        outs = (ctypes.c_void_p * max(len(outputs), 1))(*[t.data_ptr() for t in outputs])
        with torch.cuda.device(dev):
            stream = torch.cuda.current_stream(dev).cuda_stream
            rc = self.lib.napkin_run(ins, outs, sz, ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(stream))
        if rc != 0:
            raise RuntimeError(f"napkin_torch: {self.path}: {self.lib.napkin_last_error().decode(errors='replace')}")


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
        self._lock = threading.Lock()
        tag = f"{build.key[:10]}"
        self.fwd_op = self._define(f"{self.pair.fwd.name}_{tag}", "fwd")
        self.bwd_op = self._define(f"{self.pair.bwd.name}_{tag}", "bwd")
        if self.fwd_op is not None:
            self.fwd_op.register_autograd(self._backward, setup_context=self._setup_context)
        else:
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
        """`part`'s operator on `args` (its computation where torch lacks custom ops), as a tuple."""
        op = self.fwd_op if part == "fwd" else self.bwd_op
        if op is None:
            return self._compute(part, args)
        out = op(*args)
        return out if isinstance(out, tuple) else (out,)

    def _setup_context(self, ctx, inputs, output):
        output = output if isinstance(output, tuple) else (output,)
        fwd = self.pair.fwd
        by_name = dict(zip(fwd.inputs, inputs))
        by_name.update(zip(fwd.outputs, output))
        ctx.save_for_backward(*[by_name[self.pair.from_forward[n]] for n in self.pair.bwd.inputs if n in self.pair.from_forward])
        ctx.napkin_input_meta = [(t.dtype, t.shape) for t in inputs]
        ctx.napkin_output_meta = [(t.dtype, t.shape, t.device) for t in output]
        # Outputs nobody differentiates (the saved statistics and activations) keep a None
        # cotangent: autograd would otherwise fill a zero tensor for each, every step (session 19:
        # 21 bf16 fills, 0.33 ms of a training step). _backward zero-fills only the cotangents the
        # backward diagram reads.
        if hasattr(ctx, "set_materialize_grads"):
            ctx.set_materialize_grads(False)

    def _backward(self, ctx, *grads):
        """Cotangents of every forward output (statistics included, ignored) -> gradients of the
        forward's inputs (None for those not in wrt)."""
        fwd, bwd = self.pair.fwd, self.pair.bwd
        saved = iter(ctx.saved_tensors)
        args = []
        for n in bwd.inputs:
            if n in self.pair.from_forward:
                args.append(next(saved))
                continue
            k = fwd.outputs.index(self.pair.cotangent[n])
            g = grads[k]
            dtype, shape, device = ctx.napkin_output_meta[k]
            want = torch_dtype(bwd.dtypes[n])
            g = torch.zeros(shape, dtype=want, device=device) if g is None else g.to(want).contiguous()
            args.append(g)
        outs = self._call("bwd", args)
        result = [None] * len(fwd.inputs)
        for name, g in zip(bwd.outputs, outs):
            i = fwd.inputs.index(self.pair.grads[name])
            result[i] = g.to(ctx.napkin_input_meta[i][0])
        return tuple(result)

    def _autograd_function(self):
        """The fallback for torch without custom_op: the same forward and backward as an
        autograd.Function (eager mode; torch.compile would break the graph here)."""
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

    def __call__(self, *tensors):
        fwd = self.pair.fwd
        if len(tensors) != len(fwd.inputs):
            raise SignatureError(f"{self.name} takes {len(fwd.inputs)} tensors ({', '.join(fwd.inputs)}), got {len(tensors)}")
        args = []
        for name, t in zip(fwd.inputs, tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self.name}: input '{name}' is a {type(t).__name__}, not a torch.Tensor")
            if t.device != tensors[0].device:
                raise SignatureError(f"{self.name}: input '{name}' is on {t.device}, '{fwd.inputs[0]}' on {tensors[0].device}")
            args.append(t.to(torch_dtype(fwd.dtypes[name])).contiguous())
        fwd.sizes({n: t.shape for n, t in zip(fwd.inputs, args)})  # raises on shapes that do not fit
        if self.fwd_op is not None:
            out = self._call("fwd", args)
        else:
            out = self._function.apply(*args)
            out = out if isinstance(out, tuple) else (out,)
        user = out[:len(self.outputs)]
        return user[0] if len(user) == 1 else tuple(user)

    def _compute(self, part, args):
        """Outputs of `part` ("fwd" or "bwd") on real tensors `args` (one device), as a tuple."""
        sig = self.pair.fwd if part == "fwd" else self.pair.bwd
        sizes = sig.sizes({n: t.shape for n, t in zip(sig.inputs, args)})
        dev = args[0].device
        for n, t in zip(sig.inputs, args):
            if t.device != dev:
                raise SignatureError(f"{sig.name}: input '{n}' is on {t.device}, '{sig.inputs[0]}' on {dev}")
            if t.dtype != torch_dtype(sig.dtypes[n]):
                raise SignatureError(f"{sig.name}: input '{n}' is {t.dtype}; the diagram declares {sig.dtypes[n]}")
        if dev.type == "cuda":
            # Contiguous, and 16-byte aligned for the kernels' vector loads (a view with an odd
            # offset is copied).
            args = [t.contiguous() for t in args]
            args = [t.clone() if t.data_ptr() % 16 else t for t in args]
            outs = [torch.empty(sig.shape(o, sizes), dtype=torch_dtype(sig.dtypes[o]), device=dev) for o in sig.outputs]
            if all(t.numel() > 0 for t in outs):
                self.library(part, sig.settable(sizes)).run(args, outs, [sizes[a] for a in sig.axis_names])
            return tuple(outs)
        if dev.type != "cpu":
            raise SignatureError(f"{sig.name}: napkin_torch runs on CUDA and CPU tensors, not {dev.type}")
        res = self.module(part).run(dict(zip(sig.inputs, args)), None, reference=True)
        ptrs = {t.data_ptr() for t in args}
        outs = []
        for o in sig.outputs:
            t = res[o].to(torch_dtype(sig.dtypes[o])).contiguous()
            outs.append(t.clone() if t.data_ptr() in ptrs else t)
        return tuple(outs)

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
