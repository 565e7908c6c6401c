// The gemm strategy's interior epilogue with 16-byte stores (contract: gemm_wide_store.hpp).
#include "emit/cuda/gemm_wide_store.hpp"

namespace napkin::cuda {

std::string wide_store_condition(Context& c, const KernelChoice& kc, const GemmForm& g) {
  if (g.TN % 32 != 0) return "";
  std::string cond = "n_M == T_M && n_N == T_N && N_" + g.N + " % 8 == 0";
  for (const auto& o : kc.cost.outputs) {
    if (c.axes(o).empty() || c.axes(o).back() != g.N || dtype_bits(c.dtype(o)) != 16) return "";
    cond += " && reinterpret_cast<uintptr_t>(a." + o + ") % 16 == 0";
  }
  return cond;
}

namespace {
/** Emits one lane's pair of columns col, col + 1 (defined by the caller, with i_<M>) of every
 *  output through the epilogue expressions, packed into `p_<o>[slot]`. */
void pack_pair(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const NodeOverride& over, const std::string& slot) {
  const Diagram& d = c.diagram();
  for (const auto& o : kc.cost.outputs) code.line("float v_" + o + "[2];");
  code.line("#pragma unroll");
  code.open("for (int q = 0; q < 2; ++q)");
  code.line("[[maybe_unused]] const int64_t i_" + g.N + " = o_" + g.N + " + col + q;");
  for (const auto& o : kc.cost.outputs)
    code.line("v_" + o + "[q] = " + c.value(*d.find_statement(o)->expr, over, kc.cost.internal) + ";");
  code.close();
  for (const auto& o : kc.cost.outputs) code.line("p_" + o + "[" + slot + "] = napkin::pack2<" + c.ctype_of(o) + ">(v_" + o + "[0], v_" + o + "[1]);");
}
}  // namespace

void gemm_pack_group(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc) {
  const NodeOverride over = gemm_accumulators(g, acc);
  code.line("[[maybe_unused]] const int64_t i_" + g.M + " = o_" + g.M + " + row;");
  for (const auto& o : kc.cost.outputs) code.line("uint32_t p_" + o + "[4];  // packed pairs of " + o);
  code.line("#pragma unroll");
  code.open("for (int j = 0; j < 4; ++j)");
  code.line("const int nt = ng * 4 + j, col = nt * 8 + (lane % 4) * 2;");
  pack_pair(code, c, kc, g, over, "j");
  code.close();
  for (const auto& o : kc.cost.outputs) code.line("napkin::quad_transpose(p_" + o + ", lane);");
}

void gemm_pack_matrices(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc) {
  const NodeOverride over = gemm_accumulators(g, acc);
  for (const auto& o : kc.cost.outputs) code.line("uint32_t p_" + o + "[4];  // packed pairs of " + o + ", one per 8x8 matrix");
  code.line("#pragma unroll");
  code.open("for (int i = 0; i < 4; ++i)");
  code.line("const int nt = nt0 + i / 2, h = i % 2, row = row0 + h * 8 + lane / 4, col = nt * 8 + (lane % 4) * 2;");
  code.line("[[maybe_unused]] const int64_t i_" + g.M + " = o_" + g.M + " + row;");
  pack_pair(code, c, kc, g, over, "i");
  code.close();
}

void gemm_wide_store_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g,
                              const std::function<void(const std::function<void()>&)>& loops,
                              const std::function<std::string(std::size_t)>& acc, std::set<std::string>& stored) {
  code.line("// interior tile, 16-bit outputs with " + g.N + " innermost: each quad exchanges its pairs so that a lane stores 8 consecutive");
  code.line("// elements as one 16-byte vector (whole 32-byte sectors)");
  loops([&] {
    gemm_pack_group(code, c, kc, g, acc);
    code.line("const int64_t i_" + g.N + " = o_" + g.N + " + ng * 32 + (lane % 4) * 8;");
    for (const auto& o : kc.cost.outputs)
      code.line("*reinterpret_cast<uint4*>(a." + o + " + " + c.index(o) + ") = make_uint4(p_" + o + "[0], p_" + o + "[1], p_" + o + "[2], p_" + o + "[3]);");
  });
  stored.insert(kc.cost.outputs.begin(), kc.cost.outputs.end());
}

}  // namespace napkin::cuda
