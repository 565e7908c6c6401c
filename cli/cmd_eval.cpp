// napkin eval: run a diagram in fp64 on seeded random (or given) inputs; write .npy files.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "diagrams/eval.hpp"
#include "diagrams/npy.hpp"
#include "diagrams/printer.hpp"

namespace napkin::cli {

namespace {

Tensor load_input(const InputDecl& in, const SizeMap& sizes, const std::string& path) {
  NpyArray a = decode_npy(read_file(path), path);
  Tensor t = Tensor::filled(in.axes, sizes);
  if (a.shape != t.shape) {
    auto shape = [](const std::vector<std::int64_t>& s) {
      std::string r = "(";
      for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
      return r + ")";
    };
    throw UserError("size mismatch: " + path + " holds an array of shape " + shape(a.shape) + ", but input " +
                    in.name + print_axes(in.axes) + " has shape " + shape(t.shape));
  }
  t.data = std::move(a.data);
  return t;
}

void summary_row(const std::string& role, const std::string& name, const Tensor& t, std::string_view dtype) {
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (double v : t.data) lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
  shape += ")";
  fmt::print("  {:<6} {:<10} {:<10} {:<18} {:>12.5g} {:>12.5g} {:>12.5g}\n", role, name, dtype, shape, lo, hi,
             t.data.empty() ? 0.0 : sum / static_cast<double>(t.data.size()));
}

/** A warning on stderr when output `o` holds NaN or infinite values: their count, the first
 *  one's index by axis and its value (a fully masked softmax row, an infinite input). */
void warn_non_finite(const OutputDecl& o, const Tensor& t) {
  NonFinite nf = non_finite(t);
  if (nf.count == 0) return;
  std::string at;
  for (std::size_t k = 0; k < nf.first.size(); ++k) at += fmt::format("{}{}={}", k ? ", " : "", t.axes[k], nf.first[k]);
  std::fflush(stdout);
  fmt::print(stderr, "napkin: warning: output '{}' has {} non-finite value{} (NaN or infinity) among {}; the first is {}[{}] = {}\n",
             o.name, nf.count, nf.count == 1 ? "" : "s", t.data.size(), o.name, at,
             std::isnan(nf.value) ? "NaN" : nf.value > 0 ? "inf" : "-inf");
}

}  // namespace

Runner setup_eval(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto out = std::make_shared<std::string>();
  auto seed = std::make_shared<std::uint64_t>(0);
  auto given = std::make_shared<std::vector<std::string>>();
  args->add_to(sub);
  sub.add_option("--seed", *seed, "Seed of the random inputs (default 0)")->check(seed_value());
  sub.add_option("-o,--output", *out, "Folder for the .npy files (default: <diagram>-eval)");
  sub.add_option("--input", *given, "Read an input from a .npy file, NAME=FILE (repeatable)");
  return [args, out, seed, given] {
    auto l = load_checked(*args);
    if (!l) return 1;
    const Diagram& d = *l->diagram;
    std::map<std::string, std::string> files;
    for (const auto& g : *given) {
      auto eq = g.find('=');
      if (eq == std::string::npos || eq == 0) throw UserError("--input expects NAME=FILE.npy, got '" + g + "'");
      std::string name = g.substr(0, eq);
      if (!d.find_input(name)) throw UserError("--input " + g + ": diagram '" + d.name + "' has no input '" + name + "'");
      files[name] = g.substr(eq + 1);
    }
    check_eval_limits(*l->program, d, l->sizes);
    std::map<std::string, Tensor> inputs;
    const auto bounds = target_bounds(d, l->sizes);  // gather targets are drawn in range
    for (const auto* in : d.inputs()) {
      auto bound = bounds.find(in->name);
      inputs[in->name] = files.count(in->name) ? load_input(*in, l->sizes, files[in->name])
                                               : random_input(*in, l->sizes, *seed,
                                                              bound == bounds.end() ? std::nullopt : std::optional(bound->second));
    }
    auto outputs = evaluate(*l->program, d, l->sizes, inputs);

    std::string dir = out->empty() ? d.name + "-eval" : *out;
    OutputSet written(dir);  // the folder of .npy files is complete or absent
    auto save = [&](const std::string& name, const Tensor& t) {
      written.add((std::filesystem::path(dir) / (name + ".npy")).string(), encode_npy({t.shape, t.data}));
    };
    for (const auto& [n, t] : inputs) save(n, t);
    for (const auto& [n, t] : outputs) save(n, t);
    written.commit();

    std::string sizes;
    for (const auto& [a, s] : l->sizes) sizes += (sizes.empty() ? "" : " ") + a + "=" + std::to_string(s);
    fmt::print("evaluated diagram '{}' in fp64 (seed {}, {})\n", d.name, *seed, sizes);
    fmt::print("  {:<6} {:<10} {:<10} {:<18} {:>12} {:>12} {:>12}\n", "role", "array", "dtype", "shape", "min", "max",
               "mean");
    for (const auto* in : d.inputs()) summary_row("in", in->name, inputs.at(in->name), dtype_name(in->dtype));
    for (const auto* o : d.outputs()) summary_row("out", o->name, outputs.at(o->name), "fp64");
    fmt::print("wrote {} .npy files to {}/ (numpy.load reads them; outputs are fp64)\n", inputs.size() + outputs.size(), dir);
    for (const auto* o : d.outputs()) warn_non_finite(*o, outputs.at(o->name));
    return 0;
  };
}

}  // namespace napkin::cli
