/** \file context.hpp
 *  Shared state of the CUDA emitter (emit/cuda_emitter.cpp) and its renderers (emit/cuda/: one per
 *  strategy, their shared steps one file per concern, render.hpp):
 *  the arrays of the diagram with their storage types, the text buffer, and the translation of
 *  expressions into CUDA C++ float arithmetic at named indices (`i_<axis>`).
 *
 *  Conventions of the emitted code (every strategy follows them):
 *  - arrays are row-major in their declared axis order; `a.<array>` is the device pointer and
 *    `N_<axis>` the runtime size (elements) of every axis, copied from the `Args` struct;
 *  - element values are computed in fp32 (`float`), stored in the array's storage dtype;
 *  - `i_<axis>` is the global index of an axis inside a kernel.
 */
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "derive/derivation.hpp"

namespace napkin::cuda {

/** Options of one emission. */
struct EmitOptions {
  std::string prefix = "napkin_";  ///< C entry points are `<prefix>run`, ...
  /** Reference mode: every statement its own SIMT kernel, every array fp32 (the GPU reference
   *  `napkin bench` checks large sizes against). */
  bool reference = false;
};

/** C++ type of a storage dtype in emitted code: float, __nv_bfloat16, __half, __nv_fp8_e4m3,
 *  __nv_fp8_e5m2, int8_t or int32_t (gather targets). Raises UserError for dtypes the CUDA emitter
 *  does not store (int4, tf32). */
std::string ctype(DType t);

/** The device expression of a quiet fp32 NaN: the value of a softmax row masked throughout (and of
 *  what reads it), as exp(-inf - -inf) gives in the fp64 evaluator (docs/diagram-language.md). */
inline constexpr const char* kNanF = "__int_as_float(0x7fc00000)";

/** Whether diagram `d` stores an fp8 array (emit_dtype of its inputs, statements and outputs;
 *  never in reference mode). Raises UserError when it does and `hw` has no tensor-core rate for
 *  that dtype (its [tensor_core] table: fp8 tensor cores are sm_89 and later, none on the A100):
 *  napkin emits fp8 only for GPUs that multiply it. */
bool stores_fp8(const Diagram& d, const Hardware& hw, const EmitOptions& opt);

/** Whether diagram `d` needs the int8 conversions (emit/cuda/device/int8.cuh): it stores an int8
 *  array (emit_dtype of its inputs, statements and outputs) or rounds to int8 in an expression
 *  (a cast); never in reference mode. Raises UserError when it stores one and `hw` has no int8
 *  tensor-core rate (its [tensor_core] table). */
bool stores_int8(const Diagram& d, const Hardware& hw, const EmitOptions& opt);

/** Text being generated, with indentation. */
struct Code {
  std::string text;
  int indent = 0;
  void line(const std::string& s);
  void open(const std::string& s);   ///< `s {` and indent
  void close(const std::string& tail = "");  ///< `}` + tail
};

/** How value() renders some nodes instead of recursing (accumulators, call results). */
using NodeOverride = std::function<std::optional<std::string>(const Expr&)>;

class Context {
 public:
  Context(const Program& p, const Diagram& d, const Derivation& dv, EmitOptions opt);

  const Program& program() const { return p_; }
  const Diagram& diagram() const { return d_; }
  const Derivation& derivation() const { return dv_; }
  const EmitOptions& options() const { return opt_; }
  Typer& typer() { return typer_; }
  const std::vector<StatementWeave>& weave() const { return weave_; }

  /** Storage dtype of an array (fp32 for every array in reference mode). */
  DType dtype(const std::string& array) const;
  std::string ctype_of(const std::string& array) const { return ctype(dtype(array)); }
  AxisList axes(const std::string& array) const { return *d_.array_axes(array); }
  AxisList axes_of(const Expr& e) { return typer_.axes_of(e).value_or(AxisList{}); }

  /** Row-major linear index of `array` at the indices `i_<axis>` (Horner over N_<axis>). */
  std::string index(const std::string& array) const;
  /** `napkin::to_f(a.X[index])`: the fp32 value of an array element; for a scalar (0-d) input,
   *  `scalar_X`, read once at the kernel's start by declare_sizes (inputs are constant for the launch). */
  std::string load(const std::string& array) const;
  /** load() at a tile's edge, where the indices `i_<axis>` of the axes in `edge` may lie at or
   *  past their extents N_<axis>: the element is read only where every one of the array's axes in
   *  `edge` is in range, 0.0f elsewhere (no access). An array with none of them: load(). */
  std::string bounded_load(const std::string& array, const AxisList& edge) const;

  /** fp32 CUDA expression of `e` at the current indices. Statements named in `inline_stmts` are
   *  expanded in place (fused intermediates); reductions and normalisers not overridden become
   *  loops in immediately invoked lambdas (the SIMT form). */
  std::string value(const Expr& e, const NodeOverride& over = {}, const std::vector<std::string>& inline_stmts = {});

  /** Declares `const int64_t N_<axis> = a.N_<axis>;` for every axis, and `const float scalar_X =
   *  napkin::to_f(a.X[0]);` for every scalar (0-d) input X (what load() renders for it). */
  void declare_sizes(Code& c) const;

 private:
  std::string reduction(const Expr& e, const NodeOverride& over, const std::vector<std::string>& inl);
  std::string normaliser(const Expr& e, const NodeOverride& over, const std::vector<std::string>& inl);

  const Program& p_;
  const Diagram& d_;
  const Derivation& dv_;
  EmitOptions opt_;
  Typer typer_;
  std::vector<StatementWeave> weave_;
  int lambdas_ = 0;
};

/** An override for Context::value that renders every array load (an input or a stored array; not
 *  the statements in `inlined`, which value() expands in place) as Context::bounded_load at
 *  `edge`, after trying `base` first. The rule for element-wise code at the edge of a tile: any
 *  array that is not staged in tiles is read against its extents. */
NodeOverride bounded_loads(const Context& c, NodeOverride base, AxisList edge, std::vector<std::string> inlined);

/** Row-major linear index over `axes` (Horner): `((at(a0)) * <sizes>a1 + at(a1)) ...`, "0" for no
 *  axes. `sizes` prefixes the axis names: "N_" in kernels, "a.N_" on the host. */
std::string horner(const AxisList& axes, const std::function<std::string(const std::string&)>& at, const std::string& sizes = "N_");
/** Storage dtype of `array` of `d` in emitted code: fp32 in reference mode, its storage dtype otherwise. */
DType emit_dtype(const Diagram& d, const std::string& array, const EmitOptions& opt);

/** Float literal text ("0.0883883f"; "INFINITY"). */
std::string flit(double v);
/** eps binding of a normaliser (1e-5 unless given). */
double eps_of(const Expr& e);
std::string join(const std::vector<std::string>& v, const std::string& sep = ", ");
/** Device value of the causal or band mask `mask` over axes (a, b), given `diff`, an expression
 *  of i_b - i_a: "(diff <= hi [&& diff >= lo] ? 1.0f : 0.0f)" (mask_band). */
std::string band_value(const Expr& mask, const std::string& diff);

}  // namespace napkin::cuda
