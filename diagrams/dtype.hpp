/** \file dtype.hpp
 *  Element types and memory levels: the two closed enums of the IR.
 */
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace napkin {

/** Element types a diagram's arrays can hold. int32 holds integer indices (gather targets, a
 *  vocabulary of 128k and more); it is last so that the hardware tables' dtype order stays. */
enum class DType { fp32, tf32, bf16, fp16, fp8e4m3, fp8e5m2, int8, int4, int32 };

/** Name as written in diagram files ("bf16"); parse_dtype is its inverse (nullopt if unknown). */
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);
/** Storage size in bits: 32 for fp32, tf32 (tf32 is stored in 32-bit words) and int32, 4 for int4. */
int dtype_bits(DType t);
/** True for the integer dtypes (int8, int4, int32). */
bool is_integer_dtype(DType t);
/** Explicit fraction bits of a floating dtype (fp32 23, tf32 10, bf16 7, fp16 10, fp8e4m3 3,
 *  fp8e5m2 2: the formats cited at round_to_dtype); 0 for the integer dtypes. */
int dtype_mantissa_bits(DType t);
/** Comma-separated list of every dtype name, for error messages. */
std::string dtype_list();

/** Rounds an fp64 value to the nearest value representable in `t` (round to nearest even).
 *  Floating formats keep subnormals; overflow gives +-inf for formats with infinities (fp32, tf32,
 *  bf16, fp16, fp8e5m2) and saturates to +-448 for fp8e4m3 (OCP FP8 "fn" variant has no inf;
 *  PTX ISA 9.7.9.21 `cvt.satfinite`). Integers round to nearest even and saturate
 *  (int8: [-128, 127], int4: [-8, 7], int32: [-2^31, 2^31 - 1]). NaN stays NaN.
 *  Format parameters: IEEE 754 (fp32, fp16), Google brain float (bf16), NVIDIA TF32 (10-bit
 *  mantissa), OCP 8-bit floating point specification v1.0 (fp8e4m3, fp8e5m2). */
double round_to_dtype(double x, DType t);

/** Memory levels of the GPU hierarchy, from the largest and slowest to the smallest and fastest. */
enum class MemLevel { hbm, l2, smem, reg };

std::string_view level_name(MemLevel l);
std::optional<MemLevel> parse_level(std::string_view s);
std::string level_list();

}  // namespace napkin
