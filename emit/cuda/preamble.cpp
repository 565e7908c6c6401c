#include "emit/cuda/preamble.hpp"

#include "emit/device_library.hpp"  // generated from emit/cuda/device/*.cuh (emit/CMakeLists.txt)

namespace napkin::cuda {

std::string mma_function(const MmaShape& m) {
  return "mma_m" + std::to_string(m.m) + "n" + std::to_string(m.n) + "k" + std::to_string(m.k) + "_" + std::string(dtype_name(m.dtype));
}

std::string mma_atoms(const std::vector<MmaShape>& mmas, bool int8, bool fp8) {
  std::string s = "namespace napkin {\n";
  for (const auto& m : mmas) {
    // 32 bytes of K per row: fp32 accumulators for 16-bit floats (m16n8k16) and 8-bit floats
    // (m16n8k32), int32 for int8 (m16n8k32); the 8-bit ones only in files that store such arrays,
    // so that the others keep their text.
    const bool integer = is_integer_dtype(m.dtype), byte = dtype_bits(m.dtype) == 8, float8 = byte && !integer;
    if (m.scope != "warp" || m.m != 16 || m.n != 8 || m.k * dtype_bits(m.dtype) != 256 || (!byte && dtype_bits(m.dtype) != 16)) continue;
    if (integer ? !int8 || m.ptx.find(".s32.") == std::string::npos : (float8 && !fp8) || m.ptx.find(".f32.") == std::string::npos) continue;
    const std::string acc = integer ? "int32_t" : "float", c = integer ? "\"+r\"" : "\"+f\"";
    s += "/** " + m.ptx + " (from the hardware description's [[mma]] table): C += A * B, " + (integer ? "int32" : "fp32") + " C" +
         (float8 ? "; 8-bit float operands need sm_89 (PTX ISA 9.7.14.5.14): before it, this traps" : "") + ". */\n";
    s += "__device__ __forceinline__ void " + mma_function(m) + "(" + acc + " c[4], const uint32_t a[4], const uint32_t* b) {\n";
    if (float8) s += "#if __CUDA_ARCH__ >= 890\n";
    s += "  asm volatile(\"" + m.ptx + " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n";
    s += "               : " + c + "(c[0]), " + c + "(c[1]), " + c + "(c[2]), " + c + "(c[3])\n";
    s += "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n";
    if (float8) s += "#else\n  __trap();\n#endif\n";
    s += "}\n";
  }
  s += "}  // namespace napkin\n\n";
  return s;
}

std::string preamble(const std::vector<MmaShape>& mmas, bool hopper, bool fp8, bool int8) {
  std::string s = kDeviceCommon;
  if (fp8) s += kDeviceFp8;
  if (int8) s += kDeviceInt8;
  if (hopper) s += kDeviceHopper;
  return s + mma_atoms(mmas, int8, fp8);
}

}  // namespace napkin::cuda

namespace napkin::cuda {

std::string wgmma_function(const MmaShape& m, int n, bool a_in_registers, std::string& name) {
  std::string ptx = m.ptx;
  const std::string from = "m" + std::to_string(m.m) + "n" + std::to_string(m.n) + "k";
  if (auto at = ptx.find(from); at != std::string::npos) ptx.replace(at, from.size(), "m64n" + std::to_string(n) + "k");
  name = "wgmma_m64n" + std::to_string(n) + "k" + std::to_string(m.k) + "_" + std::string(dtype_name(m.dtype)) + (a_in_registers ? "_rs" : "");
  const int regs = n / 2;
  const bool integer = is_integer_dtype(m.dtype);  // int8: int32 accumulators, "+r"
  const std::string acc_t = integer ? "int32_t" : "float";
  std::string d, outs;
  for (int i = 0; i < regs; ++i) {
    d += (i ? ", %" : "%") + std::to_string(i);
    outs += std::string(i ? ", " : "") + (integer ? "\"+r\"(d[" : "\"+f\"(d[") + std::to_string(i) + "])";
  }
  const std::string r = std::to_string(regs);
  auto op = [&](int k) { return "%" + std::to_string(regs + k); };
  std::string s;
  if (!a_in_registers && dtype_bits(m.dtype) == 8) {  // no transpose immediates for 8-bit types (PTX ISA 9.7.15.5.1)
    s += "/** " + ptx + " (from the hardware description's [[mma]] table): D += A B, A and B K-major in SMEM; with\n";
    s += " *  scale_d = 0, D = A B (PTX ISA 9.7.15.5.2: D is not read, so it needs no initialisation). */\n";
    s += "template <int TA, int TB>\n";
    s += "__device__ __forceinline__ void " + name + "(" + acc_t + " (&d)[" + r + "], uint64_t desc_a, uint64_t desc_b, int scale_d = 1) {\n";
    s += "  static_assert(TA == 0 && TB == 0, \"8-bit wgmma reads K-major operands only\");\n";
    s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, " + op(2) + ", 0;\\n\"\n";
    // Integer wgmma takes scale-d alone (no imm-scale-a/b: PTX ISA 9.7.15.5.2).
    s += "               \"" + ptx + " {" + d + "}, " + op(0) + ", " + op(1) + (integer ? ", p;" : ", p, 1, 1;") + "\\n}\\n\"\n";
    s += "               : " + outs + "\n";
    s += "               : \"l\"(desc_a), \"l\"(desc_b), \"r\"(scale_d));\n}\n";
    return s;
  }
  if (!a_in_registers) {
    s += "/** " + ptx + " (from the hardware description's [[mma]] table): D += A B, A and B in SMEM; with scale_d = 0,\n";
    s += " *  D = A B (PTX ISA 9.7.15.5.2: D is not read, so it needs no initialisation by other instructions). */\n";
    s += "template <int TA, int TB>\n";
    s += "__device__ __forceinline__ void " + name + "(float (&d)[" + r + "], uint64_t desc_a, uint64_t desc_b, int scale_d = 1) {\n";
    s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, " + op(2) + ", 0;\\n\"\n";
    s += "               \"" + ptx + " {" + d + "}, " + op(0) + ", " + op(1) + ", p, 1, 1, " + op(3) + ", " + op(4) + ";\\n}\\n\"\n";
    s += "               : " + outs + "\n";
    s += "               : \"l\"(desc_a), \"l\"(desc_b), \"r\"(scale_d), \"n\"(TA), \"n\"(TB));\n}\n";
    return s;
  }
  if (dtype_bits(m.dtype) == 8) {  // no transpose immediate for 8-bit types (PTX ISA 9.7.15.5.1): B K-major
    s += "/** " + ptx + " (from the hardware description's [[mma]] table): D += A B, A in registers (the 8-bit\n";
    s += " *  k32 A fragment per warp, PTX ISA 9.7.15.5.1.1: fp8.cuh acc_to_a_fp8), B K-major in SMEM. */\n";
    s += "template <int TB>\n";
    s += "__device__ __forceinline__ void " + name + "(float (&d)[" + r + "], const uint32_t (&a)[4], uint64_t desc_b) {\n";
    s += "  static_assert(TB == 0, \"8-bit wgmma reads a K-major B only\");\n";
    s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, " + op(5) + ", 0;\\n\"\n";
    s += "               \"" + ptx + " {" + d + "}, {" + op(0) + ", " + op(1) + ", " + op(2) + ", " + op(3) + "}, " + op(4) + ", p, 1, 1;\\n}\\n\"\n";
    s += "               : " + outs + "\n";
    s += "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b), \"r\"(1));\n}\n";
    return s;
  }
  s += "/** " + ptx + " (from the hardware description's [[mma]] table): D += A B, A in registers (the m16n8k16\n";
  s += " *  A fragment layout per warp, PTX ISA 9.7.15.5.1.1), B in SMEM. */\n";
  s += "template <int TB>\n";
  s += "__device__ __forceinline__ void " + name + "(float (&d)[" + r + "], const uint32_t (&a)[4], uint64_t desc_b) {\n";
  s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, " + op(5) + ", 0;\\n\"\n";
  s += "               \"" + ptx + " {" + d + "}, {" + op(0) + ", " + op(1) + ", " + op(2) + ", " + op(3) + "}, " + op(4) + ", p, 1, 1, " + op(6) +
       ";\\n}\\n\"\n";
  s += "               : " + outs + "\n";
  s += "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b), \"r\"(1), \"n\"(TB));\n}\n";
  return s;
}

}  // namespace napkin::cuda
