// Build step of the emulated build: copies a .cu file, adding `::emu::kernel_entry(<launch bounds>);` as the
// first statement of every __global__ function, on the same line so every line number stays the same.
// The kernel's code is otherwise untouched: the launch probe (emu/launch.h) reads its bounds from there.
//
// usage: ember_emu_instrument INPUT.cu OUTPUT.cpp
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

// The index just past a comment, string or character literal starting at i, or i if none starts there.
size_t skip_non_code(const std::string& s, size_t i) {
  if (s.compare(i, 2, "//") == 0) {
    const size_t end = s.find('\n', i);
    return end == std::string::npos ? s.size() : end;
  }
  if (s.compare(i, 2, "/*") == 0) {
    const size_t end = s.find("*/", i + 2);
    return end == std::string::npos ? s.size() : end + 2;
  }
  if (s[i] == '"' || s[i] == '\'') {
    const char quote = s[i];
    for (size_t j = i + 1; j < s.size(); ++j) {
      if (s[j] == '\\') ++j;
      else if (s[j] == quote) return j + 1;
    }
    return s.size();
  }
  return i;
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool token_at(const std::string& s, size_t i, const std::string& token) {
  return s.compare(i, token.size(), token) == 0 && (i == 0 || !is_identifier_char(s[i - 1])) &&
         (i + token.size() >= s.size() || !is_identifier_char(s[i + token.size()]));
}

// From just after `__global__`: finds the body's '{' of a definition (npos for a declaration) and the text of
// its __launch_bounds__ arguments ("0" when there are none).
size_t find_body(const std::string& s, size_t i, std::string* bounds) {
  *bounds = "0";
  int depth = 0;
  while (i < s.size()) {
    const size_t next = skip_non_code(s, i);
    if (next != i) {
      i = next;
      continue;
    }
    if (depth == 0 && token_at(s, i, "__launch_bounds__")) {
      const size_t open = s.find('(', i);
      int d = 0;
      size_t close = open;
      for (; close < s.size(); ++close) {
        if (s[close] == '(') ++d;
        if (s[close] == ')' && --d == 0) break;
      }
      *bounds = s.substr(open + 1, close - open - 1);
      i = close + 1;
      continue;
    }
    const char c = s[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && c == ';') return std::string::npos;
    if (depth == 0 && c == '{') return i;
    ++i;
  }
  return std::string::npos;
}

std::string instrument(const std::string& s, int* kernels) {
  std::string out;
  size_t copied = 0, i = 0;
  while (i < s.size()) {
    const size_t next = skip_non_code(s, i);
    if (next != i) {
      i = next;
      continue;
    }
    if (!token_at(s, i, "__global__")) {
      ++i;
      continue;
    }
    std::string bounds;
    const size_t body = find_body(s, i + 10, &bounds);
    if (body == std::string::npos) {
      i += 10;
      continue;
    }
    out.append(s, copied, body + 1 - copied);
    out += " ::emu::kernel_entry(" + bounds + ");";
    copied = i = body + 1;
    ++*kernels;
  }
  out.append(s, copied, std::string::npos);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: ember_emu_instrument INPUT.cu OUTPUT.cpp\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "ember_emu_instrument: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  int kernels = 0;
  const std::string body = instrument(text.str(), &kernels);
  std::ofstream out(argv[2], std::ios::binary);
  out << "// Generated from " << argv[1] << " by ember_emu_instrument: " << kernels << " kernel(s). Do not edit.\n"
      << "#line 1 \"" << argv[1] << "\"\n"
      << body;
  if (!out) {
    std::cerr << "ember_emu_instrument: cannot write " << argv[2] << "\n";
    return 1;
  }
  return 0;
}
