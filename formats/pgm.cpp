// read_pgm: header tokens (skipping whitespace and # comments), then exactly the pixels the header promises.
#include "formats/pgm.h"

#include <cctype>
#include <fstream>
#include <iterator>

namespace ember::formats {

namespace {

// The header's next token, skipping whitespace and comments; empty at the end of the bytes.
std::string next_token(const std::string& bytes, size_t& pos) {
  while (pos < bytes.size()) {
    if (bytes[pos] == '#') {
      while (pos < bytes.size() && bytes[pos] != '\n') ++pos;
    } else if (std::isspace(static_cast<unsigned char>(bytes[pos]))) {
      ++pos;
    } else {
      break;
    }
  }
  const size_t start = pos;
  while (pos < bytes.size() && !std::isspace(static_cast<unsigned char>(bytes[pos]))) ++pos;
  return bytes.substr(start, pos - start);
}

}  // namespace

Tensor read_pgm(const std::string& path, int64_t height, int64_t width) {
  std::ifstream f(path, std::ios::binary);
  EMBER_CHECK(f.good(), IoError, "cannot open ", path);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  EMBER_CHECK(next_token(bytes, pos) == "P5", FormatError, path, ": not a binary PGM (expected magic P5)");
  const std::string w = next_token(bytes, pos), h = next_token(bytes, pos), maxval = next_token(bytes, pos);
  EMBER_CHECK(w == std::to_string(width) && h == std::to_string(height), FormatError, path, ": expected a ", width,
              "x", height, " image, found ", w, "x", h);
  EMBER_CHECK(maxval == "255", FormatError, path, ": expected maxval 255, found ", maxval);
  ++pos;  // the single whitespace byte before the pixels
  const size_t pixels = static_cast<size_t>(height * width);
  EMBER_CHECK(pos + pixels == bytes.size(), FormatError, path, ": expected ", pixels,
              " pixel bytes after the header, found ", bytes.size() >= pos ? bytes.size() - pos : 0);
  return Tensor::from_data(bytes.data() + pos, height * width, {1, height, width}, DType::U8);
}

}  // namespace ember::formats
