// napkin bench harness: compiled by `napkin bench` together with three emitted files (the derived
// kernels, prefix napkin_; the unfused schedule, prefix unfused_; the fp32 SIMT reference, prefix
// ref_) and bench_spec.h (arrays, sizes, input scales, cuBLAS problems of the diagram). It fills
// seeded random inputs (uniform in [-1, 1) times the input's kInputScales entry), checks the
// derived kernels against the reference, then times everything with CUDA events (warm-up, median
// of --runs rounds in which every item is timed once in turn, input sets rotated so L2 does not
// hold them) and prints one JSON object on stdout.
// Usage: harness [--runs N] [--seed S] [--dump DIR] [--no-time]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_spec.h"

#define NAPKIN_ENTRY(P)                                                                                           \
  extern "C" int P##kernel_count(void);                                                                           \
  extern "C" const char* P##kernel_name(int);                                                                     \
  extern "C" const char* P##kernel_strategy(int);                                                                 \
  extern "C" size_t P##workspace_bytes(const int64_t*);                                                           \
  extern "C" int P##run_kernel(int, const void* const*, void* const*, const int64_t*, void*, cudaStream_t);      \
  extern "C" int P##run(const void* const*, void* const*, const int64_t*, void*, cudaStream_t);                  \
  extern "C" const char* P##last_error(void);                                                                     \
  extern "C" const char* P##last_variant(void);
NAPKIN_ENTRY(napkin_)
NAPKIN_ENTRY(unfused_)
NAPKIN_ENTRY(ref_)

static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "harness: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(3);
  }
}
static void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "harness: %s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(3);
  }
}
static void check_napkin(int rc, const char* (*err)(void), const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "harness: %s: %s\n", what, err());
    std::exit(3);
  }
}

/** Array dtype codes of bench_spec.h: 0 fp32, 1 bf16, 2 fp16, 3 fp8e4m3, 4 fp8e5m2, 5 int32, 6 int8. */
static size_t elem_bytes(int dtype) { return dtype == 0 || dtype == 5 ? 4 : dtype == 1 || dtype == 2 ? 2 : 1; }

/** Uniform in [-1, 1) from (seed, array, index): SplitMix64, the same function as napkin's host side. */
__host__ __device__ inline float uniform(uint64_t seed, uint64_t array, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + array * 0xBF58476D1CE4E5B9ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/** dst[i] = uniform(seed, array, i) * scale, rounded to `dtype` (kInputScales gives each input's
 *  scale); an int32 array (gather targets) gets integers uniform in [0, scale): its kInputScales
 *  entry is the bound of its targets (napkin's target_bounds); an int8 array integers uniform over
 *  [-127, 127] (the quantised operands of an int8 GEMM, whose scales are inputs of their own). */
__global__ void fill(void* dst, int dtype, int64_t n, uint64_t seed, uint64_t array, float scale) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float u = uniform(seed, array, static_cast<uint64_t>(i)), v = u * scale;
    if (dtype == 0) static_cast<float*>(dst)[i] = v;
    else if (dtype == 1) static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16(v);
    else if (dtype == 2) static_cast<__half*>(dst)[i] = __float2half(v);
    else if (dtype == 3) static_cast<__nv_fp8_e4m3*>(dst)[i] = __nv_fp8_e4m3(v);
    else if (dtype == 4) static_cast<__nv_fp8_e5m2*>(dst)[i] = __nv_fp8_e5m2(v);
    else if (dtype == 5) static_cast<int32_t*>(dst)[i] = min(static_cast<int32_t>((u + 1.0f) * 0.5f * scale), static_cast<int32_t>(scale) - 1);
    else static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(__float2int_rn(u * 127.0f));  // int8: integers over [-127, 127], whatever the scale
  }
}
__global__ void to_fp32(const void* src, int dtype, int64_t n, float* dst) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = dtype == 0   ? static_cast<const float*>(src)[i]
             : dtype == 1 ? __bfloat162float(static_cast<const __nv_bfloat16*>(src)[i])
             : dtype == 2 ? __half2float(static_cast<const __half*>(src)[i])
             : dtype == 3 ? static_cast<float>(static_cast<const __nv_fp8_e4m3*>(src)[i])
             : dtype == 4 ? static_cast<float>(static_cast<const __nv_fp8_e5m2*>(src)[i])
             : dtype == 5 ? static_cast<float>(static_cast<const int32_t*>(src)[i])  // int32 targets: exact below 2^24
                          : static_cast<float>(static_cast<const int8_t*>(src)[i]);
}

static unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535)); }

/** Keeps the GPU busy for `ns` nanoseconds (one thread reading %globaltimer, a nanosecond timer:
 *  PTX ISA, chapter Special Registers, %globaltimer): launched ahead of each timing round so that the round's
 *  first item is enqueued while the GPU still works. After the round's synchronisation the GPU is
 *  idle, and the first item's start event would fire at once, before the host has finished
 *  launching the item (its argument and TMA descriptor set-up): that host time would be counted
 *  in the first item alone (session 31: a one-kernel schedule's kernel timed 5 to 50 us above
 *  the same kernel timed as "derived", never below; session 32, H200, with the spin: attention
 *  907.0 -> 894.4 us against 888 derived, fp8 attention 861.2 -> 821.8 against 822.8). */
__global__ void spin_ns(long long ns, long long* clock) {
  long long t0 = 0, t = 0;
  const long long c0 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
  clock[0] = clock64() - c0, clock[1] = t - t0;  // SM cycles and nanoseconds of the spin: the SM clock
}

/** Things timed against each other. They are timed in rounds, each round timing every item once in
 *  turn (CUDA events around each), so that every item meets the same clock and temperature
 *  states of the GPU; an item's figure is its median over the rounds, in seconds. */
struct Timed {
  std::function<void(int)> call;  ///< one run; gets the round index (rotation)
  std::vector<double> seconds;
};
/** The SM clock of each timing round in MHz, in round order (time_rounds): SM cycles (clock64)
 *  over nanoseconds (%globaltimer) of the spin ahead of the round. Under the power limit the
 *  clock falls below the boost clock the model's peaks are quoted at, and it drifts between rounds
 *  (session 46, H200: one kernel 1234.6 us in one round of calls, 1372.8 us in the next). */
static std::vector<double> g_round_mhz;
static void time_rounds(std::vector<Timed>& items, int warm, int runs) {
  std::vector<cudaEvent_t> ev(2 * items.size() * runs);
  for (auto& e : ev) check(cudaEventCreate(&e), "event");
  long long* clock = nullptr;
  check(cudaMalloc(&clock, sizeof(long long) * 2 * runs), "clock samples");
  for (int r = 0; r < warm; ++r)
    for (auto& it : items) it.call(r);
  check(cudaDeviceSynchronize(), "warm-up");
  for (int r = 0; r < runs; ++r) {
    spin_ns<<<1, 1>>>(200000, clock + 2 * r);  // 200 us: longer than any item's host-side launch
    for (std::size_t i = 0; i < items.size(); ++i) {
      cudaEventRecord(ev[2 * (r * items.size() + i)]);
      items[i].call(warm + r);
      cudaEventRecord(ev[2 * (r * items.size() + i) + 1]);
    }
    check(cudaDeviceSynchronize(), "timed round");  // the host does not run ahead by more than a round
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    for (int r = 0; r < runs; ++r) {
      float ms = 0;
      cudaEventElapsedTime(&ms, ev[2 * (r * items.size() + i)], ev[2 * (r * items.size() + i) + 1]);
      items[i].seconds.push_back(ms * 1e-3);
    }
    std::sort(items[i].seconds.begin(), items[i].seconds.end());
  }
  std::vector<long long> host(2 * runs);
  check(cudaMemcpy(host.data(), clock, sizeof(long long) * 2 * runs, cudaMemcpyDeviceToHost), "clock samples");
  cudaFree(clock);
  g_round_mhz.clear();
  for (int r = 0; r < runs; ++r) g_round_mhz.push_back(host[2 * r + 1] > 0 ? 1e3 * static_cast<double>(host[2 * r]) / static_cast<double>(host[2 * r + 1]) : 0);
  for (auto& e : ev) cudaEventDestroy(e);
}
static double median(const Timed& t) { return t.seconds[t.seconds.size() / 2]; }

static void write_npy(const std::string& path, const std::vector<float>& v, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (auto s : shape) dict += std::to_string(s) + ", ";
  dict += "), }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  const unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  std::fwrite(magic, 1, 8, f);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  std::fwrite(&len, 2, 1, f);
  std::fwrite(dict.data(), 1, dict.size(), f);
  std::fwrite(v.data(), 4, v.size(), f);
  std::fclose(f);
}

/** Differences of a device array (`dtype`, n elements) from an fp32 device reference over the
 *  elements where both are finite; `bad` counts the elements where either is not finite and they
 *  differ. The values, as fp32, into `got` when given. Every field is finite (JSON numbers). */
struct Diff { double max_err = 0, max_ref = 0, se = 0, sr = 0; int64_t bad = 0; };
static Diff compare(const void* dev, int dtype, const float* want_dev, int64_t n, std::vector<float>* got_out) {
  std::vector<float> got(n), want(n);
  float* tmp = nullptr;
  check(cudaMalloc(&tmp, n * 4), "alloc");
  to_fp32<<<grid_for(n), 256>>>(dev, dtype, n, tmp);
  check(cudaMemcpy(got.data(), tmp, n * 4, cudaMemcpyDeviceToHost), "copy");
  check(cudaMemcpy(want.data(), want_dev, n * 4, cudaMemcpyDeviceToHost), "copy");
  cudaFree(tmp);
  Diff d;
  for (int64_t j = 0; j < n; ++j) {
    const float g = got[j], w = want[j];
    if (!std::isfinite(w) || !std::isfinite(g)) {
      // A non-finite value matches only the same one (a row masked throughout gives -inf in both,
      // exp(-inf - -inf) NaN in both); any other pair is a mismatch, counted in `bad`.
      if (!((std::isnan(g) && std::isnan(w)) || g == w)) ++d.bad;
      continue;
    }
    const double e = std::fabs(static_cast<double>(g) - w);
    d.max_err = std::max(d.max_err, e), d.max_ref = std::max(d.max_ref, std::fabs(static_cast<double>(w)));
    d.se += e * e, d.sr += static_cast<double>(w) * w;
  }
  if (got_out) *got_out = std::move(got);
  return d;
}

/** cuBLASLt matmul of one kGemms entry with a fused epilogue (kEpilogues): D = epi(op(A) op(B) + bias),
 *  in cuBLAS's column-major view (D^T = B^T A^T, as the cuBLAS reference calls it). */
struct LtGemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  size_t workspace_bytes = 32u << 20;
  bool ok = false;
  const char* name = "";
  LtGemm(cublasLtHandle_t lt, const GemmSpec& s, int epilogue) {
    static const cublasLtEpilogue_t codes[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS,
                                               CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_GELU};
    static const char* names[] = {"none", "bias", "bias + ReLU", "bias + GELU (tanh)", "ReLU", "GELU (tanh)"};
    name = names[epilogue];
    const cudaDataType t = s.dtype == 1 ? CUDA_R_16BF : CUDA_R_16F;
    const cublasOperation_t ta = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_blas(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &codes[epilogue], sizeof codes[epilogue]), "EPILOGUE");
    const uint64_t n = s.n, m = s.m, k = s.k;
    check_blas(cublasLtMatrixLayoutCreate(&a, t, ta == CUBLAS_OP_N ? n : k, ta == CUBLAS_OP_N ? k : n, s.ldb), "layout A");
    check_blas(cublasLtMatrixLayoutCreate(&b, t, tb == CUBLAS_OP_N ? k : m, tb == CUBLAS_OP_N ? m : k, s.lda), "layout B");
    check_blas(cublasLtMatrixLayoutCreate(&d, t, n, m, n), "layout D");
    cublasLtMatmulPreference_t pref = nullptr;
    check_blas(cublasLtMatmulPreferenceCreate(&pref), "preference");
    check_blas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes), "workspace");
    cublasLtMatmulHeuristicResult_t h{};
    int found = 0;
    ok = cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, pref, 1, &h, &found) == CUBLAS_STATUS_SUCCESS && found > 0;
    cublasLtMatmulPreferenceDestroy(pref);
    if (ok) algo = h.algo, check(cudaMalloc(&workspace, workspace_bytes), "cuBLASLt workspace");
  }
  void run(cublasLtHandle_t lt, const void* A, const void* B, const void* bias, void* D, cudaStream_t stream) {
    const float alpha = 1.0f, beta = 0.0f;
    if (bias) check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "BIAS_POINTER");
    check_blas(cublasLtMatmul(lt, op, &alpha, B, a, A, b, &beta, D, d, D, d, &algo, workspace, workspace_bytes, stream), "cublasLtMatmul");
  }
};

int main(int argc, char** argv) {
  int runs = 30;
  uint64_t seed = 1;
  std::string dump;
  bool time = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::max(20, std::atoi(argv[++i]));
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--dump" && i + 1 < argc) dump = argv[++i];
    else if (a == "--no-time") time = false;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device");
  cudaStream_t stream = nullptr;
  // Inputs: one set, filled from the seed at each input's scale; fp32 copies for the reference.
  size_t in_bytes = 0;
  std::vector<void*> in(kNumInputs), in32(kNumInputs), out(kNumOutputs), out32(kNumOutputs);
  for (int i = 0; i < kNumInputs; ++i) {
    const auto& s = kInputs[i];
    in_bytes += s.count * elem_bytes(s.dtype);
    check(cudaMalloc(&in[i], s.count * elem_bytes(s.dtype)), "alloc input");
    check(cudaMalloc(&in32[i], s.count * 4), "alloc fp32 input");
    // fp8 inputs are drawn in [-1, 1) unscaled: an fp8 tensor carries its magnitude in its per-tensor
    // scale input, and 1/sqrt(fan-in) would put most values below e4m3's smallest normal (2^-6).
    fill<<<grid_for(s.count), 256>>>(in[i], s.dtype, s.count, seed, static_cast<uint64_t>(i), s.dtype >= 3 ? 1.0f : static_cast<float>(kInputScales[i]));
    to_fp32<<<grid_for(s.count), 256>>>(in[i], s.dtype, s.count, static_cast<float*>(in32[i]));
  }
  for (int i = 0; i < kNumOutputs; ++i) {
    check(cudaMalloc(&out[i], kOutputs[i].count * elem_bytes(kOutputs[i].dtype)), "alloc output");
    check(cudaMalloc(&out32[i], kOutputs[i].count * 4), "alloc fp32 output");
    check(cudaMemset(out[i], 0xff, kOutputs[i].count * elem_bytes(kOutputs[i].dtype)), "poison output");
    // The reference's too (NaN): an element it leaves unwritten fails the check, and compute-sanitizer
    // initcheck, which the sweep runs with the ref_ kernels uninstrumented, sees the copy back as initialised.
    check(cudaMemset(out32[i], 0xff, kOutputs[i].count * 4), "poison reference output");
  }
  void *ws = nullptr, *ws_ref = nullptr, *ws_unf = nullptr;
  check(cudaMalloc(&ws, std::max<size_t>(256, napkin_workspace_bytes(kSizes))), "workspace");
  check(cudaMalloc(&ws_ref, std::max<size_t>(256, ref_workspace_bytes(kSizes))), "reference workspace");
  check(cudaMalloc(&ws_unf, std::max<size_t>(256, unfused_workspace_bytes(kSizes))), "unfused workspace");
  // The workspaces (every intermediate array lives there) poisoned with NaN like the outputs: a
  // kernel that reads an intermediate before any kernel wrote it fails the check instead of
  // reading zeros or an earlier run's values (session 15: a GEMM epilogue read back outputs of
  // its own kernel that it had not stored yet).
  check(cudaMemset(ws, 0xff, std::max<size_t>(256, napkin_workspace_bytes(kSizes))), "poison workspace");
  check(cudaMemset(ws_ref, 0xff, std::max<size_t>(256, ref_workspace_bytes(kSizes))), "poison reference workspace");
  check(cudaMemset(ws_unf, 0xff, std::max<size_t>(256, unfused_workspace_bytes(kSizes))), "poison unfused workspace");
  // Correctness: derived kernels vs the fp32 reference on the same inputs.
  check_napkin(napkin_run(in.data(), out.data(), kSizes, ws, stream), napkin_last_error, "derived kernels");
  check(cudaDeviceSynchronize(), "derived kernels");
  check_napkin(ref_run(in32.data(), out32.data(), kSizes, ws_ref, stream), ref_last_error, "reference");
  check(cudaDeviceSynchronize(), "reference");
  std::printf("{\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"check\": [", prop.name, prop.multiProcessorCount);
  for (int i = 0; i < kNumOutputs; ++i) {
    const int64_t n = kOutputs[i].count;
    std::vector<float> got;
    const Diff df = compare(out[i], kOutputs[i].dtype, static_cast<const float*>(out32[i]), n, &got);
    const double max_err = df.max_err, max_ref = df.max_ref, se = df.se, sr = df.sr;
    const int64_t bad = df.bad;
    std::printf("%s\n    {\"output\": \"%s\", \"elements\": %lld, \"max_abs_err\": %.6g, \"max_abs_ref\": %.6g, \"rel_l2\": %.6g, \"nonfinite_mismatches\": %lld}",
                i ? "," : "", kOutputs[i].name, static_cast<long long>(n), max_err, max_ref, sr > 0 ? std::sqrt(se / sr) : std::sqrt(se),
                static_cast<long long>(bad));
    if (!dump.empty()) {
      std::vector<int64_t> shape(kOutputs[i].shape, kOutputs[i].shape + kOutputs[i].rank);
      write_npy(dump + "/" + kOutputs[i].name + ".npy", got, shape);
    }
  }
  std::printf("\n  ]");
  if (!dump.empty())
    for (int i = 0; i < kNumInputs; ++i) {
      std::vector<float> v(kInputs[i].count);
      check(cudaMemcpy(v.data(), in32[i], v.size() * 4, cudaMemcpyDeviceToHost), "copy");
      write_npy(dump + "/" + kInputs[i].name + ".npy", v, std::vector<int64_t>(kInputs[i].shape, kInputs[i].shape + kInputs[i].rank));
    }
  if (!time) {
    std::printf("\n}\n");
    return 0;
  }
  // Rotating input sets: enough copies that one pass over them exceeds twice the L2.
  const int sets = static_cast<int>(std::min<size_t>(8, std::max<size_t>(1, (2 * static_cast<size_t>(prop.l2CacheSize) + in_bytes - 1) / std::max<size_t>(in_bytes, 1))));
  std::vector<std::vector<void*>> rot(sets, in);
  for (int r = 1; r < sets; ++r)
    for (int i = 0; i < kNumInputs; ++i) {
      const size_t b = kInputs[i].count * elem_bytes(kInputs[i].dtype);
      check(cudaMalloc(&rot[r][i], b), "alloc rotation");
      check(cudaMemcpy(rot[r][i], in[i], b, cudaMemcpyDeviceToDevice), "copy rotation");
    }
  // Every item below is timed in the same rounds: the derived kernels one by one and together,
  // the unfused schedule's kernels likewise, and cuBLAS on each contraction of the diagram as one
  // strided-batched GEMM (fp32 accumulate) on buffers of its own (random, rotated likewise).
  std::vector<Timed> items;
  const int nk = napkin_kernel_count(), nu = unfused_kernel_count();
  for (int k = 0; k < nk; ++k) items.push_back({[&, k](int r) { napkin_run_kernel(k, rot[r % sets].data(), out.data(), kSizes, ws, stream); }, {}});
  for (int k = 0; k < nu; ++k) items.push_back({[&, k](int r) { unfused_run_kernel(k, rot[r % sets].data(), out.data(), kSizes, ws_unf, stream); }, {}});
  items.push_back({[&](int r) { napkin_run(rot[r % sets].data(), out.data(), kSizes, ws, stream); }, {}});
  items.push_back({[&](int r) { unfused_run(rot[r % sets].data(), out.data(), kSizes, ws_unf, stream); }, {}});
  cublasHandle_t h = nullptr;
  if (kNumGemms > 0) check_blas(cublasCreate(&h), "cublasCreate");
  std::vector<std::vector<void*>> gA(kNumGemms), gB(kNumGemms);
  std::vector<void*> gC(kNumGemms, nullptr);
  for (int g = 0; g < kNumGemms; ++g) {
    const GemmSpec& s = kGemms[g];
    const size_t ab = static_cast<size_t>(s.batch_a) * s.sa + static_cast<size_t>(s.m) * s.k, bb = static_cast<size_t>(s.batch_b) * s.sb + static_cast<size_t>(s.k) * s.n,
                 cb = static_cast<size_t>(s.batch) * static_cast<size_t>(s.m) * s.n;
    const int gsets = static_cast<int>(std::min<size_t>(8, std::max<size_t>(1, 2 * static_cast<size_t>(prop.l2CacheSize) / ((ab + bb) * 2 + 1) + 1)));
    gA[g].resize(gsets), gB[g].resize(gsets);
    for (int r = 0; r < gsets; ++r) {
      check(cudaMalloc(&gA[g][r], ab * 2), "alloc"), check(cudaMalloc(&gB[g][r], bb * 2), "alloc");
      fill<<<grid_for(ab), 256>>>(gA[g][r], s.dtype, ab, seed + 100 + r, 0, 1.0f);  // timing only: scale 1
      fill<<<grid_for(bb), 256>>>(gB[g][r], s.dtype, bb, seed + 100 + r, 1, 1.0f);
    }
    check(cudaMalloc(&gC[g], cb * 2), "alloc");
    items.push_back({[&, g](int r) {
                       const GemmSpec& s = kGemms[g];
                       const cudaDataType t = s.dtype == 1 ? CUDA_R_16BF : CUDA_R_16F;
                       const float alpha = 1.0f, beta = 0.0f;
                       const auto& A = gA[g];
                       const auto& B = gB[g];
                       check_blas(cublasGemmStridedBatchedEx(h, s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(s.n),
                                                             static_cast<int>(s.m), static_cast<int>(s.k), &alpha, B[r % B.size()], t, static_cast<int>(s.ldb),
                                                             s.sb, A[r % A.size()], t, static_cast<int>(s.lda), s.sa, &beta, gC[g], t, static_cast<int>(s.n),
                                                             static_cast<long long>(s.m) * s.n, static_cast<int>(s.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                                  "cublasGemmStridedBatchedEx");
                     },
                     {}});
  }
  // cuBLASLt with the statement's epilogue fused, where cuBLASLt has it: checked on the diagram's
  // inputs against the fp32 reference first, then timed on the cuBLAS buffers above.
  cublasLtHandle_t lt = nullptr;
  if (kNumEpilogues > 0) check_blas(cublasLtCreate(&lt), "cublasLtCreate");
  std::vector<LtGemm*> lts;
  std::vector<Diff> lt_check;
  std::vector<size_t> lt_item;
  for (int e = 0; e < kNumEpilogues; ++e) {
    const EpilogueSpec& x = kEpilogues[e];
    lts.push_back(new LtGemm(lt, kGemms[x.gemm], x.epilogue));
    if (!lts.back()->ok) continue;
    void* D = nullptr;
    const int64_t n = kOutputs[x.out].count;
    check(cudaMalloc(&D, n * elem_bytes(kOutputs[x.out].dtype)), "alloc");
    lts.back()->run(lt, in[x.a], in[x.b], x.bias >= 0 ? in[x.bias] : nullptr, D, stream);
    check(cudaDeviceSynchronize(), "cuBLASLt check");
    lt_check.push_back(compare(D, kOutputs[x.out].dtype, static_cast<const float*>(out32[x.out]), n, nullptr));
    cudaFree(D);
    lt_item.push_back(items.size());
    items.push_back({[&, e](int r) {
                       const EpilogueSpec& x = kEpilogues[e];
                       const auto& A = gA[x.gemm];
                       const auto& B = gB[x.gemm];
                       lts[e]->run(lt, A[r % A.size()], B[r % B.size()], x.bias >= 0 ? rot[r % sets][x.bias] : nullptr, gC[x.gemm], stream);
                     },
                     {}});
  }
  time_rounds(items, 2, runs);
  std::printf(",\n  \"rotating_input_sets\": %d,\n  \"runs\": %d,\n  \"timing\": \"interleaved rounds\",\n  \"sm_clock_mhz\": [", sets, runs);
  for (std::size_t r = 0; r < g_round_mhz.size(); ++r) std::printf("%s%.0f", r ? ", " : "", g_round_mhz[r]);
  std::printf("],\n  \"kernels\": [");
  for (int k = 0; k < nk; ++k) {
    napkin_run_kernel(k, rot[0].data(), out.data(), kSizes, ws, stream);  // for the variant it runs
    std::printf("%s\n    {\"name\": \"%s\", \"strategy\": \"%s\", \"variant\": \"%s\", \"seconds\": %.9g}", k ? "," : "", napkin_kernel_name(k),
                napkin_kernel_strategy(k), napkin_last_variant(), median(items[k]));
  }
  std::printf("\n  ],\n  \"unfused_kernel_times\": [");
  for (int k = 0; k < nu; ++k) {
    unfused_run_kernel(k, rot[0].data(), out.data(), kSizes, ws_unf, stream);
    std::printf("%s\n    {\"name\": \"%s\", \"strategy\": \"%s\", \"variant\": \"%s\", \"seconds\": %.9g}", k ? "," : "", unfused_kernel_name(k),
                unfused_kernel_strategy(k), unfused_last_variant(), median(items[nk + k]));
  }
  const Timed &all = items[nk + nu], &unf = items[nk + nu + 1];
  std::printf("\n  ],\n  \"derived_seconds\": %.9g,\n  \"derived_spread\": [%.9g, %.9g],\n  \"unfused_seconds\": %.9g,\n  \"unfused_kernels\": %d", median(all),
              all.seconds.front(), all.seconds.back(), median(unf), nu);
  std::printf(",\n  \"cublas\": [");
  for (int g = 0; g < kNumGemms; ++g) {
    const GemmSpec& s = kGemms[g];
    std::printf("%s\n    {\"statement\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"batch\": %lld, \"seconds\": %.9g}", g ? "," : "", s.statement,
                static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(s.batch),
                median(items[nk + nu + 2 + g]));
    for (auto* p : gA[g]) cudaFree(p);
    for (auto* p : gB[g]) cudaFree(p);
    cudaFree(gC[g]);
  }
  if (h) cublasDestroy(h);
  std::printf("\n  ],\n  \"cublaslt\": [");
  for (size_t i = 0, e = 0; e < lts.size(); ++e) {
    if (!lts[e]->ok) continue;
    const Diff& df = lt_check[i];
    std::printf("%s\n    {\"statement\": \"%s\", \"epilogue\": \"%s\", \"seconds\": %.9g, \"max_err_over_max_ref\": %.6g, \"nonfinite_mismatches\": %lld}", i ? "," : "",
                kGemms[kEpilogues[e].gemm].statement, lts[e]->name, median(items[lt_item[i]]), df.max_ref > 0 ? df.max_err / df.max_ref : df.max_err,
                static_cast<long long>(df.bad));
    ++i;
  }
  for (auto* x : lts) {
    cublasLtMatmulDescDestroy(x->op), cublasLtMatrixLayoutDestroy(x->a), cublasLtMatrixLayoutDestroy(x->b), cublasLtMatrixLayoutDestroy(x->d);
    cudaFree(x->workspace);
    delete x;
  }
  if (lt) cublasLtDestroy(lt);
  std::printf("\n  ]\n}\n");
  return 0;
}
