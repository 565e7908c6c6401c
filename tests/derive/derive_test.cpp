// What derive must find on the bundled diagrams, and properties of its output.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "derive/candidates.hpp"
#include "derive/derivation.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"
#include "lower/loop_band.hpp"
#include "perfmodel/simt_cost.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {
using Loaded = LoadedDiagram;
Loaded load(const std::string& file) { return load_library(file); }
bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }
/** Every kernel's cost under `schedule` (text) of `l` on `hw`, the schedule required to check. */
std::vector<KernelCost> kernels_by_schedule(const Loaded& l, const std::string& schedule, const Hardware& hw) {
  SourceManager sm;
  DiagnosticEngine diags;
  auto s = parse_schedule(*sm.add("v.schedule", schedule), diags);
  REQUIRE(s);
  auto checked = check_schedule(*l.program, *l.diagram, *s, l.sizes, hw, {}, diags);
  INFO(diags.render());
  REQUIRE(checked);
  return checked->cost.kernels;
}
/** The first kernel's cost under `schedule` (text) of `l` on `hw`, the schedule required to check. */
KernelCost priced_by_schedule(const Loaded& l, const std::string& schedule, const Hardware& hw) { return kernels_by_schedule(l, schedule, hw).at(0); }
/** Seconds of `rounds` dependent rounds of loads in a rows kernel whose HBM time is `t_hbm`
 *  (perfmodel/rows_cost.hpp): the loaded latency each where HBM is kept busy, else the t that
 *  solves t = rounds x (idle + (loaded - idle) x t_hbm / t), found here by bisection. */
double rounds_seconds(double rounds, double t_hbm, const Hardware& hw) {
  const double loaded = hw.hbm_loaded_latency_s, idle = hw.hbm_latency_s;
  if (rounds * loaded <= t_hbm) return rounds * loaded;
  double lo = rounds * idle, hi = rounds * loaded;
  for (int i = 0; i < 200; ++i) {
    const double t = (lo + hi) / 2;
    (t < rounds * (idle + (loaded - idle) * t_hbm / t) ? lo : hi) = t;
  }
  return (lo + hi) / 2;
}
}  // namespace

TEST_CASE("derive finds FlashAttention on attention.napkin by itself", "[derive]") {
  Loaded l = load("attention.napkin");
  Hardware hw = load_hardware("h100");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  REQUIRE(dv.chosen.kernels.size() == 1);  // one fused kernel
  const KernelChoice& k = dv.chosen.kernels[0];
  CHECK(k.plan.fused() == std::vector<std::string>{"S", "P", "O"});
  CHECK(k.cost.axes.at("q").kind == AxisPlan::Kind::group);  // q grouped
  REQUIRE(k.plan.stream());
  CHECK(k.plan.stream()->first == "x");                      // x streamed ...
  bool online = false;
  for (const auto& u : k.lemmas) online |= u.lemma == "online-softmax";
  CHECK(online);                                             // ... by the online-softmax lemma
  CHECK(has(k.cost.internal, "S"));                          // S and P never in HBM
  CHECK(has(k.cost.internal, "P"));
  CHECK(k.cost.outputs == std::vector<std::string>{"O"});
  CHECK(dv.chosen.cost.hbm_bytes < dv.unfused.cost.hbm_bytes / 10);
  CHECK(dv.chosen.cost.t_total < dv.unfused.cost.t_total);
  // Every pass of the registry speaks, each with its licence.
  std::set<std::string> passes;
  for (const auto& s : dv.steps) {
    passes.insert(s.pass);
    CHECK_FALSE(s.license.empty());
  }
  CHECK(passes.size() == 7);
}

TEST_CASE("kernels the sm_90a variants run are scored on wgmma, the others on mma.sync", "[derive]") {
  Loaded l = load("attention.napkin");
  Hardware h100 = load_hardware("h100"), a100 = load_hardware("a100");
  const KernelCost on_h100 = derive(*l.program, *l.diagram, l.sizes, h100).chosen.kernels[0].cost;
  const KernelCost on_a100 = derive(*l.program, *l.diagram, l.sizes, a100).chosen.kernels[0].cost;
  // FlashAttention with 64 rows of q per consumer warpgroup: wgmma on the H100 (one block per SM,
  // the measured wgmma share of the peak), mma.sync on the A100 (no wgmma).
  CHECK(on_h100.warpgroup_mma);
  // The measured power-limited rate caps the instruction's.
  REQUIRE(h100.sustained_tensor_fraction > 0);
  CHECK(on_h100.tensor_fraction == Approx(std::min(h100.wgmma_fraction, h100.sustained_tensor_fraction)));
  CHECK(on_h100.blocks_per_sm == 1);
  CHECK(on_h100.axes.at("q").tile == 64 * (on_h100.warps / 4));
  CHECK_FALSE(on_a100.warpgroup_mma);
  CHECK(on_a100.tensor_fraction == Approx(a100.mma_sync_fraction));
  // Without the power cap, and with the wgmma figure removed, the same schedule falls back to the
  // mma.sync rate: slower.
  Hardware uncapped = h100;
  uncapped.sustained_tensor_fraction = 0;
  const KernelCost fast = derive(*l.program, *l.diagram, l.sizes, uncapped).chosen.kernels[0].cost;
  CHECK(fast.tensor_fraction == Approx(h100.wgmma_fraction));
  CHECK(fast.t_tensor < on_h100.t_tensor);
  Hardware no_wgmma = uncapped;
  no_wgmma.wgmma_fraction = 0;
  no_wgmma.wgmma = false;  // no sm_90a path: the flash kernel lowers to mma.sync alone
  const KernelCost slow = derive(*l.program, *l.diagram, l.sizes, no_wgmma).chosen.kernels[0].cost;
  CHECK_FALSE(slow.warpgroup_mma);
  CHECK(slow.t_tensor > fast.t_tensor * 1.4);
  // A normaliser's rows walked in series: the latency term is charged where the HBM latency is known.
  Loaded ln = load("layernorm.napkin");
  const KernelCost rows = derive(*ln.program, *ln.diagram, ln.sizes, h100).chosen.kernels[0].cost;
  CHECK(rows.t_latency > 0);
  CHECK(rows.t_latency >= 2 * h100.hbm_latency_s);
}

TEST_CASE("a rows kernel is priced as lowering shapes it: rounds of loads over the teams resident at once", "[derive][rows]") {
  Loaded l = load("rmsnorm.napkin");  // Y[t,m] = rmsnorm(X, W; m), bf16
  l.sizes["t"] = 4096;
  l.sizes["m"] = 4096;
  const Hardware h100 = load_hardware("h100");
  REQUIRE(h100.hbm_loaded_latency_s > 0);
  auto priced = [&](int rows, int warps) {
    return priced_by_schedule(l, "schedule v for rmsnorm_layer\nkernel Y\n  fuse Y\n  group t by " + std::to_string(rows) + "\n  warps " + std::to_string(warps) + "\n",
                              h100);
  };
  // 8 rows of one warp each: 512 blocks of 256 threads at 48 registers, 5 per SM, one partial wave
  // (3.9 blocks per SM): every row's team is resident, and walks it in 4096 / (32 x 8 x 4) = 4
  // rounds per walk. The 4096 rows' re-reads in flight (8 KB of X each, 33.5 MB) exceed the 15 MB
  // the L2 keeps for a re-read, so each team keeps a prefix of its row in SMEM (RowsForm::staged):
  // the map walk loads only the rest, in map_rounds() rounds.
  const KernelCost t8 = priced(8, 8);
  REQUIRE(t8.spec->rows);
  const RowsForm& f8 = *t8.spec->rows;
  CHECK(f8.team_warps == 1);
  CHECK(t8.registers_per_thread == 48);
  CHECK(t8.blocks_per_sm == 5);
  CHECK(f8.rounds_per_walk() == 4);
  CHECK(f8.staged > 0);
  CHECK(f8.staged < 4096);
  CHECK(f8.map_rounds() == (4096 - f8.staged + 1023) / 1024);
  CHECK(f8.map_rounds() < 4);
  CHECK(t8.t_latency == Approx(static_cast<double>(4 + f8.map_rounds()) * h100.hbm_loaded_latency_s).epsilon(1e-9));
  // One row per block of 4 warps: one round per walk, 10 blocks per SM by registers, 4096 rows over
  // 1320 teams: 6.2 rounds, under the HBM time; 1320 rows' re-reads in flight (10.8 MB) stay in L2.
  const KernelCost t1 = priced(1, 4);
  CHECK(t1.spec->rows->team_warps == 4);
  CHECK(t1.spec->rows->staged == 0);
  CHECK(t1.blocks_per_sm == 10);
  CHECK(t1.t_latency == Approx(4096.0 * 2 / 1320 * h100.hbm_loaded_latency_s).epsilon(1e-9));
  CHECK(t1.t_total <= t8.t_total * (1 + 1e-9));  // both HBM-bound: t8 stages its rows, t1's re-reads stay in L2
  // The search sees the difference (session 9 measured 24.5 against 36.4 us on the H100).
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  CHECK(dv.chosen.kernels.at(0).cost.t_total <= t1.t_total * (1 + 1e-9));
}

TEST_CASE("a rows kernel whose rounds bind waits each round at the latency of HBM's load, between the idle and the loaded round trip", "[derive][rows]") {
  Loaded l = load("layernorm.napkin");  // 4096 x 1024, bf16: 16.8 MB
  const Hardware h200 = load_hardware("h200");
  REQUIRE(h200.hbm_loaded_latency_s > h200.hbm_latency_s);
  // Two rows a block of 4 warps: two-warp teams, few enough that their rounds bind.
  const KernelCost k = priced_by_schedule(l, "schedule v for layernorm_layer\nkernel Y\n  fuse Y\n  group t by 2\n  warps 4\n", h200);
  REQUIRE(k.spec->rows);
  const double idle = h200.hbm_latency_s, loaded = h200.hbm_loaded_latency_s;
  // rounds per resident team: every row's walks over the teams resident at once (the grid fills the GPU)
  const double n = static_cast<double>(k.spec->rows->rows_total) *
                   static_cast<double>(k.spec->rows->rounds_per_walk() + k.spec->rows->map_rounds()) /
                   (static_cast<double>(h200.sm_count) * k.blocks_per_sm * k.spec->rows->teams_per_block());
  REQUIRE(n * loaded > k.t_hbm);  // the rounds bind at the loaded latency
  CHECK(k.t_latency < n * loaded);
  CHECK(k.t_latency > n * idle);
  CHECK(k.t_latency > k.t_hbm);
  // the fixed point: each round at idle + (loaded - idle) x the HBM utilisation t_hbm / t
  CHECK(k.t_latency == Approx(n * (idle + (loaded - idle) * k.t_hbm / k.t_latency)).epsilon(1e-9));
  CHECK(k.t_latency == Approx(rounds_seconds(n, k.t_hbm, h200)).epsilon(1e-6));
}

TEST_CASE("a rows kernel's second walk re-reads from HBM the share of its rows the L2 does not keep, except the prefix it stages in SMEM", "[derive][rows]") {
  // Softmax of bf16 rows, one row per block of 8 warps (48 registers: 5 blocks per SM on the H200,
  // 660 rows in flight). A row of 4096 is re-read 8 KB at a time: 5.4 MB in flight, within the 30 MB
  // of evict_last lines the H200's L2 keeps for a re-read (l2.reread_capacity_bytes), nothing
  // staged. Rows of 32768 and 128256 would put 43 and 169 MB in flight: lowering stages a prefix of
  // each row in SMEM, sized for the blocks per SM whose 16-byte accesses in flight cover the HBM's
  // bandwidth-latency product (4.21e12 B/s x 1.6 us / 132 SMs = 51 KB: 4 blocks of 16 KB), and only
  // the rest is re-read: at 32768, 4.4 MB in flight (every re-read hits); at 128256, 105 MB, of
  // which the L2 keeps 30: the rest of the re-read comes from HBM.
  const Hardware h200 = load_hardware("h200");
  REQUIRE(h200.l2_reread_capacity_bytes == 30e6);
  Loaded l = load("softmax.napkin");
  auto priced = [&](std::int64_t v) {
    l.sizes["t"] = 4096;
    l.sizes["v"] = v;
    return priced_by_schedule(l, "schedule s for softmax_layer\nkernel P\n  fuse P\n  weave t\n  stream v by 4096 twice\n  warps 8\n", h200);
  };
  for (std::int64_t v : {4096, 32768, 128256}) {
    INFO("v = " << v);
    const KernelCost c = priced(v);
    REQUIRE(c.spec->rows);
    const RowsForm& f = *c.spec->rows;
    const bool staged = v > 4096;
    CHECK((f.staged > 0) == staged);
    CHECK(c.blocks_per_sm == (staged ? 4 : 5));
    const double once = 4096.0 * static_cast<double>(v) * 2;  // L or P, bytes
    if (!staged) {
      CHECK(c.hbm_bytes == Approx(2 * once).epsilon(1e-9));
      CHECK(c.bound.find("re-reads") == std::string::npos);
      continue;
    }
    // SMEM: 4 blocks share the SM's 228 KiB, 1 KiB reserved each, the merge's 96 bytes
    CHECK(f.staged == (233472 / 4 - 1024 - 96) / 2 / 8 * 8);
    CHECK(f.smem_bytes == 96 + f.staged * 2);
    CHECK(f.staged_arrays == std::vector<std::string>{"L"});
    const double unstaged = 1.0 - static_cast<double>(f.staged) / static_cast<double>(v);
    const double in_flight = 4.0 * 132 * static_cast<double>(v) * 2 * unstaged;  // 528 teams, each its row's unstaged bytes of L
    CHECK(reread_in_flight_bytes(f, 528, *l.diagram, l.sizes, ModelOptions{}) == Approx(in_flight).epsilon(1e-9));
    const double kept = std::min(1.0, h200.l2_reread_capacity_bytes / in_flight);
    CHECK(c.hbm_bytes == Approx(2 * once + once * unstaged * (1.0 - kept)).epsilon(1e-9));
    CHECK((c.bound.find("re-reads") != std::string::npos) == (v == 128256));
  }
}

TEST_CASE("a one-axis reduction is a rows kernel: one walk, short rows walked by teams of fewer lanes", "[derive][rows]") {
  // attention backward's D = rowsum(dO * O) over d: a row of 128 bf16 is 16 accesses of 16 bytes.
  const char* text =
      "diagram row_sum\naxis b = 4\naxis q = 4096\naxis d = 128\nin A[b,q,d] : bf16\nin B[b,q,d] : bf16\n"
      "D[b,q] = sum(A * B; d)\nout D : fp32\n";
  const Hardware h100 = load_hardware("h100");
  REQUIRE(h100.hbm_loaded_latency_s > 0);
  auto priced = [&](std::int64_t d, int rows, int warps) {
    Loaded l = load_text(text, {{"d", d}});
    return priced_by_schedule(l, "schedule v for row_sum\nkernel D\n  fuse D\n  group q by " + std::to_string(rows) + "\n  warps " + std::to_string(warps) + "\n", h100);
  };
  const KernelCost k128 = priced(128, 32, 4);
  REQUIRE(k128.spec->rows);
  const RowsForm& f = *k128.spec->rows;
  CHECK(f.reduction);
  CHECK(f.vector);
  CHECK(f.team_warps == 1);
  CHECK(f.team_lanes == 4);            // 128 / 8 = 16 accesses, U = 4 in flight a lane
  CHECK(f.teams_per_block() == 32);    // 8 rows per warp at once
  CHECK(f.walks() == 1);
  CHECK(f.map.vector_arrays.empty());  // no second walk
  // One round per row (4 lanes x 8 elements x U = 4 covers it), spread over the resident teams.
  const double teams = static_cast<double>(h100.sm_count) * f.blocks_per_sm * 32;
  CHECK(k128.t_latency == Approx(rounds_seconds(4.0 * 4096 / std::min(teams, h100.sm_count * (static_cast<double>(f.blocks) / h100.sm_count) * 32),
                                                k128.t_hbm, h100)).epsilon(1e-9));
  // Fewer rows per block than teams: the idle teams do not count as resident.
  const KernelCost k8 = priced(128, 8, 4);
  CHECK(k8.spec->rows->teams_per_block() == 32);
  const RowsForm& f8 = *k8.spec->rows;
  const double resident8 = h100.sm_count * std::min<double>(f8.blocks_per_sm, static_cast<double>(f8.blocks) / h100.sm_count) * 8;
  CHECK(k8.t_latency == Approx(rounds_seconds(4.0 * 4096 / resident8, k8.t_hbm, h100)).epsilon(1e-9));
  CHECK(k8.t_latency > k128.t_latency);
  // Rows of 24 elements (3 accesses): teams of 2 lanes (a whole 32-byte sector an access);
  // of 12 (no 16-byte path): 16 lanes.
  CHECK(priced(24, 32, 4).spec->rows->team_lanes == 2);
  CHECK_FALSE(priced(12, 32, 4).spec->rows->vector);
  CHECK(priced(12, 32, 4).spec->rows->team_lanes == 16);
  // One row per block of 4 warps keeps the team of warps (the schedule's choice, priced as such).
  CHECK(priced(128, 1, 4).spec->rows->team_warps == 4);
  CHECK(priced(128, 1, 4).spec->rows->team_lanes == 32);
}

TEST_CASE("an element-wise map of one reduction is a rows kernel: the storing lane applies the map", "[derive][rows]") {
  // rmsnorm's saved statistic rstd = rsqrt(mean(X * X; m) + eps), scaled by a per-row array.
  const char* text =
      "diagram row_rstd\naxis t = 2048\naxis m = 4096\nin X[t,m] : bf16\nin B[t] : fp32\n"
      "Y[t] = rsqrt(mean(X * X; m) + 1e-5) * B\nout Y : fp32\n";
  const Hardware h100 = load_hardware("h100");
  Loaded l = load_text(text, {});
  const KernelCost k = priced_by_schedule(l, "schedule v for row_rstd\nkernel Y\n  fuse Y\n  group t by 8\n  warps 4\n", h100);
  REQUIRE(k.spec->rows);
  const RowsForm& f = *k.spec->rows;
  CHECK(f.reduction);
  CHECK(f.parts.at(0).post);
  CHECK(f.axis == "m");
  CHECK(f.row_arrays == std::vector<std::string>{"B"});
  CHECK(f.walks() == 1);
  // X once, B and Y once per row: the model prices the row arrays too.
  CHECK(k.hbm_bytes == Approx(2048.0 * 4096 * 2 + 2048.0 * 4 * 2));
  // Derive picks it over the one-thread-per-row SIMT loop.
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  REQUIRE(dv.chosen.kernels.size() == 1);
  CHECK(dv.chosen.kernels[0].cost.spec->strategy == Strategy::rows);
  // A map that is not element-wise around the reduction stays off the rows form.
  Loaded nested = load_text(
      "diagram nested\naxis t = 64\naxis m = 64\nin X[t,m] : bf16\nY[t] = sum(X; m) + max(X; m)\nout Y : fp32\n", {});
  const KernelCost kn = priced_by_schedule(nested, "schedule v for nested\nkernel Y\n  fuse Y\n  warps 4\n", h100);
  CHECK_FALSE(kn.spec->rows);
}

TEST_CASE("statements over the same rows share one rows kernel: reductions, normalisers and maps that read the reductions", "[derive][rows]") {
  // RMSNorm's forward with its saved rstd, and its backward's row mean read by dX (napkin grad's
  // rmsnorm_layer_fwd and _bwd, at the training block's 2048 tokens).
  const char* text =
      "diagram rms\naxis t = 2048\naxis m = 4096\nin X[t,m] : bf16\nin W[m] : bf16\nin dY[t,m] : bf16\n"
      "Y[t,m] = rmsnorm(X, W; m, eps=1e-5)\nR[t] = rsqrt(mean(X * X; m) + 1e-5)\nD[t] = mean(dY * W * X; m)\n"
      "dX[t,m] = R * (dY * W) - X * (R * R * R) * D\nout Y : bf16\nout R : fp32\nout dX : bf16\n";
  const Hardware h100 = load_hardware("h100");
  Loaded l = load_text(text, {});
  // Kernels (each a fuse list, in order), all woven over t; the cost of the kernel that computes `of`.
  auto priced = [&](const std::vector<std::string>& kernels, const std::string& of) {
    std::string sched = "schedule v for rms\n";
    for (std::size_t i = 0; i < kernels.size(); ++i) sched += "kernel K" + std::to_string(i) + "\n  fuse " + kernels[i] + "\n  weave t\n  warps 4\n";
    const std::vector<KernelCost> costs = kernels_by_schedule(l, sched, h100);
    for (std::size_t i = 0; i < kernels.size(); ++i)
      if ((", " + kernels[i] + ",").find(" " + of + ",") != std::string::npos) return costs.at(i);
    FAIL("no kernel computes " << of);
    return KernelCost{};
  };
  const double row = 2048.0 * 4096 * 2;  // bytes of one [t,m] bf16 array
  // The forward: one walk gathers both lemmas' statistics from X; Y and R stored; X, W read once.
  const KernelCost fwd = priced({"Y, R", "D", "dX"}, "Y");
  REQUIRE(fwd.spec->rows);
  const RowsForm& f = *fwd.spec->rows;
  REQUIRE(f.parts.size() == 2);
  REQUIRE((f.part("Y") && f.part("R")));
  CHECK(f.part("Y")->kind == RowsPart::Kind::normaliser);
  CHECK(f.part("R")->kind == RowsPart::Kind::reduction);
  CHECK(f.part("R")->post);
  CHECK_FALSE(f.reduction);
  CHECK(f.walks() == 2);
  CHECK(f.statistics.vector_arrays == std::vector<std::string>{"X"});
  CHECK(f.map.vector_arrays == std::vector<std::string>{"W", "X"});
  CHECK(fwd.hbm_bytes == Approx(2 * row + 4096.0 * 2 + 2048.0 * 4));
  // Cheaper than the two kernels apart (X read twice, two launches).
  CHECK(fwd.t_total < priced({"Y", "R", "D", "dX"}, "Y").t_total + priced({"Y", "R", "D", "dX"}, "R").t_total);
  // The backward's row mean and the map that reads it: D (no output of the diagram) kept in
  // registers and never stored; dY, X, W and R read once, dX written.
  const KernelCost bwd = priced({"Y", "R", "D, dX"}, "dX");
  REQUIRE(bwd.spec->rows);
  const RowsForm& b = *bwd.spec->rows;
  REQUIRE(b.parts.size() == 2);
  REQUIRE(b.part("dX"));
  CHECK(b.part("dX")->kind == RowsPart::Kind::map);
  CHECK(b.part("dX")->vector_output);
  CHECK(b.row_arrays == std::vector<std::string>{"R"});
  CHECK(b.statistics.vector_arrays == std::vector<std::string>{"W", "X", "dY"});
  CHECK_FALSE(b.part("D")->stored);
  CHECK(bwd.hbm_bytes == Approx(3 * row + 4096.0 * 2 + 2048.0 * 4));
  // All four in one kernel, and derive finds it.
  const KernelCost all = priced({"Y, R, D, dX"}, "Y");
  REQUIRE(all.spec->rows);
  CHECK(all.spec->rows->parts.size() == 4);
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  REQUIRE(dv.chosen.kernels.size() == 1);
  CHECK(dv.chosen.kernels[0].cost.spec->strategy == Strategy::rows);
  CHECK(dv.chosen.kernels[0].plan.fused().size() == 4);
  // LayerNorm's forward with its saved mean and rstd: a per-row statistic does not force the rows
  // into groups of 32 (coalescing of mean[t]: 1/4096 of X's bytes), so its rows kernels keep small
  // groups and derive fuses the normaliser with the statistic that does not read the other.
  Loaded ln = load_text(
      "diagram ln\naxis t = 4096\naxis m = 1024\nin X[t,m] : bf16\nin W[m] : bf16\nin B[m] : bf16\n"
      "Y[t,m] = layernorm(X, W, B; m, eps=1e-5)\nY_mean[t] = mean(X; m)\nY_rstd[t] = rsqrt(mean((X - Y_mean) * (X - Y_mean); m) + 1e-5)\n"
      "out Y : bf16\nout Y_mean : fp32\nout Y_rstd : fp32\n", {});
  const Derivation dln = derive(*ln.program, *ln.diagram, ln.sizes, h100);
  CHECK(dln.chosen.kernels.size() == 2);
  for (const auto& kc : dln.chosen.kernels) {
    CHECK(kc.cost.spec->strategy == Strategy::rows);
    CHECK(kc.plan.group("t").value_or(1) < 32);
  }
  // Not rows: a map reading a per-element output of the same kernel, statements walking different axes.
  Loaded chain = load_text(
      "diagram chain\naxis t = 64\naxis m = 64\nin X[t,m] : bf16\nin W[m] : bf16\nY[t,m] = rmsnorm(X, W; m, eps=1e-5)\n"
      "Z[t,m] = Y * 2\nout Y : bf16\nout Z : bf16\n", {});
  CHECK_FALSE(priced_by_schedule(chain, "schedule v for chain\nkernel K\n  fuse Y, Z\n  weave t\n  warps 4\n", h100).spec->rows);
  Loaded cross = load_text(
      "diagram cross\naxis t = 64\naxis m = 64\nin X[t,m] : bf16\nA[t] = sum(X; m)\nB[m] = sum(X; t)\nout A : fp32\nout B : fp32\n", {});
  CHECK_FALSE(priced_by_schedule(cross, "schedule v for cross\nkernel K\n  fuse A, B\n  warps 4\n", h100).spec->rows);
}

TEST_CASE("a reduction down the columns is a cols kernel: lanes across columns, threads splitting the rows", "[derive][rows]") {
  // rmsnorm's weight gradient: dW[m] = sum(dY * X * R; t), R[t] the saved rstd (a broadcast per row).
  const char* text =
      "diagram col_sum\naxis t = 2048\naxis m = 4096\nin dY[t,m] : bf16\nin X[t,m] : bf16\nin R[t] : fp32\n"
      "dW[m] = sum(dY * X * R; t)\nout dW : bf16\n";
  const Hardware h100 = load_hardware("h100");
  Loaded l = load_text(text, {});
  const KernelCost k = priced_by_schedule(l, "schedule v for col_sum\nkernel dW\n  fuse dW\n  weave m\n  warps 4\n", h100);
  REQUIRE(k.spec->strategy == Strategy::cols);
  const ColsForm& f = *k.spec->cols;
  CHECK(f.axes == AxisList{"t"});
  CHECK(f.arrays == std::vector<std::string>{"X", "dY"});
  CHECK(f.row_arrays == std::vector<std::string>{"R"});
  // The vector path: 8 columns of bf16 per lane (16 bytes); 4096 / (4 x 8) = 128 blocks would leave
  // SMs idle, so 2 lanes (one 32-byte sector per warp row); 8 rows in flight (64 registers of loads).
  CHECK(f.vec == 8);
  CHECK(f.col_lanes == 2);
  CHECK(f.blocks == 4096 / 16);
  CHECK(f.row_lanes() == 64);
  CHECK(f.unroll == 8);
  CHECK(f.rounds() == 2048 / (64 * 8));
  CHECK(f.registers == 32 + 2 * 8 + 8 * (4 + 4));
  CHECK(f.smem_bytes == 128 * 8 * 4);
  // Columns that are no multiple of 8: one column per lane, 16 lanes of bf16 a 32-byte sector.
  Loaded odd = load_text(text, {{"m", 4092}});
  const KernelCost ko = priced_by_schedule(odd, "schedule v for col_sum\nkernel dW\n  fuse dW\n  weave m\n  warps 4\n", h100);
  const ColsForm& fo = *ko.spec->cols;
  CHECK(fo.vec == 1);
  CHECK(fo.col_lanes == 16);
  CHECK(fo.row_lanes() == 8);
  CHECK(fo.unroll == 16);
  CHECK(fo.rounds() == 2048 / (8 * 16));
  // 4 rounds a thread against 16, each bound by the bytes in flight: HBM-bound both ways here.
  CHECK(k.t_latency <= ko.t_latency * (1 + 1e-9));
  // fp32 partials of a split reduction over 4 rows: 4 columns (16 bytes) per lane.
  Loaded partials = load_text("diagram p\naxis s = 2048\naxis g = 8\naxis r = 4\naxis d = 128\nin P[s,g,r,d] : fp32\n"
                              "Y[s,g,d] = sum(P; r)\nout Y : bf16\n", {});
  const KernelCost kp = priced_by_schedule(partials, "schedule v for p\nkernel Y\n  fuse Y\n  weave s\n  weave g\n  group d by 32\n  warps 4\n", h100);
  REQUIRE(kp.spec->cols);
  CHECK(kp.spec->cols->vec == 4);
  CHECK(kp.spec->cols->unroll == 4);
  // One round of loads a thread either way, but a quarter of the blocks: a quarter of the waves,
  // each waiting a loaded HBM latency (session 23 measured 25-26 us one column per lane).
  Loaded partials_odd = load_text("diagram p\naxis s = 2048\naxis g = 8\naxis r = 4\naxis d = 126\nin P[s,g,r,d] : fp32\n"
                                  "Y[s,g,d] = sum(P; r)\nout Y : bf16\n", {});
  const KernelCost kpo = priced_by_schedule(partials_odd, "schedule v for p\nkernel Y\n  fuse Y\n  weave s\n  weave g\n  group d by 32\n  warps 4\n", h100);
  REQUIRE(kpo.spec->cols);
  CHECK(kpo.spec->cols->vec == 1);
  CHECK(kp.t_latency < 0.5 * kpo.t_latency);
  CHECK(k.hbm_bytes == Approx(2.0 * 2048 * 4096 * 2 + 2048 * 4 + 4096 * 2));
  CHECK(k.t_total < 50e-6);
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  REQUIRE(dv.chosen.kernels.size() == 1);
  CHECK(dv.chosen.kernels[0].cost.spec->strategy == Strategy::cols);
  // Over two axes (transformer_block's norm weights, summed over batch and tokens): one flattened
  // row index of b x s rows; R, without m, a broadcast per row.
  Loaded two = load_text("diagram c2\naxis b = 2\naxis s = 1024\naxis m = 4096\nin dH[b,s,m] : bf16\nin X[b,s,m] : bf16\nin R[b,s] : fp32\n"
                         "dW[m] = sum(dH * X * R; b, s)\nout dW : bf16\n", {});
  const KernelCost k2 = priced_by_schedule(two, "schedule v for c2\nkernel dW\n  fuse dW\n  weave m\n  warps 4\n", h100);
  REQUIRE(k2.spec->cols);
  CHECK(k2.spec->cols->axes == AxisList{"b", "s"});
  CHECK(k2.spec->cols->extent == 2048);
  CHECK(k2.spec->cols->row_arrays == std::vector<std::string>{"R"});
  CHECK(k2.t_total == Approx(k.t_total).epsilon(0.02));  // the same rows as dW over t = 2048
  // An array along t that keeps t innermost would be strided across the lanes: not the cols form.
  Loaded strided = load_text("diagram s\naxis t = 64\naxis m = 64\nin X[m,t] : bf16\nY[m] = sum(X; t)\nout Y : fp32\n", {});
  const KernelCost ks = priced_by_schedule(strided, "schedule v for s\nkernel Y\n  fuse Y\n  warps 4\n", h100);
  CHECK(ks.spec->strategy == Strategy::rows);
}

TEST_CASE("a copy into another innermost axis is a transpose kernel: tiles through SMEM, priced by its bytes and rounds", "[derive][transpose]") {
  // derive-operand-relayout's K-major copy of fp8 attention's V (Llama-3-8B, one layer): per
  // element (SIMT) it measured 256 us on an H200 (session 28, napkin compare --measure).
  const char* text =
      "diagram t\naxis b = 1\naxis h = 32\naxis x = 8192\naxis d = 128\nin V[b,h,x,d] : fp8e4m3\n"
      "V_k[b,h,d,x] : fp8e4m3 = V\nout V_k : fp8e4m3\n";
  const Hardware h200 = load_hardware("h200");
  Loaded l = load_text(text, {});
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, h200);
  REQUIRE(dv.chosen.kernels.size() == 1);
  const KernelCost& k = dv.chosen.kernels[0].cost;
  REQUIRE(k.spec->strategy == Strategy::transpose);
  const TransposeForm& f = *k.spec->transpose;
  CHECK(f.source == "V");
  CHECK(f.in_inner == "d");
  CHECK(f.out_inner == "x");
  CHECK(f.batch == AxisList{"b", "h"});
  CHECK(f.blocks == (128 / 64) * (8192 / 64) * 32);
  CHECK(k.hbm_bytes == Approx(2.0 * 32 * 8192 * 128));  // read once, written once, 1 byte each
  // 1-byte elements: 16 of them in flight a thread do not cover HBM's latency (Little's law)
  CHECK(k.t_latency > k.t_hbm);
  CHECK(k.t_total < 100e-6);
  // not a transpose: a copy in order, an expression, fewer axes
  for (const char* other : {"diagram t\naxis x = 64\naxis d = 64\nin V[x,d] : bf16\nV_k[x,d] = V\nout V_k : bf16\n",
                            "diagram t\naxis x = 64\naxis d = 64\nin V[x,d] : bf16\nV_k[d,x] = V * 2\nout V_k : bf16\n"}) {
    Loaded o = load_text(other, {});
    Derivation od = derive(*o.program, *o.diagram, o.sizes, h200);
    CHECK(od.chosen.kernels.at(0).cost.spec->strategy != Strategy::transpose);
  }
}

TEST_CASE("the SIMT price counts the rounds of loads each thread waits for", "[derive][simt]") {
  // One thread per column walking 2048 rows (session 17's training profile: 800 us measured on
  // an H100 where the throughput terms alone said 37.5 us).
  Loaded l = load_text("diagram s\naxis t = 2048\naxis m = 4096\nin dY[t,m] : bf16\nin X[t,m] : bf16\nY[m] = sum(dY * X; t)\nout Y : fp32\n", {});
  const Hardware h100 = load_hardware("h100");
  const SimtCost c = price_simt(*l.diagram, {"Y"}, l.sizes, h100, {});
  CHECK(c.t_latency == Approx(2048 * h100.hbm_latency_s));  // dY and X of a row in flight together: one round per row
  CHECK(c.t_total >= c.t_latency);
  // A loop along the arrays' innermost axis pays a round per 32-byte sector (16 bf16 elements).
  Loaded rowwise = load_text("diagram r\naxis t = 2048\naxis m = 4096\nin X[t,m] : bf16\nY[t] = sum(X; m)\nout Y : fp32\n", {});
  CHECK(price_simt(*rowwise.diagram, {"Y"}, rowwise.sizes, h100, {}).t_latency == Approx(4096 / 16.0 * h100.hbm_latency_s));
}

TEST_CASE("a SIMT reduction under a band mask walks only the band, and is priced so", "[derive][simt]") {
  // napkin grad's rename of a call argument's axis: A[x,d] = contract(K, band(s, x; lo=0, hi=0); s)
  // is K itself, one step per element (session 24 priced its loop over all of s at 5.3 ms).
  const char* text =
      "diagram r\naxis s = 8192\naxis x = 8192\naxis d = 128\nin K[s,d] : bf16\n"
      "A[x,d] = contract(K, band(s, x; lo=0, hi=0); s)\nC[x,d] = sum(K * causal(x, s); s)\nM[x,d] = max(K * causal(x, s); s)\n"
      "out A : bf16\nout C : fp32\nout M : fp32\n";
  Loaded l = load_text(text, {});
  const Expr& a = *l.diagram->find_statement("A")->expr;
  const auto band = loop_band(a, "s");
  REQUIRE(band);
  CHECK(band->outer == "x");
  CHECK(band->lo == 0);
  CHECK(band->hi == 0);
  CHECK(loop_band_steps(*band, 8192, 8192) == Approx(1.0));
  // causal(x, s) keeps s <= x: a prefix, (N + 1) / 2 steps on average; a max keeps its loop.
  const auto prefix = loop_band(*l.diagram->find_statement("C")->expr, "s");
  REQUIRE(prefix);
  CHECK_FALSE(prefix->lo);
  CHECK(prefix->hi == 0);
  CHECK(loop_band_steps(*prefix, 8192, 8192) == Approx(8193.0 / 2));
  CHECK_FALSE(loop_band(*l.diagram->find_statement("M")->expr, "s"));
  // A window clipped at the edges, counted exactly: index(axis) - index(outer) in [-3, 5] over 10 x 10.
  LoopBand w{"a", "b", -3, 5};
  double pairs = 0;
  for (int o = 0; o < 10; ++o)
    for (int i = 0; i < 10; ++i) pairs += (i - o >= -3 && i - o <= 5);
  CHECK(loop_band_steps(w, 10, 10) == Approx(pairs / 10));
  CHECK(loop_band_steps(w, 7, 12) == Approx([&] {
          double n = 0;
          for (int o = 0; o < 12; ++o)
            for (int i = 0; i < 7; ++i) n += (i - o >= -3 && i - o <= 5);
          return n / 12;
        }()));
  // The model prices the steps walked: the rename moves K once, one round of loads per element.
  const Hardware h100 = load_hardware("h100");
  const SimtCost rename = price_simt(*l.diagram, {"A"}, l.sizes, h100, {});
  CHECK(rename.t_total < 100e-6);
  CHECK(rename.l2_bytes <= 8192.0 * 128 * 32);
  CHECK(price_simt(*l.diagram, {"C"}, l.sizes, h100, {}).flops_fp32 == Approx(8192.0 * 128 * 8193 / 2 * 3));
}

TEST_CASE("the wgmma GEMM stores through SMEM by TMA only where its ring keeps its stages", "[derive][lower]") {
  Loaded l = load("matmul.napkin");
  l.sizes["a"] = 8192;
  l.sizes["b"] = 256;
  l.sizes["c"] = 4096;
  const Hardware h100 = load_hardware("h100");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  const KernelCost& k = dv.chosen.kernels.at(0).cost;
  REQUIRE(k.spec->wgmma);
  // One bf16 output with N innermost: the staging buffers (2 x T_M x 128 bytes) are in the spec's SMEM,
  // and the epilogue is no longer charged after the main loop.
  CHECK(k.spec->tma_store);
  CHECK(k.spec->wgmma_smem_bytes == gemm_wgmma_stage_bytes(*k.spec->gemm) * k.spec->wgmma_stages + gemm_tma_store_bytes(*k.spec->gemm, k.spec->tma_store_buffers));
  CHECK(k.t_epilogue == 0);
  // The staging buffers: two, and more (up to one per 64 columns) only while they cost the ring no stage.
  for (std::int64_t n : {4096, 256}) {  // T_N 256 and the thin N = 256 shape
    l.sizes["b"] = n == 256 ? 4096 : 256;
    l.sizes["c"] = n;
    const Derivation thin = derive(*l.program, *l.diagram, l.sizes, h100);
    const KernelSpec& s = *thin.chosen.kernels.at(0).cost.spec;
    REQUIRE(s.tma_store);
    INFO("T_M " << s.gemm->TM << ", T_N " << s.gemm->TN << ", " << s.wgmma_stages << " stages, " << s.tma_store_buffers << " buffers");
    std::string why;
    auto stages_with = [&](int b) { return gemm_wgmma_stages(*s.gemm, *l.diagram, h100, s.cluster, s.cluster_axis, why, gemm_tma_store_bytes(*s.gemm, b)); };
    CHECK(s.tma_store_buffers >= 2);
    const std::int64_t most = std::max<std::int64_t>(2, s.gemm->TN / 64);  // a T_N of 64 keeps two: consecutive tiles' stores
    CHECK(s.tma_store_buffers <= most);
    CHECK(stages_with(2) == s.wgmma_stages);
    CHECK(stages_with(s.tma_store_buffers) == s.wgmma_stages);
    if (s.tma_store_buffers < most) CHECK(stages_with(s.tma_store_buffers + 1) < s.wgmma_stages);
  }
  // Two 16-bit outputs take the ring in turn (session 23); an fp32 one keeps the direct stores,
  // and the reason is given.
  for (const std::string d_type : {"bf16", "fp32"}) {
    INFO(d_type);
    Loaded two = load_text("diagram two\naxis a = 1024\naxis b = 256\naxis c = 1024\nin A[a,b] : bf16\nin B[b,c] : bf16\n"
                           "C[a,c] = contract(A, B; b)\nD[a,c] = C * 2\nout C : bf16\nout D : " + d_type + "\n");
    const Derivation d2 = derive(*two.program, *two.diagram, two.sizes, h100);
    int two_outputs = 0;
    for (const auto& kc : d2.chosen.kernels)
      if (kc.cost.spec->wgmma && kc.cost.outputs.size() == 2) {
        ++two_outputs;
        CHECK(kc.cost.spec->tma_store == (d_type == "bf16"));
        if (d_type == "fp32") CHECK(kc.cost.spec->why_no_tma_store.find("D is not 16-bit") != std::string::npos);
      }
    CHECK(two_outputs == 1);  // C and D fused into one wgmma GEMM kernel
  }
}

TEST_CASE("a cluster shares the operand tiles that do not vary along its axis", "[derive]") {
  Loaded l = load("matmul.napkin");  // C[a,c] = contract(A[a,b], B[b,c]; b)
  Hardware h100 = load_hardware("h100");
  REQUIRE(h100.clusters);
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
  // The derived schedule without a cluster line, then with a cluster along each tiled axis.
  auto variant = [&](const std::string& axis) {
    Schedule s = dv.chosen.schedule;
    auto& dirs = s.kernels[0].directives;
    dirs.erase(std::remove_if(dirs.begin(), dirs.end(), [](const Directive& d) { return d.kind == Directive::Kind::cluster; }), dirs.end());
    if (!axis.empty()) {
      Directive c;
      c.kind = Directive::Kind::cluster;
      c.names = {axis};
      c.size = 2;
      dirs.push_back(c);
    }
    return cost_schedule(*l.program, *l.diagram, s, l.sizes, h100).kernels[0];
  };
  const KernelCost none = variant(""), along_a = variant("a"), along_c = variant("c");
  REQUIRE(none.warpgroup_mma);
  CHECK(none.cluster == 1);
  CHECK(none.clusterable);
  double a_bytes = 0, b_bytes = 0;
  for (const auto& t : none.transfers)
    if (t.to == MemLevel::smem) (t.array == "A" ? a_bytes : b_bytes) = t.bytes;
  REQUIRE(a_bytes > 0);
  REQUIRE(b_bytes > 0);
  // Along a, the B tiles (no a) are shared; along c, the A tiles. HBM bytes do not move.
  CHECK(along_a.cluster == 2);
  CHECK(along_a.cluster_shared == std::vector<std::string>{"B"});
  CHECK(along_a.l2_to_smem_bytes == Approx(none.l2_to_smem_bytes - b_bytes / 2));
  CHECK(along_c.cluster_shared == std::vector<std::string>{"A"});
  CHECK(along_c.l2_to_smem_bytes == Approx(none.l2_to_smem_bytes - a_bytes / 2));
  CHECK(along_a.hbm_bytes == Approx(none.hbm_bytes));
  // The search keeps a cluster only where it is priced faster than the same tiles without one (by
  // over the 0.1% of a near tie: derive/search.cpp), and the derivation log then says so.
  const KernelCost& chosen = dv.chosen.kernels[0].cost;
  const bool clustered = dv.chosen.kernels[0].plan.cluster().has_value();
  if (clustered) CHECK(chosen.t_total < none.t_total * (1 - 1e-3));
  else CHECK(std::min(along_a.t_total, along_c.t_total) >= none.t_total * (1 - 1e-3));
  CHECK(std::any_of(dv.steps.begin(), dv.steps.end(), [](const Step& s) { return s.pass == "derive-cluster"; }) == clustered);
}

TEST_CASE("on a priced tie the search keeps the plan without a cluster, and a cluster where it is priced faster", "[derive]") {
  // Measured on the H200 (sessions 46, 47): clusters of 2 priced as ties ran no faster on GEMMs and
  // slower on the block's output projection (624.9 against 502.1 us); the model prices a cluster
  // faster for a one-wave matmul at 1000^3 (its operand tiles from L2 once per cluster).
  const Hardware h200 = load_hardware("h200");
  LoadedDiagram big = load_library(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/matmul.napkin");
  for (auto& [axis, size] : big.sizes) size = 8192;
  const Derivation tied = derive(*big.program, *big.diagram, big.sizes, h200);
  CHECK_FALSE(tied.chosen.kernels[0].plan.cluster());
  Schedule with = tied.chosen.schedule;  // the same tiles in clusters along M
  Directive c;
  c.kind = Directive::Kind::cluster, c.names = {tied.chosen.kernels[0].cost.spec->gemm->M}, c.size = 2;
  with.kernels[0].directives.push_back(c);
  const double t_with = cost_schedule(*big.program, *big.diagram, with, big.sizes, h200).kernels[0].t_total;
  CHECK(t_with >= tied.chosen.kernels[0].cost.t_total * (1 - 1e-3));  // no faster beyond a tie
  for (auto& [axis, size] : big.sizes) size = 1000;
  const Derivation faster = derive(*big.program, *big.diagram, big.sizes, h200);
  CHECK(faster.chosen.kernels[0].plan.cluster());
}

TEST_CASE("hardware without clusters gets no cluster line, and rejects one", "[derive][schedule]") {
  Loaded l = load("matmul.napkin");
  Hardware a100 = load_hardware("a100");
  REQUIRE_FALSE(a100.clusters);
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, a100);
  CHECK_FALSE(dv.chosen.kernels[0].plan.cluster());
  const Derivation h = derive(*l.program, *l.diagram, l.sizes, load_hardware("h100"));
  SourceManager sm;
  DiagnosticEngine diags;
  Schedule clustered = h.chosen.schedule;  // the H100's schedule in clusters of 2 along M
  Directive c;
  c.kind = Directive::Kind::cluster, c.names = {h.chosen.kernels[0].cost.spec->gemm->M}, c.size = 2;
  std::erase_if(clustered.kernels[0].directives, [](const Directive& d) { return d.kind == Directive::Kind::cluster; });
  clustered.kernels[0].directives.push_back(c);
  auto s = parse_schedule(*sm.add("h100.schedule", print_schedule(clustered)), diags);
  REQUIRE(s);
  CHECK_FALSE(check_schedule(*l.program, *l.diagram, *s, l.sizes, a100, {}, diags));
  CHECK(diags.render().find("no thread-block clusters") != std::string::npos);
}

TEST_CASE("the derived schedule prints, parses back and re-checks", "[derive][schedule]") {
  Loaded l = load("attention.napkin");
  Hardware hw = load_hardware("h100");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  std::string text = print_schedule(dv.chosen.schedule);
  SourceManager sm;
  DiagnosticEngine diags;
  auto s = parse_schedule(*sm.add("derived.schedule", text), diags);
  REQUIRE(s);
  CHECK(print_schedule(*s) == text);
  auto checked = check_schedule(*l.program, *l.diagram, *s, l.sizes, hw, {}, diags);
  INFO(diags.render());
  REQUIRE(checked);
  CHECK(checked->cost.t_total == Approx(dv.chosen.cost.t_total));
  // Deterministic: the same derivation twice.
  CHECK(print_schedule(derive(*l.program, *l.diagram, l.sizes, hw).chosen.schedule) == text);
}

TEST_CASE("causal attention skips fully masked tiles in its cost", "[derive]") {
  Loaded plain = load("attention.napkin"), causal = load("causal_attention.napkin");
  Hardware hw = load_hardware("h100");
  Derivation a = derive(*plain.program, *plain.diagram, plain.sizes, hw), c = derive(*causal.program, *causal.diagram, causal.sizes, hw);
  REQUIRE(c.chosen.kernels.size() == 1);
  const KernelCost& k = c.chosen.kernels[0].cost;
  // q tiles of g rows and x chunks of s: about half the pairs, plus the diagonal band.
  CHECK(k.causal_active_fraction > 0.5);
  CHECK(k.causal_active_fraction < 0.6);
  CHECK(k.flops_tensor == Approx(a.chosen.kernels[0].cost.flops_tensor * k.causal_active_fraction).epsilon(0.3));
  CHECK(c.chosen.cost.t_total < 0.65 * a.chosen.cost.t_total);
}

TEST_CASE("the SwiGLU MLP fuses gate, up and product, and says why", "[derive]") {
  Loaded l = load("mlp_swiglu.napkin");
  Hardware hw = load_hardware("h100");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  bool gu_together = false;
  for (const auto& k : dv.chosen.kernels) gu_together |= has(k.plan.fused(), "G") && has(k.plan.fused(), "U") && has(k.plan.fused(), "H");
  CHECK(gu_together);
  CHECK(dv.chosen.kernels.size() < dv.unfused.kernels.size());
  CHECK(dv.chosen.cost.hbm_bytes < dv.unfused.cost.hbm_bytes);
  bool explained = false;
  for (const auto& s : dv.steps) explained |= s.pass == "derive-fusion" && s.detail.find("never leave") != std::string::npos;
  CHECK(explained);
}

TEST_CASE("the transformer block derives each call on its own and fuses around them", "[derive]") {
  Loaded l = load("transformer_block.napkin");
  Hardware hw = load_hardware("h100");
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  CHECK(dv.callees.size() == 4);  // two rmsnorm_layer, gqa_attention, mlp_swiglu
  for (const auto& [stmt, sub] : dv.callees) CHECK(sub->chosen.cost.t_total > 0);
  double sum = 0;
  for (const auto& k : dv.chosen.kernels) sum += k.cost.t_total;
  CHECK(dv.chosen.cost.t_total == Approx(sum));
  CHECK(dv.chosen.cost.t_total <= dv.unfused.cost.t_total);
}

TEST_CASE("every bundled diagram derives on every bundled GPU", "[derive]") {
  for (const auto& file : library_files()) {
    Loaded l = load(std::filesystem::path(file).filename().string());
    for (const char* gpu : {"a100", "h100", "h200", "b200", "rtx4090"}) {
      INFO(file << " on " << gpu);
      Hardware hw = load_hardware(gpu);
      Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
      CHECK(dv.chosen.cost.fits());
      CHECK(dv.chosen.cost.t_total > 0);
      CHECK(dv.chosen.cost.t_total <= dv.unfused.cost.t_total * (1 + 1e-9));
      CHECK(dv.chosen.cost.hbm_bytes >= dv.bound.hbm_bytes * (1 - 1e-9));  // never below compulsory traffic
    }
  }
}

TEST_CASE("a gemm kernel's registers are its accumulators, and its epilogue's inputs are priced as the epilogue reads them", "[derive][gemm]") {
  // SwiGLU's forward as `napkin grad` writes it (every intermediate saved): G and H are maps of the
  // dual GEMM's accumulators, computed as the epilogue stores, so one kernel holds two 128 x 128
  // accumulators (160 registers a thread on the H200), not four output tiles.
  const std::string fwd =
      "diagram mlp_fwd\naxis t = 2048\naxis m = 4096\naxis f = 14336\nin X[t,m] : bf16\nin W1[m,f] : bf16\nin W3[m,f] : bf16\nin W2[f,m] : bf16\n"
      "G_v[t,f] = contract(X, W1; m)\nG[t,f] = silu(G_v)\nU[t,f] = contract(X, W3; m)\nH[t,f] = G * U\nY[t,m] = contract(H, W2; f)\n"
      "out Y : bf16\nout G_v : bf16\nout G : bf16\nout U : bf16\nout H : bf16\n";
  Hardware hw = load_hardware("h200");
  LoadedDiagram l = load_text(fwd, {});
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  REQUIRE(dv.chosen.kernels.size() == 2);
  const KernelChoice& dual = dv.chosen.kernels[0];
  CHECK(dual.plan.fused() == std::vector<std::string>{"G_v", "G", "U", "H"});
  REQUIRE(dual.cost.spec->gemm);
  CHECK(dual.cost.registers_per_thread == 32 + static_cast<int>(dual.cost.spec->gemm->gemms.size() * dual.cost.spec->gemm->TM *
                                                                dual.cost.spec->gemm->TN * 4 / 4 / (dual.cost.warps * 32)));
  // dH = dY W2 with dG = dH * U and dG_v in its epilogue reads U and G_v from global memory there:
  // half of each sector used (bf16 in the m16n8 layout) and an HBM latency per group of rows.
  const std::string bwd =
      "diagram mlp_bwd\naxis t = 2048\naxis m = 4096\naxis f = 14336\nin dY[t,m] : bf16\nin W2[f,m] : bf16\nin U[t,f] : bf16\nin G_v[t,f] : bf16\n"
      "dH[t,f] = contract(dY, W2; m)\ndG[t,f] = dH * U\ndG_v[t,f] = dG * sigmoid(G_v)\nout dH : bf16\nout dG_v : bf16\n";
  LoadedDiagram lb = load_text(bwd, {});
  const std::string schedule = "schedule s for mlp_bwd\nkernel k\n  fuse dH, dG, dG_v\n  group t by 256\n  group f by 128\n  stream m by 64\n  warps 8\n";
  const KernelCost c = priced_by_schedule(lb, schedule, hw);
  REQUIRE(c.spec->gemm);
  REQUIRE_FALSE(c.spec->tma_store);
  const double bw = hw.hbm.bandwidth_bytes_per_s, elems = 2048.0 * 14336;
  const double sectors = (2 * elems * 2) * 2 + 2 * elems * 2;  // U, G_v at half a sector; dH, dG_v stored directly
  const double rounds = (256.0 / 2 / 64) * (128.0 / 32) * 2 * static_cast<double>(c.blocks) / hw.sm_count;
  CHECK(c.t_epilogue == Approx(sectors / bw / std::min(1.0, static_cast<double>(c.blocks) / hw.sm_count) + rounds * hw.hbm_latency_s).epsilon(1e-9));
}

TEST_CASE("a wgmma gemm's epilogue maps run between its tiles' MMAs, and its epilogue inputs wait a round per staged column block", "[derive][gemm]") {
  // Y = gelu(X W + bias) at 4096 x 1024 x 4096 on the H200 (session 32: 51.5 us plain, 57.2 with
  // the bias, 93.0 with bias and GELU, the same schedule).
  const Hardware hw = load_hardware("h200");
  Loaded l = load("matmul_bias_gelu.napkin");
  const std::string schedule =
      "schedule s for matmul_bias_gelu\nkernel Y\n  fuse Y\n  group t by 128\n  group f by 256\n  stream m by 64\n  warps 8\n  cluster t by 2\n";
  const KernelCost c = priced_by_schedule(l, schedule, hw);
  REQUIRE(c.spec->gemm);
  REQUIRE(c.spec->wgmma);
  REQUIRE(c.spec->tma_store);
  const double elements = 4096.0 * 4096;
  const MapWork gelu = *map_work(Op::gelu);
  CHECK(c.flops_fp32 == Approx(elements * (1 + gelu.fp32_flops)).epsilon(1e-9));  // the bias add and gelu's erfc polynomial
  CHECK(c.sfu_ops == Approx(elements * gelu.sfu_ops).epsilon(1e-9));
  CHECK(c.t_epilogue_maps > 0);
  CHECK(c.t_epilogue_maps == Approx(c.t_fp32 + c.t_sfu).epsilon(1e-9));
  // bias: 4 column blocks of 64 per 128 x 256 tile, each a round of HBM latency, 512 tiles over 132 SMs
  const double bias_sectors = 4096.0 * 2 * 2;  // bf16 read 8 to a 32-byte sector: half of each
  const double rounds = 512.0 / hw.sm_count * (256.0 / 64);
  CHECK(c.t_epilogue == Approx(bias_sectors / hw.hbm.bandwidth_bytes_per_s + rounds * hw.hbm_latency_s).epsilon(1e-9));
  CHECK(c.t_total >= c.t_tensor + c.t_epilogue_maps + c.t_epilogue);
  // Without the maps (a plain GEMM) nothing runs between the tiles' MMAs.
  Loaded m = load("matmul.napkin");
  m.sizes["a"] = m.sizes["c"] = 4096;
  m.sizes["b"] = 1024;
  const KernelCost p = priced_by_schedule(m, "schedule s for matmul\nkernel C\n  fuse C\n  group a by 128\n  group c by 256\n  stream b by 64\n  warps 8\n  cluster a by 2\n", hw);
  CHECK(p.t_epilogue_maps == 0);
  CHECK(p.t_epilogue == 0);
  CHECK(c.t_total > p.t_total + c.t_epilogue_maps);
}

TEST_CASE("a wgmma gemm's TMA ring turns over once per load round trip, a cluster's lockstep lengthens it, and a thin gemm is derived without one", "[derive][gemm]") {
  // matmul 8192 x 4096 x 256 (K = 4096, N = 256) on the H200 (session 33: 128x128 tiles on one
  // consumer 29.9 us without a cluster, 37.1 us in clusters of 2; every stage reads its A tile,
  // read by no other block, from HBM).
  const Hardware hw = load_hardware("h200");
  REQUIRE(hw.l2_loaded_latency_s > 0);
  REQUIRE(hw.cluster_stage_latency_s > 0);
  Loaded l = load("matmul.napkin");
  l.sizes["a"] = 8192;
  l.sizes["b"] = 4096;
  l.sizes["c"] = 256;
  const std::string tiles = "schedule s for matmul\nkernel C\n  fuse C\n  group a by 128\n  group c by 128\n  stream b by 64\n  warps 4\n";
  const KernelCost lone = priced_by_schedule(l, tiles, hw);
  const KernelCost pair = priced_by_schedule(l, tiles + "  cluster a by 2\n", hw);
  // A's tiles are read by the 2 blocks along c, B's by the 64 along a: a stage holds a first read
  // (from HBM) with probability 1 - (1 - 1/2)(1 - 1/64), else every tile hits in L2.
  const double first = 1 - (1 - 1.0 / 2) * (1 - 1.0 / 64);
  const double load = first * hw.loaded_latency_s() + (1 - first) * hw.l2_loaded_latency_s;
  for (const KernelCost* c : {&lone, &pair}) {
    REQUIRE(c->spec->wgmma);
    const double stages = c->spec->wgmma_stages, walked = 4096.0 / 64;  // one tile a block: 128 blocks, 132 SMs
    // every stage walked belongs to a block's first tile (one wave), so each lands in its turnover
    // at one SM's share of the L2 rate, as does the first fill, which waits for no release
    const double stage = (128.0 * 64 + 64.0 * 128) * 2;
    const double land = stage / (hw.l2_bulk_bandwidth_bytes_per_s / hw.sm_count);
    CHECK(c->ring_landing_s == Approx(land).epsilon(1e-9));
    CHECK(c->t_ring == Approx((walked * (c->ring_latency_s + land) + c->t_tensor) / stages).epsilon(1e-9));
    CHECK(c->t_fill == Approx(load + land).epsilon(1e-9));
  }
  CHECK(lone.ring_latency_s == Approx(load).epsilon(1e-9));
  CHECK(pair.ring_latency_s == Approx(load + hw.cluster_stage_latency_s).epsilon(1e-9));
  CHECK(pair.t_ring > lone.t_ring);
  // TMA's fills are SMEM traffic: every landed byte, the multicast ones into each block.
  CHECK(lone.smem_fill_bytes == Approx(lone.l2_to_smem_bytes));
  CHECK(pair.smem_fill_bytes == Approx(pair.l2_to_smem_bytes + pair.cluster_saved_bytes));
  CHECK(pair.smem_fill_bytes == Approx(lone.smem_fill_bytes));
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  CHECK(dv.chosen.kernels.at(0).cost.cluster == 1);
  CHECK(dv.chosen.cost.t_total < pair.t_total);
}

TEST_CASE("a wgmma gemm's L2 time counts whole 128-byte lines: a tile row that starts off a line fetches one more", "[derive][gemm]") {
  // matmul a = 1000 in 128x64 tiles (session 40, H200: c = 1024 and b = 1024 10.0 us, B's rows of
  // c = 1000 elements off the line 11.5 us, A's too at b = 1000 14.6 us).
  const Hardware hw = load_hardware("h200");
  REQUIRE(hw.l2_bulk_bandwidth_bytes_per_s > 0);
  auto priced = [&](std::int64_t b, std::int64_t c, std::int64_t tn) {
    Loaded l = load("matmul.napkin");
    l.sizes["a"] = 1000;
    l.sizes["b"] = b;
    l.sizes["c"] = c;
    return priced_by_schedule(l, "schedule s for matmul\nkernel C\n  fuse C\n  group a by 128\n  group c by " + std::to_string(tn) +
                                     "\n  stream b by 64\n  warps 8\n", hw);
  };
  auto landed = [](const KernelCost& k, const std::string& array) {
    double bytes = 0;
    for (const auto& t : k.transfers)
      if (t.array == array && t.to == MemLevel::smem) bytes += t.bytes;
    return bytes;
  };
  const KernelCost on = priced(1024, 1024, 64), b_off = priced(1024, 1000, 64), both_off = priced(1000, 1000, 64), wide = priced(1024, 1000, 256);
  for (const KernelCost* k : {&on, &b_off, &both_off, &wide}) REQUIRE((k->spec->gemm && k->spec->wgmma));
  CHECK(on.l2_offline_bytes == 0);
  // rows of 2000 bytes: one in 8 starts on a line (gcd(2000, 128) = 16); a 64-column bf16 row (128 bytes) off it spans 2 lines
  const double off = 1 - 16.0 / 128;
  CHECK(b_off.l2_offline_bytes == Approx(landed(b_off, "B") * off).epsilon(1e-9));
  CHECK(both_off.l2_offline_bytes == Approx((landed(both_off, "A") + landed(both_off, "B")) * off).epsilon(1e-9));
  // a 256-column row (512 bytes) spans 5 lines where 4 would do
  CHECK(wide.l2_offline_bytes == Approx(landed(wide, "B") * off * 128 / 512).epsilon(1e-9));
  // landed at the device's bulk rate, or at the per-SM rate times the SMs with a tile where that is less
  REQUIRE(hw.l2_bulk_sm_bandwidth_bytes_per_s > 0);
  const double active = std::min<double>(hw.sm_count, static_cast<double>(b_off.blocks));
  const double rate = std::min(hw.l2_bulk_bandwidth_bytes_per_s, active * hw.l2_bulk_sm_bandwidth_bytes_per_s);
  CHECK(b_off.t_l2 == Approx((b_off.l2_to_smem_bytes + b_off.l2_offline_bytes) / rate).epsilon(1e-9));
  CHECK(b_off.t_l2 > on.t_l2 * 1.2);
  CHECK(both_off.t_total > b_off.t_total);
}

TEST_CASE("a wgmma gemm's last tile on each SM stores its column blocks in series, after its main loop", "[derive][gemm]") {
  // session 40, H200, matmul 1000 x 64 x 1000 (one K step): 128x64 tiles 5.9 us, 128x256 9.2 us
  const Hardware hw = load_hardware("h200");
  REQUIRE(hw.gemm_last_store_block_s > 0);
  Loaded l = load("matmul.napkin");
  l.sizes["a"] = l.sizes["c"] = 1000;
  l.sizes["b"] = 64;
  auto priced = [&](int tn) {
    return priced_by_schedule(l, "schedule s for matmul\nkernel C\n  fuse C\n  group a by 128\n  group c by " + std::to_string(tn) + "\n  stream b by 64\n  warps 8\n", hw);
  };
  const KernelCost narrow = priced(64), wide = priced(256);
  REQUIRE((narrow.spec->tma_store && wide.spec->tma_store));
  CHECK(narrow.t_last_stores == Approx(1 * hw.gemm_last_store_block_s).epsilon(1e-9));
  CHECK(wide.t_last_stores == Approx(4 * hw.gemm_last_store_block_s).epsilon(1e-9));
  CHECK(wide.t_total > narrow.t_total + 2 * hw.gemm_last_store_block_s);
}

TEST_CASE("an operand whose rows TMA cannot read in place is repacked into rows of whole 128-byte lines, and the copy is priced", "[derive][gemm][repack]") {
  // session 41, H200: matmul 1000 x 1001 x 1000 (A's rows 2002 bytes apart) took the mma.sync path,
  // A copied element by element, 36.9 us; repacked for the wgmma path, 15.6 us (cuBLAS 30.8)
  const Hardware hw = load_hardware("h200");
  Loaded l = load("matmul.napkin");
  l.sizes["a"] = l.sizes["c"] = 1000;
  l.sizes["b"] = 1001;
  const std::string sched = "schedule s for matmul\nkernel C\n  fuse C\n  group a by 128\n  group c by 64\n  stream b by 64\n  warps 4\n";
  const KernelCost c = priced_by_schedule(l, sched, hw);
  const KernelSpec& s = *c.spec;
  REQUIRE(s.wgmma);
  REQUIRE(s.repacks.size() == 1);  // A [a, b]; B [b, c] has rows of 2000 bytes, a multiple of 16
  CHECK(s.repacks[0].array == "A");
  CHECK(s.repacks[0].pitch == 2048);  // 2002 bytes rounded up to 128-byte lines
  CHECK(s.repacks[0].why.find("2002 bytes") != std::string::npos);
  CHECK(s.repack("B") == nullptr);
  // the copy: A read (1000 x 2002 bytes) and written (1000 x 2048), one launch
  CHECK(c.t_repack == Approx((1000.0 * 2002 + 1000.0 * 2048) / hw.hbm.bandwidth_bytes_per_s + hw.launch_overhead_s).epsilon(1e-9));
  CHECK(c.t_total > c.t_repack);
  CHECK(describe_spec(s).find("A read from a copy with rows of 2048 bytes") != std::string::npos);
  // The mma.sync path (no TMA) reads A in place: no 4-byte cp.async divides 2002, element by element.
  REQUIRE(s.mma_sync);
  for (const auto& t : s.gemm->tiles) CHECK(t.copy_bytes == (t.array == "A" ? 0 : 16));
  // rows 16-byte aligned: no copy
  l.sizes["b"] = 1008;
  CHECK(priced_by_schedule(l, sched, hw).spec->repacks.empty());
  CHECK(priced_by_schedule(l, sched, hw).t_repack == 0);
}

TEST_CASE("the mma.sync gemm copies by the widest cp.async its strides allow and prices element-by-element staging", "[derive][gemm]") {
  const Hardware hw = load_hardware("h200");
  Loaded l = load("matmul.napkin");
  l.sizes["a"] = l.sizes["c"] = 1000;
  const std::string sched = "schedule s for matmul\nkernel C\n  fuse C\n  group a by 128\n  group c by 64\n  stream b by 64\n  warps 4\n";
  for (const auto& [b, width] : {std::pair{1000, 16}, std::pair{1004, 8}, std::pair{1002, 4}, std::pair{1001, 0}}) {
    INFO("b = " << b);
    l.sizes["b"] = b;
    const KernelCost c = priced_by_schedule(l, sched, hw);
    REQUIRE(c.spec->mma_sync);
    for (const auto& t : c.spec->gemm->tiles)
      if (t.array == "A") CHECK(t.copy_bytes == width);
  }
  // Priced where the mma.sync path is the one priced (no wgmma: the A100).
  const Hardware a100 = load_hardware("a100");
  l.sizes["b"] = 1001;
  const KernelCost slow = priced_by_schedule(l, sched, a100);
  l.sizes["b"] = 1004;
  const KernelCost fast = priced_by_schedule(l, sched, a100);
  CHECK(fast.t_scalar_staging == 0);
  REQUIRE(slow.t_scalar_staging > 0);
  // A's 128 x 64 tile, 16 bytes a thread a round, 128 threads: 8 rounds a K chunk; 16 chunks; per wave of blocks
  const double latency = a100.l2_loaded_latency_s > 0 ? a100.l2_loaded_latency_s : a100.loaded_latency_s();
  const double waves = std::ceil(static_cast<double>(slow.blocks) / (a100.sm_count * std::max(1, slow.blocks_per_sm)));
  CHECK(slow.blocks == 128);
  CHECK(slow.t_scalar_staging == Approx(waves * 16 * 8 * latency).epsilon(1e-9));
  CHECK(slow.t_total > fast.t_total + slow.t_scalar_staging * 0.9);
  CHECK(slow.bound.find("element by element") != std::string::npos);
}

TEST_CASE("a wgmma gemm's tile turnover and staging run in series with its MMAs", "[derive][gemm]") {
  // batched_matmul 32 x 4096 x 128 x 4096 on the H200 (session 33: 128x256 tiles 338.3 us, 128x64
  // tiles of the same two consumers 723.7 us: four times the tiles, each turned over).
  const Hardware hw = load_hardware("h200");
  Loaded l = load("batched_matmul.napkin");
  const std::string head = "schedule s for batched_matmul\nkernel C\n  fuse C\n  group a by 128\n  group c by ";
  const KernelCost wide = priced_by_schedule(l, head + "256\n  stream b by 64\n  warps 8\n", hw);
  const KernelCost narrow = priced_by_schedule(l, head + "64\n  stream b by 64\n  warps 8\n", hw);
  for (const KernelCost* c : {&wide, &narrow}) {
    REQUIRE(c->spec->tma_store);
    const double blocks = static_cast<double>(c->spec->gemm->TN) / 64;  // one m64 subtile a consumer
    CHECK(c->t_tile_turnover == Approx(static_cast<double>(c->blocks) / hw.sm_count * (hw.gemm_tile_turnover_s + blocks * hw.staged_store_block_s)).epsilon(1e-9));
    CHECK(c->t_total >= c->t_tensor + c->t_tile_turnover);
  }
  CHECK(narrow.blocks == 4 * wide.blocks);
  CHECK(narrow.t_total > 1.5 * wide.t_total);
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  CHECK(dv.chosen.cost.t_total <= wide.t_total * 1.001);
}

TEST_CASE("a pingpong wgmma gemm's consumers take whole tiles in turn, priced as measured: the epilogue in series", "[derive][gemm][pingpong]") {
  // Y = gelu(X W + bias) at 4096 x 1024 x 4096 on the H200: the cooperative 128x256 tile against
  // 64x256 tiles each consumer warpgroup takes whole (warps 8 pingpong). Session 34: 94.4 us and
  // 95.3 us, the epilogue not overlapped with the other consumer's MMAs.
  const Hardware hw = load_hardware("h200");
  Loaded l = load("matmul_bias_gelu.napkin");
  const std::string head = "schedule s for matmul_bias_gelu\nkernel Y\n  fuse Y\n  group t by ";
  const KernelCost co = priced_by_schedule(l, head + "128\n  group f by 256\n  stream m by 64\n  warps 8\n", hw);
  const std::string pingpong = head + "64\n  group f by 256\n  stream m by 64\n  warps 8 pingpong\n";
  const KernelCost pp = priced_by_schedule(l, pingpong, hw);
  REQUIRE(pp.spec->wgmma);
  REQUIRE(pp.spec->gemm->pingpong);
  REQUIRE(pp.spec->tma_store);
  CHECK(pp.spec->gemm->tile_consumers() == 1);
  CHECK(pp.spec->gemm->tiles_in_flight() == 2);
  // each consumer stages its own tile for the TMA store
  CHECK(pp.spec->wgmma_smem_bytes == gemm_wgmma_stage_bytes(*pp.spec->gemm) * pp.spec->wgmma_stages + pp.spec->tma_store_buffers * 2 * 64 * 128);
  CHECK(pp.registers_per_thread >= 64 * 256 / 128);  // a whole 64x256 fp32 tile per consumer thread
  CHECK(pp.blocks == 2 * co.blocks);  // the tiles of 64 rows
  CHECK(pp.t_epilogue_maps > 0);
  CHECK(pp.t_epilogue_maps == Approx(pp.t_fp32 + pp.t_sfu).epsilon(1e-9));
  CHECK(pp.t_tile_turnover == Approx(static_cast<double>(pp.blocks) / hw.sm_count * (hw.gemm_tile_turnover_s + 4 * hw.staged_store_block_s)).epsilon(1e-9));
  CHECK(pp.t_tile_turnover > co.t_tile_turnover);
  CHECK(pp.t_total >= pp.t_tensor + pp.t_tile_turnover + pp.t_epilogue_maps);
  // so the search keeps the cooperative split
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  CHECK_FALSE(dv.chosen.kernels.at(0).cost.spec->gemm->pingpong);
  CHECK(dv.chosen.cost.t_total <= pp.t_total);
  // Without wgmma the mma.sync path runs one consumer's 4 warps on each tile, and says so.
  const KernelCost a100 = priced_by_schedule(l, pingpong, load_hardware("a100"));
  CHECK(!a100.spec->wgmma);
  CHECK(a100.spec->strategy == Strategy::gemm);
  CHECK(a100.warps == 4);
  CHECK(describe_spec(*a100.spec).find("pingpong not applied") != std::string::npos);
  // pingpong needs two consumer warpgroups
  SourceManager sm;
  DiagnosticEngine diags;
  auto bad = parse_schedule(*sm.add("bad.schedule", head + "64\n  group f by 256\n  stream m by 64\n  warps 4 pingpong\n"), diags);
  REQUIRE(bad);
  CHECK(!check_schedule(*l.program, *l.diagram, *bad, l.sizes, hw, {}, diags));
  CHECK(diags.render().find("'pingpong' needs 'warps 8'") != std::string::npos);
}

TEST_CASE("napkin bench --candidates: schedules near the derived one, legal, distinct, ranked by the model", "[derive][candidates]") {
  const Hardware h100 = load_hardware("h100");
  for (const char* file : {"matmul.napkin", "attention.napkin"}) {
    INFO(file);
    Loaded l = load(file);
    if (std::string(file) == "matmul.napkin") l.sizes["a"] = l.sizes["b"] = l.sizes["c"] = 4096;
    const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
    REQUIRE_FALSE(dv.rewritten);
    const std::vector<SearchResult> c = candidate_schedules(*l.program, *l.diagram, l.sizes, h100, dv.chosen.schedule, 12);
    // issue 14 asks for at least 10; of 12 asked, two rounds of moves may leave fewer legal where
    // lowering refuses neighbours (attention: 4 warps over 128 q rows, mma.sync alone, would spill)
    CHECK(c.size() >= 10);
    CHECK(c.size() <= 12);
    std::set<std::string> texts;
    bool derived_in = false;
    for (std::size_t i = 0; i < c.size(); ++i) {
      texts.insert(print_schedule(c[i].schedule));
      derived_in = derived_in || c[i].schedule == dv.chosen.schedule;
      if (i > 0) CHECK(c[i - 1].cost.t_total <= c[i].cost.t_total);
      // each checks again as a hand-written schedule, at the price the ranking used
      SourceManager sm;
      DiagnosticEngine diags;
      auto again = check_schedule(*l.program, *l.diagram, c[i].schedule, l.sizes, h100, {}, diags);
      REQUIRE(again);
      CHECK(again->cost.t_total == Approx(c[i].cost.t_total));
    }
    CHECK(texts.size() == c.size());
    CHECK(derived_in);
    CHECK(c.front().cost.t_total <= dv.chosen.cost.t_total * (1 + 1e-9));
    // pingpong on 8 warps is a neighbour where a gemm on wgmma takes it, and only there
    int pingpong = 0;
    for (const SearchResult& r : candidate_schedules(*l.program, *l.diagram, l.sizes, h100, dv.chosen.schedule, 1000))
      for (const KernelPlan& k : r.schedule.kernels) pingpong += k.pingpong() ? 1 : 0;
    CHECK((pingpong > 0) == (std::string(file) == "matmul.napkin"));
  }
  // A start that does not check is the caller's error, with the checker's reasons.
  Loaded l = load("matmul.napkin");
  Schedule bad = derive(*l.program, *l.diagram, l.sizes, h100).chosen.schedule;
  Directive cluster;  // clusters of 3 blocks along an axis the kernel does not group
  cluster.kind = Directive::Kind::cluster, cluster.names = {"no_such_axis"}, cluster.name_locs = {SourceLoc{}}, cluster.size = 3;
  bad.kernels.at(0).directives.push_back(cluster);
  CHECK_THROWS_AS(candidate_schedules(*l.program, *l.diagram, l.sizes, h100, bad, 10), UserError);
}

TEST_CASE("napkin bench --candidates of a diagram derive rewrote: schedules of the rewrite, each legal there", "[derive][candidates]") {
  // l2norm_attention: derive-bind-reduction binds Qn_sum and Kn_sum before the search; the
  // candidates are schedules of that rewrite (cli bench_candidates gives each its `rewritten`).
  const Hardware h200 = load_hardware("h200");
  Loaded l = load("l2norm_attention.napkin");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h200);
  REQUIRE(dv.rewritten);
  const std::vector<SearchResult> c = candidate_schedules(*l.program, *dv.rewritten, l.sizes, h200, dv.chosen.schedule, 4);
  REQUIRE(c.size() >= 2);
  for (const SearchResult& r : c) {
    DiagnosticEngine diags;
    CHECK(check_schedule(*l.program, *dv.rewritten, r.schedule, l.sizes, h200, {}, diags));
    bool names_statistic = false;
    for (const KernelPlan& k : r.schedule.kernels)
      for (const std::string& s : k.fused()) names_statistic = names_statistic || s == "Qn_sum";
    CHECK(names_statistic);
    CHECK_FALSE(l.diagram->find_statement("Qn_sum"));  // not a statement of the diagram as written
  }
}

TEST_CASE("derive-bind-reduction binds a normaliser written out to an fp32 statistic that fuses with its map into a rows kernel", "[derive][bind]") {
  const Hardware hw = load_hardware("h200");
  LoadedDiagram l = load_text(R"(diagram written
axis t = 4096
axis m = 4096
in  X[t,m] : bf16
in  W[m] : bf16
Y[t,m] = X * rsqrt(mean(X * X; m) + 1e-5) * W
Z[t,m] = exp(X - max(X; m)) / sum(exp(X - max(X; m)); m)
out Y : bf16
out Z : bf16
)");
  const Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw);
  REQUIRE(dv.rewritten);
  // one statistic per distinct reduction, fp32, over the rows; the softmax's sum bound in a second round
  for (const auto& [name, body] : {std::pair{"Y_mean", "mean(X * X; m)"}, {"Z_max", "max(X; m)"}, {"Z_sum", "sum(exp(X - Z_max); m)"}}) {
    INFO(name);
    const Statement* s = dv.rewritten->find_statement(name);
    REQUIRE(s);
    CHECK(s->axes == AxisList{"t"});
    CHECK(s->dtype == DType::fp32);
    CHECK(print_expr(*s->expr) == body);
  }
  CHECK(print_expr(*dv.rewritten->find_statement("Z")->expr) == "exp(X - Z_max) / Z_sum");
  CHECK_FALSE(dv.rewritten->find_statement("Z_max2"));  // max(X; m) written twice is bound once
  // every kernel is a rows kernel (none on SIMT), each statistic fused with a map that reads it
  for (const auto& k : dv.chosen.kernels) {
    REQUIRE(k.cost.spec);
    CHECK(k.cost.spec->strategy == Strategy::rows);
  }
  // a reduction over an axis its statement lacks is left alone (the rows form takes it as written)
  LoadedDiagram plain = load_text("diagram plain\naxis t = 512\naxis m = 512\nin X[t,m] : bf16\nR[t] = rsqrt(mean(X * X; m) + 1e-5)\nout R : fp32\n");
  const Derivation pd = derive(*plain.program, *plain.diagram, plain.sizes, hw);
  for (const auto& s : pd.steps) CHECK(s.pass != "derive-bind-reduction");
}
