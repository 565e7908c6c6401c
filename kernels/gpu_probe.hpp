/** \file gpu_probe.hpp
 *  Which GPU this machine has, and whether a hardware description is of it. `napkin compare
 *  --measure` measures only the rows whose description is of the GPU present (gpu_mismatch).
 *  The probe asks the NVIDIA driver (libcuda.so.1, opened with dlopen at run time, so napkin
 *  neither links nor needs it on a machine without a GPU) for device 0 of those CUDA_VISIBLE_DEVICES
 *  lets it see: the device CUDA programs napkin builds run on.
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "hardware/hardware.hpp"

namespace napkin {

/** Device 0 as the driver reports it. */
struct GpuInfo {
  std::string name;               ///< "NVIDIA H100 80GB HBM3"
  int cc_major = 0, cc_minor = 0; ///< compute capability (9.0 on Hopper)
  int sm_count = 0;               ///< streaming multiprocessors
  std::uint64_t memory_bytes = 0; ///< device memory (bytes)
};

/** Device 0 of this machine. Raises UserError "no GPU found: <why>" when the driver library is
 *  absent, cuInit fails (no device, CUDA_VISIBLE_DEVICES empty) or it reports no device. */
GpuInfo probe_gpu();

/** The compute capability a hardware description's arch names: "sm_90a" -> 90, "sm_80" -> 80;
 *  nullopt when `arch` is not of the form sm_<digits>[letter]. */
std::optional<int> arch_compute_capability(const std::string& arch);

/** Why `hw` does not describe `gpu`, or nullopt when it does. The rule: the description is of the
 *  GPU when its arch has the GPU's compute capability, its SM count equals the GPU's, and its HBM
 *  capacity is within 10% of the GPU's memory (drivers report a little less than the datasheet;
 *  this separates the H100 SXM (80 GB) from the H200 (141 GB) and the H100 NVL (94 GB), and an
 *  A100 from a MIG slice of it). The reason names the first property that differs. */
std::optional<std::string> gpu_mismatch(const Hardware& hw, const GpuInfo& gpu);

/** "NVIDIA H100 80GB HBM3 (cc 9.0, 132 SMs, 79.6 GiB)" for messages. */
std::string describe_gpu(const GpuInfo& gpu);

}  // namespace napkin
