#include "emit/cuda/strategies.hpp"

namespace napkin::cuda {

std::string kernel_ns(const std::string& kernel) { return "k_" + kernel; }

void walk(const Expr& e, const std::function<void(const Expr&)>& f) {
  f(e);
  for (const auto& a : e.args) walk(*a, f);
}

std::string describe_plan(const KernelPlan& p) {
  std::vector<std::string> parts;
  for (const auto& dir : p.directives) {
    static const char* names[] = {"fuse", "weave", "group", "stream", "warps"};
    std::string d = names[static_cast<int>(dir.kind)];
    if (dir.kind == Directive::Kind::warps) d += " " + std::to_string(dir.size);
    else if (dir.kind == Directive::Kind::group || dir.kind == Directive::Kind::stream)
      d += " " + dir.names[0] + " by " + std::to_string(dir.size) + (dir.passes == 2 ? " twice" : "");
    else d += " " + join(dir.names);
    parts.push_back(d);
  }
  return "// kernel " + p.name + ": " + join(parts, "; ");
}

void decompose(Code& code, const std::string& linear, const AxisList& axes) {
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
    code.line("const int64_t i_" + *it + " = " + linear + " % N_" + *it + ";");
    code.line(linear + " /= N_" + *it + ";");
  }
}

std::string offset(const Context& c, const std::string& array, const std::function<std::string(const std::string&)>& at) {
  std::string s;
  for (const auto& a : c.axes(array)) s = s.empty() ? at(a) : "(" + s + ") * N_" + a + " + " + at(a);
  return s.empty() ? "0" : s;
}

std::string stride(const Context& c, const std::string& array, const std::string& axis) {
  AxisList ax = c.axes(array);
  std::string s = "int64_t{1}";
  bool after = false;
  for (const auto& a : ax) {
    if (after) s += " * N_" + a;
    if (a == axis) after = true;
  }
  return s;
}

}  // namespace napkin::cuda
