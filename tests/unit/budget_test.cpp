// napkin budget: parameters, 6PD, memory per parameter, activations by checkpointing, the JSON
// schema and bad options (perfmodel/budget.hpp, cli/cmd_budget.cpp).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "perfmodel/budget.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

std::string lib(const std::string& f) { return std::string(NAPKIN_SOURCE_DIR) + "/diagrams/library/" + f; }

/** `napkin budget` of the bundled transformer block at 1024 tokens per run (a quick derivation). */
nlohmann::json budget_json(const std::string& options) {
  auto r = run_napkin("budget " + lib("transformer_block.napkin") + " --set s=1024 --layers 32 --tokens 15e12 --format json " +
                      options);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.output);
}

/** Elements of the block's weights, computed here from the diagram: inputs with neither b nor s. */
double block_weights() {
  auto l = load_library("transformer_block.napkin");
  double sum = 0;
  for (const auto* in : l.diagram->inputs()) {
    bool token = false;
    double n = 1;
    for (const auto& a : in->axes) {
      token = token || a == "b" || a == "s";
      n *= static_cast<double>(l.sizes.at(a));
    }
    if (!token) sum += n;
  }
  return sum;
}

}  // namespace

TEST_CASE("budget: P is the block's weights times L, plus the embedding and head", "[budget]") {
  const double expected = 32 * block_weights();
  CHECK(expected > 6.9e9);  // Llama-3-8B's 32 layers: about 6.98 B without embeddings
  auto j = budget_json("");
  double p = j["params"].get<double>();
  CHECK(std::abs(p - expected) <= 0.01 * expected);
  CHECK(p == expected);
  auto e = budget_json("--embedding 128256,4096");
  CHECK(e["params"].get<double>() == expected + 2.0 * 128256 * 4096);
  auto tied = budget_json("--embedding 128256,4096 --tie-embeddings");
  CHECK(tied["params"].get<double>() == expected + 128256.0 * 4096);
}

TEST_CASE("budget: flops_6pd is 6PD exactly, the exact count is 3 x the derived forward", "[budget]") {
  auto j = budget_json("");
  const double P = j["params"].get<double>(), D = 15e12;
  CHECK(j["flops_6pd"].get<double>() == 6.0 * P * D);
  // The block's matmuls alone are 2PD forward; attention's N^2 terms come on top.
  CHECK(j["flops_exact"].get<double>() > j["flops_6pd"].get<double>());
  CHECK(j["flops_exact"].get<double>() < 1.5 * j["flops_6pd"].get<double>());
  CHECK(j["mfu"].get<double>() > 0);
  CHECK(j["mfu"].get<double>() < 1);
  CHECK(j["seconds"].get<double>() > 0);
  auto g8 = budget_json("--gpus 8");
  CHECK(g8["seconds"].get<double>() == Approx(j["seconds"].get<double>() / 8).epsilon(1e-12));
  CHECK(g8["mfu"].get<double>() == Approx(j["mfu"].get<double>()).epsilon(1e-12));
}

TEST_CASE("budget: a block of weight matmuls only costs 6PD, its elementwise FLOPs aside", "[budget]") {
  auto r = run_napkin("budget " + lib("mlp_swiglu.napkin") + " --layers 2 --tokens 1e9 --format json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.output);
  CHECK(j["flops_exact"].get<double>() >= j["flops_6pd"].get<double>());
  CHECK(j["flops_exact"].get<double>() == Approx(j["flops_6pd"].get<double>()).epsilon(1e-3));
}

TEST_CASE("budget: memory per parameter by precision and optimizer", "[budget]") {
  struct Case {
    const char* options;
    double weights, grads, optimizer;
  };
  const Case cases[] = {{"", 2, 2, 12},                                       // bf16 + AdamW: 16 bytes (ZeRO)
                        {"--optimizer adamw8bit", 2, 2, 6},                   // 8-bit moments
                        {"--optimizer sgd", 2, 2, 8},                         // master + momentum
                        {"--precision fp8", 1, 1, 12},                        // fp8 weights and gradients
                        {"--precision fp8 --optimizer adamw8bit", 1, 1, 6}};  //
  for (const auto& c : cases) {
    INFO(c.options);
    auto j = budget_json(c.options);
    const double P = j["params"].get<double>();
    const auto& m = j["memory_bytes"];
    CHECK(m["weights"].get<double>() == c.weights * P);
    CHECK(m["grads"].get<double>() == c.grads * P);
    CHECK(m["optimizer"].get<double>() == c.optimizer * P);
  }
  auto j = budget_json("");
  const auto& m = j["memory_bytes"];
  CHECK(m["weights"].get<double>() + m["grads"].get<double>() + m["optimizer"].get<double>() == 16 * j["params"].get<double>());
}

TEST_CASE("budget: checkpointing changes the activations (and full recomputation the time) only", "[budget]") {
  auto none = budget_json("--checkpointing none");
  auto sel = budget_json("--checkpointing selective");
  auto full = budget_json("--checkpointing full");
  for (const auto* other : {&sel, &full}) {
    for (const char* k : {"params", "flops_6pd", "flops_exact"}) CHECK((*other)[k] == none[k]);
    for (const char* k : {"weights", "grads", "optimizer"}) CHECK((*other)["memory_bytes"][k] == none["memory_bytes"][k]);
  }
  const double a_none = none["memory_bytes"]["activations"].get<double>();
  const double a_sel = sel["memory_bytes"]["activations"].get<double>();
  const double a_full = full["memory_bytes"]["activations"].get<double>();
  CHECK(a_sel < a_none);   // the fused attention never stores its scores
  CHECK(a_full < a_sel);   // one input per layer and one layer's working set
  const double x_bytes = 1024.0 * 4096 * 2;  // the checkpoint of a layer: its input X[b,s,m], bf16
  CHECK(a_full == Approx(32 * x_bytes + a_sel / 32).epsilon(1e-12));
  CHECK(sel["seconds"] == none["seconds"]);
  CHECK(full["seconds"].get<double>() == Approx(none["seconds"].get<double>() * 4 / 3).epsilon(1e-12));
  // Without checkpointing, each layer keeps at least its input X (1024 x 4096 bf16) and the
  // attention scores P and S (32 heads x 1024^2, bf16 each).
  CHECK(a_none >= 32 * (1024.0 * 4096 * 2 + 2 * 32 * 1024.0 * 1024 * 2));
}

TEST_CASE("budget: the JSON has exactly the documented keys", "[budget]") {
  auto j = budget_json("--embedding 128256,4096 --gpus 4");
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"flops_6pd", "flops_exact", "memory_bytes", "mfu", "params", "seconds"});
  std::vector<std::string> memory;
  for (const auto& [k, v] : j["memory_bytes"].items()) memory.push_back(k);
  CHECK(memory == std::vector<std::string>{"activations", "grads", "optimizer", "weights"});
  CHECK(j["params"].is_number_integer());
}

TEST_CASE("budget: bad options and ambiguous weights exit 1 with a clear error", "[budget]") {
  const std::string block = "budget " + lib("transformer_block.napkin") + " --set s=1024 ";
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {block + "--layers 0 --tokens 1e9", "--layers"},
      {block + "--tokens 1e9", "--layers is required"},
      {block + "--layers 2 --tokens abc", "--tokens expects a whole number"},
      {block + "--layers 2 --tokens 1.5", "--tokens expects a whole number"},
      {block + "--layers 2 --tokens inf", "--tokens expects a whole number"},
      {block + "--layers 2 --tokens 1e9 --embedding 5", "--embedding expects VOCAB,WIDTH"},
      {block + "--layers 2 --tokens 1e9 --embedding 5,-1", "--embedding expects VOCAB,WIDTH"},
      {block + "--layers 2 --tokens 1e9 --embedding 32000,5120", "--embedding width 5120 is not the block's: its output Y has 4096"},
      {block + "--layers 2 --tokens 1e9 --precision int4", "--precision"},
      {block + "--layers 2 --tokens 1e9 --optimizer lion", "--optimizer"},
      {block + "--layers 2 --tokens 1e9 --tie-embeddings", "--tie-embeddings needs --embedding"},
      {block + "--layers 2 --tokens 1e9 --precision fp8 --hw a100", "no fp8 tensor cores"},
      {block + "--layers 2 --tokens 1e9 --tokens-axis zz", "--tokens-axis names 'zz', which is not an axis"},
      {"budget " + lib("gqa_attention.napkin") + " --layers 2 --tokens 1e9",
       "gqa_attention.napkin:12:1: error: input 'K' carries the token axes b, g but not r, q"},
      {"budget " + lib("gqa_attention.napkin") + " --layers 2 --tokens 1e9 --tokens-axis b",
       "the model has no parameters"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    auto r = run_napkin(c.args);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find(c.message) != std::string::npos);
  }
}

TEST_CASE("budget: weights are the inputs without a token axis", "[budget]") {
  auto l = load_text(
      "diagram g\naxis t = 8\naxis m = 4\naxis n = 6\nin X[t,m] : bf16\nin W[m,n] : bf16\nin c[n] : fp32\n"
      "H[t,n] = contract(X, W; m)\nY[t,n] = exp(H) + c\nout Y : bf16\n");
  DiagnosticEngine diags;
  auto split = split_inputs(*l.diagram, l.sizes, {}, diags);
  REQUIRE(split);
  CHECK(split->token_axes == std::vector<std::string>{"t"});
  CHECK(split->tokens == 8);
  CHECK(split->params == 4 * 6 + 6);
  REQUIRE(split->activations.size() == 1);
  CHECK(split->activations.front()->name == "X");
  // Named token axes: m makes W an activation too.
  auto named = split_inputs(*l.diagram, l.sizes, {"t", "m"}, diags);
  REQUIRE(named);
  CHECK(named->params == 6);
  CHECK(named->tokens == 32);
  // The backward reads X and H (W is a weight, counted apart); H fused away is recomputed.
  ModelOptions opt;
  opt.dtype = DType::bf16;
  auto saved = saved_activations({{l.diagram, l.sizes, {}, false}}, *split, opt);
  CHECK(saved.inputs == 8 * 4 * 2);
  CHECK(saved.all == 8 * 4 * 2 + 8 * 6 * 2);
  CHECK(saved.stored == saved.all);
  auto fused = saved_activations({{l.diagram, l.sizes, {"H"}, false}}, *split, opt);
  CHECK(fused.stored == 8 * 4 * 2);
  CHECK(activation_bytes(saved, 10, Checkpointing::none) == 10 * saved.all);
  CHECK(activation_bytes(fused, 10, Checkpointing::selective) == 10 * fused.stored);
  CHECK(activation_bytes(saved, 10, Checkpointing::full) == 10 * saved.inputs + saved.stored);
}

TEST_CASE("budget: bytes per parameter", "[budget]") {
  auto b = bytes_per_param(DType::bf16, Optimizer::adamw);
  CHECK(b.weights + b.grads + b.optimizer == 16);
  CHECK(bytes_per_param(DType::bf16, Optimizer::adamw8bit).optimizer == 6);
  CHECK(bytes_per_param(DType::fp8e4m3, Optimizer::sgd).weights == 1);
  CHECK_THROWS_AS(bytes_per_param(DType::int4, Optimizer::adamw), UserError);
}
