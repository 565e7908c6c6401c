/** \file calibrate.hpp
 *  `napkin calibrate`: measures on a GPU the ceilings the performance model uses (HBM, L2 and
 *  SMEM bandwidth, the mma.sync rate napkin's kernels use, exp and FP32 rates, launch overhead)
 *  with the microbenchmarks of kernels/calibrate/microbench.cu, and writes a hardware description
 *  from a bundled one with the measured figures in place of the datasheet's and the estimates.
 */
#pragma once
#include <map>
#include <string>

#include "hardware/hardware.hpp"

namespace napkin {

/** `key value` lines as microbench prints them; values in SI units. Raises UserError on a line
 *  that is neither (the first token names the problem). */
std::map<std::string, std::string> parse_measurements(const std::string& text);

/** `base` with every measured figure replaced: bandwidths, FP32 and SFU rates, launch overhead,
 *  SM count and L2 size; mma_sync_fraction = measured mma.sync bf16 rate / datasheet bf16 peak
 *  (at most 1); where measured (Hopper), wgmma_fraction likewise from the wgmma rate, the L2 ->
 *  SMEM bandwidth of bulk copies (TMA's path) and the HBM latency. Raises UserError when a
 *  required measurement is missing. */
Hardware apply_measurements(const Hardware& base, const std::map<std::string, std::string>& m);

/** Compiles microbench.cu with nvcc for `base.arch` and runs it; its output. Raises UserError
 *  when nvcc is missing, the build fails, or there is no GPU. */
std::string run_microbenchmarks(const Hardware& base);

}  // namespace napkin
