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

/** bench_spec.h for `d` at `sizes`: sizes, arrays (dtype codes 0 fp32, 1 bf16, 2 fp16, 3 fp8e4m3, 4 fp8e5m2), the scale
 *  each input is drawn at (kInputScales: 1/sqrt(fan-in), diagrams/input_scales.hpp) and the
 *  contractions that map onto one cuBLAS strided-batched GEMM each (lower/blas_problem.hpp). */
std::string bench_spec(const Program& p, const Diagram& d, const SizeMap& sizes);

}  // namespace napkin
