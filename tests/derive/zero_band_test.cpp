// Zero bands (diagrams/zero_band.hpp) and the gemm that walks only the chunks inside one
// (GemmForm::k_band): the rules on each kind of expression, the range arithmetic the emitters
// share with lowering, and causal attention's backward, whose dQ = dS K walks about half of its
// chunks. The loop nest of a banded gemm runs against the evaluator in tests/emit/cpu_loop_nest_test.cpp
// (case c3), its CUDA on the device in tests/gpu/banded_matmul.napkin (the GPU sweep).
#include <catch2/catch.hpp>

#include "derive/derivation.hpp"
#include "diagrams/grad.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"
#include "diagrams/zero_band.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

const char* kRules = R"(diagram z
axis q = 100
axis x = 90
in  S[q,x] : fp32
in  L[q] : fp32
in  G[q,x] : fp32
P[q,x] = exp(mask(S, causal(q, x)) - L)
R[q,x] = exp(mask(S, causal(q, x)) - max(mask(S, causal(q, x)); x))
N2[q,x] = -P
B1[q,x] = G * band(q, x; lo=-5, hi=9)
B2[q,x] = P * band(x, q; lo=-3, hi=4)
N[q,x] = G + P
D[q,x] = -(P / (G + 1))
W[q,x] = causal(q, x; window=4) * G
E[q,x] = exp(mask(S, causal(q, x)))
out R : fp32
out N2 : fp32
out B1 : fp32
out B2 : fp32
out N : fp32
out D : fp32
out W : fp32
out E : fp32
)";

void check_band(const std::optional<ZeroBand>& z, const ZeroBand& want) {
  REQUIRE(z);
  CHECK(z->a == want.a);
  CHECK(z->b == want.b);
  CHECK(z->lo == want.lo);
  CHECK(z->hi == want.hi);
}

}  // namespace

TEST_CASE("zero bands: masks as values, exp of a masked argument and products have one, sums, quotients and inputs none", "[derive]") {
  LoadedDiagram l = load_text(kRules);
  const Diagram& d = *l.diagram;
  check_band(zero_band(d, "P"), {"q", "x", std::nullopt, 0});      // exp(-inf - L) = 0 past the diagonal
  CHECK_FALSE(zero_band(d, "R"));                                  // its subtrahend is masked too: -inf - -inf
  check_band(zero_band(d, "B1"), {"q", "x", -5, 9});
  check_band(zero_band(d, "B2"), {"q", "x", -4, 0});               // band(x, q) reversed, intersected with P's
  CHECK_FALSE(zero_band(d, "N"));                                  // a sum is 0 only where both terms are
  CHECK_FALSE(zero_band(d, "D"));                                  // a quotient: its denominator may be 0 (0 / 0 is NaN)
  check_band(zero_band(d, "W"), {"q", "x", -3, 0});                // a window: 1 - W <= x - q <= 0
  check_band(zero_band(d, "N2"), {"q", "x", std::nullopt, 0});     // neg keeps it
  CHECK_FALSE(zero_band(d, "E"));                                  // exp(-inf) with nothing subtracted is not a rule
  CHECK_FALSE(zero_band(d, "G"));                                  // an input of a parsed diagram
  Diagram copy = d;
  for (auto& item : copy.items)
    if (auto* in = std::get_if<InputDecl>(&item); in && in->name == "G") in->zero_band = ZeroBand{"x", "q", 1, 2};
  check_band(zero_band(copy, "G"), {"x", "q", 1, 2});              // a kernel view's input carries its band
  CHECK_FALSE(zero_band(copy, "N"));                               // still a sum
}

TEST_CASE("zero bands: the range of the other axis a tile of rows reaches, and the gemm's chunks", "[derive]") {
  const ZeroBand causal{"q", "x", std::nullopt, 0};  // x <= q
  CHECK(band_range(causal, "q", 64, 127, 4096) == std::pair<std::int64_t, std::int64_t>{0, 128});
  CHECK(band_range(causal, "x", 100, 199, 300) == std::pair<std::int64_t, std::int64_t>{100, 300});  // q >= x
  const ZeroBand band{"i", "k", -70, 45};
  CHECK(band_range(band, "i", 0, 63, 300) == std::pair<std::int64_t, std::int64_t>{0, 109});
  CHECK(band_range(band, "i", 128, 149, 300) == std::pair<std::int64_t, std::int64_t>{58, 195});
  const auto none = band_range(band, "k", 290, 299, 150);  // i - k in [-45, 70]: i from 245, past the 150 rows of i
  CHECK(none.first >= none.second);
  GemmForm g;
  g.TK = 64;
  g.k_band = band;
  g.k_band_axis = band.a;  // "i"
  CHECK(gemm_k_chunks(g, 128, 149, 300) == std::pair<std::int64_t, std::int64_t>{0, 4});  // k 58..194: chunks 0..3
  CHECK(gemm_k_chunks(g, 256, 319, 300) == std::pair<std::int64_t, std::int64_t>{2, 5});  // k 186..299
  g.k_band.reset();
  CHECK(gemm_k_chunks(g, 256, 319, 300) == std::pair<std::int64_t, std::int64_t>{0, 5});
}

TEST_CASE("zero bands: a banded gemm's tiles, longest first, and their makespan", "[derive]") {
  // dQ of GQA's backward at 2048 tokens: 8 tiles of 256 queries walking 4, 8, ..., 32 chunks of
  // 64 keys, over 32 heads: 256 tiles on 132 SMs (mean 34.9 chunks a block)
  GemmForm g;
  g.band_order = true;
  for (std::int64_t n = 32; n >= 4; n -= 4) g.band_ranks.push_back(n);
  const double mean = 32.0 * 144 / 132;
  // persistent blocks in snake order: block b's second tile mirrors its first (at most 32 + 4)
  CHECK(gemm_band_stretch(g, 256, 132, true) == Approx(36 / mean));
  // one block per tile, handed out in rank order: list scheduling
  const double listed = gemm_band_stretch(g, 256, 132, false);
  CHECK(listed >= 1);
  CHECK(listed <= 40 / mean);
  // equal tiles: the waves alone (2 rounds of 132 slots for 256 tiles)
  g.band_ranks.assign(8, 10);
  CHECK(gemm_band_stretch(g, 256, 132, true) == Approx(2 * 132 / 256.0));
  g.band_order = false;
  CHECK(gemm_band_stretch(g, 256, 132, true) == 1);
}

TEST_CASE("causal attention's backward: dQ = dS K walks the chunks of x up to each tile's diagonal, and the model prices that share", "[derive]") {
  DiagnosticEngine diags;
  auto written = load_program(std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/causal_attention.napkin", diags, false);
  const Diagram& forward = written->select("");
  REQUIRE(verify_program(*written, diags, &forward));
  LoadedDiagram l = load_text(print_file(differentiate(*written, forward, {}).file), {{"b", 4}, {"h", 16}, {"q", 4096}, {"x", 4096}});
  Derivation dv = derive(*l.program, *l.diagram, l.sizes, load_hardware("h100"));
  const KernelChoice* dq = nullptr;
  for (const auto& kc : dv.chosen.kernels)
    if (kc.cost.outputs == std::vector<std::string>{"dQ"}) dq = &kc;
  REQUIRE(dq);
  INFO(describe_spec(*dq->cost.spec) << "\n" << dq->cost.spec->gemm->k_note);
  REQUIRE(dq->cost.spec->strategy == Strategy::gemm);
  const GemmForm& g = *dq->cost.spec->gemm;
  REQUIRE(g.k_band);
  CHECK(g.k_band_axis == "q");
  CHECK(g.K == "x");
  // the share by hand: tile i of q walks chunks up to the one holding its last row (q is M or N)
  const std::int64_t tq = g.k_band_axis == g.M ? g.TM : g.TN;
  const std::int64_t n = 4096, tiles = (n + tq - 1) / tq, all = (n + g.TK - 1) / g.TK;
  double walked = 0;
  for (std::int64_t i = 0; i < tiles; ++i) walked += static_cast<double>(std::min(all, ((i + 1) * tq - 1) / g.TK + 1));
  CHECK(g.k_active_fraction == Approx(walked / static_cast<double>(tiles * all)));
  CHECK(g.k_active_fraction < 0.6);
  CHECK(dq->cost.causal_active_fraction == Approx(g.k_active_fraction));
  // dS is read from HBM only in the walked chunks; K whole (the last tile walks all of it)
  const double ds = 4.0 * 16 * n * n * 2, k = 4.0 * 16 * n * 128 * 2, out = k;
  CHECK(dq->cost.hbm_bytes == Approx(ds * g.k_active_fraction + k + out).epsilon(0.05));
  CHECK(dq->plan.cluster() == std::nullopt);  // a cluster along q would walk every chunk (one multicast ring)
}

TEST_CASE("zero bands: a cluster along the band's axis walks every chunk, and says so", "[derive]") {
  LoadedDiagram l = load_text(
      "diagram m\naxis i = 4096\naxis k = 4096\naxis j = 256\nin A[i,k] : bf16\nin B[j,k] : bf16\n"
      "Ab[i,k] : bf16 = A * causal(i, k)\nC[i,j] = contract(Ab, B; k)\nout C : bf16\n");
  for (const bool cluster : {false, true}) {
    DiagnosticEngine diags;
    SourceManager sm;
    std::string text = "schedule s for m\nkernel a\n  fuse Ab\n  weave i, k\n  warps 4\nkernel c\n  fuse C\n  group i by 128\n  group j by 128\n  stream k by 64\n  warps 8\n";
    if (cluster) text.append("  cluster i by 2\n");
    auto s = parse_schedule(*sm.add("m.schedule", text), diags);
    REQUIRE(s);
    const Hardware hw = load_hardware("h100");
    auto checked = check_schedule(*l.program, *l.diagram, *s, l.sizes, hw, {}, diags);
    INFO(diags.render());
    REQUIRE(checked);
    Derivation dv = derive_given(*l.program, *l.diagram, l.sizes, hw, result_of(*s, *checked));
    const GemmForm& g = *dv.chosen.kernels.at(1).cost.spec->gemm;
    INFO(g.k_note);
    CHECK(g.k_band.has_value() == !cluster);
    CHECK((g.k_note.find("walks every chunk") != std::string::npos) == cluster);
    CHECK(dv.chosen.kernels.at(1).cost.causal_active_fraction == Approx(cluster ? 1.0 : 33.0 / 64));  // tiles of 128, chunks of 64
  }
}

TEST_CASE("zero bands: a gemm walks every chunk where some row has no element inside the band (a row NaN throughout stays NaN)", "[derive]") {
  // band(i, k; lo=300, hi=400) over 500 values of k: rows i >= 200 have none
  for (const std::int64_t rows : {150, 256}) {
    LoadedDiagram l = load_text("diagram m\naxis i = " + std::to_string(rows) + "\naxis k = 500\naxis j = 64\nin A[i,k] : bf16\nin B[j,k] : bf16\n"
                                "Ab[i,k] : bf16 = A * band(i, k; lo=300, hi=400)\nC[i,j] = contract(Ab, B; k)\nout C : bf16\n");
    Derivation dv = derive(*l.program, *l.diagram, l.sizes, load_hardware("h100"));
    const GemmForm* g = nullptr;
    for (const auto& kc : dv.chosen.kernels)
      if (kc.cost.spec && kc.cost.spec->gemm) g = &*kc.cost.spec->gemm;
    REQUIRE(g);
    INFO(g->k_note);
    CHECK(g->k_band.has_value() == (rows == 150));
    CHECK((g->k_note.find("have no element in it") != std::string::npos) == (rows == 256));
  }
}
