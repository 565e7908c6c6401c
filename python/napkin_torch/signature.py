"""A diagram's signature (axes, inputs, outputs, dtypes) and the pairing of its forward and backward.

Torch-free: everything here is read from the module that `napkin emit --target torch` writes, by
parsing its literal assignments (DIAGRAM, INPUTS, OUTPUTS, AXES, DTYPES, OUT_DTYPES, _DECL) with
`ast`, never by executing it. napkin's emitter has already resolved imports, calls and axis
aliases, so this reads the diagram as napkin understands it.
"""
import ast
from dataclasses import dataclass

# napkin dtype -> the torch dtype (attribute name of the torch module) its arrays are stored in,
# for the dtypes napkin's CUDA emitter stores (emit/cuda/context.cpp: fp32, bf16, fp16).
STORAGE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}

_FIELDS = ("DIAGRAM", "INPUTS", "OUTPUTS", "AXES", "DTYPES", "OUT_DTYPES", "_DECL")


class SignatureError(ValueError):
    """A diagram napkin_torch cannot expose as an operator, or inputs that do not fit it."""


@dataclass(frozen=True)
class Signature:
    """One diagram's interface.

    name: the diagram's name. inputs, outputs: array names in the diagram's order (the order of
    the CUDA entry point's pointer arrays). axes: array name -> its axis names, outermost first
    (row-major). dtypes: array name -> napkin dtype ("bf16", ...), inputs and outputs.
    decl: (axis, factors) in declaration order, a factor an int size or an earlier axis's name
    (an axis whose factors name axes is derived: its size follows from theirs)."""

    name: str
    inputs: tuple
    outputs: tuple
    axes: dict
    dtypes: dict
    decl: tuple

    @property
    def axis_names(self):
        """Axis names in declaration order (the order of the CUDA entry point's sizes array)."""
        return tuple(a for a, _ in self.decl)

    def is_derived(self, axis):
        """True when `axis` is declared from other axes (e.g. `axis x2 = s`): never --set."""
        for a, factors in self.decl:
            if a == axis:
                return any(isinstance(f, str) for f in factors)
        raise SignatureError(f"diagram {self.name} has no axis '{axis}'")

    def sizes(self, shapes):
        """Every axis's size from the inputs' shapes.

        shapes: input name -> shape (a sequence of ints, or of torch SymInts while tracing), one
        per input. Returns axis -> size in declaration order: an axis an input has takes the
        input's size, a derived axis the product of its factors, any other its declared size.
        Raises SignatureError for a missing input, a shape of the wrong rank, an axis given two
        sizes, or a derived axis whose inputs disagree with its factors."""
        known = {}
        for name in self.inputs:
            if name not in shapes:
                raise SignatureError(f"{self.name}: input '{name}' is missing")
            shape, axes = tuple(shapes[name]), self.axes[name]
            if len(shape) != len(axes):
                raise SignatureError(f"{self.name}: input '{name}' has shape {list(shape)}, but its axes are "
                                     f"[{', '.join(axes)}] ({len(axes)} dimensions)")
            for a, s in zip(axes, shape):
                if a in known and known[a] != s:
                    raise SignatureError(f"{self.name}: axis '{a}' has size {known[a]} from an earlier input and "
                                         f"{s} in input '{name}' {list(shape)}")
                known[a] = s
        n = {}
        for a, factors in self.decl:
            size, derived = 1, False
            for f in factors:
                if isinstance(f, str):
                    size, derived = size * n[f], True
                else:
                    size = size * f
            if derived and a in known and known[a] != size:
                raise SignatureError(f"{self.name}: axis '{a}' is declared from other axes, size {size}, but the "
                                     f"inputs give it {known[a]}")
            n[a] = known.get(a, size)
        return n

    def settable(self, sizes):
        """The (axis, size) pairs to pass as napkin's --set: the axes not derived from others."""
        return tuple((a, int(sizes[a])) for a in self.axis_names if not self.is_derived(a))

    def shape(self, name, sizes):
        """The shape of array `name` at axis sizes `sizes` (as sizes() returns)."""
        return tuple(sizes[a] for a in self.axes[name])

    def check_storable(self):
        """Raises SignatureError naming each input or output whose dtype napkin_torch cannot store."""
        bad = [f"{k} ({self.dtypes[k]})" for k in self.inputs + self.outputs if self.dtypes[k] not in STORAGE]
        if bad:
            raise SignatureError(f"{self.name}: napkin_torch stores fp32, bf16 and fp16 arrays only; not " + ", ".join(bad))


def parse_torch_module(text, origin="<module>"):
    """The Signature of the diagram a `napkin emit --target torch` module computes.

    text: the module's source. origin: its path, for messages. Raises SignatureError when one of
    the fields is missing or not a literal (not a module napkin wrote, or a napkin too old)."""
    try:
        tree = ast.parse(text, filename=origin)
    except SyntaxError as e:
        raise SignatureError(f"{origin}: not a Python module napkin wrote: {e}") from None
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            key = node.targets[0].id
            if key in _FIELDS:
                try:
                    found[key] = ast.literal_eval(node.value)
                except ValueError:
                    raise SignatureError(f"{origin}:{node.lineno}: {key} is not a literal") from None
    missing = [k for k in _FIELDS if k not in found]
    if missing:
        raise SignatureError(f"{origin}: not a module of `napkin emit --target torch` (no {', '.join(missing)})")
    name = found["DIAGRAM"]
    if name not in found["_DECL"]:
        raise SignatureError(f"{origin}: _DECL has no entry for diagram {name}")
    dtypes = dict(found["DTYPES"])
    dtypes.update(found["OUT_DTYPES"])
    axes = {k: tuple(v) for k, v in found["AXES"].items()}
    for k in tuple(found["INPUTS"]) + tuple(found["OUTPUTS"]):
        if k not in axes or k not in dtypes:
            raise SignatureError(f"{origin}: array '{k}' has no axes or dtype")
    decl = tuple((a, tuple(f)) for a, f in found["_DECL"][name])
    return Signature(name, tuple(found["INPUTS"]), tuple(found["OUTPUTS"]), axes, dtypes, decl)


@dataclass(frozen=True)
class GradPair:
    """How a forward, its `napkin grad` forward (with saved statistics) and backward fit together.

    user_outputs: the original diagram's outputs (the operator returns these). saved: the extra
    outputs of the forward (statistics the backward reads). cotangent: backward input -> the
    forward output it is the cotangent of. from_forward: backward input -> the forward input or
    output it is (saved for the backward). grads: backward output -> the forward input it is the
    gradient of."""

    fwd: Signature
    bwd: Signature
    user_outputs: tuple
    saved: tuple
    cotangent: dict
    from_forward: dict
    grads: dict

    @property
    def wrt(self):
        """The forward inputs that get gradients, in the forward's input order."""
        return tuple(i for i in self.fwd.inputs if i in self.grads.values())


def pair(orig, fwd, bwd):
    """Pairs a diagram `orig` with the forward `fwd` and backward `bwd` that `napkin grad` wrote
    for it (Signatures). Raises SignatureError where they do not fit napkin grad's conventions:
    the forward has the original's inputs, and its outputs first then saved ones; each backward
    input is a forward input, `d<output>` for an output, or a saved forward output; each backward
    output is `d<input>` for a forward input."""
    if fwd.inputs != orig.inputs:
        raise SignatureError(f"{fwd.name} has inputs {fwd.inputs}, {orig.name} has {orig.inputs}")
    if fwd.outputs[:len(orig.outputs)] != orig.outputs:
        raise SignatureError(f"{fwd.name}'s outputs {fwd.outputs} do not start with {orig.name}'s {orig.outputs}")
    cotangent, from_forward, grads = {}, {}, {}
    for name in bwd.inputs:
        if name in fwd.inputs or name in fwd.outputs:
            from_forward[name] = name
        elif name.startswith("d") and name[1:] in orig.outputs:
            cotangent[name] = name[1:]
        else:
            raise SignatureError(f"{bwd.name}: input '{name}' is neither an input or output of {fwd.name} nor the "
                                 f"cotangent of one of its outputs")
    for name in bwd.outputs:
        if not (name.startswith("d") and name[1:] in fwd.inputs):
            raise SignatureError(f"{bwd.name}: output '{name}' is not d<input> of {fwd.name}")
        grads[name] = name[1:]
    for a, factors in fwd.decl:
        if (a, factors) not in bwd.decl and a in bwd.axis_names:
            raise SignatureError(f"axis '{a}' is declared differently in {fwd.name} and {bwd.name}")
    return GradPair(fwd, bwd, orig.outputs, fwd.outputs[len(orig.outputs):], cotangent, from_forward, grads)
