#include "tests/support/loop_nest_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>

namespace napkin::test {

namespace fs = std::filesystem;

namespace {
void write_doubles(std::ofstream& out, const std::vector<double>& v) {
  std::int64_t n = static_cast<std::int64_t>(v.size());
  out.write(reinterpret_cast<const char*>(&n), sizeof n);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
}
}  // namespace

void write_case_inputs(const fs::path& dir, std::size_t i, const Diagram& d, const SizeMap& sizes,
                       const std::map<std::string, Tensor>& inputs, const std::map<std::string, Tensor>& expected) {
  std::ofstream bin(dir / ("in" + std::to_string(i) + ".bin"), std::ios::binary);
  std::vector<double> axis_sizes;
  for (const auto* a : d.axes()) axis_sizes.push_back(static_cast<double>(sizes.at(a->name)));
  write_doubles(bin, axis_sizes);
  for (const auto* in : d.inputs()) write_doubles(bin, inputs.at(in->name).data);
  std::vector<double> out_sizes;
  for (const auto* o : d.outputs()) out_sizes.push_back(static_cast<double>(expected.at(o->name).data.size()));
  write_doubles(bin, out_sizes);
}

void write_driver(const fs::path& dir, std::size_t n) {
  std::vector<std::size_t> ids;
  for (std::size_t i = 0; i < n; ++i) ids.push_back(i);
  write_driver(dir, ids);
}

void write_driver(const fs::path& dir, const std::vector<std::size_t>& ids) {
  std::ofstream d(dir / "driver.cpp");
  d << "#include <cstdint>\n#include <cstdio>\n#include <string>\n#include <vector>\n";
  for (std::size_t i : ids)
    d << "extern \"C\" void napkin_c" << i << "_run(const double* const*, double* const*, const int64_t*);\n";
  d << "using Fn = void (*)(const double* const*, double* const*, const int64_t*);\nstatic Fn fns[] = {";
  for (std::size_t k = 0; k < ids.size(); ++k) d << (k ? ", " : "") << "napkin_c" << ids[k] << "_run";
  d << "};\nstatic const int ids[] = {";
  for (std::size_t k = 0; k < ids.size(); ++k) d << (k ? ", " : "") << ids[k];
  d << R"(};
static std::vector<double> read(FILE* f) {
  int64_t n = 0;
  if (fread(&n, sizeof n, 1, f) != 1) return {};
  std::vector<double> v(static_cast<size_t>(n));
  if (n && fread(v.data(), sizeof(double), v.size(), f) != v.size()) v.clear();
  return v;
}
int main(int argc, char** argv) {
  for (int k = 0; k < static_cast<int>(sizeof fns / sizeof fns[0]); ++k) {
    const int c = ids[k];
    if (argc > 2 && c != std::stoi(argv[2])) continue;
    std::string dir = argc > 1 ? argv[1] : ".";
    FILE* f = fopen((dir + "/in" + std::to_string(c) + ".bin").c_str(), "rb");
    if (!f) return 2;
    std::vector<double> sd = read(f);
    std::vector<int64_t> sizes(sd.begin(), sd.end());
    std::vector<std::vector<double>> ins;
    std::vector<double> next;
    std::vector<std::vector<double>> all;
    while (!(next = read(f)).empty() || !feof(f)) all.push_back(next);
    fclose(f);
    std::vector<double> out_sizes = all.back();
    all.pop_back();
    std::vector<const double*> in_ptrs;
    for (auto& v : all) in_ptrs.push_back(v.data());
    std::vector<std::vector<double>> outs;
    for (double s : out_sizes) outs.emplace_back(static_cast<size_t>(s), -7.0);
    std::vector<double*> out_ptrs;
    for (auto& v : outs) out_ptrs.push_back(v.data());
    fns[k](in_ptrs.data(), out_ptrs.data(), sizes.data());
    FILE* o = fopen((dir + "/out" + std::to_string(c) + ".bin").c_str(), "wb");
    for (auto& v : outs) {
      int64_t n = static_cast<int64_t>(v.size());
      fwrite(&n, sizeof n, 1, o);
      fwrite(v.data(), sizeof(double), v.size(), o);
    }
    fclose(o);
  }
  return 0;
}
)";
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want, std::string& why) {
  if (got.size() != want.size()) return why = "size differs", INFINITY;
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i])) {
      bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
      if (!same) return why = "non-finite entry " + std::to_string(i) + " differs", INFINITY;
      continue;
    }
    scale = std::max(scale, std::fabs(want[i]));
    err = std::max(err, std::fabs(got[i] - want[i]));
  }
  return err / std::max(scale, 1e-3);
}

std::vector<std::vector<double>> read_outputs(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<std::vector<double>> out;
  std::int64_t n = 0;
  while (in.read(reinterpret_cast<char*>(&n), sizeof n)) {
    std::vector<double> v(static_cast<std::size_t>(n));
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace napkin::test
