#include "perfmodel/budget.hpp"

#include <algorithm>
#include <cmath>

#include "diagrams/graph_view.hpp"

namespace napkin {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool carries(const InputDecl& in, const std::string& axis) {
  return std::find(in.axes.begin(), in.axes.end(), axis) != in.axes.end();
}

/** The default token axes: every axis of the first output but its last; empty after an error. */
std::vector<std::string> default_token_axes(const Diagram& d, DiagnosticEngine& diags) {
  auto outs = d.outputs();
  const auto* axes = outs.empty() ? nullptr : d.array_axes(outs.front()->name);
  if (!axes || axes->size() < 2) {
    diags.error(outs.empty() ? d.loc : outs.front()->loc,
                "napkin budget cannot tell the token axes of diagram '" + d.name +
                    "': its output needs at least two axes ([tokens.., features]); name them with --tokens-axis");
    return {};
  }
  return {axes->begin(), axes->end() - 1};
}

double array_bytes(const Diagram& d, const SizeMap& sizes, const std::string& name, const ModelOptions& opt) {
  const auto* axes = d.array_axes(name);
  if (!axes) return 0;
  return static_cast<double>(product(sizes, *axes)) * dtype_bits(storage_dtype(d, name, opt)) / 8.0;
}

}  // namespace

std::optional<InputSplit> split_inputs(const Diagram& d, const SizeMap& sizes, const std::vector<std::string>& token_axes,
                                       DiagnosticEngine& diags) {
  InputSplit out;
  const bool named = !token_axes.empty();
  out.token_axes = named ? token_axes : default_token_axes(d, diags);
  if (out.token_axes.empty()) return std::nullopt;
  for (const auto& a : out.token_axes) {
    if (!d.find_axis(a)) {
      diags.error(d.loc, "--tokens-axis names '" + a + "', which is not an axis of diagram '" + d.name + "'");
      return std::nullopt;
    }
  }
  out.tokens = product(sizes, out.token_axes);
  for (const auto* in : d.inputs()) {
    std::vector<std::string> has, lacks;
    for (const auto& a : out.token_axes) (carries(*in, a) ? has : lacks).push_back(a);
    if (has.empty()) {
      out.weights.push_back(in);
      out.params += product(sizes, in->axes);
    } else {
      out.activations.push_back(in);
      if (!named && !lacks.empty()) {
        diags.error(in->loc, "input '" + in->name + "' carries the token axes " + joined(has) + " but not " + joined(lacks) +
                                 " (the default token axes are the output's axes but its last: " + joined(out.token_axes) +
                                 "); is it a weight or an activation? name the token axes with --tokens-axis");
        return std::nullopt;
      }
    }
  }
  if (out.activations.empty()) {
    diags.error(d.loc, "no input of diagram '" + d.name + "' carries a token axis (" + joined(out.token_axes) +
                           "), so every input would be a weight and nothing an activation; name the token axes with --tokens-axis");
    return std::nullopt;
  }
  return out;
}

BytesPerParam bytes_per_param(DType precision, Optimizer opt) {
  BytesPerParam b;
  if (precision == DType::bf16)
    b.weights = b.grads = 2;
  else if (precision == DType::fp8e4m3)
    b.weights = b.grads = 1;
  else
    throw UserError("napkin budget prices bf16 and fp8 training, not " + std::string(dtype_name(precision)));
  const double master = 4;  // fp32 master weights: every optimizer below updates them
  switch (opt) {
    case Optimizer::adamw: b.optimizer = master + 4 + 4; break;      // fp32 first and second moments
    case Optimizer::adamw8bit: b.optimizer = master + 1 + 1; break;  // blockwise-quantised 8-bit moments
    case Optimizer::sgd: b.optimizer = master + 4; break;            // fp32 momentum buffer
  }
  return b;
}

SavedActivations saved_activations(const std::vector<DerivedDiagram>& diagrams, const InputSplit& split,
                                   const ModelOptions& opt) {
  SavedActivations s;
  if (diagrams.empty()) return s;
  const DerivedDiagram& block = diagrams.front();
  for (const auto* in : split.activations) s.inputs += array_bytes(*block.diagram, block.sizes, in->name, opt);
  for (const auto& dd : diagrams) {
    const Diagram& d = *dd.diagram;
    std::set<std::string> read;
    for (const auto* st : d.statements())
      walk(*st->expr, [&](const Expr& e) {
        if (e.kind == Expr::Kind::ref && d.array_axes(e.name)) read.insert(e.name);
      });
    for (const auto& name : read) {
      if (d.find_input(name)) continue;  // the block's inputs are counted above; a callee's are its caller's arrays
      double bytes = array_bytes(d, dd.sizes, name, opt);
      s.all += bytes;
      if (!dd.on_chip.count(name)) s.stored += bytes;
    }
  }
  s.all += s.inputs;
  s.stored += s.inputs;
  return s;
}

double activation_bytes(const SavedActivations& a, std::int64_t layers, Checkpointing c) {
  const double l = static_cast<double>(layers);
  switch (c) {
    case Checkpointing::none: return l * a.all;
    case Checkpointing::selective: return l * a.stored;
    case Checkpointing::full: return l * a.inputs + a.stored;
  }
  return 0;
}

Budget compute_budget(const BudgetInput& in, const BlockFigures& block) {
  Budget b;
  b.block_params = block.split.params;
  b.embedding_params = in.vocab * in.width * (in.tied ? 1 : 2);
  b.params = in.layers * b.block_params + b.embedding_params;
  if (b.params <= 0) throw UserError("the model has no parameters: no input of the block is a weight and no --embedding is given");
  const double P = static_cast<double>(b.params), D = in.tokens, L = static_cast<double>(in.layers);
  b.flops_6pd = 6.0 * P * D;
  const double runs = D / static_cast<double>(block.split.tokens);  // runs of the model, over all GPUs
  b.flops_exact = 3.0 * (L * block.forward_flops + block.head_flops) * runs;
  b.recompute_factor = in.checkpointing == Checkpointing::full ? 4.0 : 3.0;
  b.step_seconds = b.recompute_factor * (L * block.forward_seconds + block.head_seconds);
  b.seconds = runs / static_cast<double>(in.gpus) * b.step_seconds;
  b.gpu_seconds_per_token = b.seconds * static_cast<double>(in.gpus) / D;
  const BytesPerParam per = bytes_per_param(in.precision, in.optimizer);
  b.weights = per.weights * P;
  b.grads = per.grads * P;
  b.optimizer = per.optimizer * P;
  b.activations = activation_bytes(block.saved, in.layers, in.checkpointing) + block.head_saved;
  const double peak = block.peak_flops_per_s * static_cast<double>(in.gpus);
  b.mfu = b.seconds > 0 && peak > 0 ? b.flops_6pd / b.seconds / peak : 0;
  return b;
}

}  // namespace napkin
