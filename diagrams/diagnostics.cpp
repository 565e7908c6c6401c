#include "diagrams/diagnostics.hpp"

#include <algorithm>

namespace napkin {

void DiagnosticEngine::add(Severity s, SourceLoc loc, std::string message) {
  if (s == Severity::error) {
    ++error_count_;
    if (error_count_ > max_errors_) return;
    if (error_count_ == max_errors_) {
      diags_.push_back({s, loc, std::move(message)});
      diags_.push_back({Severity::note, loc, "too many errors; stopping here"});
      return;
    }
  } else if (saturated()) {
    return;
  }
  diags_.push_back({s, loc, std::move(message)});
}

void DiagnosticEngine::error(SourceLoc loc, std::string message) { add(Severity::error, loc, std::move(message)); }
void DiagnosticEngine::warning(SourceLoc loc, std::string message) { add(Severity::warning, loc, std::move(message)); }
void DiagnosticEngine::note(SourceLoc loc, std::string message) { add(Severity::note, loc, std::move(message)); }

void DiagnosticEngine::sort_by_location() {
  // Notes stay attached to the diagnostic before them: sort groups, not single entries.
  std::vector<std::vector<Diagnostic>> groups;
  for (auto& d : diags_) {
    if (d.severity == Severity::note && !groups.empty()) groups.back().push_back(d);
    else groups.push_back({d});
  }
  auto key = [](const Diagnostic& d) {
    return std::tuple(d.loc.file ? d.loc.file->path : std::string(), d.loc.line, d.loc.col);
  };
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const auto& a, const auto& b) { return key(a.front()) < key(b.front()); });
  diags_.clear();
  for (auto& g : groups) diags_.insert(diags_.end(), g.begin(), g.end());
}

std::string DiagnosticEngine::render() const {
  std::string out;
  for (const auto& d : diags_) out += render_diagnostic(d);
  return out;
}

namespace {
const char* severity_name(Severity s) {
  switch (s) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::note: return "note";
  }
  return "error";
}

/** One character per column (SourceLoc): control characters, each UTF-8 character outside ASCII
 *  and each byte that is not UTF-8 are shown as one '?', so that the caret stays aligned and binary
 *  input cannot disturb the terminal. Tabs are kept (the caret line reuses them). */
std::string printable(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += utf8_length(s, i)) {
    auto u = static_cast<unsigned char>(s[i]);
    out += s[i] != '\t' && (u < 0x20 || u >= 0x7f) ? '?' : s[i];
  }
  return out;
}
}  // namespace

std::string render_diagnostic(const Diagnostic& d) {
  std::string out;
  if (d.loc.valid()) {
    out += (d.loc.file->path == "-" ? std::string("<stdin>") : d.loc.file->path) + ":" +
           std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": ";
  } else {
    out += "napkin: ";
  }
  out += severity_name(d.severity);
  out += ": " + d.message + "\n";
  if (d.loc.valid()) {
    std::string line = printable(d.loc.file->line_text(d.loc.line));
    out += line + "\n";
    std::string caret;
    for (int i = 1; i < d.loc.col; ++i) {
      auto idx = static_cast<std::size_t>(i - 1);
      caret += (idx < line.size() && line[idx] == '\t') ? '\t' : ' ';
    }
    out += caret + "^\n";
  }
  return out;
}

namespace detail {
AssertFailure::AssertFailure(const char* cond, const char* file, int line) {
  os_ << file << ":" << line << ": assertion failed: " << cond << ": ";
}
AssertFailure::~AssertFailure() noexcept(false) { throw InternalError(os_.str()); }
}  // namespace detail

}  // namespace napkin
