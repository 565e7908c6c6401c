/** \file ir.hpp
 *  The diagram IR: an immutable value describing one or more diagrams of a file.
 *
 *  A Diagram holds, in source order, axis declarations, inputs, statements (each defining one
 *  array by an expression tree) and outputs. Expression nodes are shared and never changed after
 *  construction (ExprPtr points at const). Relabelling labels have their place here already:
 *  a memory level on every array occurrence (inputs, outputs, statement results and references)
 *  and a group size and a stream size on every axis.
 *
 *  Equality is structural and ignores source locations, so parse(print(d)) == d can be tested.
 *  Comments and blank lines are kept as Trivia so that printing a canonical file reproduces it.
 */
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "diagrams/dtype.hpp"
#include "diagrams/source.hpp"

namespace napkin {

/** Comments and blank lines attached to an item. `leading` holds the lines before the item: a
 *  comment line is stored with its text after '#', a blank line as std::nullopt. `trailing` is the
 *  comment at the end of the item's own line (text after "# ", trimmed), empty if none. */
struct Trivia {
  std::vector<std::optional<std::string>> leading;
  std::string trailing;
  bool operator==(const Trivia&) const = default;
};

/** A number as written: its value and its spelling (kept so that printing reproduces "1e-5"). */
struct Number {
  double value = 0;
  std::string spelling;
  bool operator==(const Number& o) const { return value == o.value && spelling == o.spelling; }
};

/** The built-in operations and the call of another diagram. */
enum class Op {
  // element-wise, one operand
  neg, exp, log, relu, gelu, silu, sigmoid, tanh, rsqrt, sqrt, abs,
  // gelu_tanh(X): GELU's tanh approximation x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  // (Hendrycks and Gimpel 2016, section 2; PyTorch's F.gelu(approximate='tanh'), cuBLASLt's GELU epilogue)
  gelu_tanh,
  // step(X): 1 where X > 0, 0 where X <= 0, NaN where X is NaN (the derivative of relu);
  // erf(X): the error function (the derivative of gelu is written with it)
  step, erf,
  // element-wise, two operands (broadcast by axis name); pow's exponent is a number
  add, sub, mul, div, pow, minimum, maximum,
  // pick(L, T; v): element-wise, L where index(v) == T and 0 elsewhere (T integer, without v): the
  // one-hot select that gather(L, T; v) = sum(pick(L, T; v); v) is expanded into
  pick,
  // contraction (einsum) over the axes after ';'
  contract,
  // reductions over the axes after ';'
  sum, max, mean,
  // normalisations over one axis
  softmax, layernorm, rmsnorm,
  // built-ins that loading expands into the operations above (diagrams/builtins.hpp):
  // logsumexp(X; v...) reduces like sum; l2norm(X; v[, eps=1e-12]) normalises like rmsnorm;
  // gather(L, T; v) is L[..., T[...], ...] along v (v reduced, like sum)
  logsumexp, l2norm, gather,
  // masks: mask(X, M) keeps X where M != 0 and puts -inf elsewhere; causal(q, x) is 1 where x <= q
  // (and q - window < x with the option window=W); band(q, x; lo=L, hi=H) is 1 where L <= x - q <= H
  mask, causal, band,
  // positions as values: pos(q) is the index along axis q, a number of shape [q]
  pos,
  // cast(X, dtype): round to a dtype
  cast,
  // call of another diagram
  call,
};

struct Expr;
/** Shared pointer to an immutable expression node; compares by value. */
struct ExprPtr {
  std::shared_ptr<const Expr> ptr;
  const Expr& operator*() const { return *ptr; }
  const Expr* operator->() const { return ptr.get(); }
  explicit operator bool() const { return ptr != nullptr; }
  bool operator==(const ExprPtr& o) const;
};

/** `name = value` after ';' in an application: an option (eps=1e-5) or, for a diagram call, an
 *  axis binding (q=s binds the callee's axis q to the caller's axis s). */
struct Binding {
  std::string key;
  std::string ident;              ///< identifier value (axis binding), or empty
  std::optional<Number> number;   ///< number value (option), or empty
  SourceLoc loc;
  bool operator==(const Binding&) const = default;
};

/** One node of an expression tree.
 *  - kind ref:    `name` is an array or an axis (an axis reference denotes its size, a scalar);
 *                 `level` is the memory level of this occurrence, if labelled.
 *  - kind number: `number`.
 *  - kind apply:  `op` applied to `args`; `axes` are the axes after ';' (reduced, normalised or
 *                 masked over); `bindings` the `key=value` items after ';'; `callee` the diagram
 *                 name for Op::call; `dtype` the target of Op::cast. Binary operators are
 *                 applications of add/sub/mul/div with two args; unary minus is neg. */
struct Expr {
  enum class Kind { ref, number, apply };
  Kind kind = Kind::number;
  SourceLoc loc;
  std::string name;
  std::optional<MemLevel> level;
  Number number;
  Op op = Op::add;
  std::string callee;
  std::vector<ExprPtr> args;
  std::vector<std::string> axes;
  std::vector<SourceLoc> axis_locs;  ///< location of each entry of `axes`
  std::vector<Binding> bindings;
  std::optional<DType> dtype;
  bool operator==(const Expr&) const = default;
};

ExprPtr make_ref(std::string name, SourceLoc loc, std::optional<MemLevel> level = std::nullopt);
ExprPtr make_number(Number n, SourceLoc loc);
ExprPtr make_apply(Op op, std::vector<ExprPtr> args, SourceLoc loc);
/** A copy of `e` with some fields changed: the way passes derive new nodes from old ones. */
ExprPtr rebuild(const Expr& e);
/** `e` with its node `target` (compared by address) replaced by `by`; the nodes off the path to
 *  it are shared, and `e` itself comes back when `target` is not in it. */
ExprPtr replace_node(const ExprPtr& e, const Expr* target, const ExprPtr& by);
/** The pointer holding the node `target` of `e` (compared by address), or an empty one. */
ExprPtr find_node(const ExprPtr& e, const Expr* target);

/** One factor of an axis size: a literal integer or another axis's size. */
struct SizeFactor {
  std::string axis;     ///< empty for a literal
  std::int64_t literal = 1;
  SourceLoc loc;
  bool operator==(const SizeFactor&) const = default;
};

/** `axis q = 8192 group 128 stream 64`: a named axis with its size (a product of factors) and
 *  its partition labels (group size, stream size; both in elements, absent until relabelled).
 *  A kernel's labels one level down and up ride on an axis too (derive/labelled.hpp):
 *  `group 128 warps 8` (8 warps split the block's tile along this axis; `warps 8 pingpong`: their
 *  consumer warpgroups take tiles in turn, Directive::pingpong), `group 128 cluster 2`
 *  (clusters of 2 adjacent blocks along it), `stream 1024 twice` (a two-pass stream). */
struct AxisDecl {
  std::string name;
  std::vector<SizeFactor> size;
  std::optional<std::int64_t> group;
  std::optional<std::int64_t> stream;
  std::optional<std::int64_t> warps;    ///< warps per thread block (the warp split is along this axis)
  std::optional<std::int64_t> cluster;  ///< thread blocks per cluster along this axis
  bool stream_twice = false;            ///< `stream N twice`: statistics first, then the map
  bool warps_pingpong = false;          ///< `warps N pingpong` (Directive::pingpong)
  SourceLoc label_loc;                  ///< where the first partition label is written (for diagnostics)
  Trivia trivia;
  SourceLoc loc;
  bool operator==(const AxisDecl&) const = default;
};

/** `in Q[b,h,q,d] : bf16 @hbm`: an input array with its axes (outermost first), dtype and level. */
/** Elements of an array are exactly 0 unless lo <= index(b) - index(a) <= hi (an absent bound:
 *  none on that side): what diagrams/zero_band.hpp finds of an array. */
struct ZeroBand {
  std::string a, b;
  std::optional<std::int64_t> lo, hi;
  bool operator==(const ZeroBand&) const = default;
};

struct InputDecl {
  std::string name;
  std::vector<std::string> axes;
  std::vector<SourceLoc> axis_locs;
  DType dtype = DType::fp32;
  std::optional<MemLevel> level;
  /** Where the input is known to be 0 (diagrams/zero_band.hpp): set on a kernel view's inputs that
   *  the whole diagram computes (derive/search.cpp), never parsed or printed. */
  std::optional<ZeroBand> zero_band;
  Trivia trivia;
  SourceLoc loc;
  bool operator==(const InputDecl&) const = default;
};

/** `S[b,h,q,x] : fp32 @reg = expr`: defines array `name` with the listed axes (their order is the
 *  array's layout) by an expression. dtype and level are optional labels. */
struct Statement {
  std::string name;
  std::vector<std::string> axes;
  std::vector<SourceLoc> axis_locs;
  std::optional<DType> dtype;
  std::optional<MemLevel> level;
  ExprPtr expr;
  Trivia trivia;
  SourceLoc loc;
  bool operator==(const Statement&) const = default;
};

/** `out O : bf16 @hbm`: marks an array as an output, with the dtype it is stored in. */
struct OutputDecl {
  std::string name;
  DType dtype = DType::fp32;
  std::optional<MemLevel> level;
  Trivia trivia;
  SourceLoc loc;
  bool operator==(const OutputDecl&) const = default;
};

using Item = std::variant<AxisDecl, InputDecl, Statement, OutputDecl>;

/** `diagram NAME` and the items up to the next diagram or the end of the file. */
struct Diagram {
  std::string name;
  std::vector<Item> items;
  Trivia trivia;
  SourceLoc loc;
  bool operator==(const Diagram&) const = default;

  const AxisDecl* find_axis(const std::string& n) const;
  const InputDecl* find_input(const std::string& n) const;
  const Statement* find_statement(const std::string& n) const;
  std::vector<const AxisDecl*> axes() const;
  std::vector<const InputDecl*> inputs() const;
  std::vector<const Statement*> statements() const;
  std::vector<const OutputDecl*> outputs() const;
  /** Axes of array `n` (an input or a statement), or nullptr if no such array. */
  const std::vector<std::string>* array_axes(const std::string& n) const;
};

/** `import "path"`: makes the diagrams of another file callable. The path is relative to the
 *  importing file's folder. */
struct Import {
  std::string path;
  Trivia trivia;
  SourceLoc loc;
  bool operator==(const Import&) const = default;
};

/** One parsed file: its imports, its diagrams, and the comments after its last item. */
struct File {
  std::vector<Import> imports;
  std::vector<Diagram> diagrams;
  Trivia end;  ///< comments and blank lines after the last item
  bool operator==(const File&) const = default;
};

/** Every axis and array name of `d` (axes, inputs, statements). */
std::set<std::string> declared_names(const Diagram& d);
/** `base`, or `base_1`, `base_2`, ..: the first not in `taken`, which it then joins. */
std::string claim_name(const std::string& base, std::set<std::string>& taken);

/** Names of the operations, as written in files ("contract"); nullopt if not a built-in. */
std::string_view op_name(Op op);
std::optional<Op> builtin_op(std::string_view name);
/** True for the operations applied element by element (neg .. maximum, pick, cast, mask). */
bool is_elementwise(Op op);
/** True where `e` applies a normaliser along its axes: softmax, layernorm or rmsnorm. */
bool is_normaliser(const Expr& e);
/** True for the functions of axis indices alone (causal, band, pos): no operands, their axes
 *  written as arguments (`causal(q, x)`), their values computed from the indices where used. */
bool is_positional(Op op);
/** The axis v of the first pick(L, T; v) in `e` (an expanded gather), or "" if `e` holds none: the
 *  tensor-core forms decline a kernel holding one (lower/gemm_form, lower/flash_form). */
std::string picked_axis(const Expr& e);
/** True for causal(q, x) without a window: the mask whose tiles past the diagonal may be skipped. */
bool is_plain_causal(const Expr& e);
/** The offsets d = index(x) - index(q) that a mask causal(q, x[; window=W]) or band(q, x; lo=L,
 *  hi=H) keeps (value 1): lo <= d <= hi. causal: hi = 0 and lo = 1 - W, absent without a window
 *  (no lower bound); band: lo = L, hi = H. For a verified diagram (the options are integers). */
struct MaskBand {
  std::optional<std::int64_t> lo;
  std::int64_t hi = 0;
};
MaskBand mask_band(const Expr& e);

}  // namespace napkin
