#include "diagrams/npy.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "diagrams/diagnostics.hpp"

namespace napkin {

std::string encode_npy(const NpyArray& a) {
  std::string shape = "(";
  for (std::size_t i = 0; i < a.shape.size(); ++i) shape += std::to_string(a.shape[i]) + (a.shape.size() == 1 ? "," : i + 1 < a.shape.size() ? ", " : "");
  shape += ")";
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }";
  std::size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  auto len = static_cast<std::uint16_t>(header.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += header;
  std::size_t off = out.size();
  out.resize(off + a.data.size() * sizeof(double));
  std::memcpy(out.data() + off, a.data.data(), a.data.size() * sizeof(double));  // x86-64 is little-endian
  return out;
}

namespace {
double half_to_double(std::uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}
}  // namespace

NpyArray decode_npy(const std::string& b, const std::string& what) {
  auto bad = [&](const std::string& why) { return UserError(what + ": not a readable .npy file: " + why); };
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) throw bad("missing the \\x93NUMPY magic");
  std::size_t hlen = 0, start = 0;
  if (b[6] == 1) {
    hlen = static_cast<unsigned char>(b[8]) | static_cast<std::size_t>(static_cast<unsigned char>(b[9])) << 8;
    start = 10;
  } else if (b[6] == 2 || b[6] == 3) {
    if (b.size() < 12) throw bad("truncated header");
    for (int i = 3; i >= 0; --i) hlen = hlen << 8 | static_cast<unsigned char>(b[static_cast<std::size_t>(8 + i)]);
    start = 12;
  } else {
    throw bad("unknown format version");
  }
  if (start + hlen > b.size()) throw bad("truncated header");
  std::string header = b.substr(start, hlen);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')"))) throw bad("no 'descr'");
  std::string descr = m[1];
  if (std::regex_search(header, std::regex(R"('fortran_order'\s*:\s*True)"))) throw bad("Fortran order is not supported; save with np.ascontiguousarray");
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) throw bad("no 'shape'");
  NpyArray a;
  std::string dims = m[1];
  std::int64_t count = 1;
  static const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    if (it->length() > 13) throw bad("dimension too large");  // before stoll, which would throw past 2^63
    std::int64_t v = std::stoll(it->str());
    if (v > (std::int64_t{1} << 40)) throw bad("dimension too large");
    a.shape.push_back(v);
    count *= v;
    if (count > (std::int64_t{1} << 40)) throw bad("too many elements");
  }
  struct Kind { const char* descr; std::size_t bytes; };
  static const Kind kinds[] = {{"<f8", 8}, {"<f4", 4}, {"<f2", 2}, {"<i8", 8}, {"<i4", 4}, {"<i2", 2},
                               {"|i1", 1}, {"|u1", 1}, {"|b1", 1}};
  const Kind* k = nullptr;
  for (const auto& kk : kinds)
    if (descr == kk.descr) k = &kk;
  if (!k) throw bad("unsupported dtype '" + descr + "' (use float64, float32, float16, int or bool)");
  std::size_t off = start + hlen;
  if (b.size() - off < static_cast<std::size_t>(count) * k->bytes) throw bad("data shorter than its shape");
  a.data.resize(static_cast<std::size_t>(count));
  const char* p = b.data() + off;
  for (std::size_t i = 0; i < a.data.size(); ++i, p += k->bytes) {
    if (descr == "<f8") { double v; std::memcpy(&v, p, 8); a.data[i] = v; }
    else if (descr == "<f4") { float v; std::memcpy(&v, p, 4); a.data[i] = v; }
    else if (descr == "<f2") { std::uint16_t v; std::memcpy(&v, p, 2); a.data[i] = half_to_double(v); }
    else if (descr == "<i8") { std::int64_t v; std::memcpy(&v, p, 8); a.data[i] = static_cast<double>(v); }
    else if (descr == "<i4") { std::int32_t v; std::memcpy(&v, p, 4); a.data[i] = v; }
    else if (descr == "<i2") { std::int16_t v; std::memcpy(&v, p, 2); a.data[i] = v; }
    else if (descr == "|i1") a.data[i] = static_cast<signed char>(*p);
    else a.data[i] = static_cast<unsigned char>(*p);
  }
  return a;
}

}  // namespace napkin
