/** \file npy.hpp
 *  NumPy .npy files (format version 1.0/2.0, numpy.lib.format), so users can check napkin's
 *  results in Python with numpy.load.
 */
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "diagrams/files.hpp"  // write_file_atomic, for the writers of .npy files

namespace napkin {

struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<double> data;  ///< row-major (C order)
};

/** Encodes `a` as a little-endian float64 ('<f8') .npy byte string. */
std::string encode_npy(const NpyArray& a);
/** Decodes a .npy byte string holding float64/32/16, int8/16/32/64, uint8 or bool, C order.
 *  Raises UserError naming `what` on anything else or on a truncated file. */
NpyArray decode_npy(const std::string& bytes, const std::string& what);

}  // namespace napkin
