#include "kernels/gpu_probe.hpp"

#include <dlfcn.h>
#include <fmt/core.h>

#include <cctype>
#include <cmath>

#include "diagrams/diagnostics.hpp"

namespace napkin {

namespace {

// The few driver API entry points the probe calls, declared here with their C signatures
// (cuda.h: CUresult and CUdevice are int; the attribute numbers are CUdevice_attribute's).
using InitFn = int (*)(unsigned);
using CountFn = int (*)(int*);
using GetFn = int (*)(int*, int);
using NameFn = int (*)(char*, int, int);
using AttrFn = int (*)(int*, int, int);
using MemFn = int (*)(std::size_t*, int);
using ErrorFn = int (*)(int, const char**);
constexpr int kAttrSmCount = 16, kAttrCcMajor = 75, kAttrCcMinor = 76;

/** libcuda.so.1 opened for the probe, closed on every path out. */
struct Driver {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ~Driver() {
    if (handle) dlclose(handle);
  }
  Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  template <typename Fn>
  Fn get(const char* symbol) const {
    void* f = dlsym(handle, symbol);
    if (!f) throw UserError(std::string("no GPU found: the NVIDIA driver library libcuda.so.1 has no ") + symbol);
    return reinterpret_cast<Fn>(f);
  }
  /** Raises "no GPU found: <call>: <driver's message>" when `rc` is not CUDA_SUCCESS. */
  void check(int rc, const char* call) const {
    if (rc == 0) return;
    const char* text = nullptr;
    if (void* f = dlsym(handle, "cuGetErrorString")) reinterpret_cast<ErrorFn>(f)(rc, &text);
    throw UserError(fmt::format("no GPU found: {} failed: {} (CUresult {})", call, text ? text : "unknown error", rc));
  }
};

}  // namespace

GpuInfo probe_gpu() {
  Driver drv;
  if (!drv.handle)
    throw UserError(std::string("no GPU found: the NVIDIA driver library libcuda.so.1 cannot be loaded (") + dlerror() +
                    "); --measure builds and runs kernels on this machine's GPU");
  drv.check(drv.get<InitFn>("cuInit")(0), "cuInit");
  int count = 0;
  drv.check(drv.get<CountFn>("cuDeviceGetCount")(&count), "cuDeviceGetCount");
  if (count < 1) throw UserError("no GPU found: the NVIDIA driver reports no CUDA device");
  int dev = 0;
  drv.check(drv.get<GetFn>("cuDeviceGet")(&dev, 0), "cuDeviceGet");
  GpuInfo g;
  char name[256] = {};
  drv.check(drv.get<NameFn>("cuDeviceGetName")(name, sizeof name - 1, dev), "cuDeviceGetName");
  g.name = name;
  const auto attr = drv.get<AttrFn>("cuDeviceGetAttribute");
  drv.check(attr(&g.cc_major, kAttrCcMajor, dev), "cuDeviceGetAttribute");
  drv.check(attr(&g.cc_minor, kAttrCcMinor, dev), "cuDeviceGetAttribute");
  drv.check(attr(&g.sm_count, kAttrSmCount, dev), "cuDeviceGetAttribute");
  std::size_t bytes = 0;
  drv.check(drv.get<MemFn>("cuDeviceTotalMem_v2")(&bytes, dev), "cuDeviceTotalMem");
  g.memory_bytes = bytes;
  return g;
}

std::optional<int> arch_compute_capability(const std::string& arch) {
  if (arch.size() < 5 || arch.rfind("sm_", 0) != 0) return std::nullopt;
  std::size_t end = 3;
  while (end < arch.size() && std::isdigit(static_cast<unsigned char>(arch[end]))) ++end;
  if (end == 3 || end + 1 < arch.size() || (end < arch.size() && !std::isalpha(static_cast<unsigned char>(arch[end])))) return std::nullopt;
  return std::stoi(arch.substr(3, end - 3));
}

std::optional<std::string> gpu_mismatch(const Hardware& hw, const GpuInfo& gpu) {
  const int cc = gpu.cc_major * 10 + gpu.cc_minor;
  const auto want = arch_compute_capability(hw.arch);
  if (!want || *want != cc)
    return fmt::format("{} is {}, the GPU here is {}", hw.name, hw.arch, describe_gpu(gpu));
  if (hw.sm_count != gpu.sm_count) return fmt::format("{} has {} SMs, the GPU here is {}", hw.name, hw.sm_count, describe_gpu(gpu));
  const double mem = static_cast<double>(gpu.memory_bytes);
  if (std::fabs(mem - hw.hbm.capacity_bytes) > 0.1 * hw.hbm.capacity_bytes)
    return fmt::format("{} has {:.1f} GiB of HBM, the GPU here is {}", hw.name, hw.hbm.capacity_bytes / 1073741824.0, describe_gpu(gpu));
  return std::nullopt;
}

std::string describe_gpu(const GpuInfo& gpu) {
  return fmt::format("{} (cc {}.{}, {} SMs, {:.1f} GiB)", gpu.name, gpu.cc_major, gpu.cc_minor, gpu.sm_count, static_cast<double>(gpu.memory_bytes) / 1073741824.0);
}

}  // namespace napkin
