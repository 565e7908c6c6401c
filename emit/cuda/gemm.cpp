// Strategy gemm: contractions over one axis of 16-bit operands, element-wise epilogues. Contract:
// see strategies.hpp and gemm_form.hpp. This file renders the mma.sync variant of the form lowering
// read (the grid decode, staging and epilogue both variants share: render.hpp): grid = tiles of
// (M, N) rasterised in groups of 8 M tiles (concurrent blocks share operand tiles in L2) x batch
// axes; K streamed in chunks of T_K through a STAGES-deep cp.async pipeline; each warp owns
// WM = T_M/WARPS rows of M and all T_N columns; fragments come from SMEM by ldmatrix (.trans for
// operands stored with M or N contiguous); accumulators stay in registers until the epilogue.
// int8 operands (K-major both) take the m16n8k32 atom with int32 accumulators, converted to fp32
// where the epilogue reads them.
// Where the hardware has wgmma and TMA, emit_gemm_wgmma (gemm_wgmma.cpp) adds the sm_90a variant
// and the launcher picks it at run time.
#include "emit/cuda/gemm_form.hpp"
#include "emit/cuda/preamble.hpp"

namespace napkin::cuda {

namespace {

/** A gemm of fp8 operands has the wgmma path alone (lower.hpp): the kernel's namespace holds the
 *  tile constants and the sm_90a variant, and where that cannot run (no Hopper GPU, a binary
 *  without sm_90a code, arrays TMA cannot address) the launcher fails with the reason. */
KernelEmit emit_gemm_wgmma_alone(Context& c, const KernelChoice& kc) {
  const KernelSpec& spec = *kc.cost.spec;
  const GemmForm& g = *spec.gemm;
  NAPKIN_ASSERT(spec.wgmma) << "a gemm without an mma.sync path must have the wgmma path (lower.cpp)";
  const std::string ns = kernel_ns(kc.plan.name);
  const std::string dt(dtype_name(g.dtype));
  Code code;
  code.line(describe_plan(kc.plan));
  code.line("// strategy gemm: M = " + g.M + " (group " + std::to_string(g.TM) + ", " + std::to_string(g.warps) + " warps), N = " + g.N + " (group " +
            std::to_string(g.TN) + "), K = " + g.K + " (" + g.k_note + ")");
  code.line("// no mma.sync variant: " + dt + " operands run on wgmma alone (sm_90a)");
  code.open("namespace " + ns);
  code.line("using T = " + ctype(g.dtype) + ";");
  code.line("constexpr int T_M = " + std::to_string(g.TM) + ", T_N = " + std::to_string(g.TN) + ", T_K = " + std::to_string(g.TK) + ";");
  Code l;
  gemm_launch_blocks(l, g);
  const std::string fallback = "return napkin_fail(\"" + ns + ": this " + dt +
                               " GEMM runs on the sm_90a wgmma path alone: it needs a Hopper GPU, a binary built for sm_90a and 16-byte-aligned arrays\");\n";
  KernelEmit r = emit_gemm_wgmma(c, kc, g, fallback);
  code.text += r.device_code;
  code.close("  // namespace " + ns);
  l.text += r.launch_code;
  r.device_code = code.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace

KernelEmit emit_gemm(Context& c, const KernelChoice& kc) {
  const KernelSpec& spec = *kc.cost.spec;
  if (!spec.mma_sync) return emit_gemm_wgmma_alone(c, kc);
  const GemmForm& g = *spec.gemm;
  const std::string &M = g.M, &N = g.N, &k = g.K;
  const MmaShape* mma = &*spec.mma_sync;
  const int stages = spec.stages;
  // int8 operands (mma.sync m16n8k32, lower/gemm_form.hpp): int32 accumulators, converted to fp32
  // in the epilogue; fragments of 8-bit elements (int8.cuh); rows padded by 16 bytes either way.
  const bool int8 = is_integer_dtype(g.dtype);
  const std::string acc_t = int8 ? "int32_t" : "float", frag = int8 ? "8" : "", pad = std::to_string(gemm_mma_sync_pad_elems(g.dtype));

  const std::string ns = kernel_ns(kc.plan.name);
  Code code;
  code.line(describe_plan(kc.plan));
  code.line("// strategy gemm: M = " + M + " (group " + std::to_string(g.TM) + ", " + std::to_string(g.warps) + " warps x " +
            std::to_string(g.TM / g.warps) + " rows), N = " + N + " (group " + std::to_string(g.TN) + "), K = " + k + " (" + g.k_note + ")");
  code.line("// mma.sync variant (sm_80 and later): " + std::to_string(stages) + "-stage cp.async pipeline; " + mma->ptx +
            "; " + (int8 ? "int32" : "fp32") + " accumulators in registers");
  code.open("namespace " + ns);
  code.line("using T = " + ctype(g.dtype) + ";");
  code.line("constexpr int T_M = " + std::to_string(g.TM) + ", T_N = " + std::to_string(g.TN) + ", T_K = " + std::to_string(g.TK) + ";");
  code.line("constexpr int WARPS = " + std::to_string(g.warps) + ", THREADS = WARPS * 32, STAGES = " + std::to_string(stages) + ";");
  code.line("constexpr int WM = T_M / WARPS, MT = WM / 16, NT = T_N / 8;  // rows per warp; m16 and n8 tiles per warp");
  std::int64_t off = 0;
  for (const auto& t : g.tiles) {
    code.line("// SMEM tile of " + t.array + ": [" + t.rows + "][" + t.cols + "], rows padded by " + pad + " elements (16 bytes) so ldmatrix is free of bank conflicts");
    code.line("constexpr int P_" + t.array + " = " + std::to_string(t.C) + " + " + pad + ", OFF_" + t.array + " = " + std::to_string(off) + ";");
    off += t.R * (t.C + gemm_mma_sync_pad_elems(g.dtype));
  }
  code.line("constexpr int STAGE_ELEMS = " + std::to_string(gemm_mma_sync_smem_bytes(g, 1) * 8 / dtype_bits(g.dtype)) + ";");
  code.line("constexpr size_t SMEM_BYTES = size_t{STAGES} * STAGE_ELEMS * sizeof(T);");
  code.line("");
  code.line("__global__ void __launch_bounds__(THREADS) kernel(const Args a) {");
  ++code.indent;
  c.declare_sizes(code);
  code.line("extern __shared__ __align__(16) unsigned char smem_raw[];");
  code.line("T* smem = reinterpret_cast<T*>(smem_raw);");
  code.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
  gemm_tile_origin(code, g);
  gemm_operand_origins(code, c, g);
  gemm_chunk_loader(code, c, g);
  const bool outer = !g.k_outer.empty();
  for (std::size_t i = 0; i < g.gemms.size(); ++i)
    code.line(acc_t + " acc" + std::to_string(i) + "[MT][NT][4] = {};  // registers: contract(" + g.gemms[i].a.array + ", " + g.gemms[i].b.array + "; " +
              join(g.gemms[i].node->axes) + ")");
  code.line("// prologue: the first STAGES - 1 chunks in flight");
  code.open("for (int s = 0; s < STAGES - 1; ++s)");
  code.line(outer ? "if (s < chunks) load_chunk(s, s);" : "if (s < chunks) load_chunk(s, s * int64_t{T_K});");
  code.line("napkin::cp_async_commit();");
  code.close();
  code.open("for (int64_t kc = 0; kc < chunks; ++kc)");
  code.line("napkin::cp_async_wait<STAGES - 2>();  // chunk kc has landed in SMEM");
  code.line("__syncthreads();                     // ... for every thread; and chunk kc - 1 is consumed");
  code.line(std::string("if (kc + STAGES - 1 < chunks) load_chunk((kc + STAGES - 1) % STAGES, ") + (outer ? "kc + STAGES - 1);" : "(kc + STAGES - 1) * T_K);"));
  code.line("napkin::cp_async_commit();");
  code.line("const T* s = smem + (kc % STAGES) * STAGE_ELEMS;");
  code.line("#pragma unroll");
  code.open("for (int kk = 0; kk < T_K; kk += " + std::to_string(mma->k) + ")");
  std::set<std::string> loaded;
  for (const auto& gc : g.gemms) {
    if (!loaded.count(gc.a.array)) {
      loaded.insert(gc.a.array);
      code.line("uint32_t fa_" + gc.a.array + "[MT][4];");
      code.line("#pragma unroll");
      code.line("for (int mt = 0; mt < MT; ++mt) napkin::frag_a" + frag + std::string(gc.a.k_inner ? "" : "_t") + "(fa_" + gc.a.array + "[mt], s + OFF_" +
                gc.a.array + ", P_" + gc.a.array + ", warp * WM + mt * 16, kk, lane);");
    }
    if (!loaded.count(gc.b.array)) {
      loaded.insert(gc.b.array);
      code.line("uint32_t fb_" + gc.b.array + "[NT / 2][4];");
      code.line("#pragma unroll");
      code.line("for (int nt = 0; nt < NT / 2; ++nt) napkin::frag_b" + frag + std::string(gc.b.k_inner ? "" : "_t") + "(fb_" + gc.b.array + "[nt], s + OFF_" +
                gc.b.array + ", P_" + gc.b.array + ", nt * 16, kk, lane);");
    }
  }
  code.line("#pragma unroll");
  code.open("for (int mt = 0; mt < MT; ++mt)");
  code.line("#pragma unroll");
  code.open("for (int nt = 0; nt < NT; ++nt)");
  for (std::size_t i = 0; i < g.gemms.size(); ++i)
    code.line("napkin::" + mma_function(*mma) + "(acc" + std::to_string(i) + "[mt][nt], fa_" + g.gemms[i].a.array + "[mt], &fb_" + g.gemms[i].b.array +
              "[nt / 2][(nt % 2) * 2]);");
  code.close();
  code.close();
  code.close();
  code.close();
  code.line("napkin::cp_async_wait<0>();");
  code.line("// epilogue: accumulator elements (row, col + q) of each m16n8 tile -> outputs");
  KernelEmit r;
  r.strategy = "gemm";
  gemm_epilogue(code, c, kc, g, [&](const std::function<void()>& body) {
    code.line("#pragma unroll");
    code.open("for (int mt = 0; mt < MT; ++mt)");
    code.line("#pragma unroll");
    code.open("for (int nt = 0; nt < NT; ++nt)");
    code.line("#pragma unroll");
    code.open("for (int h = 0; h < 2; ++h)");
    code.line("const int row = warp * WM + mt * 16 + lane / 4 + h * 8, col = nt * 8 + (lane % 4) * 2;");
    body();
    code.close();
    code.close();
    code.close();
  }, [int8](std::size_t i) {
    const std::string a = "acc" + std::to_string(i) + "[mt][nt][h * 2 + q]";
    return int8 ? "static_cast<float>(" + a + ")" : a;  // int32 -> fp32: exact below 2^24, then within 2^-24 relative
  }, r.stored);
  --code.indent;
  code.line("}");
  code.line("");
  Code l;
  gemm_launch_blocks(l, g);
  add_hopper_variant(r, code, l, spec, ns, [&](const std::string& fallback) { return emit_gemm_wgmma(c, kc, g, fallback); });
  code.close("  // namespace " + ns);
  r.device_code = code.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
