#include "diagrams/source.hpp"

namespace napkin {

std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  unsigned b = byte(i);
  std::size_t n = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 1;
  if (n == 1) return 1;
  for (std::size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xc0) != 0x80) return 1;
  unsigned second = byte(i + 1);
  if ((b == 0xe0 && second < 0xa0) || (b == 0xed && second >= 0xa0) ||  // overlong, surrogates
      (b == 0xf0 && second < 0x90) || (b == 0xf4 && second >= 0x90))    // overlong, past U+10FFFF
    return 1;
  return n;
}

SourceFile::SourceFile(std::string path_, std::string text_)
    : path(std::move(path_)), text(std::move(text_)) {
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a byte-order mark is no content
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
