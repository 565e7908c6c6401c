/** \file strategies.hpp
 *  The ways one kernel of a schedule becomes CUDA, tried in order by emit/cuda_emitter.cpp:
 *  - gemm:  contractions over one axis of 16-bit operands with element-wise epilogues (matmul,
 *           bias + GELU, the SwiGLU dual GEMM): grid = tiles of the two grouped free axes x the
 *           batch axes, warps split the first grouped axis, the contracted axis is the stream (a
 *           cp.async pipeline of 2-4 stages), operands through ldmatrix into mma.sync, fp32
 *           accumulators in registers, the epilogue applied to the accumulators before the store;
 *  - flash: contraction, softmax along the streamed axis, contraction (attention): the
 *           online-softmax lemma (paper §4) with S and P in registers;
 *  - rows:  a normaliser (softmax, layernorm, rmsnorm) along an axis kept whole or streamed: one
 *           warp (or several) per row, statistics reduced with shuffles, then the map;
 *  - simt:  anything else, and reference mode: one thread per output element, reductions as loops.
 *  Each returns nullopt with `why` set when the kernel is not of its form.
 */
#pragma once
#include <optional>
#include <set>
#include <string>

#include "emit/cuda/context.hpp"

namespace napkin::cuda {

/** One schedule kernel as CUDA text. */
struct KernelEmit {
  std::string strategy;     ///< "gemm", "flash", "rows", "simt"
  std::string device_code;  ///< namespace k_<kernel> { ... __global__ ... }
  std::string launch_code;  ///< host statements launching it on `stream` from `const Args& a`
  std::set<std::string> stored;  ///< arrays this kernel writes to global memory
};

std::optional<KernelEmit> emit_gemm(Context& c, const KernelChoice& k, const Hardware& hw, std::string& why);
std::optional<KernelEmit> emit_flash(Context& c, const KernelChoice& k, const Hardware& hw, std::string& why);
std::optional<KernelEmit> emit_rows(Context& c, const KernelChoice& k, std::string& why);
/** One SIMT kernel per statement in `statements` (topological order); `over` renders call nodes. */
KernelEmit emit_simt(Context& c, const std::string& name, const std::vector<std::string>& statements,
                     const NodeOverride& over = {});

/** Helpers shared by the strategies. */
/** Name of the kernel namespace for a schedule kernel. */
std::string kernel_ns(const std::string& kernel);
/** Every node of `e` (pre-order). */
void walk(const Expr& e, const std::function<void(const Expr&)>& f);
/** `// kernel NAME: fuse ...; group ...` */
std::string describe_plan(const KernelPlan& p);
/** Code decomposing `linear` (an int64_t variable, consumed) into `i_<axis>` over `axes`, last fastest. */
void decompose(Code& code, const std::string& linear, const AxisList& axes);
/** Element offset of `array` with axis `a` at index expression `at(a)` (Horner over N_). */
std::string offset(const Context& c, const std::string& array, const std::function<std::string(const std::string&)>& at);
/** Stride (elements) of axis `axis` in `array`: the product of the later axes' sizes. */
std::string stride(const Context& c, const std::string& array, const std::string& axis);

}  // namespace napkin::cuda
