// A stand-in for the NVIDIA driver library (libcuda.so.1) for tests of napkin compare --measure on
// machines without a GPU: the driver API entry points kernels/gpu_probe.cpp calls, reporting one
// H100 SXM5 80 GB (cc 9.0, 132 SMs), or, with FAKE_LIBCUDA_NO_DEVICE set, failing cuInit with
// CUDA_ERROR_NO_DEVICE (100) as the driver does when CUDA_VISIBLE_DEVICES hides every GPU.
#include <cstddef>
#include <cstdlib>
#include <cstring>

extern "C" {
int cuInit(unsigned) { return std::getenv("FAKE_LIBCUDA_NO_DEVICE") ? 100 : 0; }
int cuDeviceGetCount(int* n) { return *n = 1, 0; }
int cuDeviceGet(int* dev, int ordinal) { return *dev = ordinal, 0; }
int cuDeviceGetName(char* name, int len, int) {
  std::strncpy(name, "NVIDIA H100 80GB HBM3", static_cast<std::size_t>(len));
  return 0;
}
int cuDeviceGetAttribute(int* v, int attr, int) {  // 16 SM count, 75 / 76 compute capability
  *v = attr == 16 ? 132 : attr == 75 ? 9 : 0;
  return 0;
}
int cuDeviceTotalMem_v2(std::size_t* bytes, int) { return *bytes = 85520809984ull, 0; }
int cuGetErrorString(int, const char** text) { return *text = "no CUDA-capable device is detected", 0; }
}
