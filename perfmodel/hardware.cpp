#include "perfmodel/hardware.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <toml++/toml.h>

#include "diagrams/program.hpp"

namespace napkin {

std::optional<double> Hardware::tensor_rate(DType t) const {
  auto it = tensor_flops_per_s.find(t);
  if (it == tensor_flops_per_s.end()) return std::nullopt;
  return it->second;
}

const MmaShape* Hardware::warp_mma(DType t) const {
  for (const auto& m : mma)
    if (m.dtype == t && m.scope == "warp") return &m;
  return nullptr;
}

const MmaShape* Hardware::warpgroup_mma(DType t) const {
  for (const auto& m : mma)
    if (m.dtype == t && m.scope == "warpgroup" && m.m == 64 && m.k == 16 && m.ptx.find(".f32.") != std::string::npos) return &m;
  return nullptr;
}

namespace {

class Reader {
 public:
  Reader(const SourceFile& src, DiagnosticEngine& diags) : src_(src), diags_(diags) {}

  std::optional<Hardware> run() {
    toml::table root;
    try {
      root = toml::parse(src_.text, src_.path);
    } catch (const toml::parse_error& e) {
      diags_.error(at(e.source().begin), std::string("malformed TOML: ") + std::string(e.description()));
      return std::nullopt;
    }
    Hardware h;
    h.file = src_.path;
    h.name = str(root, "name");
    h.arch = str(root, "arch");
    if (auto* a = root["aliases"].as_array())
      for (auto& v : *a)
        if (auto s = v.value<std::string>()) h.aliases.push_back(*s);
    h.sm_count = static_cast<int>(num(root, "sm_count"));
    h.clock_hz = num(root, "clock_hz");
    h.launch_overhead_s = num(root, "launch_overhead_s", true);
    h.hbm = level(root, "hbm");
    h.l2 = level(root, "l2");
    if (const auto* t = table(root, "hbm"); t && t->contains("latency_s")) h.hbm_latency_s = num(*t, "latency_s", false, "hbm.");
    if (const auto* t = table(root, "l2"); t && t->contains("bulk_bandwidth_bytes_per_s"))
      h.l2_bulk_bandwidth_bytes_per_s = num(*t, "bulk_bandwidth_bytes_per_s", false, "l2.");
    const toml::table* smem = table(root, "smem");
    if (smem) {
      h.smem.capacity_bytes = num(*smem, "capacity_per_sm_bytes", false, "smem.");
      h.smem.bandwidth_bytes_per_s = num(*smem, "bandwidth_bytes_per_s", false, "smem.");
      h.smem_max_per_block_bytes = num(*smem, "max_per_block_bytes", false, "smem.");
    }
    if (const auto* r = table(root, "registers")) {
      h.registers_per_sm = static_cast<int>(num(*r, "per_sm", false, "registers."));
      h.max_registers_per_thread = static_cast<int>(num(*r, "max_per_thread", false, "registers."));
    }
    if (const auto* l = table(root, "limits")) {
      h.max_warps_per_sm = static_cast<int>(num(*l, "max_warps_per_sm", false, "limits."));
      h.max_threads_per_block = static_cast<int>(num(*l, "max_threads_per_block", false, "limits."));
      h.max_blocks_per_sm = static_cast<int>(num(*l, "max_blocks_per_sm", false, "limits."));
    }
    if (const auto* c = table(root, "compute")) {
      h.fp32_flops_per_s = num(*c, "fp32_flops_per_s", false, "compute.");
      h.sfu_ops_per_s = num(*c, "sfu_ops_per_s", false, "compute.");
      h.mma_sync_fraction = num(*c, "mma_sync_fraction", false, "compute.");
      if (h.mma_sync_fraction > 1) error(c->get("mma_sync_fraction"), "compute.mma_sync_fraction must be at most 1");
      if (c->contains("wgmma_fraction")) {
        h.wgmma_fraction = num(*c, "wgmma_fraction", false, "compute.");
        if (h.wgmma_fraction > 1) error(c->get("wgmma_fraction"), "compute.wgmma_fraction must be at most 1");
      }
      if (c->contains("sustained_tensor_fraction")) {
        h.sustained_tensor_fraction = num(*c, "sustained_tensor_fraction", false, "compute.");
        if (h.sustained_tensor_fraction > 1) error(c->get("sustained_tensor_fraction"), "compute.sustained_tensor_fraction must be at most 1");
      }
    }
    if (const auto* tc = table(root, "tensor_core")) {
      for (auto&& [k, v] : *tc) {
        auto dt = parse_dtype(k.str());
        if (!dt) {
          error(&v, "unknown dtype '" + std::string(k.str()) + "' in [tensor_core]; expected one of " + dtype_list());
          continue;
        }
        h.tensor_flops_per_s[*dt] = positive(&v, "tensor_core." + std::string(k.str()));
      }
    }
    if (const auto* f = table(root, "features")) {
      h.cp_async = flag(*f, "cp_async");
      h.tma = flag(*f, "tma");
      h.wgmma = flag(*f, "wgmma");
      if (f->contains("clusters")) h.clusters = flag(*f, "clusters");  // optional: descriptions before it lack it
    }
    if (auto* arr = root["mma"].as_array()) {
      for (auto& node : *arr) {
        const auto* t = node.as_table();
        if (!t) {
          error(&node, "each [[mma]] entry must be a table");
          continue;
        }
        MmaShape m;
        auto dt = parse_dtype(str(*t, "dtype", "mma."));
        if (!dt) error(t->get("dtype"), "unknown dtype in [[mma]]; expected one of " + dtype_list());
        else m.dtype = *dt;
        const auto* shape = (*t)["shape"].as_array();
        if (!shape || shape->size() != 3) error(t, "[[mma]] needs shape = [m, n, k]");
        else {
          std::array<int*, 3> dims{&m.m, &m.n, &m.k};
          for (std::size_t i = 0; i < 3; ++i) *dims[i] = static_cast<int>(positive(shape->get(i), "mma.shape"));
        }
        m.scope = str(*t, "scope", "mma.");
        if (m.scope != "warp" && m.scope != "warpgroup") error(t->get("scope"), "[[mma]] scope must be \"warp\" or \"warpgroup\"");
        m.ptx = str(*t, "ptx", "mma.");
        h.mma.push_back(std::move(m));
      }
    }
    if (diags_.has_errors()) return std::nullopt;
    return h;
  }

 private:
  SourceLoc at(const toml::source_position& p) {
    return SourceLoc{&src_, std::max(1, static_cast<int>(p.line)), std::max(1, static_cast<int>(p.column))};
  }
  SourceLoc at(const toml::node* n) { return n ? at(n->source().begin) : SourceLoc{&src_, 1, 1}; }
  void error(const toml::node* n, const std::string& msg) { diags_.error(at(n), msg); }

  const toml::table* table(const toml::table& t, const char* key) {
    const toml::node* n = t.get(key);
    if (!n) {
      diags_.error(SourceLoc{&src_, 1, 1}, std::string("missing table [") + key + "]");
      return nullptr;
    }
    if (!n->is_table()) error(n, std::string("'") + key + "' must be a table");
    return n->as_table();
  }
  std::string str(const toml::table& t, const char* key, const std::string& prefix = "") {
    const toml::node* n = t.get(key);
    if (!n) {
      error(&t, "missing key '" + prefix + key + "'");
      return {};
    }
    auto v = n->value<std::string>();
    if (!v) error(n, "'" + prefix + key + "' must be a string");
    return v.value_or("");
  }
  double positive(const toml::node* n, const std::string& key) {
    if (!n) return 0;
    auto v = n->value<double>();
    if (!v) {
      error(n, "'" + key + "' must be a number");
      return 0;
    }
    if (!(*v > 0)) error(n, "'" + key + "' must be positive");
    return *v;
  }
  double num(const toml::table& t, const char* key, bool zero_ok = false, const std::string& prefix = "") {
    const toml::node* n = t.get(key);
    if (!n) {
      error(&t, "missing key '" + prefix + key + "'");
      return 0;
    }
    if (zero_ok) {
      auto v = n->value<double>();
      if (!v || *v < 0) error(n, "'" + prefix + key + "' must be a non-negative number");
      return v.value_or(0);
    }
    return positive(n, prefix + key);
  }
  bool flag(const toml::table& t, const char* key) {
    const toml::node* n = t.get(key);
    if (!n) {
      error(&t, std::string("missing key 'features.") + key + "'");
      return false;
    }
    auto v = n->value<bool>();
    if (!v) error(n, std::string("'features.") + key + "' must be true or false");
    return v.value_or(false);
  }
  Level level(const toml::table& root, const char* key) {
    Level l;
    if (const auto* t = table(root, key)) {
      l.capacity_bytes = num(*t, "capacity_bytes", false, std::string(key) + ".");
      l.bandwidth_bytes_per_s = num(*t, "bandwidth_bytes_per_s", false, std::string(key) + ".");
    }
    return l;
  }

  const SourceFile& src_;
  DiagnosticEngine& diags_;
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::optional<Hardware> parse_hardware(const SourceFile& src, DiagnosticEngine& diags) {
  return Reader(src, diags).run();
}

std::string format_hardware(const Hardware& h, const std::string& header) {
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    std::string s = buf;
    return s.find_first_of(".e") == std::string::npos ? s + ".0" : s;
  };
  auto integer = [](double v) { return std::to_string(static_cast<long long>(v)); };
  std::string out;
  for (std::size_t p = 0, q; p < header.size(); p = q + 1) {
    q = header.find('\n', p);
    if (q == std::string::npos) q = header.size();
    out += "# " + header.substr(p, q - p) + "\n";
  }
  out += "name = \"" + h.name + "\"\naliases = [";
  for (std::size_t i = 0; i < h.aliases.size(); ++i) out += (i ? ", \"" : "\"") + h.aliases[i] + "\"";
  out += "]\narch = \"" + h.arch + "\"\nsm_count = " + std::to_string(h.sm_count) + "\nclock_hz = " + num(h.clock_hz) +
         "\nlaunch_overhead_s = " + num(h.launch_overhead_s) + "\n";
  out += "\n[hbm]\ncapacity_bytes = " + integer(h.hbm.capacity_bytes) + "\nbandwidth_bytes_per_s = " + num(h.hbm.bandwidth_bytes_per_s) + "\n";
  if (h.hbm_latency_s > 0) out += "latency_s = " + num(h.hbm_latency_s) + "\n";
  out += "\n[l2]\ncapacity_bytes = " + integer(h.l2.capacity_bytes) + "\nbandwidth_bytes_per_s = " + num(h.l2.bandwidth_bytes_per_s) + "\n";
  if (h.l2_bulk_bandwidth_bytes_per_s > 0) out += "bulk_bandwidth_bytes_per_s = " + num(h.l2_bulk_bandwidth_bytes_per_s) + "\n";
  out += "\n[smem]\ncapacity_per_sm_bytes = " + integer(h.smem.capacity_bytes) + "\nmax_per_block_bytes = " +
         integer(h.smem_max_per_block_bytes) + "\nbandwidth_bytes_per_s = " + num(h.smem.bandwidth_bytes_per_s) + "\n";
  out += "\n[registers]\nper_sm = " + std::to_string(h.registers_per_sm) + "\nmax_per_thread = " + std::to_string(h.max_registers_per_thread) + "\n";
  out += "\n[limits]\nmax_warps_per_sm = " + std::to_string(h.max_warps_per_sm) + "\nmax_threads_per_block = " +
         std::to_string(h.max_threads_per_block) + "\nmax_blocks_per_sm = " + std::to_string(h.max_blocks_per_sm) + "\n";
  out += "\n[compute]\nfp32_flops_per_s = " + num(h.fp32_flops_per_s) + "\nsfu_ops_per_s = " + num(h.sfu_ops_per_s) +
         "\nmma_sync_fraction = " + num(h.mma_sync_fraction) + "\n";
  if (h.wgmma_fraction > 0) out += "wgmma_fraction = " + num(h.wgmma_fraction) + "\n";
  if (h.sustained_tensor_fraction > 0) out += "sustained_tensor_fraction = " + num(h.sustained_tensor_fraction) + "\n";
  out += "\n[tensor_core]\n";
  for (const auto& [t, rate] : h.tensor_flops_per_s) out += std::string(dtype_name(t)) + " = " + num(rate) + "\n";
  out += std::string("\n[features]\ncp_async = ") + (h.cp_async ? "true" : "false") + "\ntma = " + (h.tma ? "true" : "false") +
         "\nwgmma = " + (h.wgmma ? "true" : "false") + "\nclusters = " + (h.clusters ? "true" : "false") + "\n";
  for (const auto& m : h.mma)
    out += "\n[[mma]]\ndtype = \"" + std::string(dtype_name(m.dtype)) + "\"\nshape = [" + std::to_string(m.m) + ", " +
           std::to_string(m.n) + ", " + std::to_string(m.k) + "]\nscope = \"" + m.scope + "\"\nptx = \"" + m.ptx + "\"\n";
  return out;
}

std::string hardware_dir() {
  if (const char* env = std::getenv("NAPKIN_HARDWARE_DIR")) return env;
  return NAPKIN_DEFAULT_HARDWARE_DIR;
}

std::vector<std::string> bundled_hardware() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(hardware_dir(), ec))
    if (e.path().extension() == ".toml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

Hardware load_hardware(const std::string& name_or_path) {
  std::string path;
  if (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".toml") {
    path = name_or_path;
  } else {
    std::string want = lower(name_or_path);
    std::string known;
    for (const auto& f : bundled_hardware()) {
      SourceManager sm;
      DiagnosticEngine d;
      auto h = parse_hardware(*sm.add(f, read_file(f)), d);
      if (!h) continue;
      known += (known.empty() ? "" : ", ") + lower(h->aliases.empty() ? h->name : h->aliases.front());
      bool match = lower(h->name) == want;
      for (const auto& a : h->aliases) match |= lower(a) == want;
      if (match) return *h;
    }
    throw UserError("unknown hardware '" + name_or_path + "'; bundled: " + known + " (or give a .toml path)");
  }
  SourceManager sm;
  DiagnosticEngine diags;
  auto h = parse_hardware(*sm.add(path, read_file(path)), diags);
  if (!h) {
    std::cerr << diags.render();
    throw UserError("hardware description '" + path + "' has " + std::to_string(diags.error_count()) + " error(s)");
  }
  return *h;
}

}  // namespace napkin
