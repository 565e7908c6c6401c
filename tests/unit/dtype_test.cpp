// Rounding to each dtype, against values worked out from the formats' definitions.
#include <catch2/catch.hpp>
#include <cmath>

#include "diagrams/dtype.hpp"

using namespace napkin;

TEST_CASE("round_to_dtype follows each format's precision and range", "[dtype]") {
  // bf16 has 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 and rounds to even (1).
  CHECK(round_to_dtype(1.0 + std::ldexp(1.0, -8), DType::bf16) == 1.0);
  CHECK(round_to_dtype(1.0 + 3 * std::ldexp(1.0, -9), DType::bf16) == 1.0 + std::ldexp(1.0, -7));
  // fp16: 11 significant bits, largest finite 65504, smallest subnormal 2^-24.
  CHECK(round_to_dtype(1.0 + std::ldexp(1.0, -11), DType::fp16) == 1.0);
  CHECK(round_to_dtype(65504.0, DType::fp16) == 65504.0);
  CHECK(std::isinf(round_to_dtype(65520.0, DType::fp16)));
  CHECK(round_to_dtype(std::ldexp(1.0, -24), DType::fp16) == std::ldexp(1.0, -24));
  CHECK(round_to_dtype(std::ldexp(1.0, -26), DType::fp16) == 0.0);
  // fp8e4m3 saturates at 448; fp8e5m2 overflows to inf past 57344.
  CHECK(round_to_dtype(1000.0, DType::fp8e4m3) == 448.0);
  CHECK(round_to_dtype(-1000.0, DType::fp8e4m3) == -448.0);
  CHECK(round_to_dtype(0.3, DType::fp8e4m3) == 0.3125);  // 1.25 * 2^-2: 3 fraction bits
  CHECK(std::isinf(round_to_dtype(1e6, DType::fp8e5m2)));
  // tf32 keeps 10 fraction bits.
  CHECK(round_to_dtype(1.0 + std::ldexp(1.0, -10), DType::tf32) == 1.0 + std::ldexp(1.0, -10));
  CHECK(round_to_dtype(1.0 + std::ldexp(1.0, -12), DType::tf32) == 1.0);
  // integers round to nearest even and saturate.
  CHECK(round_to_dtype(2.5, DType::int8) == 2.0);
  CHECK(round_to_dtype(300.0, DType::int8) == 127.0);
  CHECK(round_to_dtype(-300.0, DType::int8) == -128.0);
  CHECK(round_to_dtype(9.0, DType::int4) == 7.0);
  CHECK(round_to_dtype(131071.4, DType::int32) == 131071.0);  // a vocabulary index
  CHECK(round_to_dtype(3e9, DType::int32) == 2147483647.0);
  CHECK(round_to_dtype(-3e9, DType::int32) == -2147483648.0);
  CHECK(std::isnan(round_to_dtype(NAN, DType::bf16)));
}

TEST_CASE("dtype and level names round-trip", "[dtype]") {
  for (auto t : {DType::fp32, DType::tf32, DType::bf16, DType::fp16, DType::fp8e4m3, DType::fp8e5m2, DType::int8, DType::int4, DType::int32})
    CHECK(parse_dtype(dtype_name(t)) == t);
  CHECK(dtype_bits(DType::int4) == 4);
  CHECK(dtype_bits(DType::int32) == 32);
  CHECK(is_integer_dtype(DType::int32));
  CHECK_FALSE(is_integer_dtype(DType::bf16));
  CHECK(dtype_bits(DType::bf16) == 16);
  CHECK_FALSE(parse_dtype("fp64"));
  for (auto l : {MemLevel::hbm, MemLevel::l2, MemLevel::smem, MemLevel::reg}) CHECK(parse_level(level_name(l)) == l);
}
