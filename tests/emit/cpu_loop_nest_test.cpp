// The proof, on a machine without a GPU, that a derivation preserves meaning: the emitted CPU
// loop nest (same tiling, chunking, accumulators) of every bundled diagram (and of the GPU sweep's
// diagrams without calls) and of 200 random
// (NAPKIN_RANDOM_SEEDS: more) diagrams, compiled with the system C++ compiler and run at sizes that do not divide the tiles,
// equals the fp64 evaluator of the original diagram (relative error under 1e-9).
//  - bundled diagrams: derived for the H100 at their declared sizes, run at shrunk sizes of about
//    1.5 tiles per partitioned axis;
//  - random diagrams: derived in the paper's two-level model with a small memory, so that tiles
//    and stream chunks are small (and rarely divide the axes), run at their declared sizes.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <regex>

#include "diagrams/eval.hpp"
#include "diagrams/grad.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"
#include "emit/cpu_emitter.hpp"
#include "tests/support/loop_nest_check.hpp"
#include "tests/support/random_diagram.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
namespace fs = std::filesystem;

namespace {

struct Case {
  std::string label;
  std::unique_ptr<Program> program;
  const Diagram* diagram = nullptr;
  SizeMap sizes;
  std::map<std::string, Tensor> inputs;
  std::map<std::string, Tensor> expected;  // the fp64 evaluator of the diagram derive scheduled
  std::map<std::string, Tensor> written;   // the fp64 evaluator of the diagram as written
  std::string text, plan;  // the diagram text and the derived schedule, printed when it fails
  std::string file;        // the diagram's file, for the cases loaded from one
};

/** The derivation of `c` in the paper's two-level model (transfers objective, no hardware
 *  divisibility) at the smallest memory, doubling from 24 elements, that admits a schedule: the
 *  setting where small diagrams must stream. */
std::optional<Derivation> derive_in_smallest_memory(const Case& c, const Hardware& hw) {
  ModelOptions opt;
  opt.two_level = true;
  SearchOptions so;
  so.objective = SearchOptions::Objective::transfers;
  so.hardware_divisibility = false;
  std::optional<Derivation> dv;
  for (double m = 24; !dv; m *= 2) {
    opt.two_level_capacity_bytes = m * 8;
    try {
      dv.emplace(derive(*c.program, *c.diagram, c.sizes, hw, opt, so));
    } catch (const UserError&) {
    }
  }
  return dv;
}

/** The derived schedule as directive lines, kernel by kernel. */
std::string plan_text(const Derivation& dv) {
  std::string plan;
  for (const auto& k : dv.chosen.kernels) {
    plan += "kernel:";
    for (const auto& d : k.plan.directives) plan += " " + directive_text(d) + ";";
    plan += "\n";
  }
  return plan;
}

/** The seeds to run: NAPKIN_RANDOM_SEED_LIST=250,356 runs those only (by hand, to chase a
 *  failure); NAPKIN_RANDOM_SEEDS=N runs 0..N-1 (N >= 200); CI runs 0..199. */
std::vector<std::uint64_t> random_seeds(bool& chosen) {
  std::vector<std::uint64_t> seeds;
  chosen = false;
  if (const char* list = std::getenv("NAPKIN_RANDOM_SEED_LIST")) {
    chosen = true;
    for (const char* p = list; *p;) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(p, &end, 10);
      if (end == p) {
        ++p;
        continue;
      }
      seeds.push_back(v);
      p = end;
    }
    return seeds;
  }
  std::uint64_t n = 200;
  if (const char* env = std::getenv("NAPKIN_RANDOM_SEEDS")) n = std::max<std::uint64_t>(200, std::strtoull(env, nullptr, 10));
  for (std::uint64_t s = 0; s < n; ++s) seeds.push_back(s);
  return seeds;
}

/** Run sizes for a bundled diagram derived at `full`: about 1.5 tiles along each partitioned axis
 *  (never a multiple), 12 along whole axes; only axes declared by a literal (products follow). */
SizeMap run_sizes(const Diagram& d, const Derivation& dv, const SizeMap& full) {
  auto literal = [&](const std::string& a) {
    const AxisDecl* decl = d.find_axis(a);
    return decl && decl->size.size() == 1 && decl->size[0].axis.empty();
  };
  SizeMap run;
  for (const auto& k : dv.chosen.kernels)
    for (const auto& [a, ap] : k.cost.axes)
      if (ap.kind != AxisPlan::Kind::whole && literal(a)) run[a] = std::max<std::int64_t>(run[a], std::min(ap.extent, ap.tile + ap.tile / 2 + 3));
  for (const auto* a : d.axes())
    if (!run.count(a->name) && literal(a->name)) run[a->name] = std::min<std::int64_t>(full.at(a->name), 12);
  return run;
}

/** Prepares a case: derives, emits the loop nest to dir/case<i>.cpp, writes inputs, evaluates. */
void prepare(Case& c, std::size_t i, const fs::path& dir, const Derivation& dv) {
  std::string prefix = "napkin_c" + std::to_string(i) + "_";
  // The diagram derive scheduled (contractions of 3+ operands split), against the one written.
  std::ofstream(dir / ("case" + std::to_string(i) + ".cpp")) << emit_cpu(*c.program, dv.diagram(*c.diagram), dv, prefix);
  const auto bounds = target_bounds(*c.diagram, c.sizes);  // gather targets in range
  for (const auto* in : c.diagram->inputs()) {
    auto b = bounds.find(in->name);
    c.inputs[in->name] = random_input(*in, c.sizes, 1000 + i, b == bounds.end() ? std::nullopt : std::optional(b->second));
  }
  // Two references. The loop nest must equal, to fp64 rounding, the fp64 evaluator of the diagram
  // derive scheduled: its rewrites (a contraction split, a reduction bound to an fp32 statistic)
  // included, since the loop nest rounds a stored array to its dtype as the GPU does. That diagram
  // in turn must equal the diagram as written (logsumexp and l2norm evaluated as themselves, not
  // as their expansion) up to the rounding its rewrites add.
  DiagnosticEngine diags;
  auto written = c.file.empty() ? load_program_text("w.napkin", c.text, diags, false) : load_program(c.file, diags, false);
  REQUIRE_FALSE(diags.has_errors());
  c.written = evaluate(*written, written->select(c.diagram->name), c.sizes, c.inputs);
  c.expected = dv.rewritten ? evaluate(*c.program, dv.diagram(*c.diagram), c.sizes, c.inputs) : c.written;
  test::write_case_inputs(dir, i, *c.diagram, c.sizes, c.inputs, c.expected);
}

}  // namespace

TEST_CASE("derived CPU loop nests equal the fp64 evaluator: bundled diagrams, their backwards and 200 random diagrams", "[emit][cpu][property]") {
  fs::path dir = fs::temp_directory_path() / ("napkin-cpu-loop-nests-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<Case> cases;
  Hardware h100 = load_hardware("h100");

  // The bundled diagrams, and the GPU sweep's own diagrams (tests/gpu) that call no other diagram.
  std::vector<std::string> files = test::library_files();
  // And the language's test diagrams (tests/language), the fp8 and int8 GEMMs (tests/kernels: their
  // products and sums are exact in fp64 on both sides, so the 1e-9 bound below holds for them too).
  for (const char* folder : {"tests/gpu", "tests/language", "tests/kernels"})
    for (const auto& f : test::napkin_files(folder)) files.push_back(f);
  for (const auto& file : files) {
    Case c;
    c.label = fs::path(file).filename().string();
    c.file = file;
    DiagnosticEngine diags;
    c.program = load_program(file, diags);
    c.diagram = &c.program->select("");
    REQUIRE(verify_program(*c.program, diags, c.diagram));
    if (file.find("/tests/gpu/") != std::string::npos && c.program->diagrams.size() > 1) continue;
    // The transformer block at b = 2: its calls are woven over b, which their lifted callees
    // (diagrams/lift.hpp) run as a batch axis.
    const bool block = c.label == "transformer_block.napkin";
    SizeMap full = *resolve_sizes(*c.diagram, block ? SizeMap{{"b", 2}} : SizeMap{}, diags);
    Derivation dv = derive(*c.program, *c.diagram, full, h100);
    SizeMap run = run_sizes(*c.diagram, dv, full);
    if (block) run = {{"b", 2}, {"s", 21}, {"m", 40}, {"g", 2}, {"r", 2}, {"d", 12}, {"f", 70}};
    c.sizes = *resolve_sizes(*c.diagram, run, diags);
    prepare(c, cases.size(), dir, dv);
    cases.push_back(std::move(c));
  }
  // The backward of each bundled diagram (napkin grad, diagrams/grad.hpp), derived and run as the
  // forward is: the backward goes through the same derive, lower and emit.
  for (const auto& file : test::library_files()) {
    DiagnosticEngine diags;
    auto written = load_program(file, diags, /*expand=*/false);
    const Diagram& forward = written->select("");
    REQUIRE(verify_program(*written, diags, &forward));
    Case c;
    c.label = fs::path(file).filename().string() + " backward";
    c.text = print_file(differentiate(*written, forward, {}).file);
    c.program = load_program_text("g.napkin", c.text, diags);
    c.diagram = &c.program->select("");
    REQUIRE(verify_program(*c.program, diags, c.diagram));
    const bool block = c.label == "transformer_block.napkin backward";
    SizeMap full = *resolve_sizes(*c.diagram, block ? SizeMap{{"b", 2}} : SizeMap{}, diags);
    Derivation dv = derive(*c.program, *c.diagram, full, h100);
    c.plan = plan_text(dv);
    SizeMap run = run_sizes(*c.diagram, dv, full);
    if (block) run = {{"b", 2}, {"s", 21}, {"m", 40}, {"g", 2}, {"r", 2}, {"d", 12}, {"f", 70}};
    c.sizes = *resolve_sizes(*c.diagram, run, diags);
    prepare(c, cases.size(), dir, dv);
    cases.push_back(std::move(c));
  }
  std::size_t streamed_random = 0;
  bool chosen_seeds = false;
  for (std::uint64_t seed : random_seeds(chosen_seeds)) {
    Case c;
    c.label = "random seed " + std::to_string(seed);
    c.text = test::random_diagram(seed, "random", false, 11);
    DiagnosticEngine diags;
    c.program = load_program_text("r.napkin", c.text, diags);
    c.diagram = &c.program->select("");
    REQUIRE(verify_program(*c.program, diags, c.diagram));
    c.sizes = *resolve_sizes(*c.diagram, {}, diags);
    std::optional<Derivation> dv = derive_in_smallest_memory(c, h100);
    for (const auto& k : dv->chosen.kernels) streamed_random += k.plan.stream().has_value();
    c.plan = plan_text(*dv);
    prepare(c, cases.size(), dir, *dv);
    cases.push_back(std::move(c));
  }
  // Reductions of reductions over one axis and normalisers inside expressions, as derived in the
  // small-memory model (each must stream: the derived schedule is checked, not only hand-written ones).
  const char* derived_streams[] = {
      "diagram d1\naxis t = 3\naxis v = 41\nin L[t,v] : fp32\nin T[t,v] : fp32\nM[t] = max(L; v)\n"
      "Z[t] = M + log(sum(exp(L - M); v))\nC[t] = Z - sum(L * T; v)\nout C : fp32\n",
      "diagram d2\naxis t = 3\naxis m = 97\nin X[t,m] : fp32\nmu[t] = mean(X; m)\nvar[t] = mean((X - mu) * (X - mu); m)\nout var : fp32\n",
      "diagram d3\naxis t = 3\naxis m = 41\naxis f = 2\nin X[t,m] : fp32\nin W[m] : fp32\nin V[m,f] : fp32\n"
      "N[t,m] = rmsnorm(X, W; m) * 2 + 1\nY[t,f] = contract(N, V; m)\nout Y : fp32\n",
      "diagram d4\naxis q = 3\naxis x = 41\naxis d = 2\nin S[q,x] : fp32\nin V[x,d] : fp32\n"
      "P[q,x] = S * rsqrt(sum(S * S; x))\nO[q,d] = contract(P, V; x)\nout O : fp32\n",
      // the built-ins, expanded when loaded: logsumexp streams by online-rescaled-sum, l2norm in two passes
      "diagram d5\naxis t = 3\naxis v = 41\nin L[t,v] : fp32\nin T[t,v] : fp32\n"
      "C[t] = logsumexp(L; v) - sum(L * T; v)\nout C : fp32\n",
      "diagram d6\naxis q = 3\naxis x = 41\naxis d = 2\nin S[q,x] : fp32\nin V[x,d] : fp32\n"
      "P[q,x] = l2norm(S; x, eps=1e-6)\nO[q,d] = contract(P, V; x)\nout O : fp32\n",
      // cross-entropy by gather: the targets' one-hot select folded by associative-sum beside logsumexp
      "diagram d7\naxis t = 3\naxis v = 97\nin L[t,v] : fp32\nin T[t] : int32\n"
      "C[t] = logsumexp(L; v) - gather(L, T; v)\nout C : fp32\n",
  };
  // Regressions of the 1000-seed random run (seeds' texts; the last minimised by hand), derived as the random cases:
  // a stored causal softmax streamed along its axis (seed 356: its zeros past the diagonal were
  // never written), a stored array woven along that axis beside it (seeds 406, 878: skipped
  // chunks left it unwritten), an output that cancels to 0 (seed 670: rounding noise, not a bug).
  const char* derived_regressions[] = {
      "diagram s356\naxis a = 3\naxis b = 7\naxis c = 6\naxis d = 8\naxis e = 8\nin X0[e,c,a,d] : fp16\n"
      "in X1[b,e,c,d] : tf32\nT0[e,c,d,b] = X1 + X1\nT1[a,c,e,d] = rmsnorm(X0; d) * 2 + X0\n"
      "T2[d] = contract(T0, X1; e, c, b)\nT3[d,a,e,c] = softmax(mask(T1, causal(a, c)); c)\n"
      "out T2 : bf16\nout T3 : fp16\n",
      "diagram s406\naxis a = 9\naxis b = 6\naxis c = 4\naxis d = 11\nin X0[d,a,c] : fp8e5m2\n"
      "T0[d,c,a] = layernorm(X0; c, eps=1e-5)\nT1[c,d,a] = gelu(T0)\n"
      "T2[a,c,d] = softmax(mask(T0, causal(d, c)); c)\nT3[d,a,c] = T1 - T1\n"
      "T4[c,d,a] = softmax(mask(X0, causal(d, a)); a)\nout T2 : bf16\nout T3 : fp32\nout T4 : fp16\n",
      "diagram s878\naxis a = 11\naxis b = 10\naxis c = 10\naxis d = 8\nin X0[a,d,b] : fp8e5m2\n"
      "in X1[b,a,c] : tf32\nin X2[c] : bf16\nT0[a,b,d] = softmax(X0; a)\nT1[b,a] = sum(T0; d)\n"
      "T2[a,b] = layernorm(T1; a, eps=1e-5)\nT3[b,a,c,d] = X0 * X1\n"
      "T4[b,d,a] = softmax(mask(X0, causal(a, d)); d)\nout X2 : fp16\nout T2 : fp16\nout T3 : fp16\n"
      "out T4 : fp32\n",
      "diagram s670\naxis a = 9\naxis b = 8\naxis c = 9\nin X0[c,b,a] : fp32\nin X1[c] : fp32\n"
      "T0[a,b,c] = layernorm(X0; a, eps=1e-5)\nT3[c] = contract(T0, X1; a, b)\nout T3 : fp32\n",
  };
  // Contractions of three and more operands, split into pairwise ones before the search
  // (derive-contraction-order): the loop nest of the split diagram against the evaluator of the written one.
  const char* contraction_orders[] = {
      "diagram o1\naxis i = 9\naxis j = 7\naxis k = 5\naxis l = 3\nin A[i,j] : fp32\nin B[j,k] : fp32\nin C[k,l] : fp32\n"
      "D[i,l] = contract(A, B, C; j, k)\nout D : fp32\n",
      "diagram o2\naxis b = 2\naxis i = 5\naxis j = 4\naxis k = 6\naxis l = 3\nin A[b,i,j] : bf16\nin B[b,j,k] : fp32\n"
      "in C[k,l] : fp32\nin E[l,j] : fp32\nY[b,i] = contract(exp(A), B, C, E; j, k, l) * 2 + 1\nout Y : fp32\n",
      // In a callee, lifted over b: the call runs the callee as its derivation split it.
      "diagram o3\naxis i = 4\naxis j = 3\naxis k = 5\naxis l = 2\nin A[i,j] : fp32\nin B[j,k] : fp32\nin C[k,l] : fp32\n"
      "D[i,l] = contract(A, B, C; j, k)\nout D : fp32\ndiagram o3_caller\naxis b = 2\naxis i = 4\naxis j = 3\naxis k = 5\n"
      "axis l = 2\nin A[b,i,j] : fp32\nin B[j,k] : fp32\nin C[k,l] : fp32\nY[b,i,l] = o3(A, B, C)\nout Y : fp32\n",
  };
  std::vector<std::pair<const char*, bool>> derived_texts;  // text, must stream
  for (const char* text : contraction_orders) derived_texts.emplace_back(text, false);
  for (const char* text : derived_streams) derived_texts.emplace_back(text, true);
  for (const char* text : derived_regressions) derived_texts.emplace_back(text, false);
  std::size_t derived_streamed = 0;
  for (const auto& [text, must_stream] : derived_texts) {
    Case c;
    c.label = std::string("derived ") + std::string(text).substr(8, 2);
    DiagnosticEngine diags;
    c.program = load_program_text("d.napkin", text, diags);
    c.diagram = &c.program->select("");
    REQUIRE(verify_program(*c.program, diags, c.diagram));
    c.sizes = *resolve_sizes(*c.diagram, {}, diags);
    std::optional<Derivation> dv = derive_in_smallest_memory(c, h100);
    bool streams = false;
    std::string plan;
    for (const auto& k : dv->chosen.kernels) {
      streams |= k.plan.stream().has_value();
      for (const auto& d : k.plan.directives) plan += directive_text(d) + "; ";
    }
    INFO(c.label << ": " << plan);
    if (must_stream) {
      CHECK(streams);
      derived_streamed += streams;
    }
    c.text = text;
    c.plan = plan_text(*dv);
    prepare(c, cases.size(), dir, *dv);
    cases.push_back(std::move(c));
  }
  CHECK(derived_streamed >= 7);
  // Every lemma, through a hand-written schedule (the searches above may not pick each one), at
  // sizes that do not divide the tiles.
  struct LemmaCase {
    const char* lemma;
    const char* diagram;
    const char* schedule;
  };
  const LemmaCase lemma_cases[] = {
      {"online-softmax",
       "diagram l1\naxis q = 13\naxis x = 23\naxis d = 6\nin Q[q,d] : fp32\nin K[x,d] : fp32\nin V[x,d] : fp32\n"
       "S[q,x] = mask(contract(Q, K; d), causal(q, x))\nP[q,x] = softmax(S; x)\nO[q,d] = contract(P, V; x) * 2\nout O : fp32\n",
       "schedule s for l1\nkernel k\n  fuse S, P, O\n  group q by 4\n  stream x by 5\n"},
      {"normalised-contraction",
       "diagram l2\naxis t = 7\naxis m = 10\naxis f = 5\nin X[t,m] : fp32\nin W[m] : fp32\nin V[m,f] : fp32\n"
       "N[t,m] = rmsnorm(X, W; m, eps=1e-3)\nY[t,f] = contract(N, V; m)\nout Y : fp32\n",
       "schedule s for l2\nkernel k\n  fuse N, Y\n  group t by 3\n  stream m by 4\n"},
      {"welford",
       "diagram l3\naxis t = 7\naxis m = 10\naxis f = 5\nin X[t,m] : fp32\nin W[m] : fp32\nin B[m] : fp32\nin V[m,f] : fp32\n"
       "N[t,m] = layernorm(X * 3 + 1, W, B; m)\nY[t,f] = contract(N, V; m)\nout Y : fp32\n",
       "schedule s for l3\nkernel k\n  fuse N, Y\n  group t by 3\n  stream m by 4\n"},
      {"max-monoid",
       "diagram l4\naxis t = 7\naxis m = 10\nin X[t,m] : fp32\nM[t] = max(exp(X); m) + mean(X; m)\nout M : fp32\n",
       "schedule s for l4\nkernel k\n  fuse M\n  group t by 2\n  stream m by 3\n"},
      {"two-pass-normalisation",
       "diagram l5\naxis t = 5\naxis v = 17\nin L[t,v] : fp32\nin W[v] : fp32\nP[t,v] = softmax(L; v)\nR[t,v] = layernorm(L, W; v)\n"
       "out P : fp32\nout R : fp32\n",
       "schedule s for l5\nkernel k\n  fuse P, R\n  group t by 2\n  stream v by 4 twice\n"},
      {"online-rescaled-sum",  // logsumexp and cross-entropy over a vocabulary (target one-hot)
       "diagram l7\naxis t = 5\naxis v = 23\nin L[t,v] : fp32\nin T[t,v] : fp32\nM[t] = max(L; v)\n"
       "Z[t] = M + log(sum(exp(L - M); v))\nC[t] = Z - sum(L * T; v)\nout Z : fp32\nout C : fp32\n",
       "schedule s for l7\nkernel k\n  fuse M, Z, C\n  group t by 2\n  stream v by 4\n"},
      {"online-rescaled-sum",  // masked rows: rows 5..8 masked throughout (NaN, as written), rows 0..4 masked in their first chunks (soundness fuzzer, seed 100497)
       "diagram l14\naxis t = 9\naxis v = 23\nin L[t,v] : fp32\nLm[t,v] = mask(L, band(t, v; lo=18, hi=30))\nM[t] = max(Lm; v)\n"
       "Z[t] = M + log(sum(exp(Lm - M); v))\nout Z : fp32\n",
       "schedule s for l14\nkernel k\n  fuse Lm, M, Z\n  group t by 2\n  stream v by 4\n"},
      {"online-rescaled-sum",  // a NaN element (-inf * 0 at v = t) in a chunk whose running max is still -inf, finite chunks after it: NaN, as written (soundness fuzzer, seed 301744)
       "diagram l16\naxis t = 9\naxis v = 23\nin L[t,v] : fp32\nN[t,v] = mask(L, band(t, v; lo=6, hi=40)) * (pos(v) - pos(t))\n"
       "M[t] = max(N; v)\nZ[t] = M + log(sum(exp(N - M); v))\nout Z : fp32\n",
       "schedule s for l16\nkernel k\n  fuse N, M, Z\n  group t by 2\n  stream v by 4\n"},
      {"two-pass-normalisation",  // NaN elements in chunks whose max is -inf (P: fmax drops them, the sum must not), a +inf max (R) (soundness fuzzer, seed 300217)
       "diagram l15\naxis q = 7\naxis x = 13\nin X[q,x] : fp32\nZ[q,x] = mask(X, band(q, x; lo=2, hi=30)) * 0 + X\n"
       "P[q,x] = softmax(mask(Z, band(q, x; lo=-3, hi=30)); x)\nW[q,x] = mask(X, causal(q, x)) * mask(X, causal(q, x))\n"
       "R[q,x] = softmax(W; x)\nout P : fp32\nout R : fp32\n",
       "schedule s for l15\nkernel k\n  fuse Z, P, W, R\n  group q by 2\n  stream x by 2 twice\n"},
      {"chan-centred-moment",  // a centred variance, by mean and by sum
       "diagram l8\naxis t = 5\naxis m = 19\nin X[t,m] : fp32\nmu[t] = mean(X; m)\n"
       "var[t] = mean((X - mu) * (X - mu); m)\nss[t] = sum((X - mu) * (X - mu); m)\nout var : fp32\nout ss : fp32\n",
       "schedule s for l8\nkernel k\n  fuse mu, var, ss\n  group t by 2\n  stream m by 4\n"},
      {"two-pass-normalisation",  // normalisers inside expressions
       "diagram l9\naxis t = 5\naxis m = 17\nin X[t,m] : fp32\nin W[m] : fp32\nN[t,m] = rmsnorm(X, W; m) * 2 + X\n"
       "P[t,m] = exp(softmax(X; m)) - 1\nout N : fp32\nout P : fp32\n",
       "schedule s for l9\nkernel k\n  fuse N, P\n  group t by 2\n  stream m by 4 twice\n"},
      {"two-pass-normalisation",  // a causal softmax, stored, with a stored array woven beside it (seeds 356, 406, 878)
       "diagram l10\naxis q = 9\naxis x = 11\nin X[q,x] : fp32\nY[q,x] = X * X\nP[q,x] = softmax(mask(X, causal(q, x)); x)\n"
       "out Y : fp32\nout P : fp32\n",
       "schedule s for l10\nkernel k\n  fuse Y, P\n  group q by 2\n  stream x by 3 twice\n"},
      {"online-softmax",  // a sliding window: chunks wholly before a row's window are fully masked, none skipped
       "diagram l11\naxis q = 13\naxis x = 23\naxis d = 6\nin Q[q,d] : fp32\nin K[x,d] : fp32\nin V[x,d] : fp32\n"
       "S[q,x] = mask(contract(Q, K; d) - 0.25 * (pos(q) - pos(x)), causal(q, x; window=6))\nP[q,x] = softmax(S; x)\n"
       "O[q,d] = contract(P, V; x)\nout O : fp32\n",
       "schedule s for l11\nkernel k\n  fuse S, P, O\n  group q by 4\n  stream x by 5\n"},
      {"two-pass-normalisation",  // a band mask over element-wise min, max, pow and abs
       "diagram l12\naxis q = 13\naxis x = 23\nin A[q,x] : fp32\nin B[x] : fp32\n"
       "S[q,x] = mask(max(min(pow(abs(A), 1.5), B), -1) + pos(x) / x, band(q, x; lo=-2, hi=7))\n"
       "P[q,x] = softmax(S; x)\nout P : fp32\n",
       "schedule s for l12\nkernel k\n  fuse S, P\n  group q by 4\n  stream x by 5 twice\n"},
      {"associative-sum",  // cross-entropy by gather: the one-hot select folded chunk by chunk beside logsumexp
       "diagram l13\naxis t = 5\naxis v = 23\nin L[t,v] : bf16\nin T[t] : int32\n"
       "C[t] = logsumexp(L; v) - gather(L, T; v)\nG[t] = gather(exp(L), T; v) * 2\nout C : fp32\nout G : fp32\n",
       "schedule s for l13\nkernel k\n  fuse C_max, C, G\n  group t by 2\n  stream v by 4\n"},
      {"associative-sum",
       "diagram l6\naxis a = 9\naxis g = 3\naxis r = 2\naxis d = 5\naxis m = 4\nin A[a,g,r,d] : fp32\nin W[g,r,d,m] : fp32\n"
       "Y[a,m] = contract(A, W; g, r, d)\nout Y : fp32\n",
       "schedule s for l6\nkernel k\n  fuse Y\n  group a by 4\n  stream g by 1\n  stream r by 1\n  stream d by 2\n"},
  };
  // The CUDA kernel walks a contracted axis the schedule keeps whole in chunks (lowering's gemm K
  // by T_K, flash x by T_X); the loop nest walks the same chunks (the lemma's fold, not a whole-axis
  // reduction), at sizes that do not divide them.
  const LemmaCase spec_chunk_cases[] = {
      {"associative-sum",
       "diagram c1\naxis t = 70\naxis m = 150\naxis f = 40\nin X[t,m] : bf16\nin W[m,f] : bf16\nin B[f] : bf16\n"
       "Y[t,f] = gelu(contract(X, W; m) + B)\nout Y : bf16\n",
       "schedule s for c1\nkernel k\n  fuse Y\n  group t by 64\n  group f by 32\n  warps 4\n"},
      {"online-softmax",
       "diagram c2\naxis q = 70\naxis x = 150\naxis d = 16\nin Q[q,d] : bf16\nin K[x,d] : bf16\nin V[x,d] : bf16\n"
       "S[q,x] = contract(Q, K; d) * 0.25\nP[q,x] = softmax(S; x)\nO[q,d] = contract(P, V; x)\nout O : bf16\n",
       "schedule s for c2\nkernel k\n  fuse S, P, O\n  group q by 64\n  warps 4\n"},
      // an operand 0 outside a band (diagrams/zero_band.hpp): the gemm walks each tile's chunks
      // inside it alone (GemmForm::k_band), and so does the loop nest, from both sides
      {"associative-sum",
       "diagram c3\naxis i = 150\naxis k = 300\naxis j = 40\nin A[i,k] : bf16\nin B[j,k] : bf16\n"
       "Ab[i,k] : bf16 = A * band(i, k; lo=-70, hi=45)\nC[i,j] = contract(Ab, B; k)\nout C : bf16\n",
       "schedule s for c3\nkernel a\n  fuse Ab\n  weave i, k\n  warps 4\nkernel k\n  fuse C\n  group i by 64\n  group j by 32\n  warps 4\n"},
  };
  for (const auto& lc : spec_chunk_cases) {
    Case c;
    c.label = std::string("spec chunk, ") + lc.lemma;
    DiagnosticEngine diags;
    c.program = load_program_text("c.napkin", lc.diagram, diags);
    c.diagram = &c.program->select("");
    REQUIRE(verify_program(*c.program, diags, c.diagram));
    c.sizes = *resolve_sizes(*c.diagram, {}, diags);
    SourceManager sm;
    auto s = parse_schedule(*sm.add("c.schedule", lc.schedule), diags);
    REQUIRE(s);
    auto checked = check_schedule(*c.program, *c.diagram, *s, c.sizes, h100, {}, diags);
    INFO(c.label << "\n" << diags.render());
    REQUIRE(checked);
    Derivation dv;
    dv.chosen = result_of(*s, *checked);
    const std::string code = emit_cpu(*c.program, *c.diagram, dv);
    CHECK(code.find("chunked as the CUDA kernel does") != std::string::npos);
    CHECK(code.find(std::string("head: ") + lc.lemma) != std::string::npos);
    if (c.diagram->name == "c3") {  // both sides of the band skip chunks
      CHECK(code.find("past the band") != std::string::npos);
      CHECK(code.find("before the band") != std::string::npos);
    }
    c.text = lc.diagram;
    c.plan = lc.schedule;
    prepare(c, cases.size(), dir, dv);
    cases.push_back(std::move(c));
  }
  for (const auto& lc : lemma_cases) {
    Case c;
    c.label = std::string("lemma ") + lc.lemma;
    DiagnosticEngine diags;
    c.program = load_program_text("l.napkin", lc.diagram, diags);
    c.diagram = &c.program->select("");
    REQUIRE(verify_program(*c.program, diags, c.diagram));
    c.sizes = *resolve_sizes(*c.diagram, {}, diags);
    SourceManager sm;
    auto s = parse_schedule(*sm.add("l.schedule", lc.schedule), diags);
    REQUIRE(s);
    auto checked = check_schedule(*c.program, *c.diagram, *s, c.sizes, h100, {}, diags);
    INFO(c.label << "\n" << diags.render());
    REQUIRE(checked);
    bool used = false;
    for (const auto& k : checked->lemmas)
      for (const auto& u : k) used |= u.lemma == lc.lemma;
    CHECK(used);
    Derivation dv;
    dv.chosen = result_of(*s, *checked);
    c.text = lc.diagram;
    c.plan = lc.schedule;
    prepare(c, cases.size(), dir, dv);
    cases.push_back(std::move(c));
  }

  INFO("kernels with a stream among the random cases: " << streamed_random);
  if (!chosen_seeds) CHECK(streamed_random >= 30);  // the random cases exercise the lemmas, not only whole tiles

  test::write_driver(dir, cases.size());
  std::string compile = "cd " + dir.string() +
                        " && ls case*.cpp | xargs -P 4 -n 10 g++ -std=c++17 -O0 -w -c && g++ -O0 -c driver.cpp -o driver.o"
                        " && g++ case*.o driver.o -o runner 2> link.log && ./runner " + dir.string();
  INFO(compile);
  REQUIRE(std::system(compile.c_str()) == 0);

  std::size_t checked = 0;
  bool all_equal = true;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto outs = test::read_outputs(dir / ("out" + std::to_string(i) + ".bin"));
    const auto decl = cases[i].diagram->outputs();
    REQUIRE(outs.size() == decl.size());
    for (std::size_t o = 0; o < decl.size(); ++o) {
      std::string why;
      double err = test::relative_error(outs[o], cases[i].expected.at(decl[o]->name).data, why);
      INFO(cases[i].label << ", output " << decl[o]->name << ": relative error " << err << " " << why << " (" << (dir / ("case" + std::to_string(i) + ".cpp")).string() << ")");
      INFO("diagram:\n" << cases[i].text << "schedule:\n" << cases[i].plan);
      CHECK(err < 1e-9);
      all_equal &= err < 1e-9;
      // A rewrite's only licence is fp32 rounding of what it stores (2^-24 relative per element,
      // a few of them chained): far below any wrong axis, term or sign.
      std::string why_written;
      double drift = test::relative_error(cases[i].expected.at(decl[o]->name).data, cases[i].written.at(decl[o]->name).data, why_written);
      INFO("the diagram derive scheduled against the diagram as written: relative error " << drift << " " << why_written);
      CHECK(drift < 1e-6);
      ++checked;
    }
  }
  if (!chosen_seeds) CHECK(checked >= 230);
  if (all_equal) fs::remove_all(dir);  // kept when a case differs: the messages name its files
}

namespace {
/** The tile sizes the loop nest of kernel `kernel` declares (`T_a = 64`; whole axes, `T_a = N_a`, left out). */
std::map<std::string, std::int64_t> loop_nest_tiles(const std::string& code, const std::string& kernel) {
  std::map<std::string, std::int64_t> tiles;
  const auto begin = code.find("// kernel " + kernel + ":");
  if (begin == std::string::npos) return tiles;
  const std::string body = code.substr(begin, code.find("// kernel ", begin + 1) - begin);
  static const std::regex tile_decl("T_([A-Za-z_][A-Za-z0-9_]*) = ([0-9]+)");
  for (std::sregex_iterator it(body.begin(), body.end(), tile_decl), end; it != end; ++it) tiles[(*it)[1]] = std::stoll((*it)[2]);
  return tiles;
}
}  // namespace

TEST_CASE("the loop nest tiles as the CUDA kernel does: its tiles are the kernel spec's", "[emit][cpu]") {
  const Hardware h100 = load_hardware("h100");
  int gemm = 0, flash = 0;
  for (const auto& file : test::library_files()) {
    const test::LoadedDiagram l = test::load_library(file);
    const Derivation dv = derive(*l.program, *l.diagram, l.sizes, h100);
    const std::string code = emit_cpu(*l.program, *l.diagram, dv);
    for (const auto& k : dv.chosen.kernels) {
      const KernelSpec* spec = k.cost.spec.get();
      if (!spec || !spec->tensor_cores()) continue;
      INFO(file << ", kernel " << k.plan.name << ": " << describe_spec(*spec));
      const auto tiles = loop_nest_tiles(code, k.plan.name);
      // The tile along `a` as it runs: a tile over the extent is the whole axis, as the CUDA kernel's edge guard makes it.
      auto runs = [&](const std::string& a, std::int64_t t) { return std::min(t, k.cost.axes.at(a).extent); };
      auto loop = [&](const std::string& a) { return tiles.count(a) ? runs(a, tiles.at(a)) : k.cost.axes.at(a).extent; };
      if (const auto& g = spec->gemm) {
        ++gemm;
        CHECK(loop(g->M) == runs(g->M, g->TM));
        CHECK(loop(g->N) == runs(g->N, g->TN));
        CHECK(loop(g->K) == runs(g->K, g->TK));
        for (const auto& a : g->k_outer) CHECK(loop(a) == 1);
        for (const auto& a : g->batch) CHECK(loop(a) == 1);
      }
      if (const auto& f = spec->flash) {
        ++flash;
        CHECK(loop(f->M) == runs(f->M, f->TQ));
        CHECK(loop(f->x) == runs(f->x, f->TX));
        for (const auto& a : f->batch) CHECK(loop(a) == 1);
      }
    }
  }
  CHECK(gemm >= 5);
  CHECK(flash >= 4);
}
