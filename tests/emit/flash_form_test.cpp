// The flash form generalised (lower/flash_form.hpp; issue 12, item 4): a contraction, element-wise
// score maps in statements of their own (bias and mask arrays), softmax along x or no normaliser
// (sigmoid attention), then a contraction; d_qk != d_v; wgmma at d = 64 and d = 256. Each case
// lowers to one flash kernel with its wgmma variant on the H100, and its CUDA compiles with nvcc
// for sm_80 and sm_90a (where nvcc is found) into mma.sync and wgmma code. What the form cannot
// render lowers to SIMT with the reason. The device runs are the tests/gpu diagrams used here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <tuple>
#include <fstream>
#include <unistd.h>

#include "derive/derivation.hpp"
#include "emit/cuda_emitter.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

TEST_CASE("flash form: score chains, no normaliser and d_qk != d_v lower to one flash kernel with wgmma, and compile", "[emit][cuda]") {
  Hardware hw = load_hardware("h100");
  struct Case {
    const char* file;
    SizeMap sizes;
    bool softmax;
  };
  const std::vector<Case> cases = {
      {"tests/gpu/sigmoid_attention_small.napkin", {}, false},
      {"tests/gpu/sigmoid_attention_small.napkin", {{"q", 333}, {"x", 517}, {"d", 64}}, false},
      {"tests/gpu/cross_attention_192.napkin", {}, true},
      {"tests/gpu/cross_attention_192.napkin", {{"dk", 64}, {"dv", 256}, {"q", 130}, {"x", 777}}, true},
      {"diagrams/library/sigmoid_attention.napkin", {}, false},
      {"diagrams/library/cross_attention.napkin", {}, true},
      {"diagrams/library/attention.napkin", {{"b", 16}, {"h", 16}, {"q", 1024}, {"x", 1024}, {"d", 64}}, true},
      {"diagrams/library/attention.napkin", {{"d", 256}}, true},
  };
  const bool nvcc = !std::string(NAPKIN_NVCC).empty();
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-flash-form-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(c.file << " case " << i);
    LoadedDiagram l = load_library(std::string(NAPKIN_SOURCE_DIR) + "/" + c.file);
    SizeMap sizes = l.sizes;
    for (const auto& [k, v] : c.sizes) sizes[k] = v;
    Derivation dv = derive(*l.program, *l.diagram, sizes, hw);
    REQUIRE(dv.chosen.kernels.size() == 1);
    const KernelChoice& kc = dv.chosen.kernels[0];
    const KernelSpec& spec = *kc.cost.spec;
    INFO(describe_spec(spec));
    REQUIRE(spec.strategy == Strategy::flash);
    CHECK(spec.wgmma);
    CHECK(kc.cost.warpgroup_mma);
    const FlashForm& f = *spec.flash;
    CHECK(f.normaliser_lemma == (c.softmax ? "online-softmax" : ""));
    CHECK(f.DK == sizes.at(f.dk));
    CHECK(f.DV == sizes.at(f.dv));
    // Causal chunks are skipped only under a softmax (a sigmoid of a masked score is not 0).
    if (!c.softmax) CHECK((!f.skip && kc.cost.causal_active_fraction == 1));
    const std::string text = emit_cuda(*l.program, *l.diagram, dv, hw);
    CHECK(count(text, "// strategy flash") == 1);
    CHECK(count(text, "// wgmma variant (sm_90a)") == 1);
    CHECK((count(text, "// online softmax") > 0) == c.softmax);
    if (!c.softmax) CHECK(count(text, "(a plain sum over " + f.x + ")") == 2);
    if (!nvcc) continue;
    const std::string cu = dir + "/k" + std::to_string(i) + ".cu";
    std::ofstream(cu) << text;
    for (const std::string arch : {"80", "90a"}) {
      const std::string ptx = cu + "." + arch + ".ptx";
      const std::string cmd = std::string(NAPKIN_NVCC) + " -std=c++17 -O3 -ptx -arch=compute_" + arch + " -o " + ptx + " " + cu + " > " + cu + ".log 2>&1";
      INFO(cmd << "\n" << slurp(cu + ".log"));
      REQUIRE(std::system(cmd.c_str()) == 0);
      CHECK(slurp(cu + ".log").find("warning") == std::string::npos);
      const std::string p = slurp(ptx);
      CHECK(count(p, "mma.sync.aligned.m16n8k16") > 0);
      CHECK((count(p, "wgmma.mma_async") > 0) == (arch == "90a"));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("flash form: what it cannot render lowers to SIMT (saying why) or to flash_bwd", "[emit]") {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/napkin-flash-decline-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string head = "axis h = 2\naxis q = 128\naxis x = 256\naxis d = 64\nin Q[h,q,d] : bf16\nin K[h,x,d] : bf16\nin V[h,x,d] : bf16\n"
                           "S[h,q,x] = contract(Q, K; d)\n";
  struct Case {
    std::string body, why, lowered = "lowered to                     simt";
  };
  const std::vector<Case> cases = {
      // rmsnorm along x has a streaming lemma (normalised-contraction) but no flash rendering
      {"P[h,q,x] = rmsnorm(S; x)\nO[h,q,d] = contract(P, V; x)\nout O : bf16\n",
       "flash: the normaliser before the last contraction is not a softmax along x"},
      // a score statement that leaves the kernel: the flash form stores O (and row statistics) only; without a
      // normaliser the flash_bwd form takes it (S a stored tile, O accumulated over x)
      {"P[h,q,x] = sigmoid(S)\nO[h,q,d] = contract(P, V; x)\nout O : bf16\nout S : bf16\n", "flash: the kernel stores 2 contractions",
       "lowered to                flash_bwd"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const std::string name = "d" + std::to_string(i), file = dir + "/" + name + ".napkin", sched = dir + "/" + name + ".schedule";
    std::ofstream(file) << "diagram " << name << "\n" << head << cases[i].body;
    std::ofstream(sched) << "schedule s for " << name << "\n  kernel k\n    fuse S, P, O\n    weave h\n    group q by 64\n    stream x by 64\n    warps 4\n";
    RunResult r = run_napkin("derive " + file + " --hw h100 --schedule " + sched);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find(cases[i].lowered) != std::string::npos);
    if (cases[i].lowered.find("simt") != std::string::npos) CHECK(r.output.find(cases[i].why) != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("flash form: the softmax's logsumexp (napkin grad's saved statistic) is stored by the flash kernel from m and l", "[emit][cuda]") {
  // attention's forward as `napkin grad` writes it: O and P_lse = logsumexp(mask(S, causal); x).
  // Several waves of blocks: under one wave the longest tile is the makespan and the skip saves
  // no time, so derive need not take it (perfmodel/cost.cpp dispatch_stretch).
  const char* text =
      "diagram attn_lse\naxis b = 4\naxis h = 16\naxis q = 1024\naxis x = 1024\naxis d = 64\n"
      "in Q[b,h,q,d] : bf16\nin K[b,h,x,d] : bf16\nin V[b,h,x,d] : bf16\n"
      "S[b,h,q,x] = contract(Q, K; d) * rsqrt(d)\nP[b,h,q,x] = softmax(mask(S, causal(q, x)); x)\n"
      "P_lse[b,h,q] = logsumexp(mask(S, causal(q, x)); x)\nO[b,h,q,d] = contract(P, V; x)\nout O : bf16\nout P_lse : fp32\n";
  Hardware hw = load_hardware("h100");
  LoadedDiagram l = load_text(text, {});
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  REQUIRE(dv.chosen.kernels.size() == 1);  // not S, P, P_lse_max, P_lse and O apart
  const KernelChoice& kc = dv.chosen.kernels[0];
  const KernelSpec& spec = *kc.cost.spec;
  REQUIRE(spec.strategy == Strategy::flash);
  const FlashForm& f = *spec.flash;
  REQUIRE(f.stats.size() == 2);  // the max and the logsumexp statements (derive writes logsumexp as both)
  CHECK(f.skip);                 // the causal skip holds: the skipped terms are -inf in the max and 0 in the sum
  CHECK(kc.cost.causal_active_fraction < 1);
  CHECK(kc.cost.outputs.size() == 2);
  const std::string cuda = emit_cuda(*l.program, *l.diagram, dv, hw);
  std::size_t stores = 0;
  for (std::size_t at = cuda.find("a.P_lse["); at != std::string::npos; at = cuda.find("a.P_lse[", at + 1)) ++stores;
  CHECK(stores == (spec.wgmma ? 2u : 1u));  // the mma.sync variant, and the wgmma one where lowering emits it
  CHECK(cuda.find("logf(") != std::string::npos);
  // Without the softmax (a plain logsumexp beside a sigmoid score) there is no running max: not the flash form.
  LoadedDiagram sig = load_text(
      "diagram s\naxis q = 128\naxis x = 128\naxis d = 64\nin Q[q,d] : bf16\nin K[x,d] : bf16\nin V[x,d] : bf16\n"
      "S[q,x] = contract(Q, K; d)\nP[q,x] = sigmoid(S)\nL[q] = logsumexp(S; x)\nO[q,d] = contract(P, V; x)\nout O : bf16\nout L : fp32\n",
      {});
  Derivation ds = derive(*sig.program, *sig.diagram, sig.sizes, hw);
  for (const auto& k : ds.chosen.kernels)
    if (k.cost.spec->strategy == Strategy::flash) CHECK(k.cost.spec->flash->stats.empty());
}

TEST_CASE("flash form under a causal skip: tiles longest first, batch slices fastest only where K and V fit half of L2", "[emit][cuda]") {
  // One head group's causal attention: q tiles differ in chunks; the grid hands the longest out
  // first. At 8 heads of 2048 tokens K and V (8 MB) fit half the H200's L2: every slice's longest tile goes
  // first and the model replays that order; at 8192 tokens and 32 groups (256 MB) each slice's
  // tiles stay together, and the model replays that order too (its last slices' long tiles start late).
  auto attn = [](int heads, int n) {
    return "diagram a\naxis h = " + std::to_string(heads) + "\naxis q = " + std::to_string(n) + "\naxis x = " + std::to_string(n) +
           "\naxis d = 128\nin Q[h,q,d] : bf16\nin K[h,x,d] : bf16\nin V[h,x,d] : bf16\n"
           "S[h,q,x] = contract(Q, K; d) * rsqrt(d)\nP[h,q,x] = softmax(mask(S, causal(q, x)); x)\nO[h,q,d] = contract(P, V; x)\nout O : bf16\n";
  };
  Hardware hw = load_hardware("h200");
  for (const auto& [heads, n, fits] : {std::tuple{8, 2048, true}, std::tuple{32, 8192, false}}) {
    LoadedDiagram l = load_text(attn(heads, n), {});
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
    REQUIRE(dv.chosen.kernels.size() == 1);
    const KernelChoice& kc = dv.chosen.kernels[0];
    REQUIRE(kc.cost.spec->flash);
    const FlashForm& f = *kc.cost.spec->flash;
    REQUIRE(f.skip);
    INFO("n = " << n);
    REQUIRE(f.tile_chunks.size() == static_cast<std::size_t>((n + f.TQ - 1) / f.TQ));
    CHECK(std::is_sorted(f.tile_chunks.rbegin(), f.tile_chunks.rend()));  // non-increasing: the longest first
    CHECK(f.tile_chunks.front() == (n + f.TX - 1) / f.TX);               // the last tile walks every chunk
    CHECK(f.slices_fastest == fits);
    CHECK(kc.cost.imbalance >= 1.0);
    if (!fits) CHECK(kc.cost.imbalance > 1.0);  // 32 slices of 64 tiles, 2 to 64 chunks each, on 132 slots
    const std::string cuda = emit_cuda(*l.program, *l.diagram, dv, hw);
    const auto decode = cuda.find("o_q = (tiles_q - 1 - bid");
    REQUIRE(decode != std::string::npos);
    // slices fastest: the head index is decoded before the tile; else the tile first (bid % tiles_q)
    CHECK((cuda.compare(decode, 32, "o_q = (tiles_q - 1 - bid) * T_Q;") == 0) == fits);
  }
}
