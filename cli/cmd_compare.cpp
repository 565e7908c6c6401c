// napkin compare: the best schedule for each (hardware, dtype) pair: predicted time, TFLOP/s,
// bound and bytes per level, as a table, a CSV file and an SVG bar chart.
#include <fmt/core.h>

#include <algorithm>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "derive/derivation.hpp"
#include "diagrams/npy.hpp"

namespace napkin::cli {

namespace {

struct Row {
  std::string hw, dtype, bound, note;
  std::size_t kernels = 0;
  double seconds = 0, flops = 0, hbm = 0, l2 = 0;
  bool ok = false;
};

/** The names of a comma-separated option value; raises UserError when it names none. */
std::vector<std::string> split(const std::string& s, const std::string& option) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  if (out.empty()) throw UserError(option + " needs at least one name (a comma-separated list), got '" + s + "'");
  return out;
}

std::string csv(const std::vector<Row>& rows) {
  std::string out = "hardware,dtype,kernels,predicted_us,tflops,bound,hbm_bytes,l2_to_smem_bytes,note\n";
  for (const auto& r : rows)
    out += fmt::format("{},{},{},{:.3f},{:.2f},\"{}\",{:.0f},{:.0f},\"{}\"\n", r.hw, r.dtype, r.kernels, r.seconds * 1e6,
                       r.ok ? r.flops / r.seconds / 1e12 : 0.0, r.bound, r.hbm, r.l2, r.note);
  return out;
}

/** A horizontal bar per pair, length proportional to the predicted time; hand-written SVG. */
std::string chart(const std::vector<Row>& rows, const std::string& title) {
  double longest = 0;
  for (const auto& r : rows)
    if (r.ok) longest = std::max(longest, r.seconds);
  const int bar_h = 22, left = 210, width = 460, top = 46;
  int height = top + static_cast<int>(rows.size()) * (bar_h + 8) + 30;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"Helvetica,Arial,sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n"
      "<text x=\"10\" y=\"38\" font-size=\"11\" fill=\"#555\">predicted time of the derived schedule (napkin model; shorter is faster)</text>\n",
      left + width + 260, height, title);
  static const char* colours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"};
  std::vector<std::string> dtypes;
  for (const auto& r : rows)
    if (std::find(dtypes.begin(), dtypes.end(), r.dtype) == dtypes.end()) dtypes.push_back(r.dtype);
  int y = top;
  for (const auto& r : rows) {
    std::size_t ci = static_cast<std::size_t>(std::find(dtypes.begin(), dtypes.end(), r.dtype) - dtypes.begin());
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{} {}</text>\n", left - 8, y + 15, r.hw, r.dtype);
    if (r.ok) {
      double w = longest > 0 ? r.seconds / longest * width : 0;
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", left, y, std::max(1.0, w), bar_h,
                       colours[ci % 6]);
      s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\">{:.1f} us, {:.0f} TFLOP/s, {}</text>\n", left + w + 6, y + 15,
                       r.seconds * 1e6, r.flops / r.seconds / 1e12, r.bound);
    } else {
      s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#999\">{}</text>\n", left + 4, y + 15, r.note);
    }
    y += bar_h + 8;
  }
  return s + "</svg>\n";
}

}  // namespace

Runner setup_compare(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto hws = std::make_shared<std::string>("a100,h100,h200,b200");
  auto dtypes = std::make_shared<std::string>("bf16,fp8e4m3");
  auto out = std::make_shared<std::string>();
  args->add_to(sub);
  sub.add_option("--hw", *hws, "Comma-separated hardware names")->capture_default_str();
  sub.add_option("--dtype", *dtypes, "Comma-separated dtypes every array is stored in")->capture_default_str();
  sub.add_option("-o,--output", *out, "Prefix of the CSV and SVG files (default: <diagram>-compare)");
  return [=] {
    auto l = load_checked(*args);
    if (!l) return 1;
    const Diagram& d = *l->diagram;
    std::vector<Row> rows;
    const auto hw_names = split(*hws, "--hw"), dtype_names = split(*dtypes, "--dtype");
    for (const auto& hname : hw_names) {
      Hardware h = load_hardware(hname);
      for (const auto& dname : dtype_names) {
        auto dt = parse_dtype(dname);
        if (!dt) throw UserError("unknown dtype '" + dname + "'; expected one of " + dtype_list());
        Row r{h.name, dname, "", "", 0, 0, 0, 0, 0, false};
        if (!h.tensor_rate(*dt) && *dt != DType::fp32) {
          r.note = "no " + dname + " tensor cores on " + h.name;
          rows.push_back(r);
          continue;
        }
        ModelOptions opt;
        opt.dtype = dt;
        try {
          Derivation dv = derive(*l->program, d, l->sizes, h, opt);
          r.ok = true;
          r.kernels = dv.chosen.kernels.size();
          r.seconds = dv.chosen.cost.t_total;
          r.flops = dv.chosen.cost.flops;
          r.hbm = dv.chosen.cost.hbm_bytes;
          r.l2 = dv.chosen.cost.l2_to_smem_bytes;
          const KernelChoice* slowest = &dv.chosen.kernels.front();
          for (const auto& k : dv.chosen.kernels)
            if (k.cost.t_total > slowest->cost.t_total) slowest = &k;
          r.bound = slowest->cost.bound;
        } catch (const UserError& e) {
          r.note = e.what();
        }
        rows.push_back(r);
      }
    }
    fmt::print("napkin compare: diagram '{}' (sizes as declared; every array stored in the listed dtype)\n\n", d.name);
    fmt::print("  {:<16} {:<9} {:>7} {:>13} {:>9} {:>11} {:>11}   {}\n", "hardware", "dtype", "kernels", "predicted", "TFLOP/s",
               "HBM", "L2->SMEM", "bound");
    for (const auto& r : rows) {
      if (!r.ok) {
        fmt::print("  {:<16} {:<9} {}\n", r.hw, r.dtype, r.note);
        continue;
      }
      fmt::print("  {:<16} {:<9} {:>7} {:>10.1f} us {:>9.0f} {:>11} {:>11}   {}\n", r.hw, r.dtype, r.kernels, r.seconds * 1e6,
                 r.flops / r.seconds / 1e12, human_bytes(r.hbm), human_bytes(r.l2), r.bound);
    }
    std::string prefix = out->empty() ? d.name + "-compare" : *out;
    OutputSet files;  // the CSV and the chart: both or neither
    files.add(prefix + ".csv", csv(rows));
    files.add(prefix + ".svg", chart(rows, "napkin compare: " + d.name));
    files.commit();
    fmt::print("\nwrote {}.csv and {}.svg\n", prefix, prefix);
    return 0;
  };
}

}  // namespace napkin::cli
