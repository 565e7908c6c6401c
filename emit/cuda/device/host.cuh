/** \file host.cuh
 *  Host side of every target's launches: the dynamic SMEM limit, set once per kernel and device.
 */
#pragma once
#include <cuda_runtime.h>

#include <mutex>
#include <tuple>
#include <vector>

namespace napkin {
/** cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) on the
 *  current device, once per (kernel, device, bytes) for the process: the attribute stays set, and
 *  the call costs about 5 us of host time per launch (torch profiler, H200 host, session 22), which
 *  an operator called every training step pays for every kernel it launches. Returns the CUDA
 *  error of cudaGetDevice or of the call (not remembered then). Thread-safe. */
[[maybe_unused]] static cudaError_t smem_limit_once(const void* kernel, int bytes) {
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  static std::mutex lock;
  static std::vector<std::tuple<const void*, int, int>> done;
  const auto key = std::make_tuple(kernel, dev, bytes);
  {
    std::lock_guard<std::mutex> g(lock);
    for (const auto& k : done)
      if (k == key) return cudaSuccess;
  }
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) {
    std::lock_guard<std::mutex> g(lock);
    done.push_back(key);
  }
  return e;
}
}  // namespace napkin
