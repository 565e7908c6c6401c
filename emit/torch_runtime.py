import math

import torch
import torch.nn.functional as F

# Dtypes: arrays of each napkin dtype are computed in a carrier torch dtype that holds its values
# exactly (fp8, int8 and int4 in bf16, tf32 in fp32, int32 indices in fp64) and stored in _storage(dtype).
_CARRIER = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
            "fp8e4m3": torch.bfloat16, "fp8e5m2": torch.bfloat16, "int8": torch.bfloat16, "int4": torch.bfloat16,
            "int32": torch.float64}
# Explicit fraction bits, smallest normal exponent, largest finite value, has infinities.
_FORMATS = {"fp32": (23, -126, 3.4028234663852886e38, True), "tf32": (10, -126, 3.4011621342146535e38, True),
            "bf16": (7, -126, 3.3895313892515355e38, True), "fp16": (10, -14, 65504.0, True),
            "fp8e4m3": (3, -6, 448.0, False), "fp8e5m2": (2, -14, 57344.0, True)}


def _storage(dt):
    """The torch dtype inputs and outputs of napkin dtype `dt` are stored in."""
    if dt in ("int8", "int4"):
        return torch.int8
    if dt == "int32":
        return torch.int32
    if dt.startswith("fp8"):
        t = getattr(torch, "float8_e4m3fn" if dt == "fp8e4m3" else "float8_e5m2", None)
        if t is None:
            raise RuntimeError(f"napkin dtype {dt} needs torch with float8 dtypes (2.1 or later)")
        return t
    return _CARRIER[dt]


def _round(v, dt):
    """Tensor v rounded to napkin dtype `dt` (nearest even; fp8e4m3 and integers saturate; NaN stays
    NaN), in dt's carrier dtype."""
    if dt in ("fp32", "bf16", "fp16"):
        return v.to(_CARRIER[dt])
    if dt == "tf32":
        v = v.float()
        i = v.view(torch.int32)
        r = ((i + 0xFFF + ((i >> 13) & 1)) & ~0x1FFF).view(torch.float32)
        return torch.where(torch.isnan(v), v, r)
    if dt == "fp8e4m3":
        return v.clamp(-448.0, 448.0).to(_storage(dt)).to(torch.bfloat16)
    if dt == "fp8e5m2":
        v = torch.where(v.abs() >= 61440.0, v * math.inf, v.clamp(-57344.0, 57344.0))
        return v.to(_storage(dt)).to(torch.bfloat16)
    if dt == "int32":
        return v.double().round().clamp(-2147483648.0, 2147483647.0)
    lo, hi = (-128.0, 127.0) if dt == "int8" else (-8.0, 7.0)
    return v.float().round().clamp(lo, hi).to(torch.bfloat16)


def _round_scalar(x, dt):
    """Python float x rounded to napkin dtype `dt`, as diagrams/dtype.cpp rounds it."""
    if x != x:
        return x
    if dt in ("int8", "int4", "int32"):
        hi = 127.0 if dt == "int8" else 7.0 if dt == "int4" else 2147483647.0
        return max(-hi - 1.0, min(hi, x if math.isinf(x) else float(round(x))))
    mant, emin, top, has_inf = _FORMATS[dt]
    if x == 0 or math.isinf(x):
        return x if x == 0 or has_inf else math.copysign(top, x)
    q = math.ldexp(1.0, max(math.frexp(x)[1] - 1, emin) - mant)
    r = round(x / q) * q
    if abs(r) > top:
        return math.copysign(math.inf if has_inf else top, x)
    return r


def _cast(v, dt, ref):
    """A dtype label or cast(X, dt): v's values rounded to dt, in dt's carrier dtype (reference
    mode: in fp32)."""
    if not isinstance(v, torch.Tensor):
        return _round_scalar(float(v), dt)
    r = _round(v, dt)
    return r.float() if ref else r


def _load(t, dt, ref):
    """An input as computed: fp32 in reference mode; fp8 and integer storage in its carrier."""
    if ref:
        return t.float()
    return t.to(_CARRIER[dt]) if not t.is_floating_point() or t.element_size() == 1 else t


def _store(v, dt, ref, dev):
    """An output as returned: in dt's storage dtype (reference mode: fp32, unrounded)."""
    if not isinstance(v, torch.Tensor):
        v = torch.full((), float(v), dtype=torch.float64, device=dev)
    return v.float() if ref else _round(v, dt).to(_storage(dt))


def _sizes(decl, arrays, inputs, given):
    """Axis sizes: `given`, then the input shapes, then the declared sizes (decl: (axis, factors) in
    declaration order; a factor is a size or an earlier axis). ValueError for a missing input, a
    shape of the wrong rank, two sizes of one axis, or a product axis given another size."""
    known, declared = dict(given or {}), dict(decl)
    for a in known:
        if a not in declared:
            raise ValueError(f"no axis '{a}' to size")
    if arrays is not None:
        for name, axes in arrays.items():
            if name not in inputs:
                raise ValueError(f"input '{name}' is missing")
            shape = tuple(inputs[name].shape)
            if len(shape) != len(axes):
                raise ValueError(f"input '{name}' has shape {shape}; its axes are {axes}")
            for a, s in zip(axes, shape):
                if known.setdefault(a, s) != s:
                    raise ValueError(f"axis '{a}' has size {known[a]} and, in input '{name}', {s}")
    n = {}
    for a, factors in decl:
        size, derived = 1, False
        for f in factors:
            if isinstance(f, str):
                size, derived = size * n[f], True
            else:
                size *= f
        if derived and known.get(a, size) != size:
            raise ValueError(f"size mismatch: axis '{a}' is a product of other axes, {size}, but has size {known[a]}")
        n[a] = known.get(a, size)
    return n


def _device(inputs):
    for t in inputs.values():
        return t.device
    return torch.device("cpu")


def _einsum(eq, *ops):
    """torch.einsum after promoting the operands to one dtype (fp32 accumulation inside, as torch
    does for 16-bit operands)."""
    dt = ops[0].dtype
    for t in ops[1:]:
        if t.dtype != dt:
            dt = torch.promote_types(dt, t.dtype)
    return torch.einsum(eq, *[t if t.dtype == dt else t.to(dt) for t in ops])


def _gather(x, dim, t):
    """gather(L, T; v) (napkin's sum(pick(L, T; v); v)): x's entries at the indices t along dim; t
    has x's trailing dimensions, of size 1 along dim and where T lacks an axis."""
    shape = list(x.shape)
    shape[dim] = 1
    return torch.gather(x, dim, torch.broadcast_to(t.long(), shape)).squeeze(dim)


def _band(nq, nx, lo, hi, dev):
    """causal(q, x[; window=W]) and band(q, x; lo, hi): True where lo <= index(x) - index(q) <= hi
    (lo None: no lower bound; causal is hi = 0, lo = 1 - W)."""
    keep = torch.ones(nq, nx, dtype=torch.bool, device=dev).tril(hi)
    return keep if lo is None else keep.triu(lo)


def _pos(n, dev):
    """pos(q): the indices along q as numbers."""
    return torch.arange(n, dtype=torch.float32, device=dev)


def _layer_norm(x, dim, w, b, eps):
    """layernorm(X[, W[, B]]; a) along x's axis `dim` (negative); w and b are 1-D along it or None."""
    xm = x.movedim(dim, -1)
    fused = True  # (written without generators, which some torch.compile versions do not trace)
    for t in (w, b):
        fused = fused and (t is None or (t.dim() == 1 and t.dtype == x.dtype))
    y = F.layer_norm(xm, (xm.shape[-1],), w if fused else None, b if fused else None, eps).movedim(-1, dim)
    if not fused:
        tail = (1,) * (-dim - 1)
        y = y if w is None else y * w.reshape(tuple(w.shape) + tail)
        y = y if b is None else y + b.reshape(tuple(b.shape) + tail)
    return y


def _rms_norm(x, dim, w, eps):
    """rmsnorm(X[, W]; a) along x's axis `dim` (negative): F.rms_norm where torch has it."""
    xm = x.movedim(dim, -1)
    fused = w is not None and w.dim() == 1 and w.dtype == x.dtype
    if hasattr(F, "rms_norm"):
        y = F.rms_norm(xm, (xm.shape[-1],), w if fused else None, eps)
    else:
        xf = xm.float()
        y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
        y = y * w if fused else y
    y = y.movedim(-1, dim)
    if w is not None and not fused:
        y = y * w.reshape(tuple(w.shape) + (1,) * (-dim - 1))
    return y


def _woven(r, sizes, nout):
    """A call's result: the callee's output (its axes last, the woven axes, of `sizes`, just before
    them) with the woven axes moved after its own axes and expanded to their sizes."""
    nw = len(sizes)
    while r.dim() < nw + nout:
        r = r.unsqueeze(0)
    k = r.dim() - nw - nout
    r = r.expand(*r.shape[:k], *sizes, *r.shape[k + nw:])
    return r.movedim(tuple(range(-nw - nout, -nout)), tuple(range(-nw, 0)))


def _tensor(v, dev):
    return v if isinstance(v, torch.Tensor) else torch.full((), float(v), dtype=torch.float32, device=dev)


# Scalar maths with the evaluator's IEEE results where Python's math raises.
def _s_exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _s_log(x):
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def _s_pow(x, p):
    """x ** p with C's pow results where Python's math raises (0 to a negative power, overflow)."""
    if x == 0 and p < 0:
        odd = p == math.floor(p) and math.fmod(p, 2) != 0
        return math.copysign(math.inf, x) if odd else math.inf
    try:
        return math.pow(x, p)
    except ValueError:  # a negative base and a fractional exponent
        return math.nan
    except OverflowError:
        return math.copysign(math.inf, x) if x < 0 and p == math.floor(p) and math.fmod(p, 2) != 0 else math.inf


def _s_fmin(a, b):
    return b if math.isnan(a) else (a if math.isnan(b) else min(a, b))


def _s_fmax(a, b):
    return b if math.isnan(a) else (a if math.isnan(b) else max(a, b))


def _step(x):
    """1 where x > 0, 0 where x <= 0, NaN where x is NaN (the evaluator's step, diagrams/eval.cpp)."""
    return torch.where(torch.isnan(x), x, (x > 0).to(x.dtype))


def _s_step(x):
    return x if math.isnan(x) else (1.0 if x > 0 else 0.0)


def _s_erf(x):
    return math.erf(x)


def _s_abs(x):
    return abs(x)


def _s_sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def _s_rsqrt(x):
    return 1.0 / math.sqrt(x) if x > 0 else (math.copysign(math.inf, x) if x == 0 else math.nan)


def _s_div(a, b):
    if b != 0:
        return a / b
    return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b)


def _s_sigmoid(x):
    return 1.0 / (1.0 + _s_exp(-x))


def _s_silu(x):
    return _s_div(x, 1.0 + _s_exp(-x))


def _s_gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def _s_gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _s_relu(x):
    return x if x > 0 else 0.0


def _s_tanh(x):
    return math.tanh(x)

