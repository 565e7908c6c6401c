#include "diagrams/source.hpp"

namespace napkin {

SourceFile::SourceFile(std::string path_, std::string text_)
    : path(std::move(path_)), text(std::move(text_)) {
  line_starts.push_back(0);
  for (std::size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') line_starts.push_back(i + 1);
}

std::string_view SourceFile::line_text(int line) const {
  if (line < 1 || static_cast<std::size_t>(line) > line_starts.size()) return {};
  std::size_t begin = line_starts[static_cast<std::size_t>(line - 1)];
  std::size_t end = text.find('\n', begin);
  if (end == std::string::npos) end = text.size();
  if (end > begin && text[end - 1] == '\r') --end;
  return std::string_view(text).substr(begin, end - begin);
}

const SourceFile* SourceManager::add(std::string path, std::string text) {
  files_.push_back(std::make_unique<SourceFile>(std::move(path), std::move(text)));
  return files_.back().get();
}

}  // namespace napkin
