// .npy encoding and decoding.
#include <catch2/catch.hpp>
#include <cstring>

#include "diagrams/diagnostics.hpp"
#include "diagrams/npy.hpp"

using namespace napkin;

TEST_CASE("npy round trip and header layout", "[npy]") {
  NpyArray a{{2, 3}, {1, 2, 3, 4, 5, -6.5}};
  std::string b = encode_npy(a);
  CHECK(b.substr(0, 6) == "\x93NUMPY");
  std::size_t hlen = static_cast<unsigned char>(b[8]) | static_cast<std::size_t>(static_cast<unsigned char>(b[9])) << 8;
  CHECK((10 + hlen) % 64 == 0);  // numpy aligns the data to 64 bytes
  CHECK(b.find("'shape': (2, 3)") != std::string::npos);
  NpyArray c = decode_npy(b, "x");
  CHECK(c.shape == a.shape);
  CHECK(c.data == a.data);
  CHECK(encode_npy({{3}, {1, 2, 3}}).find("'shape': (3,)") != std::string::npos);
  CHECK(encode_npy({{}, {4}}).find("'shape': ()") != std::string::npos);
}

TEST_CASE("npy decodes float32 and int8 and refuses what it cannot read", "[npy]") {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  header += std::string(64 - (10 + header.size() + 1) % 64, ' ') + "\n";
  std::string b = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  float v[2] = {1.5f, -2.0f};
  b.append(reinterpret_cast<const char*>(v), 8);
  CHECK(decode_npy(b, "f").data == std::vector<double>{1.5, -2.0});
  CHECK_THROWS_AS(decode_npy("garbage", "g"), UserError);
  CHECK_THROWS_AS(decode_npy(b.substr(0, b.size() - 3), "short"), UserError);
  std::string fortran = b;
  fortran.replace(fortran.find("False"), 5, "True ");
  CHECK_THROWS_AS(decode_npy(fortran, "fortran"), UserError);
  // A dimension past 2^63 is a user error, not std::out_of_range.
  std::string big = "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }";
  big += std::string(64 - (10 + big.size() + 1) % 64, ' ') + "\n";
  std::string huge = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(big.size()) + '\0' + big;
  CHECK_THROWS_WITH(decode_npy(huge, "huge"), Catch::Contains("dimension too large"));
}
