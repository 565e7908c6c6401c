#include "diagrams/schedule.hpp"

#include <algorithm>

#include "diagrams/lexer.hpp"

namespace napkin {

std::vector<std::string> KernelPlan::fused() const {
  std::vector<std::string> out;
  for (const auto& d : directives)
    if (d.kind == Directive::Kind::fuse) out.insert(out.end(), d.names.begin(), d.names.end());
  return out;
}

std::optional<std::int64_t> KernelPlan::group(const std::string& axis) const {
  for (const auto& d : directives)
    for (const auto& n : d.names)
      if (n == axis && d.kind == Directive::Kind::weave) return 1;
      else if (n == axis && d.kind == Directive::Kind::group) return d.size;
  return std::nullopt;
}

std::optional<std::pair<std::string, std::int64_t>> KernelPlan::stream() const {
  auto all = streams();
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::vector<std::pair<std::string, std::int64_t>> KernelPlan::streams() const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const auto& d : directives)
    if (d.kind == Directive::Kind::stream && !d.names.empty()) out.emplace_back(d.names[0], d.size);
  return out;
}

bool KernelPlan::streams_axis(const std::string& axis) const {
  for (const auto& [a, s] : streams())
    if (a == axis) return true;
  return false;
}

int KernelPlan::stream_passes() const {
  const Directive* d = find(Directive::Kind::stream);
  return d ? d->passes : 1;
}

int KernelPlan::warps() const {
  const Directive* d = find(Directive::Kind::warps);
  return d ? static_cast<int>(d->size) : 4;
}

bool KernelPlan::pingpong() const {
  const Directive* d = find(Directive::Kind::warps);
  return d && d->pingpong;
}

std::optional<std::pair<std::string, std::int64_t>> KernelPlan::cluster() const {
  const Directive* d = find(Directive::Kind::cluster);
  if (!d || d->names.empty()) return std::nullopt;
  return std::make_pair(d->names[0], d->size);
}

const Directive* KernelPlan::find(Directive::Kind k, const std::string& which) const {
  for (const auto& d : directives)
    if (d.kind == k && (which.empty() || std::find(d.names.begin(), d.names.end(), which) != d.names.end())) return &d;
  return nullptr;
}

namespace {

struct Fail {};

class ScheduleParser {
 public:
  ScheduleParser(std::vector<Token> t, DiagnosticEngine& d) : toks_(std::move(t)), diags_(d) {}

  std::optional<Schedule> run() {
    int before = diags_.error_count();
    while (!at(Tok::eof) && !diags_.saturated()) {
      if (accept(Tok::newline)) continue;
      if (at(Tok::comment)) {
        std::string c = next().text;
        if (!started_) s_.comments.push_back(c);
        accept(Tok::newline);
        continue;
      }
      try {
        line();
      } catch (const Fail&) {
        while (!at(Tok::newline) && !at(Tok::eof)) next();
      }
    }
    if (!started_ && diags_.error_count() == before)
      diags_.error(toks_.front().loc, "no schedule in this file; start one with 'schedule NAME for DIAGRAM'");
    if (diags_.error_count() != before) return std::nullopt;
    return s_;
  }

 private:
  const Token& peek() const { return toks_[pos_]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at(Tok k) const { return peek().kind == k; }
  bool accept(Tok k) { return at(k) ? (next(), true) : false; }
  /** Whether `loc`'s line already has an error (the lexer's, say): one error per bad line. */
  bool line_has_error(const SourceLoc& loc) const {
    for (const auto& d : diags_.diagnostics())
      if (d.loc.file == loc.file && d.loc.line == loc.line) return true;
    return false;
  }
  [[noreturn]] void fail(const std::string& what) {
    if (!line_has_error(peek().loc)) diags_.error(peek().loc, "expected " + what + ", found " + token_description(peek()));
    throw Fail{};
  }
  std::string ident(const std::string& what) {
    if (!at(Tok::ident)) fail(what);
    return next().text;
  }
  std::int64_t positive(const std::string& what) {
    if (!at(Tok::integer)) fail(what);
    const Token& t = next();
    if (t.int_value < 1) {
      diags_.error(t.loc, what + " must be at least 1");
      throw Fail{};
    }
    return t.int_value;
  }
  std::string end_of_line() {
    std::string c;
    if (at(Tok::comment)) {
      c = next().text;
      std::size_t b = c.find_first_not_of(" \t");
      c = b == std::string::npos ? "" : c.substr(b);
    }
    if (!at(Tok::eof) && !accept(Tok::newline)) fail("end of line");
    return c;
  }

  void line() {
    const Token& first = peek();
    if (!at(Tok::ident)) fail("'schedule', 'kernel' or a directive (fuse, weave, group, stream, warps, cluster)");
    std::string w = first.text;
    if (w == "schedule") {
      next();
      if (started_) {
        diags_.error(first.loc, "one schedule per file");
        throw Fail{};
      }
      s_.loc = first.loc;
      started_ = true;  // even if the rest of this line is bad: the lines after it are the schedule's, not errors of their own
      s_.name = ident("a schedule name");
      if (ident("'for' and the diagram's name") != "for") {
        if (!line_has_error(toks_[pos_ - 1].loc)) diags_.error(toks_[pos_ - 1].loc, "expected 'for' after the schedule's name");
        throw Fail{};
      }
      s_.diagram = ident("the diagram's name after 'for'");
      end_of_line();
      return;
    }
    if (!started_) {
      diags_.error(first.loc, "'" + w + "' before 'schedule NAME for DIAGRAM'");
      throw Fail{};
    }
    if (w == "kernel") {
      next();
      KernelPlan k;
      k.loc = first.loc;
      k.name = ident("a kernel name");
      end_of_line();
      s_.kernels.push_back(std::move(k));
      return;
    }
    Directive d;
    d.loc = first.loc;
    if (w == "fuse") d.kind = Directive::Kind::fuse;
    else if (w == "weave") d.kind = Directive::Kind::weave;
    else if (w == "group") d.kind = Directive::Kind::group;
    else if (w == "stream") d.kind = Directive::Kind::stream;
    else if (w == "warps") d.kind = Directive::Kind::warps;
    else if (w == "cluster") d.kind = Directive::Kind::cluster;
    else {
      diags_.error(first.loc, "unknown directive '" + w + "'; expected fuse, weave, group, stream, warps or cluster");
      throw Fail{};
    }
    next();
    if (d.kind == Directive::Kind::warps) {
      d.size = positive("the number of warps");
      if (at(Tok::ident) && peek().text == "pingpong") next(), d.pingpong = true;
    } else if (d.kind == Directive::Kind::group || d.kind == Directive::Kind::stream || d.kind == Directive::Kind::cluster) {
      d.name_locs.push_back(peek().loc);
      d.names.push_back(ident("an axis name"));
      if (ident("'by' and a size") != "by") {
        diags_.error(toks_[pos_ - 1].loc, "expected 'by' and a size");
        throw Fail{};
      }
      d.size = positive(w == "group" ? "the group size" : w == "cluster" ? "the blocks per cluster" : "the stream size");
      if (d.kind == Directive::Kind::stream && at(Tok::ident) && peek().text == "twice") next(), d.passes = 2;
    } else {
      do {
        d.name_locs.push_back(peek().loc);
        d.names.push_back(ident(d.kind == Directive::Kind::fuse ? "a statement name" : "an axis name"));
        if (d.kind == Directive::Kind::weave) repeated_weave(d);
      } while (accept(Tok::comma));
    }
    d.comment = end_of_line();
    if (s_.kernels.empty()) {
      KernelPlan k;
      k.name = s_.name;
      k.loc = d.loc;
      s_.kernels.push_back(std::move(k));
    }
    s_.kernels.back().directives.push_back(std::move(d));
  }

  /** Reports the last axis of weave line `d` when this line or an earlier weave line of the same
   *  kernel names it already. */
  void repeated_weave(const Directive& d) {
    const std::string& a = d.names.back();
    bool repeated = std::count(d.names.begin(), d.names.end(), a) > 1;
    if (!s_.kernels.empty() && !repeated) {
      const Directive* earlier = s_.kernels.back().find(Directive::Kind::weave, a);
      repeated = earlier != nullptr;
    }
    if (repeated) diags_.error(d.name_locs.back(), "axis '" + a + "' is woven twice in this kernel; name each axis once");
  }

  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  DiagnosticEngine& diags_;
  Schedule s_;
  bool started_ = false;
};

const char* keyword(Directive::Kind k) {
  switch (k) {
    case Directive::Kind::fuse: return "fuse";
    case Directive::Kind::weave: return "weave";
    case Directive::Kind::group: return "group";
    case Directive::Kind::stream: return "stream";
    case Directive::Kind::warps: return "warps";
    case Directive::Kind::cluster: return "cluster";
  }
  return "?";
}

}  // namespace

std::optional<Schedule> parse_schedule(const SourceFile& src, DiagnosticEngine& diags) {
  const int before = diags.error_count();  // the lexer's errors count too: a bad token drops the rest of its line
  auto s = ScheduleParser(lex(src, diags), diags).run();
  if (diags.error_count() != before) return std::nullopt;
  return s;
}

std::string directive_text(const Directive& d) {
  std::string l = keyword(d.kind);
  if (d.kind == Directive::Kind::warps) return l + " " + std::to_string(d.size) + (d.pingpong ? " pingpong" : "");
  if (d.kind == Directive::Kind::group || d.kind == Directive::Kind::stream || d.kind == Directive::Kind::cluster)
    return l + " " + d.names.at(0) + " by " + std::to_string(d.size) + (d.passes == 2 ? " twice" : "");
  for (std::size_t i = 0; i < d.names.size(); ++i) l += (i ? ", " : " ") + d.names[i];
  return l;
}

std::string print_schedule(const Schedule& s) {
  std::string out;
  for (const auto& c : s.comments) out += "#" + c + "\n";
  out += "schedule " + s.name + " for " + s.diagram + "\n";
  for (const auto& k : s.kernels) {
    out += "kernel " + k.name + "\n";
    std::vector<std::string> lines;
    for (const auto& d : k.directives) {
      lines.push_back("  " + directive_text(d));
    }
    std::size_t width = 0;
    for (const auto& l : lines) width = std::max(width, l.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto& c = k.directives[i].comment;
      out += c.empty() ? lines[i] + "\n" : lines[i] + std::string(width + 2 - lines[i].size(), ' ') + "# " + c + "\n";
    }
  }
  return out;
}

}  // namespace napkin
