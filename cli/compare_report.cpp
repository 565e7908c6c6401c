#include "cli/compare_report.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "derive/pass.hpp"

namespace napkin::cli {

namespace {

bool any_measure(const std::vector<CompareRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const CompareRow& r) { return r.measure != Measured::off; });
}

bool timed(const CompareRow& r) { return (r.measure == Measured::measured || r.measure == Measured::wrong) && r.measured_s > 0; }

/** The row's measurement in words: "", "WRONG: max|err| / max|ref| = ... > tolerance ...", "not measured: ...", "failed: ...". */
std::string measure_text(const CompareRow& r) {
  switch (r.measure) {
    case Measured::wrong:
      return fmt::format("WRONG: max|err| / max|ref| = {:.2e} > tolerance {:.2e}", r.max_rel_err, r.tolerance);
    case Measured::not_measured: return "not measured: " + r.measure_note;
    case Measured::failed: return "failed: " + r.measure_note;
    default: return "";
  }
}

const char* check_word(Measured m) {
  switch (m) {
    case Measured::measured: return "ok";
    case Measured::wrong: return "WRONG";
    case Measured::not_measured: return "not measured";
    case Measured::failed: return "failed";
    default: return "";
  }
}

/** The CSV's quoted text field: double quotes doubled (RFC 4180). */
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

double model_error(const CompareRow& r) { return r.measured_s > 0 ? r.seconds / r.measured_s - 1 : 0; }

std::string compare_table(const std::vector<CompareRow>& rows, const std::string& diagram) {
  const bool m = any_measure(rows);
  std::string s = fmt::format(
      "napkin compare: diagram '{}' (sizes as declared; a 16- or 32-bit dtype stores every array in it; an 8-bit or\n"
      "narrower one stores the inputs in it and the outputs and intermediates in bf16, accumulating in fp32)\n\n",
      diagram);
  if (m)
    s += fmt::format("  {:<16} {:<9} {:>7} {:>13} {:>9} {:>13} {:>9} {:>7} {:>11} {:>11}   {}\n", "hardware", "dtype", "kernels", "predicted", "TFLOP/s",
                     "measured", "TFLOP/s", "model", "HBM", "L2->SMEM", "bound");
  else
    s += fmt::format("  {:<16} {:<9} {:>7} {:>13} {:>9} {:>11} {:>11}   {}\n", "hardware", "dtype", "kernels", "predicted", "TFLOP/s", "HBM", "L2->SMEM",
                     "bound");
  for (const auto& r : rows) {
    if (!r.ok) {
      s += fmt::format("  {:<16} {:<9} {}\n", r.hw, r.dtype, m ? measure_text(r) : r.note);
      continue;
    }
    const std::string predicted = fmt::format("{:>10.1f} us {:>9.0f}", r.seconds * 1e6, r.flops / r.seconds / 1e12);
    std::string measured;
    if (m) measured = timed(r) ? fmt::format(" {:>10.1f} us {:>9.0f} {:>+6.0f}%", r.measured_s * 1e6, r.flops / r.measured_s / 1e12, model_error(r) * 100)
                               : fmt::format(" {:>13} {:>9} {:>7}", "-", "-", "-");
    s += fmt::format("  {:<16} {:<9} {:>7} {}{} {:>11} {:>11}   {}", r.hw, r.dtype, r.kernels, predicted, measured, human_bytes(r.hbm), human_bytes(r.l2),
                     r.bound);
    const std::string note = measure_text(r);
    s += note.empty() ? "\n" : "; " + note + "\n";
  }
  return s;
}

std::string compare_csv(const std::vector<CompareRow>& rows) {
  const bool m = any_measure(rows);
  std::string out = "hardware,dtype,kernels,predicted_us,tflops,bound,hbm_bytes,l2_to_smem_bytes,note";
  out += m ? ",measured_us,measured_tflops,model_error,check,max_err_over_max_ref,tolerance\n" : "\n";
  for (const auto& r : rows) {
    const std::string note = m ? measure_text(r) : r.note;  // a row without a prediction is not measured, for the same reason
    out += fmt::format("{},{},{},{:.3f},{:.2f},{},{:.0f},{:.0f},{}", r.hw, r.dtype, r.kernels, r.seconds * 1e6, r.ok ? r.flops / r.seconds / 1e12 : 0.0,
                       quoted(r.bound), r.hbm, r.l2, quoted(note));
    if (m) {
      if (timed(r))
        out += fmt::format(",{:.3f},{:.2f},{:.4f},{},{:.3e},{:.3e}\n", r.measured_s * 1e6, r.flops / r.measured_s / 1e12, model_error(r), check_word(r.measure),
                           r.max_rel_err, r.tolerance);
      else
        out += fmt::format(",,,,{},,\n", check_word(r.measure));
    } else {
      out += "\n";
    }
  }
  return out;
}

std::string compare_chart(const std::vector<CompareRow>& rows, const std::string& title) {
  const bool m = any_measure(rows);
  double longest = 0;
  for (const auto& r : rows) {
    if (r.ok) longest = std::max(longest, r.seconds);
    if (timed(r)) longest = std::max(longest, r.measured_s);
  }
  const int bar_h = 22, meas_h = m ? 14 : 0, gap = m ? 12 : 8, left = 210, width = 460, top = m ? 66 : 46;
  const int height = top + static_cast<int>(rows.size()) * (bar_h + meas_h + gap) + 30;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"Helvetica,Arial,sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n"
      "<text x=\"10\" y=\"38\" font-size=\"11\" fill=\"#555\">{}</text>\n",
      left + width + 260, height, title,
      m ? "time of the derived schedule, predicted (napkin model) and measured on this GPU; shorter is faster"
        : "predicted time of the derived schedule (napkin model; shorter is faster)");
  if (m)  // the legend: a coloured bar is the model's, the dark bar below it the GPU's
    s += "<rect x=\"10\" y=\"47\" width=\"18\" height=\"10\" fill=\"#0072B2\"/>\n"
         "<text x=\"32\" y=\"56\" font-size=\"11\">predicted (colour: dtype)</text>\n"
         "<rect x=\"190\" y=\"49\" width=\"18\" height=\"6\" fill=\"#333333\"/>\n"
         "<text x=\"212\" y=\"56\" font-size=\"11\">measured on the GPU (red: WRONG result)</text>\n";
  static const char* colours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"};
  std::vector<std::string> dtypes;
  for (const auto& r : rows)
    if (std::find(dtypes.begin(), dtypes.end(), r.dtype) == dtypes.end()) dtypes.push_back(r.dtype);
  auto length = [&](double t) { return longest > 0 ? t / longest * width : 0; };
  int y = top;
  for (const auto& r : rows) {
    std::size_t ci = static_cast<std::size_t>(std::find(dtypes.begin(), dtypes.end(), r.dtype) - dtypes.begin());
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{} {}</text>\n", left - 8, y + 15, r.hw, r.dtype);
    if (r.ok) {
      const double w = length(r.seconds);
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", left, y, std::max(1.0, w), bar_h, colours[ci % 6]);
      s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\">{:.1f} us, {:.0f} TFLOP/s, {}</text>\n", left + w + 6, y + 15, r.seconds * 1e6,
                       r.flops / r.seconds / 1e12, r.bound);
    } else {
      s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#999\">{}</text>\n", left + 4, y + 15, r.note);
    }
    if (m) {
      const int my = y + bar_h + 2;
      if (timed(r)) {
        const double w = length(r.measured_s);
        const bool wrong = r.measure == Measured::wrong;
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", left, my, std::max(1.0, w), meas_h - 4,
                         wrong ? "#CC0000" : "#333333");
        s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\"{}>measured {:.1f} us, {:.0f} TFLOP/s, model {:+.0f}%{}</text>\n", left + w + 6, my + 9,
                         wrong ? " fill=\"#CC0000\"" : "", r.measured_s * 1e6, r.flops / r.measured_s / 1e12, model_error(r) * 100, wrong ? ", WRONG" : "");
      } else if (r.ok) {
        s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#999\">{}</text>\n", left + 4, my + 9, measure_text(r));
      }
    }
    y += bar_h + meas_h + gap;
  }
  return s + "</svg>\n";
}

}  // namespace napkin::cli
