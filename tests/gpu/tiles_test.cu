// Device unit test of the tile library (emit/cuda/device/*.cuh) and of the generated MMA atoms
// (tests/golden/cuda/atoms.cuh, kept equal to the generator by tests/emit/device_atoms_test.cpp):
// each primitive on the GPU against a host reference, on seeded random inputs. One line per check,
// then "tiles_test: N passed, M failed"; exit code 1 on any failure. The sm_90a checks (wgmma, TMA,
// the mbarrier pipeline, a cluster's multicast) run where the binary was built for sm_90a and the
// GPU is a Hopper.
// Build: nvcc -std=c++17 -O2 -arch=sm_90a -I<source root> tests/gpu/tiles_test.cu (CTest label
// compile builds it for sm_80 and sm_90a; tools/device/bench.sh tiles builds and runs it).
// Usage: tiles_test [SEED]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "emit/cuda/device/napkin.cuh"
#include "tests/golden/cuda/atoms.cuh"

using bf16 = __nv_bfloat16;
using napkin::acc_col;
using napkin::acc_row;

namespace {

int g_passed = 0, g_failed = 0;

void summary_and_exit(int code) {
  std::printf("tiles_test: %d passed, %d failed\n", g_passed, g_failed);
  std::fflush(stdout);
  _exit(code);
}

/** Reports one check: PASS or FAIL with `detail`. */
void report(bool ok, const std::string& name, const std::string& detail = "") {
  (ok ? g_passed : g_failed) += 1;
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stdout);
}

/** Aborts the run on a CUDA error (the context may be unusable after it). */
void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  report(false, what, cudaGetErrorString(e));
  summary_and_exit(1);
}

/** Waits for the device at most 10 s: a kernel stuck on a barrier fails the run instead of hanging it. */
void finish(const std::string& what) {
  check_cuda(cudaGetLastError(), (what + " (launch)").c_str());
  const auto start = std::chrono::steady_clock::now();
  cudaError_t e;
  while ((e = cudaStreamQuery(nullptr)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
      report(false, what, "kernel did not finish within 10 s");
      summary_and_exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  check_cuda(e, what.c_str());
}

std::mt19937 g_rng;

/** `n` values uniform in [-1, 1) (fp8: [-4, 4)), rounded to T. */
template <class T> std::vector<T> random_values(size_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_same_v<T, float>) x = u(g_rng);
    else if constexpr (std::is_same_v<T, bf16>) x = __float2bfloat16(u(g_rng));
    else if constexpr (std::is_same_v<T, __half>) x = __float2half(u(g_rng));
    else x = T(4.0f * u(g_rng));  // fp8: [-4, 4) rounded to the type (round to nearest even, cuda_fp8.h)
  }
  return v;
}
float host_f(float x) { return x; }
float host_f(bf16 x) { return __bfloat162float(x); }
float host_f(__half x) { return __half2float(x); }
float host_f(__nv_fp8_e4m3 x) { return static_cast<float>(x); }
float host_f(__nv_fp8_e5m2 x) { return static_cast<float>(x); }
float host_f(int8_t x) { return static_cast<float>(x); }
float host_f(int32_t x) { return static_cast<float>(x); }
template <class T> T host_from_f(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else if constexpr (std::is_same_v<T, bf16>) return __float2bfloat16(x);
  else return __float2half(x);
}
template <class T> bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

/** Device copy of `v`; freed at exit of the process. */
template <class T> T* to_device(const std::vector<T>& v) {
  T* d = nullptr;
  check_cuda(cudaMalloc(&d, v.size() * sizeof(T)), "cudaMalloc");
  check_cuda(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  return d;
}
template <class T> std::vector<T> from_device(const T* d, size_t n) {
  std::vector<T> v(n);
  check_cuda(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  return v;
}

/** "" when `got` equals `want` bit for bit, else where they first differ (rows of `cols`). */
template <class T> std::string compare_exact(const std::vector<T>& got, const std::vector<T>& want, int cols) {
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < want.size(); ++i)
    if (!same_bits(got[i], want[i]) && bad++ == 0)
      first = "at (" + std::to_string(i / cols) + ", " + std::to_string(i % cols) + ") got " + std::to_string(host_f(got[i])) + " want " +
              std::to_string(host_f(want[i]));
  return bad ? std::to_string(bad) + " elements differ, first " + first : "";
}

/** "" when |got - want| <= tol[i] everywhere, else the worst element. */
std::string compare_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& tol, int cols) {
  int bad = 0;
  double worst = 0;
  std::string at;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]);
    if (!(err <= tol[i])) {
      ++bad;
      if (!(err <= worst)) {
        worst = err;
        at = "(" + std::to_string(i / cols) + ", " + std::to_string(i % cols) + ") got " + std::to_string(got[i]) + " want " +
             std::to_string(want[i]);
      }
    }
  }
  return bad ? std::to_string(bad) + " elements off, worst at " + at : "";
}

// ---- load_tile: zero fill past ragged rows and columns ------------------------------------------

constexpr int LT_ROWS = 32, LT_COLS = 64, LT_PITCH = 72, LT_THREADS = 128;

__global__ void load_tile_kernel(const bf16* g, int64_t stride, int n_rows, int n_cols, int width, bf16* out) {
  __shared__ __align__(16) bf16 s[LT_ROWS * LT_PITCH];
  for (int i = threadIdx.x; i < LT_ROWS * LT_PITCH; i += LT_THREADS) s[i] = __float2bfloat16(-7.0f);  // not zero: the fill must write
  __syncthreads();
  const napkin::SmemTile<bf16, LT_ROWS, LT_COLS, LT_PITCH> t{s};
  t.load<LT_THREADS>(napkin::GlobalTile<bf16>{g, stride, n_rows, n_cols}, width);
  napkin::cp_async_commit();
  napkin::cp_async_wait<0>();
  __syncthreads();
  for (int i = threadIdx.x; i < LT_ROWS * LT_COLS; i += LT_THREADS) out[i] = t.at(i / LT_COLS, i % LT_COLS);
}

void check_load_tile() {
  const int R = 80, C = 136;  // the buffer: 80 rows of 272 bytes
  const auto h = random_values<bf16>(R * C);
  bf16* g = to_device(h);
  bf16* out = to_device(std::vector<bf16>(LT_ROWS * LT_COLS));
  // width: bytes per cp.async, copy_width of the origin and the row stride (0: element by element);
  // strides of 136 (272 bytes, 16-byte aligned), 132 (264: 8), 130 (260: 4) and 129 (258: 2) elements.
  struct Case { int r0, c0, n_rows, n_cols, stride; };
  const Case cases[] = {{0, 0, 32, 64, 136},  {64, 96, 16, 40, 136}, {48, 72, 32, 37, 136}, {70, 100, 10, 29, 136}, {8, 8, 32, 64, 132},
                        {40, 4, 32, 61, 132}, {8, 2, 32, 64, 130},   {20, 6, 31, 27, 130},  {8, 8, 32, 64, 129},   {79, 128, 1, 8, 136},
                        {0, 0, 0, 64, 136}};
  for (const Case& c : cases) {
    const bf16* origin = g + c.r0 * c.stride + c.c0;
    const int width = napkin::copy_width(reinterpret_cast<uintptr_t>(origin) | uint64_t(c.stride) * sizeof(bf16));
    load_tile_kernel<<<1, LT_THREADS>>>(origin, c.stride, c.n_rows, c.n_cols, width, out);
    const std::string name = "load_tile " + (width ? std::to_string(width) + "-byte cp.async" : std::string("scalar")) + " 32x64 at (" +
                             std::to_string(c.r0) + ", " + std::to_string(c.c0) + ") of rows " + std::to_string(c.stride) + " apart, " +
                             std::to_string(c.n_rows) + " rows x " + std::to_string(c.n_cols) + " cols valid";
    finish(name);
    std::vector<bf16> want(LT_ROWS * LT_COLS);
    for (int r = 0; r < LT_ROWS; ++r)
      for (int k = 0; k < LT_COLS; ++k)
        want[r * LT_COLS + k] = r < c.n_rows && k < c.n_cols ? h[(c.r0 + r) * c.stride + c.c0 + k] : __float2bfloat16(0.0f);
    const std::string d = compare_exact(from_device(out, want.size()), want, LT_COLS);
    report(d.empty(), name, d);
  }
}

// ---- pitch_copy: a dense array into rows padded to 128-byte lines (the repacked GEMM operand) ---

/** `lead` elements of the allocation before the array: a source starting off a 16-byte boundary
 *  (the copy's aligned 16-byte loads must stay inside the array: memcheck over this test). */
template <class T> void check_pitch_copy(int64_t rows, int64_t cols, int64_t pitch, const char* what, int64_t lead = 0) {
  const auto h = random_values<T>(rows * cols + lead);
  T* src = to_device(h) + lead;
  std::vector<T> init(rows * pitch, T(-7.0f));  // the pad keeps what it held
  T* dst = to_device(init);
  const cudaError_t launched = napkin::pitch_copy(dst, static_cast<const T*>(src), rows, cols, pitch, cudaStream_t{});
  const std::string name = "pitch_copy " + std::to_string(rows) + " x " + std::to_string(cols) + " " + what + " into rows of " + std::to_string(pitch) +
                           " elements, " + std::to_string(lead) + " elements into its allocation (the pad left as it was)";
  finish(name);
  std::vector<T> want = init;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) want[r * pitch + c] = h[lead + r * cols + c];
  const std::string d = compare_exact(from_device(dst, want.size()), want, static_cast<int>(pitch));
  report(launched == cudaSuccess && d.empty(), name, launched == cudaSuccess ? d : cudaGetErrorString(launched));
}

// ---- the cp.async ring: chunks of a stream through STAGES buffers ------------------------------

constexpr int RING_STAGES = 3, RING_ROWS = 16, RING_COLS = 64, RING_PITCH = 72, RING_THREADS = 128;

__global__ void cp_async_ring_kernel(const bf16* g, int K, bf16* out) {
  __shared__ __align__(16) bf16 s[RING_STAGES][RING_ROWS * RING_PITCH];
  const int chunks = (K + RING_COLS - 1) / RING_COLS;
  auto issue = [&](int chunk) {  // one commit group per chunk, empty past the end
    if (chunk < chunks) {
      const napkin::SmemTile<bf16, RING_ROWS, RING_COLS, RING_PITCH> t{s[chunk % RING_STAGES]};
      t.load<RING_THREADS>(napkin::GlobalTile<bf16>{g + chunk * RING_COLS, K, RING_ROWS, min(RING_COLS, K - chunk * RING_COLS)}, 16);
    }
    napkin::cp_async_commit();
  };
  for (int c = 0; c < RING_STAGES - 1; ++c) issue(c);
  napkin::StageRing<RING_STAGES> ring;
  for (int c = 0; c < chunks; ++c, ring.advance()) {
    napkin::cp_async_wait<RING_STAGES - 2>();  // chunk c's group is done
    __syncthreads();
    const bf16* st = s[ring.stage()];
    for (int i = threadIdx.x; i < RING_ROWS * RING_COLS; i += RING_THREADS)
      out[(c * RING_ROWS + i / RING_COLS) * RING_COLS + i % RING_COLS] = st[(i / RING_COLS) * RING_PITCH + i % RING_COLS];
    __syncthreads();  // every read of the stage before it is refilled
    issue(c + RING_STAGES - 1);
  }
}

void check_cp_async_ring() {
  for (const int K : {600, 640, 64, 8}) {
    const int chunks = (K + RING_COLS - 1) / RING_COLS;
    const auto h = random_values<bf16>(RING_ROWS * K);
    bf16* g = to_device(h);
    bf16* out = to_device(std::vector<bf16>(chunks * RING_ROWS * RING_COLS));
    const std::string name = "cp.async ring of " + std::to_string(RING_STAGES) + " stages, " + std::to_string(chunks) +
                             " chunks of 16x64, K = " + std::to_string(K);
    cp_async_ring_kernel<<<1, RING_THREADS>>>(g, K, out);
    finish(name);
    std::vector<bf16> want(chunks * RING_ROWS * RING_COLS);
    for (int c = 0; c < chunks; ++c)
      for (int r = 0; r < RING_ROWS; ++r)
        for (int k = 0; k < RING_COLS; ++k)
          want[(c * RING_ROWS + r) * RING_COLS + k] = c * RING_COLS + k < K ? h[r * K + c * RING_COLS + k] : __float2bfloat16(0.0f);
    const std::string d = compare_exact(from_device(out, want.size()), want, RING_COLS);
    report(d.empty(), name, d);
  }
}

// ---- store_pair at odd and aligned offsets -----------------------------------------------------

constexpr int SP_THREADS = 64, SP_REGION = 16;

/** Thread t: p = its region + t / 32 (so half the pointers are odd), first index o = t % 8, and
 *  mode (t / 8) % 4: 0 adjacent pair, 1 first only, 2 pair 5 apart, 3 pair in reverse order. */
__host__ __device__ void store_pair_case(int t, int& p_off, int64_t x[2], bool& second) {
  const int o = t % 8, mode = (t / 8) % 4;
  p_off = t * SP_REGION + t / 32;
  x[0] = mode == 3 ? o + 1 : o;
  x[1] = mode == 2 ? o + 5 : mode == 3 ? o : o + 1;
  second = mode != 1;
}

template <class T> __global__ void store_pair_kernel(T* out, const float* v) {
  const int t = threadIdx.x;
  int p_off;
  int64_t x[2];
  bool second;
  store_pair_case(t, p_off, x, second);
  const float pair[2] = {v[2 * t], v[2 * t + 1]};
  napkin::store_pair(out + p_off, x, pair, second);
}

template <class T> void check_store_pair(const char* type) {
  const auto v = random_values<float>(2 * SP_THREADS);
  std::vector<T> want(SP_THREADS * SP_REGION + 8, host_from_f<T>(99.0f));
  T* out = to_device(want);
  float* dv = to_device(v);
  store_pair_kernel<T><<<1, SP_THREADS>>>(out, dv);
  const std::string name = std::string("store_pair ") + type + " at odd and aligned offsets (pairs, singles, apart, reversed)";
  finish(name);
  for (int t = 0; t < SP_THREADS; ++t) {
    int p_off;
    int64_t x[2];
    bool second;
    store_pair_case(t, p_off, x, second);
    want[p_off + x[0]] = host_from_f<T>(v[2 * t]);
    if (second) want[p_off + x[1]] = host_from_f<T>(v[2 * t + 1]);
  }
  const std::string d = compare_exact(from_device(out, want.size()), want, SP_REGION);
  report(d.empty(), name, d);
}

// ---- index arithmetic --------------------------------------------------------------------------

__global__ void split_index_kernel(const int64_t* rest, const int64_t* n, int64_t* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  int64_t r = rest[i];
  out[2 * i] = napkin::split_index(r, n[i]);
  out[2 * i + 1] = r;
}

/** split_index against % and / on the host: values on both sides of 2^32, in either argument. */
void check_split_index() {
  std::vector<int64_t> rest, n;
  const int64_t edges[] = {0, 1, 2, 4095, 4096, (int64_t{1} << 31) - 1, int64_t{1} << 31, (int64_t{1} << 32) - 1, int64_t{1} << 32, (int64_t{1} << 40) + 7};
  for (int64_t r : edges)
    for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{128}, int64_t{14336}, (int64_t{1} << 32) - 1, int64_t{1} << 32, (int64_t{1} << 33) + 5}) rest.push_back(r), n.push_back(m);
  std::uniform_int_distribution<int64_t> any(0, int64_t{1} << 45), small(1, 1 << 20);
  for (int k = 0; k < 4000; ++k) rest.push_back(k % 2 ? any(g_rng) : any(g_rng) >> 14), n.push_back(k % 3 ? small(g_rng) : any(g_rng) + 1);
  const int count = static_cast<int>(rest.size());
  int64_t* d_rest = to_device(rest);
  int64_t* d_n = to_device(n);
  int64_t* d_out = to_device(std::vector<int64_t>(2 * count));
  split_index_kernel<<<(count + 127) / 128, 128>>>(d_rest, d_n, d_out, count);
  const std::string name = "split_index (remainder and quotient, 32- and 64-bit operands)";
  finish(name);
  const auto got = from_device(d_out, 2 * count);
  std::string diff;
  for (int i = 0; i < count && diff.empty(); ++i)
    if (got[2 * i] != rest[i] % n[i] || got[2 * i + 1] != rest[i] / n[i])
      diff = std::to_string(rest[i]) + " by " + std::to_string(n[i]) + ": got " + std::to_string(got[2 * i]) + ", " + std::to_string(got[2 * i + 1]);
  report(diff.empty(), name, diff);
}

// ---- the element-wise maps' arithmetic (numeric.cuh) against fp64 -----------------------------

__global__ void maps_kernel(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[2 * i] = napkin::gelu(x[i]);
  out[2 * i + 1] = napkin::gelu_tanh(x[i]);
}

/** gelu (the erfc form) and gelu_tanh (x sigmoid(2u)) against their fp64 definitions
 *  (diagrams/eval.cpp) on every 1/1024 step of [-12, 12] and 4000 random points: relative error at
 *  most 4e-6 where |x| <= 5 and 3e-5 beyond (the exponent's argument, up to 104 in magnitude, is
 *  rounded to fp32), results under 1e-35 in magnitude (flushed or underflowed) within 1e-35. */
void check_maps() {
  std::vector<float> x;
  for (int k = -12 * 1024; k <= 12 * 1024; ++k) x.push_back(static_cast<float>(k) / 1024.0f);
  std::uniform_real_distribution<float> any(-12.0f, 12.0f);
  for (int k = 0; k < 4000; ++k) x.push_back(any(g_rng));
  const int n = static_cast<int>(x.size());
  float* dx = to_device(x);
  float* out = to_device(std::vector<float>(2 * n));
  maps_kernel<<<(n + 127) / 128, 128>>>(dx, out, n);
  const std::string name = "gelu (erfc form) and gelu_tanh (sigmoid form) against fp64";
  finish(name);
  const auto got = from_device(out, 2 * n);
  double worst[2] = {0, 0};
  std::string diff;
  for (int i = 0; i < n; ++i) {
    const double v = x[i];
    // x Phi(x) and x sigmoid(2u): the definitions without 1 + erf's and 1 + tanh's cancellation at x < 0
    const double want[2] = {0.5 * v * std::erfc(-v / std::sqrt(2.0)),
                            v / (1 + std::exp(-2 * 0.7978845608028654 * (v + 0.044715 * v * v * v)))};
    for (int f = 0; f < 2; ++f) {
      const double err = std::fabs(got[2 * i + f] - want[f]);
      if (std::fabs(want[f]) < 1e-35) {
        if (err > 1e-35 && diff.empty()) diff = "x = " + std::to_string(v) + ": got " + std::to_string(got[2 * i + f]) + ", want " + std::to_string(want[f]);
        continue;
      }
      const double rel = err / std::fabs(want[f]);
      worst[f] = std::max(worst[f], rel);
      if (rel > (std::fabs(v) <= 5 ? 4e-6 : 3e-5) && diff.empty())
        diff = std::string(f ? "gelu_tanh" : "gelu") + " at x = " + std::to_string(v) + ": relative error " + std::to_string(rel);
    }
  }
  char worst_text[96];
  std::snprintf(worst_text, sizeof worst_text, "max relative error gelu %.2e, gelu_tanh %.2e", worst[0], worst[1]);
  report(diff.empty(), name, diff.empty() ? std::string(worst_text) : diff + " (" + worst_text + ")");
}

// ---- warp reductions ---------------------------------------------------------------------------

__global__ void reduce_kernel(const float* v, float* out) {
  const float x = v[threadIdx.x];
  out[threadIdx.x * 4 + 0] = napkin::quad_sum(x);
  out[threadIdx.x * 4 + 1] = napkin::quad_max(x);
  out[threadIdx.x * 4 + 2] = napkin::warp_sum(x);
  out[threadIdx.x * 4 + 3] = napkin::warp_max(x);
}

void check_reductions() {
  const auto v = random_values<float>(32);
  float* dv = to_device(v);
  float* out = to_device(std::vector<float>(128));
  reduce_kernel<<<1, 32>>>(dv, out);
  const std::string name = "quad_sum, quad_max, warp_sum, warp_max over 32 lanes";
  finish(name);
  const auto got = from_device(out, 128);
  std::vector<double> want(128), tol(128, 0.0);
  double all_sum = 0, all_max = -1e30, abs_sum = 0;
  for (float x : v) all_sum += x, all_max = std::max<double>(all_max, x), abs_sum += std::fabs(x);
  for (int l = 0; l < 32; ++l) {
    double qs = 0, qm = -1e30;
    for (int j = l / 4 * 4; j < l / 4 * 4 + 4; ++j) qs += v[j], qm = std::max<double>(qm, v[j]);
    want[l * 4 + 0] = qs, tol[l * 4 + 0] = 1e-5;  // fp32 sums in another order
    want[l * 4 + 1] = qm;
    want[l * 4 + 2] = all_sum, tol[l * 4 + 2] = 1e-5 * abs_sum;
    want[l * 4 + 3] = all_max;
  }
  const std::string d = compare_close(got, want, tol, 4);
  report(d.empty(), name, d);
}

// ---- the quad transpose of packed pairs (the gemm epilogue's 16-byte stores) -------------------

__global__ void quad_transpose_kernel(const uint32_t* in, uint32_t* out) {
  uint32_t p[4];
  for (int j = 0; j < 4; ++j) p[j] = in[threadIdx.x * 4 + j];
  napkin::quad_transpose(p, threadIdx.x % 32);
  for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = p[i];
}

void check_quad_transpose() {
  // Lane l's p[j] is "the pair of columns 8j + 2q of row l / 4": encode (row, column) in the value.
  std::vector<uint32_t> in(64 * 4);
  const uint32_t salt = static_cast<uint32_t>(g_rng()) & 0xffff0000u;  // the run's seed
  for (int l = 0; l < 64; ++l)
    for (int j = 0; j < 4; ++j) in[l * 4 + j] = salt ^ static_cast<uint32_t>((l / 4) * 64 + 8 * j + 2 * (l % 4));
  uint32_t* din = to_device(in);
  uint32_t* dout = to_device(std::vector<uint32_t>(in.size()));
  quad_transpose_kernel<<<1, 64>>>(din, dout);
  const std::string name = "quad_transpose: lane q of each quad ends with columns 8q..8q+7 (2 warps)";
  finish(name);
  const auto got = from_device(dout, in.size());
  std::string bad;
  for (int l = 0; l < 64 && bad.empty(); ++l)
    for (int i = 0; i < 4; ++i) {
      const uint32_t want = salt ^ static_cast<uint32_t>((l / 4) * 64 + 8 * (l % 4) + 2 * i);
      if (got[l * 4 + i] != want) {
        bad = "lane " + std::to_string(l) + " p[" + std::to_string(i) + "]: got " + std::to_string(got[l * 4 + i] ^ salt) + ", want " + std::to_string(want ^ salt);
        break;
      }
    }
  report(bad.empty(), name, bad);
}

// ---- stmatrix into a 128-byte-swizzled buffer (the TMA-store epilogue's staging, sm_90) -------

/** One warp stores the 16x16 block at 16-byte chunks CJ, CJ+1 of a 16-row x 64-column staging
 *  buffer by stmatrix, as emit/cuda/gemm_wgmma.cpp's TMA-store epilogue does; the buffer is read
 *  back unswizzled (chunk c of row r sits at c ^ (r % 8)). */
constexpr int ST_CJ = 2;
__global__ void stmatrix_kernel(uint32_t salt, uint16_t* out) {
  __shared__ __align__(1024) unsigned char buf[16 * 128];
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * 128 / 4; i += 32) reinterpret_cast<uint32_t*>(buf)[i] = 0xffffffffu;
  __syncwarp();
  uint32_t p[4];
  for (int i = 0; i < 4; ++i) {  // matrix i: rows 8 (i % 2).., columns 8 (i / 2).. of the block
    const int row = lane / 4 + 8 * (i % 2), col = ST_CJ * 8 + 8 * (i / 2) + 2 * (lane % 4);
    const uint32_t lo = (salt + row * 64 + col) & 0xffffu, hi = (salt + row * 64 + col + 1) & 0xffffu;
    p[i] = lo | (hi << 16);
  }
  const int mi = lane / 8, r = (mi % 2) * 8 + lane % 8, chunk = ST_CJ + mi / 2;
  napkin::stsm_x4(buf + r * 128 + ((chunk ^ (r % 8)) * 16), p[0], p[1], p[2], p[3]);
  __syncwarp();
  for (int e = lane; e < 16 * 64; e += 32) {
    const int row = e / 64, col = e % 64, c = col / 8;
    out[e] = *reinterpret_cast<const uint16_t*>(buf + row * 128 + ((c ^ (row % 8)) * 16) + (col % 8) * 2);
  }
}

void check_stmatrix() {
  const uint32_t salt = static_cast<uint32_t>(g_rng()) & 0xffffu;
  uint16_t* dout = to_device(std::vector<uint16_t>(16 * 64));
  stmatrix_kernel<<<1, 32>>>(salt, dout);
  const std::string name = "stmatrix x4: accumulator fragments land in a 128-byte-swizzled staging buffer";
  finish(name);
  const auto got = from_device(dout, 16 * 64);
  std::string bad;
  for (int e = 0; e < 16 * 64 && bad.empty(); ++e) {
    const int row = e / 64, col = e % 64;
    const bool written = col >= ST_CJ * 8 && col < ST_CJ * 8 + 16;
    const uint16_t want = written ? static_cast<uint16_t>((salt + row * 64 + col) & 0xffffu) : 0xffffu;
    if (got[e] != want) bad = "(" + std::to_string(row) + ", " + std::to_string(col) + "): got " + std::to_string(got[e]) + ", want " + std::to_string(want);
  }
  report(bad.empty(), name, bad);
}

// ---- mma.sync m16n8k16 with ldmatrix fragments -------------------------------------------------

constexpr int MMA_PITCH = 24;  // 48-byte rows: ldmatrix's 16-byte row addresses, rows staggered

/** C[16][16] = A[16][16] B^T, A given [m][k], B given [n][k]; in SMEM A is [k][m] when A_T and
 *  B is [k][n] when B_T (the .trans fragment loads), else as given. Two n8 atoms. */
template <class T, bool A_T, bool B_T> __global__ void mma_sync_kernel(const T* a_g, const T* b_g, float* c_out) {
  __shared__ __align__(16) T sa[16 * MMA_PITCH];
  __shared__ __align__(16) T sb[16 * MMA_PITCH];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) {
    const int r = i / 16, k = i % 16;
    (A_T ? sa[k * MMA_PITCH + r] : sa[r * MMA_PITCH + k]) = a_g[i];
    (B_T ? sb[k * MMA_PITCH + r] : sb[r * MMA_PITCH + k]) = b_g[i];
  }
  __syncwarp();
  uint32_t a[4], b[4];
  if constexpr (A_T) napkin::frag_a_t(a, sa, MMA_PITCH, 0, 0, lane);
  else napkin::frag_a(a, sa, MMA_PITCH, 0, 0, lane);
  if constexpr (B_T) napkin::frag_b_t(b, sb, MMA_PITCH, 0, 0, lane);
  else napkin::frag_b(b, sb, MMA_PITCH, 0, 0, lane);
  float c0[4] = {}, c1[4] = {};
  if constexpr (std::is_same_v<T, bf16>) {
    napkin::mma_m16n8k16_bf16(c0, a, b);
    napkin::mma_m16n8k16_bf16(c1, a, b + 2);
  } else {
    napkin::mma_m16n8k16_fp16(c0, a, b);
    napkin::mma_m16n8k16_fp16(c1, a, b + 2);
  }
  for (int i = 0; i < 4; ++i) {
    c_out[acc_row(lane, i) * 16 + acc_col(lane, i)] = c0[i];
    c_out[acc_row(lane, i) * 16 + 8 + acc_col(lane, i)] = c1[i];
  }
}

/** Host reference of C = A B^T (A [m][k], B [n][k]) in fp64 and a tolerance per element for fp32
 *  accumulation: 2^-12 of the sum of |products| (tensor cores add in fp32 with truncation). */
template <class T>
void host_gemm(const std::vector<T>& a, const std::vector<T>& b, int M, int N, int K, std::vector<double>& c, std::vector<double>& tol) {
  c.assign(M * N, 0.0), tol.assign(M * N, 0.0);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = double(host_f(a[m * K + k])) * host_f(b[n * K + k]);
        s += p, mag += std::fabs(p);
      }
      c[m * N + n] = s, tol[m * N + n] = mag / 4096 + 1e-6;
    }
}

template <class T, bool A_T, bool B_T> void check_mma_sync(const char* type) {
  const auto a = random_values<T>(256), b = random_values<T>(256);
  T* da = to_device(a);
  T* db = to_device(b);
  float* dc = to_device(std::vector<float>(256));
  mma_sync_kernel<T, A_T, B_T><<<1, 32>>>(da, db, dc);
  const std::string name = std::string("mma.sync m16n8k16 ") + type + " x2, fragments by ldmatrix" + (A_T ? ".trans" : "") + " (A " +
                           (A_T ? "[k][m]" : "[m][k]") + ") and ldmatrix" + (B_T ? ".trans" : "") + " (B " + (B_T ? "[k][n]" : "[n][k]") + ")";
  finish(name);
  std::vector<double> want, tol;
  host_gemm(a, b, 16, 16, 16, want, tol);
  const std::string d = compare_close(from_device(dc, 256), want, tol, 16);
  report(d.empty(), name, d);
}

// ---- int8: conversions, and mma.sync m16n8k32 with ldmatrix fragments (int8.cuh) ---------------

constexpr int I8_K = 64, I8_PITCH = I8_K + 16;  // two k32 steps; rows padded by 16 bytes, as the GEMM's

/** C[16][16] = A[16][64] B^T of int8 (A [m][k], B [n][k], K-major in SMEM as the int8 GEMM stages
 *  them): the generated m16n8k32 atom, two n8 atoms per k32 step, int32 accumulators. */
__global__ void mma_int8_kernel(const int8_t* a_g, const int8_t* b_g, int32_t* c_out) {
  __shared__ __align__(16) int8_t sa[16 * I8_PITCH];
  __shared__ __align__(16) int8_t sb[16 * I8_PITCH];
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * I8_K; i += 32) sa[(i / I8_K) * I8_PITCH + i % I8_K] = a_g[i], sb[(i / I8_K) * I8_PITCH + i % I8_K] = b_g[i];
  __syncwarp();
  int32_t c0[4] = {}, c1[4] = {};
  for (int kk = 0; kk < I8_K; kk += 32) {
    uint32_t a[4], b[4];
    napkin::frag_a8(a, sa, I8_PITCH, 0, kk, lane);
    napkin::frag_b8(b, sb, I8_PITCH, 0, kk, lane);
    napkin::mma_m16n8k32_int8(c0, a, b);
    napkin::mma_m16n8k32_int8(c1, a, b + 2);
  }
  for (int i = 0; i < 4; ++i) {
    c_out[acc_row(lane, i) * 16 + acc_col(lane, i)] = c0[i];
    c_out[acc_row(lane, i) * 16 + 8 + acc_col(lane, i)] = c1[i];
  }
}

void check_mma_int8() {
  std::uniform_int_distribution<int> u(-128, 127);
  std::vector<int8_t> a(16 * I8_K), b(16 * I8_K);
  for (auto& x : a) x = static_cast<int8_t>(u(g_rng));
  for (auto& x : b) x = static_cast<int8_t>(u(g_rng));
  int8_t* da = to_device(a);
  int8_t* db = to_device(b);
  int32_t* dc = to_device(std::vector<int32_t>(256));
  mma_int8_kernel<<<1, 32>>>(da, db, dc);
  const std::string name = "mma.sync m16n8k32 int8 x2 x2 (K = 64), int32 accumulators, fragments by ldmatrix (A [m][k], B [n][k])";
  finish(name);
  std::vector<int32_t> want(256);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      int32_t s = 0;
      for (int k = 0; k < I8_K; ++k) s += int32_t{a[m * I8_K + k]} * int32_t{b[n * I8_K + k]};
      want[m * 16 + n] = s;
    }
  const std::string d = compare_exact(from_device(dc, 256), want, 16);  // integer sums: exact
  report(d.empty(), name, d);
}

/** C[16][16] = A[16][64] B^T of an 8-bit float T (A [m][k], B [n][k], K-major in SMEM as the GEMM's
 *  mma.sync path stages them): the generated m16n8k32 atom (sm_89 on; Hopper converts to f16 for
 *  HMMA), two n8 atoms per k32 step, fp32 accumulators, frag8.cuh's fragments. */
template <class T> __global__ void mma_fp8_kernel(const T* a_g, const T* b_g, float* c_out) {
  __shared__ __align__(16) T sa[16 * I8_PITCH];
  __shared__ __align__(16) T sb[16 * I8_PITCH];
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * I8_K; i += 32) sa[(i / I8_K) * I8_PITCH + i % I8_K] = a_g[i], sb[(i / I8_K) * I8_PITCH + i % I8_K] = b_g[i];
  __syncwarp();
  float c0[4] = {}, c1[4] = {};
  for (int kk = 0; kk < I8_K; kk += 32) {
    uint32_t a[4], b[4];
    napkin::frag_a8(a, sa, I8_PITCH, 0, kk, lane);
    napkin::frag_b8(b, sb, I8_PITCH, 0, kk, lane);
    if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) napkin::mma_m16n8k32_fp8e4m3(c0, a, b), napkin::mma_m16n8k32_fp8e4m3(c1, a, b + 2);
    else napkin::mma_m16n8k32_fp8e5m2(c0, a, b), napkin::mma_m16n8k32_fp8e5m2(c1, a, b + 2);
  }
  for (int i = 0; i < 4; ++i) {
    c_out[acc_row(lane, i) * 16 + acc_col(lane, i)] = c0[i];
    c_out[acc_row(lane, i) * 16 + 8 + acc_col(lane, i)] = c1[i];
  }
}

template <class T> void check_mma_fp8(const char* what) {
  const std::string name = std::string("mma.sync m16n8k32 ") + what + " x2 x2 (K = 64), fp32 accumulators, fragments by ldmatrix (A [m][k], B [n][k])";
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major * 10 + minor < 89) {
    std::printf("SKIP %s: needs compute capability 8.9 (this GPU: %d.%d)\n", name.c_str(), major, minor);
    return;
  }
  const auto a = random_values<T>(16 * I8_K), b = random_values<T>(16 * I8_K);
  T* da = to_device(a);
  T* db = to_device(b);
  float* dc = to_device(std::vector<float>(256));
  mma_fp8_kernel<T><<<1, 32>>>(da, db, dc);
  finish(name);
  std::vector<double> want, tol;
  host_gemm(a, b, 16, 16, I8_K, want, tol);  // fp8 products are exact in fp32: the tolerance is the sum's rounding
  const std::string d = compare_close(from_device(dc, 256), want, tol, 16);
  report(d.empty(), name, d);
}

/** from_f<int8_t> (round to nearest even, saturate, NaN to 0), to_f and store_pair of int8. */
__global__ void int8_convert_kernel(const float* x, int8_t* q, float* back, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) q[i] = napkin::from_f<int8_t>(x[i]), back[i] = napkin::to_f(q[i]);
  if (threadIdx.x == 0) {
    const int64_t at[2] = {n, n + 1};
    const float v[2] = {3.5f, -1000.0f};
    napkin::store_pair(q, at, v, true);
  }
}

void check_int8_conversions() {
  const std::vector<float> x{-200.0f, -128.5f, -127.5f, -0.5f, 0.5f, 1.5f, 2.5f, 126.5f, 127.5f, 300.0f, NAN, 3e9f};
  const std::vector<int8_t> want{-128, -128, -128, 0, 0, 2, 2, 126, 127, 127, 0, 127, 4, -128};
  const int n = static_cast<int>(x.size());
  float* dx = to_device(x);
  int8_t* dq = to_device(std::vector<int8_t>(n + 2));
  float* db = to_device(std::vector<float>(n));
  int8_convert_kernel<<<1, 32>>>(dx, dq, db, n);
  const std::string name = "int8 from_f (nearest even, saturating, NaN to 0), to_f and store_pair";
  finish(name);
  const auto q = from_device(dq, n + 2);
  const auto back = from_device(db, n);
  std::string d = compare_exact(q, want, n + 2);
  for (int i = 0; i < n && d.empty(); ++i)
    if (back[i] != static_cast<float>(want[i])) d = "to_f of element " + std::to_string(i) + " is " + std::to_string(back[i]);
  report(d.empty(), name, d);
}

// ---- sm_90a: wgmma m64n128k16 on SMEM descriptors of 128-byte-swizzled tiles -------------------

constexpr int WG_M = 64, WG_N = 128, WG_K = 64, WG_THREADS = 128;
constexpr int WG_SMEM_B_OFFSET = 16384, WG_SMEM_BYTES = WG_SMEM_B_OFFSET + WG_N * WG_K * 2 + 1024;  // + alignment

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/** Rounds the start of dynamic SMEM up to the 1024-byte alignment of swizzle atoms. */
__device__ unsigned char* smem_aligned_1024(unsigned char* raw) { return raw + (1024 - napkin::smem_u32(raw) % 1024) % 1024; }
#endif

/** C[64][128] = A[64][64] B^T (A [m][k], B [n][k] in global memory). MODE 0: A and B K-major in
 *  SMEM (TA = TB = 0); 1: both MN-major (TA = TB = 1; B as two 64-column blocks); 2: A in registers
 *  (m16n8k16 fragments by ldmatrix from a pitched tile), B K-major. SMEM written by the threads
 *  in Swizzled128Tile's layout, so this also checks that layout against wgmma's. */
template <class T, int MODE> __global__ void wgmma_kernel(const T* a_g, const T* b_g, float* c_out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  unsigned char* smem = smem_aligned_1024(raw);
  T* sa = reinterpret_cast<T*>(smem);                        // 64 x 64: 8 KiB (MODE 2: 64 x 72, 9 KiB)
  T* sb = reinterpret_cast<T*>(smem + WG_SMEM_B_OFFSET);  // 128 x 64: 16 KiB
  constexpr int A_PITCH = WG_K + 8;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  using A64 = napkin::Swizzled128Tile<T, WG_K>;  // MN-major blocks: 64 rows of k, 64 columns of m or n
  for (int i = tid; i < WG_M * WG_K; i += WG_THREADS) {
    const int m = i / WG_K, k = i % WG_K;
    if constexpr (MODE == 0) sa[napkin::Swizzled128Tile<T, WG_M>::offset(m, k)] = a_g[i];
    else if constexpr (MODE == 1) sa[A64::offset(k, m)] = a_g[i];
    else sa[m * A_PITCH + k] = a_g[i];
  }
  for (int i = tid; i < WG_N * WG_K; i += WG_THREADS) {
    const int n = i / WG_K, k = i % WG_K;
    if constexpr (MODE == 1) sb[(n / 64) * 64 * WG_K + A64::offset(k, n % 64)] = b_g[i];
    else sb[napkin::Swizzled128Tile<T, WG_N>::offset(n, k)] = b_g[i];
  }
  napkin::fence_proxy_async();  // generic-proxy writes before wgmma's async-proxy reads
  __syncthreads();
  float acc[WG_N / 2];
  for (int i = 0; i < WG_N / 2; ++i) acc[i] = 0.0f;
  [[maybe_unused]] uint32_t af[WG_K / 16][4];
  if constexpr (MODE == 2)
    for (int kk = 0; kk < WG_K; kk += 16) napkin::frag_a(af[kk / 16], sa, A_PITCH, warp * 16, kk, lane);
  napkin::fence_regs(acc);
  napkin::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < WG_K; kk += 16) {
    if constexpr (MODE == 0) {
      const uint64_t da = napkin::smem_desc(sa + kk, 16, 1024), db = napkin::smem_desc(sb + kk, 16, 1024);
      if constexpr (std::is_same_v<T, bf16>) napkin::wgmma_m64n128k16_bf16<0, 0>(acc, da, db);
      else napkin::wgmma_m64n128k16_fp16<0, 0>(acc, da, db);
    } else if constexpr (MODE == 1) {  // a k16 step is 16 rows of 128 bytes; column blocks 64 rows of k apart
      const uint64_t da = napkin::smem_desc(sa + kk * 64, WG_K * 128, 1024), db = napkin::smem_desc(sb + kk * 64, WG_K * 128, 1024);
      napkin::wgmma_m64n128k16_bf16<1, 1>(acc, da, db);
    } else {
      napkin::wgmma_m64n128k16_bf16_rs<0>(acc, af[kk / 16], napkin::smem_desc(sb + kk, 16, 1024));
    }
  }
  napkin::wgmma_commit();
  napkin::wgmma_wait<0>();
  napkin::fence_regs(acc);
  for (int j = 0; j < WG_N / 8; ++j)
    for (int i = 0; i < 4; ++i) c_out[(warp * 16 + acc_row(lane, i)) * WG_N + j * 8 + acc_col(lane, i)] = acc[j * 4 + i];
#endif
}

/** C[64][128] = A[64][128] B^T of fp8 (A [m][k], B [n][k]): the generated wgmma m64n128k32 atom
 *  (8-bit types: both operands K-major in SMEM, no transpose), K = 128 elements = one 128-byte
 *  swizzle row, 4 k32 steps advancing the descriptors 32 bytes each. */
template <class T> __global__ void wgmma_fp8_kernel(const T* a_g, const T* b_g, float* c_out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int K = 128;
  extern __shared__ unsigned char raw[];
  unsigned char* smem = smem_aligned_1024(raw);
  T* sa = reinterpret_cast<T*>(smem);                     // 64 x 128 bytes: 8 KiB
  T* sb = reinterpret_cast<T*>(smem + WG_SMEM_B_OFFSET);  // 128 x 128 bytes: 16 KiB
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < WG_M * K; i += WG_THREADS) sa[napkin::Swizzled128Tile<T, WG_M>::offset(i / K, i % K)] = a_g[i];
  for (int i = tid; i < WG_N * K; i += WG_THREADS) sb[napkin::Swizzled128Tile<T, WG_N>::offset(i / K, i % K)] = b_g[i];
  napkin::fence_proxy_async();  // generic-proxy writes before wgmma's async-proxy reads
  __syncthreads();
  float acc[WG_N / 2];
  for (int i = 0; i < WG_N / 2; ++i) acc[i] = 0.0f;
  napkin::fence_regs(acc);
  napkin::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K; kk += 32) {  // 32 fp8 elements = 32 bytes per k32 step
    const uint64_t da = napkin::smem_desc(sa + kk, 16, 1024), db = napkin::smem_desc(sb + kk, 16, 1024);
    if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) napkin::wgmma_m64n128k32_fp8e4m3<0, 0>(acc, da, db);
    else napkin::wgmma_m64n128k32_fp8e5m2<0, 0>(acc, da, db);
  }
  napkin::wgmma_commit();
  napkin::wgmma_wait<0>();
  napkin::fence_regs(acc);
  for (int j = 0; j < WG_N / 8; ++j)
    for (int i = 0; i < 4; ++i) c_out[(warp * 16 + acc_row(lane, i)) * WG_N + j * 8 + acc_col(lane, i)] = acc[j * 4 + i];
#endif
}

/** C[64][128] = A[64][128] B^T of int8 (A [m][k], B [n][k]): the generated wgmma m64n128k32 .s32.s8.s8
 *  atom, both operands K-major in SMEM, K = 128 bytes = one swizzle row, 4 k32 steps; int32
 *  accumulators (int8.cuh's fence_regs). */
__global__ void wgmma_int8_kernel(const int8_t* a_g, const int8_t* b_g, int32_t* c_out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int K = 128;
  extern __shared__ unsigned char raw[];
  unsigned char* smem = smem_aligned_1024(raw);
  int8_t* sa = reinterpret_cast<int8_t*>(smem);
  int8_t* sb = reinterpret_cast<int8_t*>(smem + WG_SMEM_B_OFFSET);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < WG_M * K; i += WG_THREADS) sa[napkin::Swizzled128Tile<int8_t, WG_M>::offset(i / K, i % K)] = a_g[i];
  for (int i = tid; i < WG_N * K; i += WG_THREADS) sb[napkin::Swizzled128Tile<int8_t, WG_N>::offset(i / K, i % K)] = b_g[i];
  napkin::fence_proxy_async();
  __syncthreads();
  int32_t acc[WG_N / 2];
  for (int i = 0; i < WG_N / 2; ++i) acc[i] = 0;
  napkin::fence_regs(acc);
  napkin::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K; kk += 32) {
    const uint64_t da = napkin::smem_desc(sa + kk, 16, 1024), db = napkin::smem_desc(sb + kk, 16, 1024);
    napkin::wgmma_m64n128k32_int8<0, 0>(acc, da, db);
  }
  napkin::wgmma_commit();
  napkin::wgmma_wait<0>();
  napkin::fence_regs(acc);
  for (int j = 0; j < WG_N / 8; ++j)
    for (int i = 0; i < 4; ++i) c_out[(warp * 16 + acc_row(lane, i)) * WG_N + j * 8 + acc_col(lane, i)] = acc[j * 4 + i];
#endif
}

void check_wgmma_int8() {
  constexpr int K = 128;
  std::uniform_int_distribution<int> u(-128, 127);
  std::vector<int8_t> a(WG_M * K), b(WG_N * K);
  for (auto& x : a) x = static_cast<int8_t>(u(g_rng));
  for (auto& x : b) x = static_cast<int8_t>(u(g_rng));
  int8_t* da = to_device(a);
  int8_t* db = to_device(b);
  int32_t* dc = to_device(std::vector<int32_t>(WG_M * WG_N));
  wgmma_int8_kernel<<<1, WG_THREADS, WG_SMEM_BYTES>>>(da, db, dc);
  const std::string name = "wgmma m64n128k32 .s32.s8.s8 x4 (K = 128), A and B K-major in SMEM, int32 accumulators";
  finish(name);
  std::vector<int32_t> want(WG_M * WG_N);
  for (int m = 0; m < WG_M; ++m)
    for (int n = 0; n < WG_N; ++n) {
      int32_t s = 0;
      for (int k = 0; k < K; ++k) s += int32_t{a[m * K + k]} * int32_t{b[n * K + k]};
      want[m * WG_N + n] = s;
    }
  const std::string d = compare_exact(from_device(dc, WG_M * WG_N), want, WG_N);  // integer sums: exact
  report(d.empty(), name, d);
}

template <class T> void check_wgmma_fp8(const char* what) {
  constexpr int K = 128;
  const auto a = random_values<T>(WG_M * K), b = random_values<T>(WG_N * K);
  T* da = to_device(a);
  T* db = to_device(b);
  float* dc = to_device(std::vector<float>(WG_M * WG_N));
  wgmma_fp8_kernel<T><<<1, WG_THREADS, WG_SMEM_BYTES>>>(da, db, dc);
  const std::string name = std::string("wgmma m64n128k32 x4 (K = 128) ") + what + ", A and B K-major in SMEM";
  finish(name);
  std::vector<double> want, tol;
  host_gemm(a, b, WG_M, WG_N, K, want, tol);  // fp8 products are exact in fp32: the tolerance is the sum's rounding
  const std::string d = compare_close(from_device(dc, WG_M * WG_N), want, tol, WG_N);
  report(d.empty(), name, d);
}

// ---- the fp8 flash form's P: fp32 accumulator fragments as the k32 A fragment of 8-bit wgmma ------

/** A 64 x 128 P (row-major fp32 values, each exactly a T) as one warpgroup's m64nN accumulator
 *  fragments, per k32 slice kb converted by napkin::acc_to_a_fp8 (emit/cuda/device/fp8.cuh); the
 *  registers go to a_out[(kb * 128 + thread) * 4 + r]. WGMMA (sm_90a, e4m3): also C = P B^T by the
 *  generated wgmma m64n128k32 atom with A from those registers and B [n][k] K-major in SMEM. */
template <class T, bool WGMMA> __global__ void acc_to_a_fp8_kernel(const float* p, uint32_t* a_out, const T* b_g, float* c_out) {
  static_assert(!WGMMA || std::is_same_v<T, __nv_fp8_e4m3>, "the test's register-A wgmma atom is the e4m3 one");
  constexpr int K = 128;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  uint32_t af[K / 32][4];
#pragma unroll
  for (int kb = 0; kb < K / 32; ++kb) {
    float acc[16];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j * 4 + e] = p[(warp * 16 + acc_row(lane, e)) * K + kb * 32 + j * 8 + acc_col(lane, e)];
    napkin::acc_to_a_fp8<T>(acc, af[kb], lane);
#pragma unroll
    for (int r = 0; r < 4; ++r) a_out[(kb * 128 + tid) * 4 + r] = af[kb][r];
  }
  if constexpr (WGMMA) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char raw[];
    T* sb = reinterpret_cast<T*>(smem_aligned_1024(raw));
    for (int i = tid; i < WG_N * K; i += WG_THREADS) sb[napkin::Swizzled128Tile<T, WG_N>::offset(i / K, i % K)] = b_g[i];
    napkin::fence_proxy_async();  // generic-proxy writes before wgmma's async-proxy reads
    __syncthreads();
    float c[WG_N / 2];
    for (int i = 0; i < WG_N / 2; ++i) c[i] = 0.0f;
    napkin::fence_regs(c);
    napkin::wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < K / 32; ++kb) napkin::wgmma_m64n128k32_fp8e4m3_rs<0>(c, af[kb], napkin::smem_desc(sb + kb * 32, 16, 1024));
    napkin::wgmma_commit();
    napkin::wgmma_wait<0>();
    napkin::fence_regs(c);
    for (int j = 0; j < WG_N / 8; ++j)
      for (int i = 0; i < 4; ++i) c_out[(warp * 16 + acc_row(lane, i)) * WG_N + j * 8 + acc_col(lane, i)] = c[j * 4 + i];
#endif
  }
}

/** acc_to_a_fp8 against the PTX ISA's layout of the 8-bit A fragment of wgmma .m64nNk32 (9.7.15.5.1.1,
 *  as mma.m16n8k32's per warp: element a_i of register i / 4 at row lane / 4 + 8 ((i / 4) % 2),
 *  column 4 (lane % 4) + i % 4 + 16 (i >= 8)), byte for byte; with WGMMA, also through the
 *  hardware: P B^T by wgmma from those registers against the host's product. */
template <class T, bool WGMMA> void check_acc_to_a_fp8(const char* what) {
  constexpr int K = 128;
  const auto pv = random_values<T>(WG_M * K), b = random_values<T>(WG_N * K);
  std::vector<float> pf(pv.size());
  for (size_t i = 0; i < pv.size(); ++i) pf[i] = host_f(pv[i]);
  float* dp = to_device(pf);
  uint32_t* da = to_device(std::vector<uint32_t>(K / 32 * WG_THREADS * 4));
  T* db = to_device(b);
  float* dc = to_device(std::vector<float>(WG_M * WG_N));
  acc_to_a_fp8_kernel<T, WGMMA><<<1, WG_THREADS, WGMMA ? WG_SMEM_BYTES : 0>>>(dp, da, db, dc);
  const std::string name = std::string("acc_to_a_fp8 ") + what + ": m64nN f32 accumulator fragments as wgmma k32 8-bit A fragments";
  finish(name);
  const auto a = from_device(da, K / 32 * WG_THREADS * 4);
  int bad = 0;
  std::string first;
  for (int kb = 0; kb < K / 32; ++kb)
    for (int tid = 0; tid < WG_THREADS; ++tid)
      for (int r = 0; r < 4; ++r)
        for (int i = 0; i < 4; ++i) {
          const int lane = tid % 32, row = tid / 32 * 16 + lane / 4 + 8 * (r % 2), col = kb * 32 + 4 * (lane % 4) + i + 16 * (r / 2);
          const unsigned got = (a[(kb * WG_THREADS + tid) * 4 + r] >> (8 * i)) & 0xffu;
          unsigned char want = 0;
          std::memcpy(&want, &pv[row * K + col], 1);
          if (got != want && bad++ == 0)
            first = "thread " + std::to_string(tid) + " k32 slice " + std::to_string(kb) + " register " + std::to_string(r) + " byte " + std::to_string(i) +
                    ": want P(" + std::to_string(row) + ", " + std::to_string(col) + ")";
        }
  report(bad == 0, name, bad ? std::to_string(bad) + " bytes differ, first " + first : "");
  if (!WGMMA) return;
  const std::string name_mma = std::string("wgmma m64n128k32 x4 (K = 128) ") + what + ", A from acc_to_a_fp8's registers, B K-major in SMEM";
  std::vector<double> want, tol;
  host_gemm(pv, b, WG_M, WG_N, K, want, tol);
  const std::string d = compare_close(from_device(dc, WG_M * WG_N), want, tol, WG_N);
  report(d.empty(), name_mma, d);
}

template <class T, int MODE> void check_wgmma(const char* what) {
  const auto a = random_values<T>(WG_M * WG_K), b = random_values<T>(WG_N * WG_K);
  T* da = to_device(a);
  T* db = to_device(b);
  float* dc = to_device(std::vector<float>(WG_M * WG_N));
  wgmma_kernel<T, MODE><<<1, WG_THREADS, WG_SMEM_BYTES>>>(da, db, dc);
  const std::string name = std::string("wgmma m64n128k16 x4 (K = 64) ") + what;
  finish(name);
  std::vector<double> want, tol;
  host_gemm(a, b, WG_M, WG_N, WG_K, want, tol);
  const std::string d = compare_close(from_device(dc, WG_M * WG_N), want, tol, WG_N);
  report(d.empty(), name, d);
}

// ---- sm_90a: wgmma descriptors advanced by an add (wgmma.cuh desc_advance) ----------------------

constexpr int DESC_CASES = 6;
/** For each case: desc_advance of the descriptor at an SMEM offset, and the descriptor built at
 *  offset + bytes; both written out (their 64 bits must agree). */
__global__ void desc_kernel(const int (*cases)[2], unsigned long long* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  unsigned char* smem = smem_aligned_1024(raw);
  for (int i = 0; i < DESC_CASES; ++i) {
    const int at = cases[i][0], bytes = cases[i][1];
    const unsigned lbo = i % 2 ? 16u : 8192u;  // K-major, MN-major
    out[2 * i] = napkin::desc_advance(napkin::smem_desc(smem + at, lbo, 1024), bytes);
    out[2 * i + 1] = napkin::smem_desc(smem + at + bytes, lbo, 1024);
  }
#endif
}

void check_desc_advance() {
  // (offset, advance) in bytes: k steps inside a swizzle row, stages, a warpgroup's rows, up to the 200 KB mark
  const std::vector<int> flat = {0, 32, 1024, 96, 8192, 16384 + 64, 0, 3 * 65536, 128, 16 * 128, 65536, 131072 + 4096};
  int (*cases)[2] = nullptr;
  unsigned long long* out = nullptr;
  cudaMalloc(&cases, sizeof(int) * flat.size());
  cudaMalloc(&out, sizeof(unsigned long long) * 2 * DESC_CASES);
  cudaMemcpy(cases, flat.data(), sizeof(int) * flat.size(), cudaMemcpyHostToDevice);
  cudaFuncSetAttribute(desc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024 + 1024);
  desc_kernel<<<1, 1, 200 * 1024 + 1024>>>(cases, out);
  const std::string name = "wgmma descriptors: desc_advance(smem_desc(p), n) equals smem_desc(p + n), 6 offsets up to 200 KB";
  finish(name);
  std::vector<unsigned long long> got(2 * DESC_CASES);
  cudaMemcpy(got.data(), out, sizeof(unsigned long long) * got.size(), cudaMemcpyDeviceToHost);
  std::string d;
  for (int i = 0; i < DESC_CASES; ++i)
    if (got[2 * i] != got[2 * i + 1]) d += "case " + std::to_string(i) + ": " + std::to_string(got[2 * i]) + " != " + std::to_string(got[2 * i + 1]) + "; ";
  report(d.empty() && got[1] != 0, name, d);
  cudaFree(cases);
  cudaFree(out);
}

// ---- sm_90a: TMA 2-D box with out-of-bounds zero fill -----------------------------------------

constexpr int BOX_ROWS = 32, BOX_COLS = 64;

__global__ void tma_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, bf16* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  bf16* tile = reinterpret_cast<bf16*>(smem_aligned_1024(raw));
  __shared__ uint64_t bar;
  for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += blockDim.x) tile[i] = __float2bfloat16(-7.0f);
  if (threadIdx.x == 0) {
    napkin::mbar_init(&bar, 1);
    napkin::mbar_init_fence();
  }
  napkin::fence_proxy_async();  // the sentinel writes before TMA's
  __syncthreads();
  if (threadIdx.x == 0) {
    napkin::mbar_expect_tx(&bar, BOX_ROWS * BOX_COLS * 2);
    napkin::tma_load(tile, &map, &bar, c0, c1);
  }
  napkin::mbar_wait(&bar, 0);
  const napkin::Swizzled128Tile<bf16, BOX_ROWS> t{tile};
  for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += blockDim.x) out[i] = t.at(i / BOX_COLS, i % BOX_COLS);
#endif
}

/** Tensor map of a row-major bf16 [rows][cols] array with boxes of box_rows x 64. */
bool bf16_tmap(CUtensorMap* map, const bf16* base, int rows, int cols, int box_rows) {
  const uint64_t dims[2] = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
  const uint64_t strides[1] = {static_cast<uint64_t>(cols) * 2};
  const uint32_t box[2] = {64, static_cast<uint32_t>(box_rows)};
  return napkin::make_tmap(map, base, 2, dims, strides, box, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
}

void check_tma() {
  const int R = 100, C = 72;  // rows of 144 bytes: TMA's 16-byte stride alignment
  const auto h = random_values<bf16>(R * C);
  bf16* g = to_device(h);
  bf16* out = to_device(std::vector<bf16>(BOX_ROWS * BOX_COLS));
  CUtensorMap map;
  if (!bf16_tmap(&map, g, R, C, BOX_ROWS)) {
    report(false, "TMA: make_tmap of a 100 x 72 bf16 array", "cuTensorMapEncodeTiled refused it");
    return;
  }
  for (const auto& [c0, c1] : {std::pair{0, 0}, std::pair{40, 80}, std::pair{-16, -5}, std::pair{8, 68}}) {
    tma_kernel<<<1, 128, BOX_ROWS * BOX_COLS * 2 + 1024>>>(map, c0, c1, out);
    const std::string name = "TMA 2-D box 32x64 of a 100 x 72 bf16 array at (row " + std::to_string(c1) + ", col " + std::to_string(c0) +
                             "), 128-byte swizzle, zero fill outside";
    finish(name);
    std::vector<bf16> want(BOX_ROWS * BOX_COLS);
    for (int r = 0; r < BOX_ROWS; ++r)
      for (int k = 0; k < BOX_COLS; ++k) {
        const int gr = c1 + r, gc = c0 + k;
        want[r * BOX_COLS + k] = gr >= 0 && gr < R && gc >= 0 && gc < C ? h[gr * C + gc] : __float2bfloat16(0.0f);
      }
    const std::string d = compare_exact(from_device(out, want.size()), want, BOX_COLS);
    report(d.empty(), name, d);
  }
}

// ---- sm_90a: TMA store of a swizzled SMEM box, clipped at the array's edge --------------------

/** Fills a 32 x 64 box in SMEM (Swizzled128Tile layout: the tensor map's 128-byte swizzle) with
 *  value(r, c) = r * 64 + c, and stores it by TMA at (c0, c1): elements past the array are not written. */
__global__ void tma_store_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  const napkin::Swizzled128Tile<bf16, BOX_ROWS> t{reinterpret_cast<bf16*>(smem_aligned_1024(raw))};
  for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += blockDim.x) t.at(i / BOX_COLS, i % BOX_COLS) = __float2bfloat16(static_cast<float>(i % 256));
  napkin::fence_proxy_async();  // the generic-proxy writes before TMA reads them
  __syncthreads();
  if (threadIdx.x == 0) {
    napkin::tma_store(&map, t.p, c0, c1);
    napkin::bulk_commit();
    napkin::bulk_wait<0>();
  }
#endif
}

void check_tma_store() {
  const int R = 100, C = 72;
  const auto h = random_values<bf16>(R * C);
  for (const auto& [c0, c1] : {std::pair{0, 0}, std::pair{8, 68}, std::pair{40, 80}}) {
    bf16* g = to_device(h);
    CUtensorMap map;
    if (!bf16_tmap(&map, g, R, C, BOX_ROWS)) {
      report(false, "TMA store: make_tmap of a 100 x 72 bf16 array", "cuTensorMapEncodeTiled refused it");
      return;
    }
    tma_store_kernel<<<1, 128, BOX_ROWS * BOX_COLS * 2 + 1024>>>(map, c0, c1);
    const std::string name = "TMA store of a 32x64 swizzled SMEM box into a 100 x 72 bf16 array at (row " + std::to_string(c1) + ", col " +
                             std::to_string(c0) + "), clipped at the edge";
    finish(name);
    std::vector<bf16> want = h;
    for (int r = 0; r < BOX_ROWS; ++r)
      for (int k = 0; k < BOX_COLS; ++k) {
        const int gr = c1 + r, gc = c0 + k;
        if (gr < R && gc < C) want[gr * C + gc] = __float2bfloat16(static_cast<float>((r * BOX_COLS + k) % 256));
      }
    const std::string d = compare_exact(from_device(g, want.size()), want, C);
    report(d.empty(), name, d);
  }
}

// ---- sm_90a: the mbarrier pipeline (full/empty barriers, StageRing phases, TMA producer) -------

constexpr int PIPE_STAGES = 3, PIPE_ROWS = 16, PIPE_CONSUMER_WARPS = 2, PIPE_STAGE_BYTES = PIPE_ROWS * 128;

__global__ void pipeline_kernel(const __grid_constant__ CUtensorMap map, int K, bf16* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  unsigned char* smem = smem_aligned_1024(raw);
  __shared__ uint64_t full[PIPE_STAGES], empty[PIPE_STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunks = (K + 63) / 64;
  if (threadIdx.x == 0) {
    for (int s = 0; s < PIPE_STAGES; ++s) {
      napkin::mbar_init(&full[s], 1);
      napkin::mbar_init(&empty[s], PIPE_CONSUMER_WARPS);  // one arrival per consumer warp
    }
    napkin::mbar_init_fence();
  }
  __syncthreads();
  napkin::StageRing<PIPE_STAGES> ring;
  if (warp == 0) {  // producer: one thread
    if (lane == 0)
      for (int c = 0; c < chunks; ++c, ring.advance()) {
        const int s = ring.stage();
        if (ring.reuses()) napkin::mbar_wait(&empty[s], ring.release_phase());
        napkin::mbar_expect_tx(&full[s], PIPE_STAGE_BYTES);  // the whole box, zero-filled part too
        napkin::tma_load(smem + s * PIPE_STAGE_BYTES, &map, &full[s], c * 64, 0);
      }
  } else {  // consumers: warp w copies rows 8 (w - 1) .. 8 (w - 1) + 7 of each chunk out
    const int r0 = (warp - 1) * (PIPE_ROWS / PIPE_CONSUMER_WARPS);
    for (int c = 0; c < chunks; ++c, ring.advance()) {
      const int s = ring.stage();
      napkin::mbar_wait(&full[s], ring.phase());
      const napkin::Swizzled128Tile<bf16, PIPE_ROWS> t{reinterpret_cast<bf16*>(smem + s * PIPE_STAGE_BYTES)};
      for (int i = lane; i < (PIPE_ROWS / PIPE_CONSUMER_WARPS) * 64; i += 32) {
        const int r = r0 + i / 64, k = i % 64;
        out[(c * PIPE_ROWS + r) * 64 + k] = t.at(r, k);
      }
      __syncwarp();
      if (lane == 0) napkin::mbar_arrive(&empty[s]);
    }
  }
#endif
}

void check_pipeline() {
  for (const int K : {600, 64 * 7}) {
    const int chunks = (K + 63) / 64;
    const auto h = random_values<bf16>(PIPE_ROWS * K);
    bf16* g = to_device(h);
    bf16* out = to_device(std::vector<bf16>(chunks * PIPE_ROWS * 64));
    const std::string name = "mbarrier pipeline: " + std::to_string(PIPE_STAGES) + "-stage ring, TMA producer, " +
                             std::to_string(PIPE_CONSUMER_WARPS) +
                             " consumer warps, " + std::to_string(chunks) + " chunks of 16x64, K = " + std::to_string(K);
    CUtensorMap map;
    if (!bf16_tmap(&map, g, PIPE_ROWS, K, PIPE_ROWS)) {
      report(false, name, "cuTensorMapEncodeTiled refused the array");
      continue;
    }
    pipeline_kernel<<<1, 32 * (1 + PIPE_CONSUMER_WARPS), PIPE_STAGES * PIPE_STAGE_BYTES + 1024>>>(map, K, out);
    finish(name);
    std::vector<bf16> want(chunks * PIPE_ROWS * 64);
    for (int c = 0; c < chunks; ++c)
      for (int r = 0; r < PIPE_ROWS; ++r)
        for (int k = 0; k < 64; ++k) want[(c * PIPE_ROWS + r) * 64 + k] = c * 64 + k < K ? h[r * K + c * 64 + k] : __float2bfloat16(0.0f);
    const std::string d = compare_exact(from_device(out, want.size()), want, 64);
    report(d.empty(), name, d);
  }
}

// ---- sm_90a: a cluster of 2: TMA multicast, remote mbarrier arrivals, cluster barriers ---------

constexpr int MC_ROWS = 32, MC_ARRAY_ROWS = 24;  // each rank multicasts 16 rows; rows 24.. lie outside

__global__ void __launch_bounds__(128, 1) NAPKIN_CLUSTER_DIMS(2)
    multicast_kernel(const __grid_constant__ CUtensorMap map, bf16* out, unsigned* ranks) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  bf16* tile = reinterpret_cast<bf16*>(smem_aligned_1024(raw));
  __shared__ uint64_t full, empty;
  const unsigned rank = napkin::cluster_rank();
  if (threadIdx.x == 0) {
    napkin::mbar_init(&full, 1);
    napkin::mbar_init(&empty, 2);  // one arrival from each block of the cluster
    napkin::mbar_init_fence();
  }
  napkin::cluster_sync();  // both blocks' barriers initialised before either multicasts into the other
  if (threadIdx.x == 0) {
    napkin::mbar_expect_tx(&full, MC_ROWS * 64 * 2);  // both halves: this block's and the other's multicast
    napkin::tma_load_multicast(tile + rank * (MC_ROWS / 2) * 64, &map, &full, 0x3, 0, static_cast<int>(rank) * (MC_ROWS / 2));
  }
  napkin::mbar_wait(&full, 0);
  const napkin::Swizzled128Tile<bf16, MC_ROWS> t{tile};
  for (int i = threadIdx.x; i < MC_ROWS * 64; i += blockDim.x) out[blockIdx.x * MC_ROWS * 64 + i] = t.at(i / 64, i % 64);
  __syncthreads();
  if (threadIdx.x == 0)
    for (unsigned r = 0; r < 2; ++r) napkin::mbar_arrive_cluster(&empty, r);
  napkin::mbar_wait(&empty, 0);
  if (threadIdx.x == 0) ranks[blockIdx.x] = rank;
  napkin::cluster_sync();  // no block leaves while the other may still address its SMEM
#endif
}

void check_multicast() {
  const auto h = random_values<bf16>(MC_ARRAY_ROWS * 64);
  bf16* g = to_device(h);
  bf16* out = to_device(std::vector<bf16>(2 * MC_ROWS * 64));
  unsigned* ranks = to_device(std::vector<unsigned>{7, 7});
  const std::string name = "cluster of 2: TMA multicast of a 16x64 box each into both blocks (rows 24..31 outside: zeros), remote mbarrier arrivals, "
                           "cluster_sync";
  CUtensorMap map;
  if (!bf16_tmap(&map, g, MC_ARRAY_ROWS, 64, MC_ROWS / 2)) {
    report(false, name, "cuTensorMapEncodeTiled refused the array");
    return;
  }
  multicast_kernel<<<2, 128, MC_ROWS * 64 * 2 + 1024>>>(map, out, ranks);
  finish(name);
  std::vector<bf16> want(2 * MC_ROWS * 64);
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < MC_ROWS; ++r)
      for (int k = 0; k < 64; ++k) want[(b * MC_ROWS + r) * 64 + k] = r < MC_ARRAY_ROWS ? h[r * 64 + k] : __float2bfloat16(0.0f);
  std::string d = compare_exact(from_device(out, want.size()), want, 64);
  const auto got_ranks = from_device(ranks, 2);
  if (d.empty() && (got_ranks[0] != 0 || got_ranks[1] != 1))
    d = "cluster_rank of blocks 0, 1: " + std::to_string(got_ranks[0]) + ", " + std::to_string(got_ranks[1]);
  report(d.empty(), name, d);
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned seed = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 20261122u;
  g_rng.seed(seed);
  int dev = 0;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  check_cuda(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  std::printf("tiles_test: %s (sm_%d%d), seed %u\n", prop.name, prop.major, prop.minor, seed);
  check_load_tile();
  check_cp_async_ring();
  check_store_pair<float>("fp32");
  check_store_pair<bf16>("bf16");
  check_store_pair<__half>("fp16");
  check_reductions();
  check_maps();
  check_split_index();
  check_quad_transpose();
  check_mma_sync<bf16, false, false>("bf16");
  check_mma_sync<bf16, true, true>("bf16");
  check_mma_sync<__half, false, false>("fp16");
  check_mma_sync<__half, true, false>("fp16");
  check_mma_sync<__half, false, true>("fp16");
  check_pitch_copy<bf16>(37, 1001, 1024, "bf16");          // 2002-byte rows into 2048-byte ones
  check_pitch_copy<__nv_fp8_e4m3>(2100, 4041, 4096, "fp8e4m3");  // more rows than the grid's 2048, a ragged last run
  check_pitch_copy<__nv_fp8_e4m3>(7, 1000, 1024, "fp8e4m3", 3);  // every row's runs off 16 bytes; the first and last words outside the array
  check_pitch_copy<bf16>(5, 72, 128, "bf16", 1);                  // rows of 144 bytes from an odd 2-byte offset
  check_pitch_copy<bf16>(3, 9, 64, "bf16");                       // one whole run a row, then a ragged one
  check_mma_int8();
  check_mma_fp8<__nv_fp8_e4m3>("fp8e4m3");
  check_mma_fp8<__nv_fp8_e5m2>("fp8e5m2");
  check_int8_conversions();
  check_acc_to_a_fp8<__nv_fp8_e5m2, false>("fp8e5m2");
  if (napkin::hopper_kernel(reinterpret_cast<const void*>(&tma_kernel))) {
    check_wgmma<bf16, 0>("bf16, A and B K-major in SMEM");
    check_wgmma<__half, 0>("fp16, A and B K-major in SMEM");
    check_wgmma<bf16, 1>("bf16, A and B MN-major in SMEM");
    check_wgmma<bf16, 2>("bf16, A in registers, B K-major in SMEM");
    check_wgmma_fp8<__nv_fp8_e4m3>("fp8e4m3");
    check_wgmma_fp8<__nv_fp8_e5m2>("fp8e5m2");
    check_wgmma_int8();
    check_acc_to_a_fp8<__nv_fp8_e4m3, true>("fp8e4m3");
    check_desc_advance();
    check_tma();
    check_tma_store();
    check_stmatrix();
    check_pipeline();
    check_multicast();
  } else {
    std::printf("tiles_test: the sm_90a checks (wgmma, TMA loads and stores, mbarrier pipeline, cluster multicast) did not run: "
                "needs a binary built for sm_90a on a Hopper GPU "
                "(and NAPKIN_NO_WGMMA unset)\n");
  }
  summary_and_exit(g_failed == 0 ? 0 : 1);
}
