/** \file bench.hpp
 *  `napkin bench`: builds and runs the derived kernels of a diagram on the local GPU and compares
 *  them with references measured in the same run. Steps: derive at the given sizes; emit three
 *  .cu files (the derived schedule; the best unfused schedule, intermediates in HBM; an fp32 SIMT
 *  reference) and bench_spec.h (arrays, sizes, the diagram's contractions as cuBLAS problems);
 *  compile them with kernels/bench/harness.cu by nvcc; run the harness, which fills the inputs
 *  (uniform in [-1, 1) times each input's 1/sqrt(fan-in) scale, printed) and checks the derived
 *  kernels against the fp32 reference and times everything with CUDA events (median of >= 20
 *  runs, rotated input sets); at small sizes also check against the fp64 evaluator. Prints per
 *  kernel: measured time, TFLOP/s, GB/s (HBM bytes of the model over the measured time), the
 *  model's prediction and its error, and speed-ups over the unfused schedule and cuBLAS.
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "derive/derivation.hpp"
#include "hardware/hardware.hpp"

namespace napkin {

struct BenchOptions {
  std::string workdir;          ///< where the sources, the binary and logs go
  std::string nvcc = "nvcc";
  std::vector<std::string> arch = {"-gencode=arch=compute_90a,code=sm_90a"};
  int runs = 30;                ///< timed runs per measurement (at least 20)
  std::uint64_t seed = 1;
  bool json = false;
  double rel_tolerance = 2e-2;  ///< max |err| / max |ref| accepted (bf16: about 1e-2)
  std::optional<SearchResult> schedule;  ///< a checked given schedule to bench instead of the derived one
};

/** Runs the benchmark of `d` at `sizes` with the model of `hw`; prints the report on stdout.
 *  Returns 0 when every check passed, 1 when one failed. Raises UserError when nvcc or the GPU is
 *  missing (with the compiler's or harness's log), InternalError for malformed harness output. */
int run_bench(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const BenchOptions& opt);

/** What one benchmark measured, for callers that report it their own way (napkin compare --measure). */
struct BenchResult {
  std::string device;          ///< the GPU's name as the harness reports it
  bool pass = false;           ///< every element-wise check within opt.rel_tolerance
  double max_rel_err = 0;      ///< the largest max|err| / max|ref| of the checks (fp32 GPU reference, fp64 evaluator)
  double seconds = 0;          ///< measured: the derived schedule, all kernels, median (s)
  double predicted_s = 0;      ///< the model's time of the schedule that was measured (s)
  double flops = 0;            ///< FLOPs of that schedule (tensor + fp32), as the model counts them
  double clock_mhz = 0;        ///< median SM clock of the timing rounds (MHz; summarise_clock), 0 when the harness gave none
};

/** run_bench's steps without its report: builds, checks and times `d` and returns the figures.
 *  Raises as run_bench does. */
BenchResult measure_bench(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const BenchOptions& opt);

/** The element-wise tolerance (max|err| / max|ref|) of a kernel storing its arrays in `t`: one
 *  unit in the last place at 1.0, 2^(1-p) for a significand of p bits (two roundings of half an
 *  ulp: an operand rounded inside the kernel, e.g. attention's P before its MMA, and the stored
 *  output), and at least BenchOptions' default 2e-2. fp32, fp16 and bf16: 2e-2; fp8e4m3 (p = 4):
 *  0.125; fp8e5m2 (p = 3): 0.25. Both sides use the same rounded inputs, so input rounding is not
 *  in the error. */
double check_tolerance(DType t);

/** The SM clock over a benchmark's timing rounds, in MHz: one sample a round, the harness's spin
 *  ahead of the round timing itself by SM cycles (clock64) over nanoseconds (%globaltimer). */
struct ClockSummary {
  double median = 0, min = 0, max = 0;  ///< MHz
  /** (max - min) / max: above kClockDrift the rounds mix clock states (power or thermal limit). */
  double spread() const { return max > 0 ? (max - min) / max : 0; }
  static constexpr double kClockDrift = 0.1;
};

/** The median, least and largest of `mhz` (per-round samples). Raises InternalError when `mhz` is
 *  empty. Measured (session 46, H200, 700 W limit): idle-started rounds at 1966-1980 MHz, sustained
 *  GEMMs and attention falling to 1470-1800 MHz within 20 rounds. */
ClockSummary summarise_clock(std::vector<double> mhz);

/** bench_spec.h for `d` at `sizes`: sizes, arrays (dtype codes 0 fp32, 1 bf16, 2 fp16, 3 fp8e4m3,
 *  4 fp8e5m2, 5 int32, 6 int8; gather targets drawn under their bound), the scale each input is drawn at (kInputScales: 1/sqrt(fan-in),
 *  diagrams/input_scales.hpp) and the bf16 and fp16 contractions that map onto one cuBLAS
 *  strided-batched GEMM each (lower/blas_problem.hpp; the harness's cuBLAS baseline is 16-bit).
 *  Raises UserError for an array the harness cannot fill (tf32, int4). */
std::string bench_spec(const Program& p, const Diagram& d, const SizeMap& sizes);

}  // namespace napkin
