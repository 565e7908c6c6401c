/** \file simt_cost.hpp
 *  The price of a kernel lowered to SIMT (lower/lower.hpp, rendered by emit/cuda/simt.cpp): one
 *  launch per statement, in dataflow order, one thread per output element (consecutive threads
 *  along the statement's innermost axis), every reduction and normaliser inside the expression a
 *  loop that each thread walks, every statement stored to global memory. No tensor cores, no SMEM
 *  staging: every operand read inside a loop is a load served by L2 (or L1).
 *
 *  Per statement of E output elements, with an expression costing f FP32 operations, s
 *  special-function operations and b bytes of loads per element:
 *    t = max(HBM bytes / HBM bandwidth, max(E·b / L2 bandwidth, E·l / load rate), E·f / FP32 rate + E·s / SFU rate) + launch
 *  with l loads per element, issued at 32 per SM per clock (whitepapers: 8 LD/ST units per SM
 *  partition);
 *  where HBM bytes are each array read once plus the statement written once. A load of an array
 *  without the innermost axis, or inside a loop over it (its index then the loop's), is the same
 *  address for the 32 threads of a warp (a broadcast: b/32); a load of an array whose own innermost
 *  axis is the statement's is coalesced (b per thread); any other load is strided, the threads'
 *  addresses the array's stride s along that axis apart: min(32, s b) bytes per thread, a 32-byte
 *  sector each once s b >= 32 (CUDA C++ Best Practices Guide, coalesced access to global memory;
 *  a row reduction over d of dO[b,h,q,d] with threads along q measured 288 us on an H200 where
 *  pricing its loads as coalesced predicted 35 us, docs/benchmarks.md session 14). Loop costs follow the emitted loops
 *  (emit/cuda/context.cpp): a reduction over axes R evaluates its body |R| times; softmax 2N + 1
 *  times its argument, layernorm 3N + 1, rmsnorm 2N + 1 (N: the normalised extent).
 *
 *  Latency: a thread's loops run one iteration after another, and an iteration waits for its
 *  loads (in flight together), so a thread waits r rounds of the unloaded HBM latency L (a load
 *  walking its array's innermost axis one element per iteration: one round per 32-byte sector,
 *  the rest from L1). With R threads resident at once (SMs x max warps x 32, at most E):
 *    t >= ceil(E / R) · r · L.
 *  This prices a reduction over few outputs, dW[m] = sum(...; t) with one thread per column
 *  (4096 threads, 2048 rounds: about 660 us predicted, 800 us measured on an H100 in session 17's
 *  training profile), which the throughput terms alone put at 37.5 us.
 */
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "diagrams/program.hpp"
#include "diagrams/typing.hpp"
#include "diagrams/sizes.hpp"
#include "hardware/hardware.hpp"
#include "lower/options.hpp"

namespace napkin {

/** FP32 and special-function work of one element of a one-operand map as the CUDA emitter writes
 *  it (emit/cuda/context.cpp, emit/cuda/device/numeric.cuh), in FLOPs as Hardware::fp32_flops_per_s
 *  counts them (2 per FMA-pipe issue slot: an add or a mul counts 2 like a fused multiply-add;
 *  compares and selects, which issue on the ALU at half the FMA pipe's rate, 4: CUDA C++
 *  Programming Guide, throughput of native arithmetic instructions, compute capability 9.0, 64
 *  results per clock per SM against 128) and MUFU operations (ex2, rcp, rsqrt, lg2, sqrt):
 *  - erf: erff as nvcc 13.0 writes it (its PTX, counted in session 32: 7 fma.rn, 3 mul or sub,
 *    8 selp, 2 setp and a copysign, one ex2.approx): 64 FLOPs, 1 MUFU;
 *  - gelu: numeric.cuh's erfc form: 17 FMA-pipe instructions (9 of the polynomial) and a compare and
 *    select, 42 FLOPs; rcp and ex2, 2 MUFU;
 *  - gelu_tanh: x / (1 + 2^(-2u log2 e)): 5 FMA-pipe instructions, 10 FLOPs; ex2 and rcp, 2 MUFU;
 *  - exp, log, tanh, rsqrt, sqrt: 1 FLOP and 1 MUFU (the MUFU op and its scaling);
 *  - sigmoid: numeric.cuh's 1 / (1 + exp(-x)) by __expf and __fdividef: ex2 and rcp, 2 MUFU; the
 *    exponent's scale, the add and the quotient's multiply, 3 FLOPs; silu (x sigmoid(x)) one more
 *    multiply, 4 FLOPs. (Counted as one MUFU op before session 42: sigmoid attention priced -16%,
 *    tests/model/ledger-h200.tsv.)
 *  Returns nullopt for any other operation. */
struct MapWork {
  double fp32_flops = 0, sfu_ops = 0;  ///< per element
};
std::optional<MapWork> map_work(Op op);

struct SimtCost {
  double flops_fp32 = 0, sfu_ops = 0;  ///< operations, whole kernel
  double l2_bytes = 0, hbm_bytes = 0;  ///< bytes, whole kernel
  ///< t_l2: the larger of L2 bytes over L2 bandwidth and loads over the LD/ST issue rate
  double t_hbm = 0, t_l2 = 0, t_compute = 0, t_launch = 0;  ///< seconds, summed over the statements' launches
  double t_latency = 0;                ///< seconds: the threads' serial rounds of loads (above), summed
  double t_total = 0;                  ///< seconds: the statements one after another
  std::int64_t elements = 0;           ///< output elements (threads) over all statements
  std::string bound;                   ///< the largest of the summed terms
};

/** Price of `statements` (names of statements of `d`, not calls) run as SIMT kernels at `sizes` on `hw`. */
SimtCost price_simt(const Diagram& d, const std::vector<std::string>& statements, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt);

}  // namespace napkin
