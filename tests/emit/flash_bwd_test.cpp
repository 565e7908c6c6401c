// The flash_bwd form (lower/flash_bwd_form.hpp; issue 16, part 2): attention's backward from
// `napkin grad` derives one fused kernel of the score tiles (S, P, dP, dS) with an accumulated
// gradient, found by the stream closures of the partition search (derive/partition.hpp), lowered
// to flash_bwd and emitted as mma.sync CUDA that compiles for sm_80 and sm_90a, with its sm_90a
// wgmma variant compiled to SASS without serialised wgmma (where nvcc is found); FlashAttention-2's own layout (keys grouped, dK and dV accumulated, dS stored for dQ)
// written as a schedule lowers to it too. The device runs (correctness against the fp32 GPU
// reference and the fp64 evaluator, timings) are in docs/benchmarks.md, session 15.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "derive/check_schedule.hpp"
#include "derive/derivation.hpp"
#include "derive/partition.hpp"
#include "diagrams/eval.hpp"
#include "diagrams/schedule.hpp"
#include "diagrams/verify.hpp"
#include "emit/cpu_emitter.hpp"
#include "emit/cuda_emitter.hpp"
#include "tests/support/loop_nest_check.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

const KernelChoice* flash_bwd_kernel(const Derivation& dv) {
  const KernelChoice* found = nullptr;
  for (const auto& kc : dv.chosen.kernels)
    if (kc.cost.spec && kc.cost.spec->strategy == Strategy::flash_bwd) {
      CHECK(found == nullptr);
      found = &kc;
    }
  return found;
}

/** `l` derived at its sizes with `shape` over them on `hw` into `dv`; its one flash_bwd kernel. */
const KernelChoice* derive_flash_bwd(const LoadedDiagram& l, const SizeMap& shape, const Hardware& hw, Derivation& dv) {
  SizeMap sizes = l.sizes;
  for (const auto& [k, v] : shape) sizes[k] = v;
  dv = derive(*l.program, *l.diagram, sizes, hw);
  return flash_bwd_kernel(dv);
}

}  // namespace

TEST_CASE("flash_bwd: attention's backward derives one fused score-tile kernel, lowered to flash_bwd, and compiles", "[emit][cuda]") {
  Hardware hw = load_hardware("h200");
  const bool nvcc = !std::string(NAPKIN_NVCC).empty();
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-flash-bwd-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::vector<SizeMap> shapes = {{{"b", 4}, {"h", 16}, {"q", 4096}, {"x", 4096}}, {{"b", 1}, {"h", 3}, {"q", 130}, {"x", 77}}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    INFO("shape " << i);
    LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/golden/grad/attention.napkin");
    REQUIRE(l.diagram->name == "attention_bwd");
    Derivation dv;
    const KernelChoice* kc = derive_flash_bwd(l, shapes[i], hw, dv);
    REQUIRE(kc != nullptr);
    const FlashBwdForm& f = *kc->cost.spec->flash_bwd;
    INFO(describe_spec(*kc->cost.spec));
    const auto tiles = f.tile_names();
    CHECK(std::set<std::string>(tiles.begin(), tiles.end()) == std::set<std::string>{"S", "P", "dP", "dS"});
    REQUIRE(!f.outputs.empty());
    CHECK(f.X != f.Q);
    CHECK(kc->cost.problems.empty());
    CHECK(kc->cost.registers_per_thread <= hw.max_registers_per_thread);
    CHECK(flash_bwd_smem_bytes(f) <= static_cast<std::int64_t>(hw.smem_max_per_block_bytes));
    // dS never runs as its own SIMT kernel any more (session 14: 6.4 ms of 10.6 on the H200)
    for (const auto& k : dv.chosen.kernels)
      if (k.cost.spec->strategy == Strategy::simt) CHECK(std::find(k.cost.statements.begin(), k.cost.statements.end(), "dS") == k.cost.statements.end());
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK(count(text, "// strategy flash_bwd") == 1);
    // the sm_90a variant (wgmma on TMA, flash_bwd_wgmma.cpp) wherever lowering grants it, and at
    // the benchmark shape it must (two consumer warpgroups of 64 rows of X, widths of 128)
    if (i == 0) CHECK(kc->cost.spec->wgmma);
    CHECK(kc->cost.imbalance == 1);  // no causal skip: every block streams every chunk
    CHECK(kc->cost.t_skipped_zeros == 0);
    CHECK(count(text, "// wgmma variant (sm_90a): warpgroup 0 loads the resident tiles") == (kc->cost.spec->wgmma ? 1 : 0));
    // Stored tiles leave the wgmma path by TMA from swizzled staging where the array's strides
    // allow a tensor map (4096 keys: yes; 77: a row of 154 bytes, copied out by the threads).
    int tma_stored = 0;
    for (const auto& t : f.tiles) {
      CHECK(t.swizzled == (t.staged && (t.x_inner || f.TQ % 64 == 0)));
      if (!kc->cost.spec->wgmma || !t.tma_store) continue;
      ++tma_stored;
      CHECK(count(text, "napkin::tma_store(&tm_" + t.s->name + ",") == 1);
    }
    if (i == 0) CHECK(tma_stored == 1);  // dS
    if (i == 1) CHECK(tma_stored == 0);
    // The row statistics the maps read along Q are column vectors: on the wgmma path the producer
    // warp stages them in the ring (their global loads stalled the consumers' wgmma issue)
    CHECK(f.row_vectors.empty());
    CHECK(std::set<std::string>(f.col_vectors.begin(), f.col_vectors.end()) == std::set<std::string>{"P_lse", "dP_rowsum"});
    if (kc->cost.spec->wgmma) {
      for (const auto& a : f.col_vectors) CHECK(count(text, "constexpr int OFF_COL_" + a + " = ") == 1);
      CHECK(count(text, "napkin::mbar_init(&full[s], 1 + 32)") == 1);
      CHECK(kc->cost.spec->wgmma_smem_bytes == flash_bwd_wgmma_smem_bytes(f));
      // every map reads registers only: none keeps the interior and boundary paths
      CHECK(count(text.substr(text.find("namespace wg")), "in a boundary chunk, elements past") == 0);
    }
    if (!nvcc) continue;
    const std::string cu = dir + "/bwd" + std::to_string(i) + ".cu";
    std::ofstream(cu) << text;
    for (const std::string arch : {"80", "90a"}) {
      const std::string ptx = cu + "." + arch + ".ptx";
      const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O3 -ptx -arch=compute_" + arch + " -o " + ptx + " " + cu + " > " + cu + ".log 2>&1";
      INFO(cmd << "\n" << slurp(cu + ".log"));
      REQUIRE(std::system(cmd.c_str()) == 0);
      CHECK(slurp(cu + ".log").find("warning") == std::string::npos);
      CHECK(count(slurp(ptx), "mma.sync.aligned.m16n8k16") > 0);
    }
    if (!kc->cost.spec->wgmma) continue;
    // to SASS for sm_90a: ptxas must not serialise the wgmma (C7512 or C7513, "Potential
    // Performance Loss"), which it does when a wgmma's input registers are defined while one is
    // in flight; and the wgmma kernel must not spill (session 20: 300 bytes of spills came with
    // the serialisation)
    const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O3 -cubin -arch=sm_90a -Xptxas -v -o " + cu + ".cubin " + cu + " > " + cu + ".sass.log 2>&1";
    INFO(cmd << "\n" << slurp(cu + ".sass.log"));
    REQUIRE(std::system(cmd.c_str()) == 0);
    const std::string log = slurp(cu + ".sass.log");
    CHECK(log.find("warning") == std::string::npos);
    CHECK(log.find("Performance Loss") == std::string::npos);
    const std::size_t wg = log.find("Function properties for _ZN20napkin_attention_bwd9k_S_to_dV2wg");
    REQUIRE(wg != std::string::npos);
    CHECK(log.substr(wg, log.find("registers", wg) - wg).find(" 0 bytes spill stores, 0 bytes spill loads") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("flash_bwd: FlashAttention-2's layout (keys grouped, dK and dV accumulated, dS stored for dQ) lowers to it", "[emit]") {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-flash-bwd-fa2-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string sched = dir + "/fa2.schedule";
  std::ofstream(sched) << "schedule fa2 for attention_bwd\nkernel rowsum\n  fuse dP_rowsum\n  weave b, h, q\nkernel main\n  fuse S, P, dP, dS, dK, dV\n"
                          "  weave b, h\n  group x by 128\n  stream q by 64\n  warps 8\nkernel dq\n  fuse dQ\n  weave b, h\n  group q by 128\n  stream x by 64\n"
                          "  warps 8\n";
  RunResult r = run_napkin("derive " + std::string(NAPKIN_SOURCE_DIR) + "/tests/golden/grad/attention.napkin --hw h200 --set b=4 --set h=16 --set q=4096 " +
                           "--set x=4096 --schedule " + sched);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("main         lowered to                flash_bwd") != std::string::npos);
  CHECK(r.output.find("dq           lowered to                     gemm") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("partition: the stream closures offer the six-statement backward kernel no segment holds", "[derive]") {
  // attention_bwd's dataflow, in its statement order: S P dP dP_rowsum dS dQ dK dV
  PartitionGraph g;
  g.statements = 8;
  g.preds = {{}, {0}, {}, {}, {1, 2, 3}, {4}, {4}, {1}};
  const std::vector<std::vector<std::string>> reads = {{"Q", "K"}, {"S", "P_lse"}, {"dO", "V"}, {"dO", "O"}, {"P", "dP", "dP_rowsum"},
                                                       {"dS", "K"}, {"dS", "Q"}, {"dO", "P"}};
  g.linked = [&](std::size_t i, std::size_t j) {
    for (std::size_t p : g.preds[i]) if (p == j) return true;
    for (std::size_t p : g.preds[j]) if (p == i) return true;
    for (const auto& a : reads[i])
      if (std::find(reads[j].begin(), reads[j].end(), a) != reads[j].end()) return true;
    return false;
  };
  g.alone.assign(8, false);
  g.axes = {{"b", "h", "q", "x", "d"}, {"b", "h", "q", "x"}, {"b", "h", "q", "x", "d"}, {"b", "h", "q", "d"},
            {"b", "h", "q", "x"},      {"b", "h", "q", "d", "x"}, {"b", "h", "x", "d", "q"}, {"b", "h", "x", "d", "q"}};
  g.reduces = {true, false, true, true, false, true, true, true};
  Partitioner p(g);
  REQUIRE(!p.exact());
  REQUIRE(p.restricted());
  const auto candidates = p.candidates();
  auto has = [&](std::vector<std::size_t> m) {
    return std::any_of(candidates.begin(), candidates.end(), [&](const PartitionCandidate& c) { return c.members == m; });
  };
  CHECK(has({0, 1, 2, 4, 6, 7}));  // S P dP dS dK dV: grouped by x, streaming q (FlashAttention-2)
  CHECK(has({0, 1, 2, 4, 5}));     // S P dP dS dQ: grouped by q, streaming x
  for (std::size_t i = 0; i < 8; ++i) CHECK(has({i}));
  // a covering sequence exists over these candidates
  std::vector<PartitionCandidate> priced = candidates;
  for (auto& c : priced) c.score = 1.0 / static_cast<double>(c.members.size());
  CHECK(!p.best(priced, 0).empty());
}

TEST_CASE("a GEMM epilogue storing several statements never reads them back from global memory", "[emit]") {
  // mlp_swiglu's backward recomputes G, U and H = G * U in one GEMM kernel that stores all three:
  // H's value comes from the accumulators (session 15: it read G and U back before storing them)
  Hardware hw = load_hardware("h200");
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-epilogue-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  RunResult g = run_napkin("grad " + std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/mlp_swiglu.napkin -o " + dir + "/mlp.napkin");
  REQUIRE(g.status == 0);
  LoadedDiagram l = load_library(dir + "/mlp.napkin");
  SizeMap sizes = l.sizes;
  sizes["t"] = 512, sizes["m"] = 512, sizes["f"] = 1536;
  Derivation dv = derive(*l.program, *l.diagram, sizes, hw);
  const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
  std::size_t multi = 0;
  for (const auto& kc : dv.chosen.kernels) {
    if (kc.cost.spec->strategy != Strategy::gemm || kc.cost.outputs.size() < 2) continue;
    ++multi;
    const std::string ns = "namespace k_" + kc.plan.name + " {";
    const std::size_t at = text.find(ns);
    REQUIRE(at != std::string::npos);
    const std::size_t end = text.find("namespace k_", at + ns.size());
    const std::string body = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    for (const auto& o : kc.cost.outputs) {
      INFO(kc.plan.name << " stores " << o);
      CHECK(body.find("to_f(a." + o + "[") == std::string::npos);
    }
  }
  CHECK(multi > 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("flash_bwd: causal chunks are skipped only where every output and stored tile is exactly 0 there", "[emit]") {
  Hardware hw = load_hardware("h200");
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-flash-bwd-causal-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  RunResult g = run_napkin("grad " + std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/causal_attention.napkin -o " + dir + "/c.napkin");
  REQUIRE(g.status == 0);
  LoadedDiagram l = load_library(dir + "/c.napkin");
  SizeMap sizes = l.sizes;
  sizes["b"] = 2, sizes["h"] = 4, sizes["q"] = 1000, sizes["x"] = 1000;
  Derivation dv = derive(*l.program, *l.diagram, sizes, hw);
  const KernelChoice* kc = flash_bwd_kernel(dv);
  REQUIRE(kc != nullptr);
  const FlashBwdForm& f = *kc->cost.spec->flash_bwd;
  INFO(describe_spec(*kc->cost.spec));
  // P = exp(mask(S, causal(q, x)) - P_lse) is 0 past the diagonal, dS = P (dP - D) too
  CHECK(f.skip == (f.X == "x" ? "before" : "after"));
  CHECK(f.active_fraction > 0.45);
  CHECK(f.active_fraction < 0.65);
  CHECK(kc->cost.causal_active_fraction == f.active_fraction);
  CHECK(emit_cuda(*l.program, *l.diagram, dv, hw).find("are fully masked and skipped") != std::string::npos);
  // more keys than queries: the keys past the last query are masked in every row of causal(q, x),
  // so a statistic over them would be -inf and the language's value there NaN: no skip
  SizeMap wide = sizes;
  wide["q"] = 300, wide["x"] = 1000;
  Derivation wdv = derive(*l.program, *l.diagram, wide, hw);
  REQUIRE(flash_bwd_kernel(wdv) != nullptr);
  CHECK(flash_bwd_kernel(wdv)->cost.spec->flash_bwd->skip.empty());
  // attention without a mask skips nothing
  LoadedDiagram plain = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/golden/grad/attention.napkin");
  SizeMap ps = plain.sizes;
  ps["b"] = 2, ps["h"] = 4, ps["q"] = 1000, ps["x"] = 1000;
  Derivation pdv = derive(*plain.program, *plain.diagram, ps, hw);
  REQUIRE(flash_bwd_kernel(pdv) != nullptr);
  CHECK(flash_bwd_kernel(pdv)->cost.spec->flash_bwd->skip.empty());
  // a stored tile that is not 0 past the diagonal (S itself) refuses the skip
  std::ofstream(dir + "/s.napkin") << "diagram d\naxis h = 2\naxis q = 256\naxis x = 256\naxis d = 64\nin Q[h,q,d] : bf16\nin K[h,x,d] : bf16\n"
                                      "in V[h,x,d] : bf16\nin L[h,q] : fp32\nS[h,q,x] = contract(Q, K; d)\nP[h,q,x] = exp(mask(S, causal(q, x)) - L)\n"
                                      "O[h,q,d] = contract(P, V; x)\nout O : bf16\nout S : bf16\n";
  std::ofstream(dir + "/s.schedule") << "schedule s for d\n  kernel k\n    fuse S, P, O\n    weave h\n    group q by 64\n    stream x by 64\n    warps 4\n";
  RunResult r = run_napkin("derive " + dir + "/s.napkin --hw h100 --schedule " + dir + "/s.schedule");
  INFO(r.output);
  CHECK(r.output.find("lowered to                flash_bwd") != std::string::npos);
  CHECK(r.output.find("causal:") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("flash_bwd: grouped-query attention's backward streams the query heads and the queries, nested, in one kernel", "[emit][cuda]") {
  // dK[b,g,x,d] and dV sum over r (query heads per key/value head) and q: the outer stream r by 1
  // around q's chunks (FlashBwdForm::outer). Session 18 ran this backward as separate GEMMs with a
  // SIMT dS (1.37 ms at q = x = 2048). Where the key tiles are few (q = x = 2048: 128 blocks),
  // derive-split-reduction splits r off instead (fp32 partials dK_r, dV_r and their sums): r is
  // then a batch axis of the kernel, no outer stream.
  Hardware hw = load_hardware("h200");
  const bool nvcc = !std::string(NAPKIN_NVCC).empty();
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-flash-bwd-gqa-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  RunResult g = run_napkin("grad " + std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/gqa_attention.napkin -o " + dir + "/g.napkin");
  REQUIRE(g.status == 0);
  LoadedDiagram l = load_library(dir + "/g.napkin");
  REQUIRE(l.diagram->name == "gqa_attention_bwd");
  const std::vector<SizeMap> shapes = {{}, {{"q", 2048}, {"x", 2048}}, {{"g", 2}, {"r", 3}, {"q", 333}, {"x", 200}, {"d", 64}}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    INFO("shape " << i);
    Derivation dv;
    const KernelChoice* kc = derive_flash_bwd(l, shapes[i], hw, dv);
    REQUIRE(kc != nullptr);
    const FlashBwdForm& f = *kc->cost.spec->flash_bwd;
    INFO(describe_spec(*kc->cost.spec));
    const bool split = i > 0;  // the model's choice at these shapes (derive-split-reduction's step says both predictions)
    CHECK((dv.rewritten != nullptr) == split);
    CHECK(f.X == "x");
    CHECK(f.Q == "q");
    CHECK(f.outer == (split ? AxisList{} : AxisList{"r"}));
    if (!split) CHECK(f.outer_steps == l.sizes.at("r"));
    CHECK(contains(f.batch, std::string("r")) == split);
    CHECK(f.skip == "before");  // causal(q, x): the chunks of q before the tile's first key
    // the skipped chunks' zeros: dS is read after this kernel only by the dQ gemm, which walks the
    // chunks of x up to each tile's diagonal (a zero band), so they are written only in the rows
    // its tiles reach (lower_kernel_of) and priced apart (before the stream loop) in that share ...
    const BwdTile* ds = nullptr;
    for (const auto& t : f.tiles)
      if (t.stored) ds = &t;
    REQUIRE(ds);
    CHECK(ds->s->name == "dS");
    CHECK(ds->zero_readers.size() == 1);
    CHECK(ds->zero_share < 1);
    CHECK((kc->cost.t_skipped_zeros > 0) == (ds->zero_share > 0));
    // ... and the tiles of keys, longest first, fill the SMs evenly over several waves (512
    // blocks at 8192 tokens, 512 with r split off at 2048; unsplit at 2048 they were one wave of
    // 128 whose longest block computed twice the mean)
    if (i < 2) {
      CHECK(f.longest_fraction == 1);
      CHECK(f.tile_chunks.front() == *std::max_element(f.tile_chunks.begin(), f.tile_chunks.end()));
      CHECK(kc->cost.imbalance < 1.1);
    }
    std::set<std::string> outs;
    for (const auto& o : f.outputs) outs.insert(o.out->name);
    CHECK(outs == (split ? std::set<std::string>{"dK_r", "dV_r"} : std::set<std::string>{"dK", "dV"}));
    for (const auto& k : dv.chosen.kernels) CHECK(k.cost.spec->strategy != Strategy::simt);
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK(count(text, "inside the outer stream of r") == (split ? 0 : kc->cost.spec->wgmma ? 2 : 1));
    CHECK(count(text, "the longest first (the causal skip") == (kc->cost.spec->wgmma ? 2 : 1));
    // dQ's GEMM walks the causal band's q tiles longest first (GemmForm::band_order): its mma.sync
    // grid, and the wgmma path's producer and consumers in snake order, priced as such
    std::size_t banded = 0;
    for (const auto& k : dv.chosen.kernels) {
      const auto& spec = *k.cost.spec;
      if (!spec.gemm || !spec.gemm->k_band) continue;
      const GemmForm& gf = *spec.gemm;
      INFO(k.plan.name << ": " << describe_spec(spec));
      REQUIRE(gf.band_order);
      CHECK(gf.k_band_axis == "q");
      CHECK(gf.band_reversed);  // x <= q: the last q tile walks the most chunks
      CHECK(std::is_sorted(gf.band_ranks.rbegin(), gf.band_ranks.rend()));
      CHECK(gf.band_ranks.front() > gf.band_ranks.back());
      if (i < 2) CHECK(k.cost.imbalance < 1.1);  // (shape 2: fewer tiles than SMs, the waves bound it)
      // the persistent blocks in snake order are about as even as blocks handed out one tile at a time
      CHECK(gemm_band_stretch(gf, k.cost.blocks, hw.sm_count, true) <= gemm_band_stretch(gf, k.cost.blocks, hw.sm_count, false) + 0.05);
      banded += spec.wgmma ? 3 : 1;
    }
    CHECK(banded > 0);
    CHECK(count(text, "(GemmForm::band_order") == banded);
    if (!nvcc || i == 1) continue;  // shape 1's kernels are shape 2's at other sizes
    const std::string cu = dir + "/gqa" + std::to_string(i) + ".cu";
    std::ofstream(cu) << text;
    for (const std::string arch : {"80", "90a"}) {
      const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O3 -ptx -arch=compute_" + arch + " -o " + cu + ".ptx " + cu + " > " + cu + ".log 2>&1";
      INFO(cmd << "\n" << slurp(cu + ".log"));
      REQUIRE(std::system(cmd.c_str()) == 0);
      CHECK(slurp(cu + ".log").find("warning") == std::string::npos);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("flash_bwd: the SMEM reads two consumer warpgroups do not hide are priced as the hardware's fitted share", "[emit]") {
  // attention's backward at B4 H16 N4096 on the H200: the fused kernel's total carries
  // flash_bwd_smem_exposed x its SMEM time, not overlapped; with the share 0 it does not.
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/golden/grad/attention.napkin");
  const SizeMap shape = {{"b", 4}, {"h", 16}, {"q", 4096}, {"x", 4096}};
  Hardware hw = load_hardware("h200");
  REQUIRE(hw.flash_bwd_smem_exposed > 0);
  Derivation dv;
  const KernelChoice* kc = derive_flash_bwd(l, shape, hw, dv);
  REQUIRE(kc != nullptr);
  REQUIRE(kc->cost.warpgroup_mma);
  CHECK(kc->cost.t_smem > 0);
  CHECK(kc->cost.t_smem_exposed == Approx(hw.flash_bwd_smem_exposed * kc->cost.t_smem));
  Hardware unfitted = hw;
  unfitted.flash_bwd_smem_exposed = 0;
  Derivation dv0;
  const KernelChoice* kc0 = derive_flash_bwd(l, shape, unfitted, dv0);
  REQUIRE(kc0 != nullptr);
  CHECK(kc0->cost.t_smem_exposed == 0);
  CHECK(kc->cost.t_total == Approx(kc0->cost.t_total + kc->cost.t_smem_exposed).epsilon(1e-9));
}

// dQ by atomic adds (lemma atomic-sum; issue 16): FlashAttention-2's backward with dQ's fp32
// accumulator fused into the key-grouped kernel. The schedule checks, lowers to flash_bwd on
// mma.sync with the accumulator as an atomic output, the model prices its atomic adds and its
// zeroing, the CUDA adds by red and zeroes it before the launch (and compiles for sm_80 and
// sm_90a without warnings), and the CPU loop nest of that schedule equals the fp64 evaluator. A
// 16-bit dQ may not be grouped over the keys; derive weighs the accumulator against dQ's own
// kernel and keeps whichever the model prices lower. The device runs are in docs/benchmarks.md,
// session 27.
TEST_CASE("flash_bwd: dQ added up by atomic adds across the key tiles", "[emit][cuda][cpu]") {
  const Hardware hw = load_hardware("h200");
  REQUIRE(hw.l2_atomic_bandwidth_bytes_per_s > 0);
  const std::string diagram =
      "diagram attention_bwd\naxis b = 1\naxis h = 3\naxis q = 200\naxis x = 300\naxis d = 64\n"
      "in Q[b,h,q,d] : bf16\nin K[b,h,x,d] : bf16\nin V[b,h,x,d] : bf16\nin dO[b,h,q,d] : bf16\nin O[b,h,q,d] : bf16\nin P_lse[b,h,q] : fp32\n"
      "S[b,h,q,x] = contract(Q, K; d) * rsqrt(d)\nP[b,h,q,x] = exp(S - P_lse)\ndP[b,h,q,x] = contract(dO, V; d)\n"
      "dP_rowsum[b,h,q] = sum(dO * O; d)\ndS[b,h,q,x] = P * (dP - dP_rowsum)\n"
      "dQ_acc[b,h,q,d] : fp32 = contract(dS, K; x) * rsqrt(d)\ndQ[b,h,q,d] = dQ_acc\n"
      "dK[b,h,x,d] = contract(dS, Q; q) * rsqrt(d)\ndV[b,h,x,d] = contract(dO, P; q)\nout dQ : bf16\nout dK : bf16\nout dV : bf16\n";
  const std::string schedule =
      "schedule s for attention_bwd\nkernel D\n  fuse dP_rowsum\n  group h by 1\n  group q by 4\n  warps 4\n"
      "kernel main\n  fuse S, P, dP, dS, dQ_acc, dK, dV\n  weave b\n  weave h\n  group x by 128\n  stream q by 64\n  warps 8\n"
      "kernel copy\n  fuse dQ\n  weave b\n  weave h\n  group q by 16\n  warps 4\n";
  DiagnosticEngine diags;
  auto program = load_program_text("acc.napkin", diagram, diags);
  const Diagram& d = program->select("");
  REQUIRE(verify_program(*program, diags, &d));
  const SizeMap sizes = *resolve_sizes(d, {}, diags);
  SourceManager sm;
  auto s = parse_schedule(*sm.add("acc.schedule", schedule), diags);
  REQUIRE(s);
  auto checked = check_schedule(*program, d, *s, sizes, hw, {}, diags);
  INFO(diags.render());
  REQUIRE(checked);
  Derivation dv;
  dv.chosen = result_of(*s, *checked);
  const KernelChoice& kc = dv.chosen.kernels.at(1);
  REQUIRE(kc.cost.spec);
  const KernelSpec& spec = *kc.cost.spec;
  CHECK(spec.shape.atomic == std::vector<std::string>{"dQ_acc"});
  REQUIRE(spec.strategy == Strategy::flash_bwd);
  const FlashBwdForm& f = *spec.flash_bwd;
  REQUIRE(f.atomics.size() == 1);
  CHECK(f.atomics[0].tile == "dS");
  CHECK(f.atomics[0].operand == "K");
  CHECK(std::find_if(f.tiles.begin(), f.tiles.end(), [](const BwdTile& t) { return t.atomic_staged; })->s->name == "dS");
  CHECK_FALSE(spec.wgmma);
  CHECK(spec.why_no_wgmma.find("atomic adds") != std::string::npos);
  // every key tile's block adds its partial dQ once: 3 tiles of 128 keys over 300
  CHECK(kc.cost.atomic_bytes == Approx(3.0 * 1 * 3 * 200 * 64 * 4));
  CHECK(kc.cost.t_atomic == Approx(kc.cost.atomic_bytes / hw.l2_atomic_bandwidth_bytes_per_s / std::min(1.0, static_cast<double>(kc.cost.blocks) / hw.sm_count)));
  CHECK(kc.cost.t_zero > hw.launch_overhead_s);
  CHECK(kc.cost.t_total > kc.cost.t_smem + kc.cost.t_atomic);  // mma.sync flash_bwd: one dependent chain per warp, nothing hidden
  const std::string text = emit_cuda(*program, d, dv, hw);
  CHECK(count(text, "napkin::red_add2(a.dQ_acc + ") == 1);
  CHECK(count(text, "cudaMemsetAsync(a.dQ_acc, 0,") == 1);
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-atomic-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  if (!std::string(NAPKIN_NVCC).empty()) {
    const std::string cu = dir + "/acc.cu";
    std::ofstream(cu) << text;
    for (const std::string arch : {"80", "90a"}) {
      const std::string ptx = cu + "." + arch + ".ptx";
      const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O3 -ptx -arch=compute_" + arch + " -o " + ptx + " " + cu + " > " + cu + ".log 2>&1";
      INFO(cmd << "\n" << slurp(cu + ".log"));
      REQUIRE(std::system(cmd.c_str()) == 0);
      CHECK(slurp(cu + ".log").find("warning") == std::string::npos);
      CHECK(count(slurp(ptx), arch == "80" ? "atom.global.add.f32" : "red.global.add.v2.f32") > 0);  // atomicAdd before sm_90
    }
  }
  // The CPU loop nest of the same schedule (blocks adding into the zeroed accumulator) against
  // the fp64 evaluator.
  std::map<std::string, Tensor> inputs;
  for (const auto* in : d.inputs()) inputs[in->name] = random_input(*in, sizes, 27);
  const auto expected = evaluate(*program, d, sizes, inputs);
  std::ofstream(dir + "/case0.cpp") << emit_cpu(*program, d, dv, "napkin_c0_");
  CHECK(count(slurp(dir + "/case0.cpp"), "g_dQ_acc[") >= 1);
  write_case_inputs(dir, 0, d, sizes, inputs, expected);
  write_driver(dir, 1);
  const std::string run = "cd " + dir + " && g++ -std=c++17 -O1 -w case0.cpp driver.cpp -o runner && ./runner " + dir;
  INFO(run);
  REQUIRE(std::system(run.c_str()) == 0);
  const auto outs = read_outputs(dir + "/out0.bin");
  const auto decl = d.outputs();
  REQUIRE(outs.size() == decl.size());
  for (std::size_t o = 0; o < decl.size(); ++o) {
    std::string why;
    const double err = relative_error(outs[o], expected.at(decl[o]->name).data, why);
    INFO(decl[o]->name << " " << why << ": " << err);
    // dQ is the fp32 accumulator's copy: each block's partial rounded to fp32 before it is added
    // (as on the GPU), where the evaluator rounds the whole sum once: fp32 rounding per block
    CHECK(err < (decl[o]->name == "dQ" ? 4 * std::ldexp(1.0, -24) : 1e-9));
  }
  std::filesystem::remove_all(dir);

  // dQ itself (bf16) may not be grouped over the keys: the lemma needs an fp32 accumulator.
  std::string plain = diagram;
  plain.replace(plain.find("dQ_acc[b,h,q,d] : fp32 = contract(dS, K; x) * rsqrt(d)\ndQ[b,h,q,d] = dQ_acc\n"),
                std::string("dQ_acc[b,h,q,d] : fp32 = contract(dS, K; x) * rsqrt(d)\ndQ[b,h,q,d] = dQ_acc\n").size(),
                "dQ[b,h,q,d] = contract(dS, K; x) * rsqrt(d)\n");
  std::string plain_schedule = schedule.substr(0, schedule.find("kernel copy"));
  plain_schedule.replace(plain_schedule.find("dQ_acc"), 6, "dQ");
  DiagnosticEngine d2;
  auto p2 = load_program_text("plain.napkin", plain, d2);
  const Diagram& pd = p2->select("");
  REQUIRE(verify_program(*p2, d2, &pd));
  auto s2 = parse_schedule(*sm.add("plain.schedule", plain_schedule), d2);
  REQUIRE(s2);
  CHECK_FALSE(check_schedule(*p2, pd, *s2, sizes, hw, {}, d2));
  CHECK(d2.render().find("lemma atomic-sum: 'dQ' is not declared fp32") != std::string::npos);

  // derive weighs dQ's accumulator against the diagram as given, and says both predictions
  const Derivation plain_dv = derive(*p2, pd, *resolve_sizes(pd, {{"b", 4}, {"h", 16}, {"q", 4096}, {"x", 4096}, {"d", 128}}, d2), hw);
  bool weighed = false;
  for (const auto& st : plain_dv.steps)
    if (st.pass == "derive-atomic-accumulation" && st.kernel == "dQ_acc") {
      weighed = true;
      CHECK(st.detail.find("with the accumulators against") != std::string::npos);
    }
  CHECK(weighed);
}

TEST_CASE("derive keeps an atomic accumulator only where its best schedule adds by atomics and is predicted faster", "[emit][derive]") {
  LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/tests/golden/grad/attention.napkin");
  SizeMap sizes = l.sizes;
  for (const auto& [k, v] : SizeMap{{"b", 4}, {"h", 16}, {"q", 4096}, {"x", 4096}}) sizes[k] = v;
  const auto step_of = [](const Derivation& dv, const std::string& acc) -> const Step* {
    for (const auto& st : dv.steps)
      if (st.pass == "derive-atomic-accumulation" && st.kernel == acc) return &st;
    return nullptr;
  };
  // The H200: each accumulator's best schedule streams the axis instead (a copy, no adds): refused.
  const Derivation h200 = derive(*l.program, *l.diagram, sizes, load_hardware("h200"));
  CHECK(h200.rewritten == nullptr);
  for (const std::string acc : {"dQ_acc", "dK_acc"}) {
    const Step* st = step_of(h200, acc);
    REQUIRE(st != nullptr);
    CHECK(st->move.find("does not group") != std::string::npos);
    CHECK(st->move.find("no atomic adds") != std::string::npos);
  }
  // An A100 given an L2 atomic bandwidth (its table has none: no candidate at all): its mma.sync
  // kernels make the key-side accumulator pay, and derive keeps it, grouped over the queries.
  Hardware a100 = load_hardware("a100");
  CHECK(step_of(derive(*l.program, *l.diagram, sizes, a100), "dK_acc") == nullptr);
  a100.l2_atomic_bandwidth_bytes_per_s = 2.5e12;
  const Derivation dv = derive(*l.program, *l.diagram, sizes, a100);
  const Step* st = step_of(dv, "dK_acc");
  REQUIRE(st != nullptr);
  INFO(st->move << " / " << st->detail);
  CHECK(st->move.find("add into by atomic adds") != std::string::npos);
  REQUIRE(dv.rewritten != nullptr);
  bool grouped = false;
  for (const auto& k : dv.chosen.kernels) {
    const auto fused = k.plan.fused();
    if (std::find(fused.begin(), fused.end(), "dK_acc") == fused.end()) continue;
    grouped = k.plan.group("q").value_or(0) >= 2;
    CHECK(k.cost.problems.empty());
    REQUIRE(k.cost.spec);
    CHECK(std::find(k.cost.spec->shape.atomic.begin(), k.cost.spec->shape.atomic.end(), "dK_acc") != k.cost.spec->shape.atomic.end());
  }
  CHECK(grouped);
  CHECK(dv.chosen.cost.t_total < search_with_unfused(*l.program, *l.diagram, sizes, a100, {}, {}).first.cost.t_total);
}
