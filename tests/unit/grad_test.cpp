// Reverse mode on diagrams (diagrams/grad.hpp): for every bundled diagram and for diagrams that
// use every operation, the backward written by napkin grad round-trips through print and parse,
// verifies, and, evaluated in fp64, equals central finite differences of the forward along random
// directions; the forward with its saved statistics computes the original outputs; inlining calls
// keeps the meaning; `napkin grad` refuses bad --wrt lists with exit status 1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <unistd.h>
#include <random>

#include "diagrams/eval.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/grad.hpp"
#include "diagrams/inline_calls.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** Small sizes for every axis declared by a literal: 2, 3, 4, 5, 2, ... (products follow). */
SizeMap small_sizes(const Diagram& d) {
  SizeMap out;
  int i = 0;
  for (const auto* a : d.axes())
    if (a->size.size() == 1 && a->size[0].axis.empty()) out[a->name] = 2 + (i++ % 4);
  return out;
}

/** fp64 standard normal values, not rounded to the input's dtype (finite differences need the
 *  exact function); integer inputs as the evaluator draws them. */
Tensor fp64_input(const Diagram& d, const InputDecl& in, const SizeMap& sizes, std::mt19937_64& rng) {
  if (is_integer_dtype(in.dtype)) {
    auto bounds = target_bounds(d, sizes);
    auto it = bounds.find(in.name);
    return random_input(in, sizes, rng(), it == bounds.end() ? std::nullopt : std::optional<std::int64_t>(it->second));
  }
  Tensor t = Tensor::filled(in.axes, sizes);
  std::normal_distribution<double> n;
  for (auto& v : t.data) v = n(rng);
  return t;
}

double dot(const Tensor& a, const Tensor& b) {
  Tensor bp = permute(b, a.axes);
  double s = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) s += a.data[i] * bp.data[i];
  return s;
}

struct Loaded {
  std::unique_ptr<Program> program;
  const Diagram* diagram = nullptr;
};

Loaded load_unexpanded(const std::string& name, const std::string& text) {
  DiagnosticEngine diags;
  Loaded l;
  l.program = load_program_text(name, text, diags, /*expand=*/false);
  if (!diags.has_errors()) {
    l.diagram = &l.program->select("");
    verify_program(*l.program, diags, l.diagram);
  }
  INFO(diags.render());
  REQUIRE_FALSE(diags.has_errors());
  return l;
}

/** The generated file loaded back (built-ins expanded, as every command but print loads it). */
std::unique_ptr<Program> load_generated(const std::string& text) {
  DiagnosticEngine diags;
  auto p = load_program_text("grad.napkin", text, diags);
  if (!diags.has_errors()) verify_program(*p, diags);
  INFO(diags.render() << text);
  REQUIRE_FALSE(diags.has_errors());
  return p;
}

/** Differentiates the last diagram of `text` (a file at `path`'s folder, for imports) and checks
 *  the round trip, the forward and the backward against central differences. */
void check_gradient(const std::string& path, const std::string& text, std::uint64_t seed, const std::vector<std::string>& save = {}) {
  INFO(path);
  Loaded l = load_unexpanded(path, text);
  GradResult g = differentiate(*l.program, *l.diagram, {}, save);
  for (const auto& s : save) CHECK(std::find(g.stored.begin(), g.stored.end(), s) != g.stored.end());
  const std::string printed = print_file(g.file);
  INFO(printed);
  // Round trip: the text parses back to the same IR and prints identically.
  {
    DiagnosticEngine diags;
    SourceManager sm;
    auto reparsed = load_program_text("grad.napkin", printed, diags, /*expand=*/false);
    REQUIRE_FALSE(diags.has_errors());
    CHECK(reparsed->main_file() == g.file);
    CHECK(print_file(reparsed->main_file()) == printed);
  }
  auto gen = load_generated(printed);
  const Diagram& fwd = gen->select(l.diagram->name + "_fwd");
  const Diagram& bwd = gen->select(l.diagram->name + "_bwd");
  DiagnosticEngine diags;
  const SizeMap sizes = *resolve_sizes(fwd, small_sizes(fwd), diags);
  std::mt19937_64 rng(seed);

  std::map<std::string, Tensor> inputs;
  for (const auto* in : fwd.inputs()) inputs[in->name] = fp64_input(fwd, *in, sizes, rng);
  // The forward of the original diagram, and the generated forward: same outputs.
  DiagnosticEngine d2;
  auto original = load_program_text(path, text, d2);
  const Diagram& orig = original->select("");
  auto y0 = evaluate(*original, orig, sizes, inputs);
  auto y = evaluate(*gen, fwd, sizes, inputs);
  for (const auto& [name, t] : y0) {
    INFO("output " << name);
    REQUIRE(y.count(name));
    Tensor a = permute(y.at(name), t.axes);
    for (std::size_t i = 0; i < t.data.size(); ++i) REQUIRE(a.data[i] == Approx(t.data[i]).epsilon(1e-12).margin(1e-12));
  }
  // The backward at random cotangents.
  std::map<std::string, Tensor> bin;
  std::map<std::string, Tensor> cot;  // by forward output
  for (const auto* in : bwd.inputs()) {
    if (inputs.count(in->name)) bin[in->name] = inputs.at(in->name);
    else if (y.count(in->name)) bin[in->name] = y.at(in->name);  // a saved statistic
  }
  REQUIRE(g.cotangents.size() > 0);
  for (const auto& c : g.cotangents) {
    const InputDecl* in = bwd.find_input(c);
    REQUIRE(in);
    bin[c] = fp64_input(bwd, *in, sizes, rng);
    cot[in->trivia.trailing.substr(std::string("cotangent of ").size())] = bin[c];
  }
  REQUIRE(bin.size() == bwd.inputs().size());
  auto grads = evaluate(*gen, bwd, sizes, bin);
  auto loss = [&](const std::map<std::string, Tensor>& x) {
    auto out = evaluate(*original, orig, sizes, x);
    double s = 0;
    for (const auto& [name, c] : cot) s += dot(c, out.at(name));
    return s;
  };
  REQUIRE(g.wrt.size() == grads.size());
  for (const auto& w : g.wrt) {
    INFO("d/d" << w);
    const Tensor& gw = grads.at("d" + w);
    REQUIRE(gw.axes == fwd.find_input(w)->axes);
    for (int trial = 0; trial < 2; ++trial) {
      const InputDecl* in = fwd.find_input(w);
      Tensor u = fp64_input(fwd, *in, sizes, rng);
      const double h = 1e-5;
      auto plus = inputs, minus = inputs;
      for (std::size_t i = 0; i < u.data.size(); ++i) {
        plus[w].data[i] += h * u.data[i];
        minus[w].data[i] -= h * u.data[i];
      }
      const double fd = (loss(plus) - loss(minus)) / (2 * h);
      const double an = dot(u, gw);
      INFO("finite difference " << fd << ", backward " << an);
      REQUIRE(std::isfinite(an));
      CHECK(std::fabs(fd - an) <= 1e-6 * std::max(1.0, std::fabs(an)));
    }
  }
}

}  // namespace

TEST_CASE("the backward of every bundled diagram equals finite differences in fp64", "[grad]") {
  std::uint64_t seed = 1;
  for (const auto& path : library_files()) check_gradient(path, slurp(path), seed++);
}

TEST_CASE("arrays saved instead of recomputed: the backward reads the forward's outputs", "[grad]") {
  const std::string lib = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/";
  check_gradient(lib + "attention.napkin", slurp(lib + "attention.napkin"), 21, {"P"});
  check_gradient(lib + "mlp_swiglu.napkin", slurp(lib + "mlp_swiglu.napkin"), 22, {"G", "H"});
  check_gradient(lib + "transformer_block.napkin", slurp(lib + "transformer_block.napkin"), 23, {"H1", "A_P", "X2"});
  Loaded l = load_unexpanded("attention.napkin", slurp(lib + "attention.napkin"));
  GradResult g = differentiate(*l.program, *l.diagram, {}, {"P"});
  const std::string text = print_file(g.file);
  INFO(text);
  CHECK(text.find("P_lse") == std::string::npos);  // P is read, not recomputed from its statistic
  CHECK(text.find("out P : bf16  # saved for the backward") != std::string::npos);
  CHECK(text.find("in  P[b,h,q,x] : bf16") != std::string::npos);
  CHECK(g.recomputed.empty());  // S is read by nothing once P is saved
  CHECK_THROWS_WITH(differentiate(*l.program, *l.diagram, {}, {"Q"}),
                    Catch::Contains("--save: 'Q' is not a statement of attention_fwd"));
}

TEST_CASE("every adjoint rule against finite differences", "[grad]") {
  const std::string ops = R"(diagram ops
axis t = 3
axis m = 4
axis v = 5
in  X[t,m] : fp32
in  W[m] : bf16
in  B[m] : fp32
in  L[t,v] : fp32
in  T[t] : int32
A[t,m] = gelu(X) * W + silu(X) - tanh(X) / (2 + sigmoid(X) * relu(X)) + X * step(X) + gelu_tanh(X * 2) * W
C[t,m] = abs(X) * erf(X) + pow(X * X + 1, 1.5) + exp(-X) * rsqrt(X * X + 1) + sqrt(X * X + 2) + log(X * X + 1)
E[t] = max(A; m) + mean(C; m) + sum(min(A, C) * max(A, W); m)
F[t,m] = layernorm(X, W, B; m, eps=1e-3) + rmsnorm(C, W; m) + l2norm(A; m)
G[t] = logsumexp(L; v) - gather(L, T; v)
H[t,m] = softmax(mask(F, W); m) + pow(X * X + 1, -0.5) / 100
Y[t] = E + G * 2 + sum(H * C; m) + contract(X, W, B; m)
out Y : fp32
out F : fp32
)";
  check_gradient("ops.napkin", ops, 11);
  const std::string broadcast = R"(diagram broadcast
axis t = 3
axis m = 4
in  X[t,m] : fp32
in  W[m] : fp32
S[t] = sum(X; m)
Z[t,m] = S * W + X / W
M[m] = mean(Z; t)
Y[t,m] = M - X * M + softmax(Z * 2 + causal(t, m); t)
out Y : fp32
)";
  check_gradient("broadcast.napkin", broadcast, 12);
}

TEST_CASE("cast passes the cotangent through (the straight-through estimator)", "[grad]") {
  Loaded l = load_unexpanded("cast.napkin", "diagram c\naxis t = 4\nin  X[t] : fp32\nY[t] = cast(X, fp8e4m3) * 2\nout Y : bf16\n");
  const std::string text = print_file(differentiate(*l.program, *l.diagram, {"X"}).file);
  INFO(text);
  CHECK(text.find("in  dY[t] : bf16  # cotangent of Y") != std::string::npos);
  CHECK(text.find("dX[t] = dY * 2    # gradient of X") != std::string::npos);
  CHECK(text.find("out dX : fp32") != std::string::npos);
}

TEST_CASE("inlining calls keeps the meaning: the transformer block inlined evaluates as called", "[grad]") {
  const std::string path = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/transformer_block.napkin";
  DiagnosticEngine diags;
  auto p = load_program(path, diags);
  const Diagram& d = p->select("");
  Diagram flat = inline_calls(*p, d);
  for (const auto* s : flat.statements()) {
    bool calls = false;
    walk(*s->expr, [&](const Expr& n) { calls |= n.kind == Expr::Kind::apply && n.op == Op::call; });
    CHECK_FALSE(calls);
  }
  CHECK(verify_diagram(*p, flat, diags));
  INFO(diags.render());
  const SizeMap sizes = *resolve_sizes(d, small_sizes(d), diags);
  std::map<std::string, Tensor> in;
  for (const auto* i : d.inputs()) in[i->name] = random_input(*i, sizes, 5);
  auto a = evaluate(*p, d, sizes, in);
  auto b = evaluate(*p, flat, *resolve_sizes(flat, small_sizes(d), diags), in);
  const Tensor& ya = a.at("Y");
  Tensor yb = permute(b.at("Y"), ya.axes);
  for (std::size_t i = 0; i < ya.data.size(); ++i) REQUIRE(yb.data[i] == Approx(ya.data[i]).epsilon(1e-12));
}

TEST_CASE("napkin grad: the attention backward recomputes P from the saved logsumexp", "[grad][cli]") {
  const std::string lib = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/";
  const std::string out = std::filesystem::temp_directory_path() / ("napkin-grad-" + std::to_string(getpid()) + ".napkin");
  RunResult r = run_napkin("grad " + lib + "attention.napkin --wrt Q,K,V -o " + out);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("napkin grad: d/d{Q,K,V} of attention: attention_fwd saves P_lse, O; attention_bwd takes the cotangents dO") !=
        std::string::npos);
  const std::string text = slurp(out);
  std::filesystem::remove(out);
  check_golden("grad/attention.napkin", text);
  CHECK(text.find("P_lse[b,h,q] = logsumexp(S; x)") != std::string::npos);
  CHECK(text.find("P[b,h,q,x] = exp(S - P_lse)") != std::string::npos);
  // FlashAttention-2's D = rowsum(dO o O): O read from the forward, not the q x x arrays dP and P
  CHECK(text.find("dP_rowsum[b,h,q] = sum(dO * O; d)") != std::string::npos);
  CHECK(text.find("in  O[b,h,q,d] : bf16") != std::string::npos);
  CHECK(text.find("out dV : bf16") != std::string::npos);
}

TEST_CASE("napkin grad refuses a bad --wrt with status 1", "[grad][cli]") {
  const std::string lib = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/";
  struct Case {
    std::string args, message;
  };
  for (const auto& c : {Case{"--wrt Q,Z", "'Z' is not an input of diagram 'attention'"},
                        Case{"--wrt Q,,K", "an empty name"},
                        Case{"--wrt Q,Q", "input 'Q' is named twice"}}) {
    RunResult r = run_napkin("grad " + lib + "attention.napkin " + c.args);
    INFO(c.args << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find(c.message) != std::string::npos);
  }
  RunResult r = run_napkin("grad " + std::string(NAPKIN_SOURCE_DIR) + "/tests/language/cross_entropy.napkin --wrt T");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("integer dtype int32: it has no gradient") != std::string::npos);
}

TEST_CASE("the backward's contractions read arrays: element-wise operands and sums of contractions become statements", "[grad]") {
  const std::string lib = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/";
  for (const char* file : {"sigmoid_attention.napkin", "mlp_swiglu.napkin", "transformer_block.napkin", "attention.napkin"}) {
    INFO(file);
    Loaded l = load_unexpanded(lib + file, slurp(lib + file));
    GradResult g = differentiate(*l.program, *l.diagram, {}, {});
    const Diagram& bwd = g.file.diagrams.back();
    INFO(print_file(g.file));
    for (const auto* s : bwd.statements()) {
      std::size_t contractions = 0;
      std::function<void(const Expr&)> top = [&](const Expr& e) {  // contractions summed at the top of the expression
        if (e.kind != Expr::Kind::apply) return;
        if (e.op == Op::contract) {
          ++contractions;
          for (const auto& a : e.args) {  // an array, or an index expression (band, causal) reading none
            bool reads_array = false;
            walk(*a, [&](const Expr& n) { reads_array |= n.kind == Expr::Kind::ref && bwd.array_axes(n.name); });
            CHECK((a->kind == Expr::Kind::ref || !reads_array));
          }
          return;
        }
        if (is_elementwise(e.op))
          for (const auto& a : e.args) top(*a);
      };
      top(*s->expr);
      CHECK(contractions <= 1);
    }
  }
  // the sigmoid attention's dS is shared by dQ and dK: one statement, read twice
  Loaded l = load_unexpanded(lib + "sigmoid_attention.napkin", slurp(lib + "sigmoid_attention.napkin"));
  const std::string text = print_file(differentiate(*l.program, *l.diagram, {}, {}).file);
  CHECK(text.find("dQ_operand[b,h,q,x] = dP * (P * (1 - P))") != std::string::npos);
  CHECK(text.find("contract(dQ_operand, Q; q)") != std::string::npos);
}

TEST_CASE("a pre-activation the adjoint reads is a forward statement: computed once, and savable", "[grad]") {
  // silu's adjoint reads its argument: G = silu(contract(X, W1; m)) becomes G_v = contract(X, W1; m);
  // G = silu(G_v) in the forward, so the backward neither contracts X with W1 twice (session 19:
  // 0.34 ms of a training step) nor lacks G_v as a candidate to save
  const std::string lib = std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/";
  Loaded l = load_unexpanded(lib + "mlp_swiglu.napkin", slurp(lib + "mlp_swiglu.napkin"));
  GradResult g = differentiate(*l.program, *l.diagram, {}, {});
  const Diagram& fwd = g.file.diagrams.front();
  const Diagram& bwd = g.file.diagrams.back();
  INFO(print_file(g.file));
  auto contractions_of_x_w1 = [](const Diagram& d) {
    int n = 0;
    for (const auto* s : d.statements())
      walk(*s->expr, [&](const Expr& e) {
        if (e.kind == Expr::Kind::apply && e.op == Op::contract && e.args.size() == 2 && e.args[0]->kind == Expr::Kind::ref &&
            e.args[1]->kind == Expr::Kind::ref && e.args[0]->name == "X" && e.args[1]->name == "W1")
          ++n;
      });
    return n;
  };
  CHECK(contractions_of_x_w1(fwd) == 1);
  CHECK(contractions_of_x_w1(bwd) == 1);
  REQUIRE(fwd.find_statement("G_v") != nullptr);
  CHECK(fwd.find_statement("G")->expr->args[0]->kind == Expr::Kind::ref);
  // saved, the backward reads it and contracts X with W1 not at all
  GradResult saved = differentiate(*l.program, *l.diagram, {}, {"G_v", "U", "H"});
  CHECK(contractions_of_x_w1(saved.file.diagrams.back()) == 0);
  // sigmoid's adjoint reads only its value: sigmoid attention's scores stay in one statement
  Loaded sa = load_unexpanded(lib + "sigmoid_attention.napkin", slurp(lib + "sigmoid_attention.napkin"));
  CHECK(differentiate(*sa.program, *sa.diagram, {}, {}).file.diagrams.front().find_statement("P_v") == nullptr);
}
