/** \file compare_measure.hpp
 *  `napkin compare --measure`: which rows are measured on this machine's GPU, and measuring one.
 *  A row (hardware, dtype) is measured when it has a prediction, its hardware description is of the
 *  GPU present (kernels/gpu_probe.hpp, gpu_mismatch: compute capability, SM count, memory), and
 *  the CUDA emitter and the benchmark harness can store the dtype; otherwise it is "not measured"
 *  with the first of these reasons. Measuring is napkin bench's machinery (kernels/bench.hpp) run
 *  on the diagram retyped to the row's dtype (lower/options.hpp, stored_as): emitted, built by
 *  nvcc for the description's arch, checked element-wise against the fp32 reference on fresh random
 *  inputs within check_tolerance(dtype), then timed.
 */
#pragma once
#include <optional>
#include <string>

#include "cli/compare_report.hpp"
#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"
#include "hardware/hardware.hpp"
#include "kernels/bench.hpp"
#include "kernels/gpu_probe.hpp"

namespace napkin::cli {

/** Why row `r` (diagram `d` of `p` at `sizes`, stored in `dt`, predicted for `hw`) is not measured on
 *  `gpu`, or nullopt when it is measurable. In order: the row has no prediction (r.note); `hw` is
 *  not the GPU (gpu_mismatch); emitting the CUDA or the harness's array table for the retyped
 *  diagram raises a UserError (the dtype is one they do not store: int8, int4; fp8 on a GPU without
 *  fp8 tensor cores), whose first line is the reason. Derives the retyped diagram for the last check. */
std::optional<std::string> why_not_measured(const CompareRow& r, const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, DType dt,
                                            const GpuInfo& gpu);

/** Measures row `r` (as why_not_measured's arguments) when it is measurable, with `base`'s runs,
 *  seed and nvcc, in the work folder `workdir`, and sets r.measure and its figures: measured,
 *  wrong (the check failed), not_measured (with the reason) or failed (a build or run step failed:
 *  its message's first line; the whole message goes to stderr). Raises nothing for a row. */
void measure_row(CompareRow& r, const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, DType dt, const GpuInfo& gpu,
                 const BenchOptions& base, const std::string& workdir);

/** nvcc's `-gencode` flag for a description's arch: "sm_90a" -> "-gencode=arch=compute_90a,code=sm_90a". */
std::string gencode_for(const std::string& arch);

}  // namespace napkin::cli
