#include "hardware/hardware.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <toml++/toml.h>

#include "diagrams/program.hpp"
#include "hardware/hardware_schema.hpp"

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
    if (m.dtype == t && m.scope == "warpgroup" && m.m == 64 && m.k * dtype_bits(t) == 256 &&
        m.ptx.find(is_integer_dtype(t) ? ".s32." : ".f32.") != std::string::npos)
      return &m;
  return nullptr;
}

namespace {

using hwschema::Field;
using hwschema::Section;
using hwschema::Type;

/** Reads a description by walking the schema (hardware_schema.hpp): every key is checked for its
 *  type and range, every key not in the schema is an error, each error located at its value. */
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
    std::vector<std::string> top_names;
    for (const Section& s : hwschema::sections()) {
      if (!s.name.empty()) top_names.emplace_back(s.name);
      for (const auto& f : s.fields)
        if (s.name.empty()) top_names.emplace_back(f.key);
    }
    for (const Section& s : hwschema::sections()) {
      if (s.name.empty()) {
        read_fixed(root, s.fields, "", h, top_names);
        continue;
      }
      const toml::node* n = root.get(s.name);
      if (!n) {
        if (s.required) diags_.error(at(&root), "missing " + std::string(s.kind == Section::Kind::table_array ? "array of tables [[" : "table [") +
                                                    std::string(s.name) + (s.kind == Section::Kind::table_array ? "]]" : "]"));
        continue;
      }
      if (s.kind == Section::Kind::table_array) read_mma(*n, s, h);
      else if (const auto* t = n->as_table()) s.kind == Section::Kind::fixed ? read_fixed(*t, s.fields, std::string(s.name) + ".", h, {}) : read_rates(*t, s, h);
      else error(n, "'" + std::string(s.name) + "' must be a table [" + std::string(s.name) + "], not " + describe(*n));
    }
    if (!diags_.has_errors() && h.smem_max_per_block_bytes > h.smem.capacity_bytes)
      error(root.get("smem")->as_table()->get("max_per_block_bytes"), "'smem.max_per_block_bytes' (" + std::to_string(static_cast<long long>(h.smem_max_per_block_bytes)) +
                                                                           " bytes) exceeds 'smem.capacity_per_sm_bytes' (" +
                                                                           std::to_string(static_cast<long long>(h.smem.capacity_bytes)) + " bytes)");
    if (diags_.has_errors()) return std::nullopt;
    return h;
  }

 private:
  SourceLoc at(const toml::source_position& p) {
    return SourceLoc{&src_, std::max(1, static_cast<int>(p.line)), std::max(1, static_cast<int>(p.column))};
  }
  SourceLoc at(const toml::node* n) { return n ? at(n->source().begin) : SourceLoc{&src_, 1, 1}; }
  void error(const toml::node* n, const std::string& msg) { diags_.error(at(n), msg); }

  static std::string describe(const toml::node& n) {
    if (auto v = n.as_integer()) return std::to_string(v->get());
    if (auto v = n.as_floating_point()) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.6g", v->get());
      return buf;
    }
    if (n.is_string()) return "a string";
    if (n.is_boolean()) return "a boolean";
    if (n.is_table()) return "a table";
    if (n.is_array()) return "a list";
    return "a date or time";
  }

  /** The value of `n` as field `f` wants it, or nullopt after a located error naming `key`. */
  template <class Target>
  std::optional<hwschema::Value> value(const toml::node& n, const Field<Target>& f, const std::string& key) {
    hwschema::Value v;
    auto fail = [&](const toml::node& where, const std::string& got) {
      error(&where, "'" + key + "' must be " + hwschema::expectation(f) + "; got " + got);
      return std::nullopt;
    };
    auto in_range = [&](double x) { return (f.lo_open ? x > f.lo : x >= f.lo) && x <= f.hi; };  // false for NaN
    switch (f.type) {
      case Type::string:
        if (!n.is_string()) return fail(n, describe(n));
        v.text = n.as_string()->get();
        return v;
      case Type::boolean:
        if (!n.is_boolean()) return fail(n, describe(n));
        v.flag = n.as_boolean()->get();
        return v;
      case Type::string_list: {
        const auto* a = n.as_array();
        if (!a) return fail(n, describe(n));
        for (const auto& e : *a) {
          if (!e.is_string()) return fail(e, "an element that is " + describe(e));
          v.list.push_back(e.as_string()->get());
        }
        return v;
      }
      case Type::integer: {
        if (!n.is_integer()) return fail(n, describe(n));
        const long long x = n.as_integer()->get();
        if (!in_range(static_cast<double>(x))) return fail(n, describe(n));
        v.number = static_cast<double>(x);
        return v;
      }
      case Type::real: {
        if (!n.is_number()) return fail(n, describe(n));
        const double x = n.is_integer() ? static_cast<double>(n.as_integer()->get()) : n.as_floating_point()->get();
        if (!in_range(x)) return fail(n, describe(n));
        v.number = x;
        return v;
      }
      case Type::integer_triple: {
        const auto* a = n.as_array();
        if (!a || a->size() != 3) return fail(n, a ? "a list of " + std::to_string(a->size()) : describe(n));
        for (std::size_t i = 0; i < 3; ++i) {
          const toml::node& e = *a->get(i);
          if (!e.is_integer() || !in_range(static_cast<double>(e.as_integer()->get()))) return fail(e, describe(e));
          v.triple[i] = e.as_integer()->get();
        }
        return v;
      }
    }
    return std::nullopt;
  }

  /** Reads the keys of `fields` from `t` into `target`; `prefix` is "" or "table."; keys of `t`
   *  that are neither fields nor in `also_known` (the top level's tables) are errors. */
  template <class Target>
  void read_fixed(const toml::table& t, std::span<const Field<Target>> fields, const std::string& prefix, Target& target,
                  const std::vector<std::string>& also_known) {
    std::vector<std::string> names = also_known;
    for (const auto& f : fields) names.emplace_back(f.key);
    for (auto&& [k, n] : t) {
      const std::string key(k.str());
      if (std::find(names.begin(), names.end(), key) != names.end()) continue;
      const std::string near = hwschema::closest(key, names);
      diags_.error(at(k.source().begin.line ? k.source().begin : n.source().begin),
                   "unknown key '" + prefix + key + "'" + (near.empty() ? "" : "; did you mean '" + prefix + near + "'?"));
    }
    for (const auto& f : fields) {
      const toml::node* n = t.get(f.key);
      if (!n) {
        if (f.required) error(&t, "missing key '" + prefix + std::string(f.key) + "' (" + hwschema::expectation(f) + ")");
        continue;
      }
      if (auto v = value(*n, f, prefix + std::string(f.key))) f.set(target, *v);
    }
  }

  /** [tensor_core]: one rate per dtype name. */
  void read_rates(const toml::table& t, const Section& s, Hardware& h) {
    std::vector<std::string> names;
    for (int d = 0; d <= static_cast<int>(DType::int4); ++d) names.emplace_back(dtype_name(static_cast<DType>(d)));
    for (auto&& [k, n] : t) {
      hwschema::Value v;
      const std::string key(k.str());
      if (!parse_dtype(key)) {
        const std::string near = hwschema::closest(key, names);
        error(&n, "unknown dtype '" + key + "' in [" + std::string(s.name) + "]; " +
                      (near.empty() ? "expected one of " + dtype_list() : "did you mean '" + near + "'?"));
        continue;
      }
      if (auto got = value(n, s.fields[0], std::string(s.name) + "." + key)) {
        got->key = key;
        s.fields[0].set(h, *got);
      }
    }
  }

  /** [[mma]]: a list of instruction tables. */
  void read_mma(const toml::node& n, const Section& s, Hardware& h) {
    const std::string name(s.name);
    const auto* arr = n.as_array();
    if (!arr) {
      error(&n, "'" + name + "' must be an array of tables [[" + name + "]], not " + describe(n));
      return;
    }
    for (const auto& e : *arr) {
      const auto* t = e.as_table();
      if (!t) {
        error(&e, "each [[" + name + "]] entry must be a table, not " + describe(e));
        continue;
      }
      MmaShape m;
      read_fixed(*t, s.mma_fields, name + ".", m, {});
      if (const auto* d = t->get("dtype"); d && d->is_string() && !parse_dtype(d->as_string()->get()))
        error(d, "unknown dtype '" + d->as_string()->get() + "' in [[" + name + "]]; expected one of " + dtype_list());
      if (const auto* sc = t->get("scope"); sc && sc->is_string() && m.scope != "warp" && m.scope != "warpgroup")
        error(sc, "'" + name + ".scope' must be \"warp\" or \"warpgroup\"");
      h.mma.push_back(std::move(m));
    }
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
  auto quoted = [](const std::string& v) {  // a TOML basic string: quotes, backslashes and control characters escaped
    std::string q = "\"";
    for (unsigned char c : v) {
      if (c == '"' || c == '\\') q += '\\', q += static_cast<char>(c);
      else if (c < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        q += buf;
      } else q += static_cast<char>(c);
    }
    return q + "\"";
  };
  std::string out;
  for (std::size_t p = 0, q; p < header.size(); p = q + 1) {
    q = header.find('\n', p);
    if (q == std::string::npos) q = header.size();
    out += "# " + header.substr(p, q - p) + "\n";
  }
  out += "name = " + quoted(h.name) + "\naliases = [";
  for (std::size_t i = 0; i < h.aliases.size(); ++i) out += (i ? ", " : "") + quoted(h.aliases[i]);
  out += "]\narch = " + quoted(h.arch) + "\nsm_count = " + std::to_string(h.sm_count) + "\nclock_hz = " + num(h.clock_hz) +
         "\nlaunch_overhead_s = " + num(h.launch_overhead_s) + "\n";
  out += "\n[hbm]\ncapacity_bytes = " + integer(h.hbm.capacity_bytes) + "\nbandwidth_bytes_per_s = " + num(h.hbm.bandwidth_bytes_per_s) + "\n";
  if (h.hbm_latency_s > 0) out += "latency_s = " + num(h.hbm_latency_s) + "\n";
  if (h.hbm_loaded_latency_s > 0) out += "loaded_latency_s = " + num(h.hbm_loaded_latency_s) + "\n";
  if (h.rows_hbm_fraction > 0) out += "rows_fraction = " + num(h.rows_hbm_fraction) + "\n";
  out += "\n[l2]\ncapacity_bytes = " + integer(h.l2.capacity_bytes) + "\nbandwidth_bytes_per_s = " + num(h.l2.bandwidth_bytes_per_s) + "\n";
  if (h.l2_bulk_bandwidth_bytes_per_s > 0) out += "bulk_bandwidth_bytes_per_s = " + num(h.l2_bulk_bandwidth_bytes_per_s) + "\n";
  if (h.l2_bulk_sm_bandwidth_bytes_per_s > 0) out += "bulk_sm_bandwidth_bytes_per_s = " + num(h.l2_bulk_sm_bandwidth_bytes_per_s) + "\n";
  if (h.l2_loaded_latency_s > 0) out += "loaded_latency_s = " + num(h.l2_loaded_latency_s) + "\n";
  if (h.l2_atomic_bandwidth_bytes_per_s > 0) out += "atomic_bandwidth_bytes_per_s = " + num(h.l2_atomic_bandwidth_bytes_per_s) + "\n";
  if (h.l2_reread_capacity_bytes > 0) out += "reread_capacity_bytes = " + integer(h.l2_reread_capacity_bytes) + "\n";
  out += "\n[smem]\ncapacity_per_sm_bytes = " + integer(h.smem.capacity_bytes) + "\nmax_per_block_bytes = " +
         integer(h.smem_max_per_block_bytes) + "\nbandwidth_bytes_per_s = " + num(h.smem.bandwidth_bytes_per_s) + "\n";
  out += "\n[registers]\nper_sm = " + std::to_string(h.registers_per_sm) + "\nmax_per_thread = " + std::to_string(h.max_registers_per_thread) + "\n";
  out += "\n[limits]\nmax_warps_per_sm = " + std::to_string(h.max_warps_per_sm) + "\nmax_threads_per_block = " +
         std::to_string(h.max_threads_per_block) + "\nmax_blocks_per_sm = " + std::to_string(h.max_blocks_per_sm) + "\n";
  out += "\n[compute]\nfp32_flops_per_s = " + num(h.fp32_flops_per_s) + "\nsfu_ops_per_s = " + num(h.sfu_ops_per_s) +
         "\nmma_sync_fraction = " + num(h.mma_sync_fraction) + "\n";
  if (h.wgmma_fraction > 0) out += "wgmma_fraction = " + num(h.wgmma_fraction) + "\n";
  if (h.sustained_tensor_fraction > 0) out += "sustained_tensor_fraction = " + num(h.sustained_tensor_fraction) + "\n";
  if (h.flash_bwd_smem_exposed > 0) out += "flash_bwd_smem_exposed = " + num(h.flash_bwd_smem_exposed) + "\n";
  if (h.flash_softmax_hidden > 0) out += "flash_softmax_hidden = " + num(h.flash_softmax_hidden) + "\n";
  if (h.flash_chunk_latency_s > 0) out += "flash_chunk_latency_s = " + num(h.flash_chunk_latency_s) + "\n";
  if (h.flash_mma_sync_factor != 1) out += "flash_mma_sync_factor = " + num(h.flash_mma_sync_factor) + "\n";
  if (h.flash_mma_sync_alone != 1) out += "flash_mma_sync_alone = " + num(h.flash_mma_sync_alone) + "\n";
  if (h.cluster_stage_latency_s > 0) out += "cluster_stage_latency_s = " + num(h.cluster_stage_latency_s) + "\n";
  if (h.staged_store_block_s > 0) out += "staged_store_block_s = " + num(h.staged_store_block_s) + "\n";
  if (h.gemm_last_store_block_s > 0) out += "gemm_last_store_block_s = " + num(h.gemm_last_store_block_s) + "\n";
  if (h.gemm_tile_turnover_s > 0) out += "gemm_tile_turnover_s = " + num(h.gemm_tile_turnover_s) + "\n";
  if (h.sustained_smem_fraction > 0) out += "sustained_smem_fraction = " + num(h.sustained_smem_fraction) + "\n";
  out += "\n[tensor_core]\n";
  for (const auto& [t, rate] : h.tensor_flops_per_s) out += std::string(dtype_name(t)) + " = " + num(rate) + "\n";
  out += std::string("\n[features]\ncp_async = ") + (h.cp_async ? "true" : "false") + "\ntma = " + (h.tma ? "true" : "false") +
         "\nwgmma = " + (h.wgmma ? "true" : "false") + "\nclusters = " + (h.clusters ? "true" : "false") + "\n";
  for (const auto& m : h.mma)
    out += "\n[[mma]]\ndtype = \"" + std::string(dtype_name(m.dtype)) + "\"\nshape = [" + std::to_string(m.m) + ", " +
           std::to_string(m.n) + ", " + std::to_string(m.k) + "]\nscope = " + quoted(m.scope) + "\nptx = " + quoted(m.ptx) + "\n" + (m.mn_major ? "mn_major = true\n" : "") +
           (m.fraction > 0 ? "fraction = " + num(m.fraction) + "\n" : "");
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

namespace {

/** Parses `path`; on errors prints them (located) and raises UserError naming the file. */
Hardware load_file(const std::string& path) {
  SourceManager sm;
  DiagnosticEngine diags;
  auto h = parse_hardware(*sm.add(path, read_file(path)), diags);
  if (!h) {
    std::cerr << diags.render();
    throw UserError("hardware description '" + path + "' has " + std::to_string(diags.error_count()) + " error(s)");
  }
  return *h;
}

}  // namespace

Hardware load_hardware(const std::string& name_or_path) {
  if (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".toml") return load_file(name_or_path);
  const std::string want = lower(name_or_path);
  std::set<std::string> known;       // each description once, by its first alias (or name)
  std::vector<std::string> broken;   // bundled files that do not parse
  std::string broken_errors;
  for (const auto& f : bundled_hardware()) {
    SourceManager sm;
    DiagnosticEngine d;
    auto h = parse_hardware(*sm.add(f, read_file(f)), d);
    if (!h) {
      // A broken bundled file reports its own errors when it is the one asked for by file
      // name; otherwise its errors come with the unknown-hardware error, if there is one.
      if (lower(std::filesystem::path(f).stem().string()) == want) return load_file(f);
      broken.push_back(f);
      broken_errors += d.render();
      continue;
    }
    known.insert(lower(h->aliases.empty() ? h->name : h->aliases.front()));
    bool match = lower(h->name) == want;
    for (const auto& a : h->aliases) match |= lower(a) == want;
    if (match) return *h;
  }
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  std::string msg = "unknown hardware '" + name_or_path + "'; bundled: " + list + " (or give a .toml path)";
  // The one asked for may be among the broken ones: show why they do not load.
  std::cerr << broken_errors;
  for (const auto& f : broken) msg += "; the bundled description '" + f + "' does not load (errors above)";
  throw UserError(msg);
}

}  // namespace napkin
