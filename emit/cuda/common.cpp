#include "emit/cuda/strategies.hpp"

namespace napkin::cuda {

std::string kernel_ns(const std::string& kernel) { return "k_" + kernel; }

void walk(const Expr& e, const std::function<void(const Expr&)>& f) {
  f(e);
  for (const auto& a : e.args) walk(*a, f);
}

std::string describe_plan(const KernelPlan& p) {
  std::vector<std::string> parts;
  for (const auto& dir : p.directives) parts.push_back(directive_text(dir));
  return "// kernel " + p.name + ": " + join(parts, "; ");
}

void open_bounded_kernel(Code& k, const Context& c, int registers, int blocks_per_sm, const std::string& form) {
  k.line("// at most " + std::to_string(registers) + " registers per thread: " + std::to_string(blocks_per_sm) +
         " blocks per SM resident, as the model prices it (" + form + ")");
  k.line("");
  k.line("__global__ void __launch_bounds__(THREADS, " + std::to_string(blocks_per_sm) + ") kernel(const Args a) {");
  ++k.indent;
  c.declare_sizes(k);
}

void decompose(Code& code, const std::string& linear, const AxisList& axes, bool maybe_unused) {
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
    code.line(std::string(maybe_unused ? "[[maybe_unused]] " : "") + "const int64_t i_" + *it + " = napkin::split_index(" + linear + ", N_" + *it + ");");
  }
}

std::string offset(const Context& c, const std::string& array, const std::function<std::string(const std::string&)>& at) {
  return horner(c.axes(array), at);
}

std::string host_bytes(const std::string& type, const AxisList& axes) {
  std::string s = "sizeof(" + type + ")";
  for (const auto& ax : axes) s += " * static_cast<size_t>(a.N_" + ax + ")";
  return s;
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

std::string tma_batch_coords(const Context& c, const std::string& array, const std::string& rows, const std::string& cols) {
  std::string s;
  AxisList ax = c.axes(array);
  for (auto it = ax.rbegin(); it != ax.rend(); ++it)
    if (*it != rows && *it != cols) s += ", static_cast<int>(i_" + *it + ")";
  return s;
}

}  // namespace napkin::cuda
