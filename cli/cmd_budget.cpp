// napkin budget: the training budget of a model made of the diagram's block repeated L times
// (parameters, 6PD and the exact FLOPs, time, memory per GPU, MFU); the formulas are in
// perfmodel/budget.hpp and docs/budget.md.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "derive/derivation.hpp"
#include "diagrams/verify.hpp"
#include "perfmodel/budget.hpp"

namespace napkin::cli {

namespace {

struct BudgetArgs {
  DiagramArgs diagram;
  std::string hw = "h100", precision = "bf16", optimizer = "adamw", checkpointing = "none", format = "text";
  std::string tokens, embedding, tokens_axis;
  std::int64_t layers = 0, gpus = 1;
  bool tied = false;
};

/** D from `--tokens` ("15e12", "2000000"): a whole number from 1 to 1e20; raises UserError. */
double parse_tokens(const std::string& s) {
  std::istringstream in(s);
  double v = 0;
  bool ok = static_cast<bool>(in >> v) && in.peek() == std::char_traits<char>::eof();
  if (!ok || !std::isfinite(v) || v < 1 || v > 1e20 || std::floor(v) != v)
    throw UserError("--tokens expects a whole number of training tokens from 1 to 1e20 (e.g. 15e12), got '" + s + "'");
  return v;
}

/** V and d from `--embedding V,d`; raises UserError unless both are whole numbers from 1 to 2^31. */
std::pair<std::int64_t, std::int64_t> parse_embedding(const std::string& s) {
  auto comma = s.find(',');
  auto number = [&](const std::string& part) -> std::int64_t {
    if (part.empty() || part.size() > 10 || part.find_first_not_of("0123456789") != std::string::npos) return 0;
    std::int64_t v = std::stoll(part);
    return v <= (std::int64_t{1} << 31) ? v : 0;
  };
  std::int64_t v = 0, d = 0;
  if (comma != std::string::npos) v = number(s.substr(0, comma)), d = number(s.substr(comma + 1));
  if (v < 1 || d < 1)
    throw UserError("--embedding expects VOCAB,WIDTH, two whole numbers from 1 to 2^31 (e.g. 128256,4096), got '" + s + "'");
  return {v, d};
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

/** The block and every callee its derivation lifted, with the arrays their chosen kernels keep on
 *  chip; callee sizes as derive() binds them (derive/derivation.cpp). */
void collect(const Derivation& dv, const Diagram& d, const SizeMap& sizes, bool callee, std::vector<DerivedDiagram>& out) {
  DerivedDiagram dd{&d, sizes, {}, callee};
  for (const auto& k : dv.chosen.kernels) dd.on_chip.insert(k.cost.internal.begin(), k.cost.internal.end());
  out.push_back(dd);
  for (const auto& [statement, sub] : dv.callees) {
    SizeMap bound;
    for (const auto& [axis, caller] : sub->lifted->caller_axis) bound[axis] = sizes.at(caller);
    DiagnosticEngine diags;
    auto inner = resolve_sizes(sub->lifted->diagram, bound, diags);
    if (!inner) throw InternalError("budget: the sizes of callee " + sub->lifted->diagram.name + " do not resolve");
    collect(*sub, sub->lifted->diagram, *inner, true, out);
  }
}

/** The head, logits = contract(H, W; m) over T tokens, derived as any diagram is: its forward
 *  seconds and FLOPs, and the bytes its backward reads (H and W's gradient operands: H). */
void derive_head(const BudgetInput& in, std::int64_t tokens, const Hardware& hw, const ModelOptions& opt, BlockFigures& f) {
  std::string text = fmt::format(
      "diagram lm_head\naxis t = {}\naxis m = {}\naxis v = {}\nin H[t,m] : bf16\nin W[m,v] : bf16\n"
      "L[t,v] = contract(H, W; m)\nout L : bf16\n",
      tokens, in.width, in.vocab);
  DiagnosticEngine diags;
  auto program = load_program_text("<lm_head>", text, diags);
  const Diagram& d = program->select("");
  verify_program(*program, diags, &d, {});
  auto sizes = diags.has_errors() ? std::nullopt : resolve_sizes(d, {}, diags);
  if (!sizes) throw InternalError("budget: the head diagram does not verify:\n" + diags.render());
  Derivation dv = derive(*program, d, *sizes, hw, opt);
  f.head_seconds = dv.chosen.cost.t_total;
  f.head_flops = dv.chosen.cost.flops;
  f.head_saved = static_cast<double>(tokens * in.width) * dtype_bits(storage_dtype(d, "H", opt)) / 8.0;
}

/** The embedding width must be the block's width: the elements per token of its first output
 *  (its axes other than the token axes). Raises UserError naming both. */
void check_embedding_width(const Diagram& d, const SizeMap& sizes, const InputSplit& split, std::int64_t width) {
  const auto outs = d.outputs();
  const auto* axes = outs.empty() ? nullptr : d.array_axes(outs.front()->name);
  if (!axes) return;
  std::vector<std::string> features;
  for (const auto& a : *axes)
    if (std::find(split.token_axes.begin(), split.token_axes.end(), a) == split.token_axes.end()) features.push_back(a);
  const std::int64_t per_token = product(sizes, features);
  if (per_token != width)
    throw UserError(fmt::format("--embedding width {} is not the block's: its output {} has {} elements per token", width,
                                outs.front()->name, per_token));
}

std::string json_report(const Budget& b) {
  nlohmann::json j;
  j["params"] = b.params;
  j["flops_6pd"] = b.flops_6pd;
  j["flops_exact"] = b.flops_exact;
  j["seconds"] = b.seconds;
  j["memory_bytes"] = {{"weights", b.weights}, {"grads", b.grads}, {"optimizer", b.optimizer}, {"activations", b.activations}};
  j["mfu"] = b.mfu;
  return j.dump(2) + "\n";
}

std::string gb(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

void print_text(const BudgetArgs& a, const BudgetInput& in, const Diagram& d, const BlockFigures& f, const Budget& b,
                const Hardware& hw) {
  std::string weights;
  for (const auto* w : f.split.weights) weights += (weights.empty() ? "" : ", ") + w->name;
  fmt::print("napkin budget: {} x {} layers on {:.4g} tokens, {} x {} ({}, {}, checkpointing {})\n\n", d.name, in.layers,
             in.tokens, in.gpus, hw.name, a.precision, a.optimizer, a.checkpointing);
  std::string axes;
  for (const auto& t : f.split.token_axes) axes += (axes.empty() ? "" : ", ") + t;
  fmt::print("  token axes         {} ({} tokens per run of the block)\n", axes, f.split.tokens);
  fmt::print("  weights            {} (inputs without a token axis)\n", weights);
  fmt::print("  parameters P       {} = {} x {} per block + {} embedding and head\n", b.params, in.layers, b.block_params,
             b.embedding_params);
  fmt::print("  compute 6PD        {:.4g} FLOP (Kaplan et al. 2020)\n", b.flops_6pd);
  fmt::print("  compute exact      {:.4g} FLOP = 3 x forward of the derived kernels ({:.3f} x 6PD)\n", b.flops_exact,
             b.flops_exact / b.flops_6pd);
  fmt::print("  forward per run    block {:.3f} ms, head {:.3f} ms; step {:.3f} ms ({:g} x forward)\n", f.forward_seconds * 1e3,
             f.head_seconds * 1e3, b.step_seconds * 1e3, b.recompute_factor);
  fmt::print("  time               {:.4g} s = {:.1f} days on {} GPU{}; {:.4g} GPU-hours\n", b.seconds, b.seconds / 86400, in.gpus, in.gpus == 1 ? "" : "s",
             b.seconds * static_cast<double>(in.gpus) / 3600);
  fmt::print("  cost per token     {:.4g} GPU-us\n", b.gpu_seconds_per_token * 1e6);
  const double total = b.weights + b.grads + b.optimizer + b.activations;
  fmt::print("  memory per GPU     weights {}, grads {}, optimizer {}, activations {}; total {}\n", gb(b.weights), gb(b.grads),
             gb(b.optimizer), gb(b.activations), gb(total));
  if (hw.hbm.capacity_bytes > 0 && total > hw.hbm.capacity_bytes)
    fmt::print("                     exceeds the {} of one {}: shard the states over the GPUs (ZeRO/FSDP) or recompute\n",
               gb(hw.hbm.capacity_bytes), hw.name);
  fmt::print("  MFU                {:.3f} (6PD / time / (GPUs x {:.0f} TFLOP/s))\n", b.mfu, f.peak_flops_per_s / 1e12);
}

}  // namespace

Runner setup_budget(CLI::App& sub) {
  auto a = std::make_shared<BudgetArgs>();
  a->diagram.add_to(sub);
  sub.add_option("--layers", a->layers, "Blocks in the model (L)")->required()->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}));
  sub.add_option("--tokens", a->tokens, "Training tokens (D), e.g. 15e12")->required();
  sub.add_option("--hw", a->hw, "Hardware name or description file")->capture_default_str();
  sub.add_option("--gpus", a->gpus, "GPUs, data parallel (G)")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{10000000}));
  sub.add_option("--precision", a->precision, "Training precision")->capture_default_str()->check(CLI::IsMember({"bf16", "fp8"}));
  sub.add_option("--optimizer", a->optimizer, "Optimizer")->capture_default_str()->check(CLI::IsMember({"adamw", "adamw8bit", "sgd"}));
  sub.add_option("--checkpointing", a->checkpointing, "Activation recomputation")->capture_default_str()->check(CLI::IsMember({"none", "full", "selective"}));
  sub.add_option("--embedding", a->embedding, "Embedding table and output head, VOCAB,WIDTH");
  sub.add_flag("--tie-embeddings", a->tied, "The head shares the embedding table");
  sub.add_option("--tokens-axis", a->tokens_axis, "Comma-separated axes that index tokens (default: the output's axes but its last)");
  sub.add_option("--format", a->format, "Output format")->capture_default_str()->check(CLI::IsMember({"text", "json"}));
  return [a] {
    BudgetInput in;
    in.layers = a->layers;
    in.gpus = a->gpus;
    in.tied = a->tied;
    in.tokens = parse_tokens(a->tokens);
    in.precision = a->precision == "fp8" ? DType::fp8e4m3 : DType::bf16;
    in.optimizer = a->optimizer == "adamw8bit" ? Optimizer::adamw8bit : a->optimizer == "sgd" ? Optimizer::sgd : Optimizer::adamw;
    in.checkpointing = a->checkpointing == "full" ? Checkpointing::full
                       : a->checkpointing == "selective" ? Checkpointing::selective : Checkpointing::none;
    if (!a->embedding.empty()) std::tie(in.vocab, in.width) = parse_embedding(a->embedding);
    if (a->tied && a->embedding.empty()) throw UserError("--tie-embeddings needs --embedding VOCAB,WIDTH");
    if (!a->tokens_axis.empty() && split_names(a->tokens_axis).empty())
      throw UserError("--tokens-axis needs at least one axis name (a comma-separated list), got '" + a->tokens_axis + "'");
    Hardware hw = load_hardware(a->hw);
    auto peak = hw.tensor_rate(in.precision);
    if (!peak) throw UserError(fmt::format("{} has no {} tensor cores; use --precision bf16 or another --hw", hw.name, a->precision));
    auto l = load_checked(a->diagram);
    if (!l) return 1;
    const Diagram& d = *l->diagram;
    DiagnosticEngine diags;
    auto split = split_inputs(d, l->sizes, split_names(a->tokens_axis), diags);
    std::cerr << diags.render();
    if (!split) return 1;
    ModelOptions opt;
    opt.dtype = in.precision;
    BlockFigures f;
    f.split = *split;
    f.peak_flops_per_s = *peak;
    Derivation dv = derive(*l->program, d, l->sizes, hw, opt);
    f.forward_seconds = dv.chosen.cost.t_total;
    f.forward_flops = dv.chosen.cost.flops;
    std::vector<DerivedDiagram> diagrams;
    collect(dv, d, l->sizes, false, diagrams);
    f.saved = saved_activations(diagrams, f.split, opt);
    if (in.vocab > 0) check_embedding_width(d, l->sizes, f.split, in.width);
    if (in.vocab > 0) derive_head(in, f.split.tokens, hw, opt, f);
    Budget b = compute_budget(in, f);
    if (a->format == "json")
      std::cout << json_report(b);
    else
      print_text(*a, in, d, f, b, hw);
    return 0;
  };
}

}  // namespace napkin::cli
