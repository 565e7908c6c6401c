#include "diagrams/program.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "diagrams/builtins.hpp"
#include "diagrams/limits.hpp"
#include "diagrams/parser.hpp"

namespace napkin {

namespace fs = std::filesystem;

const Diagram& Program::select(const std::string& name) const {
  if (!name.empty()) {
    auto it = diagrams.find(name);
    if (it == diagrams.end()) throw UserError("no diagram named '" + name + "'");
    return *it->second;
  }
  if (main_file().diagrams.empty()) throw UserError("the file defines no diagram");
  return main_file().diagrams.back();
}

namespace {

class Loader {
 public:
  Loader(Program& p, DiagnosticEngine& d) : prog_(p), diags_(d) {}

  void load(const std::string& path, std::string text, SourceLoc from) {
    std::error_code ec;  // /dev/stdin on a pipe has no canonical path: the path itself is the key
    fs::path canonical = path == "-" ? fs::path(path) : fs::weakly_canonical(path, ec);
    std::string key = ec ? path : canonical.string();
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      if (stack_[i] != key) continue;
      std::string chain;
      for (std::size_t j = i; j < stack_.size(); ++j) chain += fs::path(stack_[j]).filename().string() + " -> ";
      diags_.error(from, "import cycle: " + chain + fs::path(key).filename().string());
      return;
    }
    if (!seen_.insert(key).second) return;  // imported twice through different files: load once
    const SourceFile* src = prog_.sources.add(path, std::move(text));
    ParseResult parsed = parse_file(*src, diags_);
    auto lf = std::make_unique<LoadedFile>();
    lf->source = src;
    lf->file = std::move(parsed.file);
    prog_.broken.insert(parsed.broken.begin(), parsed.broken.end());
    LoadedFile* here = lf.get();
    prog_.files.push_back(std::move(lf));

    stack_.push_back(key);
    fs::path base = path == "-" ? fs::current_path() : fs::path(path).parent_path();
    for (const auto& imp : here->file.imports) {
      if (stack_.size() > static_cast<std::size_t>(kMaxImportDepth)) {  // the loader recurses once per level
        diags_.error(imp.loc, "imports nested too deeply: this import would be the " + std::to_string(kMaxImportDepth + 1) +
                                  "th nested one (from " + fs::path(stack_.front()).filename().string() + "); at most " +
                                  std::to_string(kMaxImportDepth) + " imports may nest");
        break;
      }
      fs::path target = base / imp.path;
      std::string body;
      try {
        body = read_file(target.string());
      } catch (const UserError& e) {
        diags_.error(imp.loc, std::string("cannot import: ") + e.what());
        continue;
      }
      load(target.string(), std::move(body), imp.loc);
    }
    stack_.pop_back();

    for (const auto& d : here->file.diagrams) {
      if (builtin_op(d.name)) {
        diags_.error(d.loc, "diagram '" + d.name + "' has the name of a built-in operation; choose another name");
        continue;
      }
      auto [it, inserted] = prog_.diagrams.emplace(d.name, &d);
      if (!inserted) {
        diags_.error(d.loc, "diagram '" + d.name + "' is already defined");
        diags_.note(it->second->loc, "first defined here");
      }
    }
  }

 private:
  Program& prog_;
  DiagnosticEngine& diags_;
  std::vector<std::string> stack_;
  std::set<std::string> seen_;
};

}  // namespace

std::unique_ptr<Program> load_program_text(const std::string& name, std::string text, DiagnosticEngine& diags, bool expand) {
  auto p = std::make_unique<Program>();
  Loader(*p, diags).load(name, std::move(text), SourceLoc{});
  if (p->main_file().diagrams.empty() && !diags.has_errors())
    diags.error(SourceLoc{p->files.front()->source, 1, 1}, "no diagram in this file; start one with 'diagram NAME'");
  if (expand) expand_builtins(*p);
  return p;
}

std::unique_ptr<Program> load_program(const std::string& path, DiagnosticEngine& diags, bool expand) {
  return load_program_text(path, read_file(path), diags, expand);
}

}  // namespace napkin
