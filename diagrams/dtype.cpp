#include "diagrams/dtype.hpp"

#include <array>
#include <cmath>
#include <limits>

namespace napkin {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  int bits;
  int mantissa_bits;  ///< explicit fraction bits (floating) or 0 (integer)
  int min_exponent;   ///< exponent of the smallest normal number
  double max_finite;
  bool has_inf;
  bool is_int;
};

constexpr std::array<DTypeInfo, 9> kTypes{{
    {DType::fp32, "fp32", 32, 23, -126, 3.4028234663852886e38, true, false},
    {DType::tf32, "tf32", 32, 10, -126, 3.4011621342146535e38, true, false},
    {DType::bf16, "bf16", 16, 7, -126, 3.3895313892515355e38, true, false},
    {DType::fp16, "fp16", 16, 10, -14, 65504.0, true, false},
    {DType::fp8e4m3, "fp8e4m3", 8, 3, -6, 448.0, false, false},
    {DType::fp8e5m2, "fp8e5m2", 8, 2, -14, 57344.0, true, false},
    {DType::int8, "int8", 8, 0, 0, 127.0, false, true},
    {DType::int4, "int4", 4, 0, 0, 7.0, false, true},
    {DType::int32, "int32", 32, 0, 0, 2147483647.0, false, true},
}};

const DTypeInfo& info(DType t) { return kTypes[static_cast<std::size_t>(t)]; }
}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }
int dtype_bits(DType t) { return info(t).bits; }
bool is_integer_dtype(DType t) { return info(t).is_int; }
int dtype_mantissa_bits(DType t) { return info(t).mantissa_bits; }

std::optional<DType> parse_dtype(std::string_view s) {
  for (const auto& i : kTypes)
    if (i.name == s) return i.type;
  return std::nullopt;
}

std::string dtype_list() {
  std::string out;
  for (const auto& i : kTypes) out += (out.empty() ? "" : ", ") + std::string(i.name);
  return out;
}

double round_to_dtype(double x, DType t) {
  const DTypeInfo& f = info(t);
  if (std::isnan(x)) return x;
  if (f.is_int) {
    double r = std::nearbyint(x);
    return std::fmax(-f.max_finite - 1.0, std::fmin(f.max_finite, r));
  }
  if (x == 0.0 || std::isinf(x)) return std::isinf(x) && !f.has_inf ? std::copysign(f.max_finite, x) : x;
  int exp = 0;
  std::frexp(x, &exp);  // |x| = m * 2^exp with m in [0.5, 1): unit exponent is exp - 1
  int e = std::max(exp - 1, f.min_exponent);
  double quantum = std::ldexp(1.0, e - f.mantissa_bits);
  double r = std::nearbyint(x / quantum) * quantum;  // exact scaling by a power of two
  if (std::fabs(r) > f.max_finite)
    return f.has_inf ? std::copysign(std::numeric_limits<double>::infinity(), x) : std::copysign(f.max_finite, x);
  return r;
}

namespace {
constexpr std::array<std::pair<MemLevel, std::string_view>, 4> kLevels{{
    {MemLevel::hbm, "hbm"}, {MemLevel::l2, "l2"}, {MemLevel::smem, "smem"}, {MemLevel::reg, "reg"}}};
}

std::string_view level_name(MemLevel l) { return kLevels[static_cast<std::size_t>(l)].second; }

std::optional<MemLevel> parse_level(std::string_view s) {
  for (const auto& [l, n] : kLevels)
    if (n == s) return l;
  return std::nullopt;
}

std::string level_list() { return "hbm, l2, smem, reg"; }

}  // namespace napkin
