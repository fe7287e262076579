// safetensors reader, first stage: the header's JSON checked for UTF-8 and parsed against the schema by a SAX handler.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_set>

#include "formats/safetensors_detail.h"

namespace ember::formats::detail {
namespace {

// SAX handler that accepts exactly the safetensors header schema and stops at the first deviation,
// so nothing deeper than {name: {field: [numbers]}} is ever built and duplicate keys (which a DOM
// parse would silently collapse to the last one) are caught.
class HeaderSax {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit HeaderSax(Header& out) : out_(out) {}
  const std::string& error() const { return error_; }

  bool null() { return unexpected("null"); }
  bool boolean(bool v) { return unexpected(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) { return unexpected(std::to_string(v)); }  // only negatives come here
  bool number_unsigned(number_unsigned_t v) {
    if (state_ == State::Shape) {
      entry_.dims.push_back(v);
      return true;
    }
    if (state_ == State::Offsets) {
      if (entry_.offsets.size() == 2)
        return stop("tensor ", quote(entry_.name),
                    ": expected \"data_offsets\" to be [begin, end], found more than 2 entries");
      entry_.offsets.push_back(v);
      return true;
    }
    return unexpected(std::to_string(v));
  }
  bool number_float(number_float_t, const string_t& text) { return unexpected(text); }
  bool string(string_t& s) {
    if (state_ == State::Meta) {
      out_.metadata.emplace(std::move(meta_key_), std::move(s));
      return true;
    }
    if (state_ == State::Info && field_ == Field::DType) {
      entry_.dtype_code = std::move(s);
      return true;
    }
    return unexpected("the string " + quote(s));
  }
  bool binary(binary_t&) { return unexpected("binary data"); }

  bool start_object(std::size_t) {
    if (state_ == State::Start) {
      state_ = State::Top;
      return true;
    }
    if (state_ == State::Top) {
      if (key_ == "__metadata__") {
        state_ = State::Meta;
      } else {
        state_ = State::Info;
        entry_ = Entry{};
        entry_.name = key_;
        seen_ = 0;
      }
      return true;
    }
    return unexpected("an object");
  }
  bool key(string_t& k) {
    switch (state_) {
      case State::Top:
        if (k == "__metadata__") {
          if (seen_metadata_) return stop("\"__metadata__\" appears twice; expected it at most once");
          seen_metadata_ = true;
        } else if (k.empty()) {
          // The writer refuses empty names, so the reader does too: what loads can be saved back.
          return stop("a tensor has an empty name; expected every tensor to be named");
        } else if (!names_.insert(k).second) {
          return stop("tensor name ", quote(k), " appears twice; expected unique names");
        }
        key_ = std::move(k);
        return true;
      case State::Meta:
        if (out_.metadata.count(k))
          return stop("\"__metadata__\" key ", quote(k), " appears twice; expected unique keys");
        meta_key_ = std::move(k);
        return true;
      case State::Info: {
        unsigned bit = 0;
        if (k == "dtype")
          field_ = Field::DType, bit = 1;
        else if (k == "shape")
          field_ = Field::Shape, bit = 2;
        else if (k == "data_offsets")
          field_ = Field::Offsets, bit = 4;
        else
          return stop("tensor ", quote(entry_.name), ": unexpected field ", quote(k),
                      "; expected only \"dtype\", \"shape\" and \"data_offsets\"");
        if (seen_ & bit) return stop("tensor ", quote(entry_.name), ": field ", quote(k), " appears twice");
        seen_ |= bit;
        return true;
      }
      default:
        return stop("unexpected key ", quote(k));  // keys only occur in objects we entered
    }
  }
  bool end_object() {
    if (state_ == State::Meta) {
      state_ = State::Top;
      return true;
    }
    if (state_ == State::Info) {
      if (seen_ != 7) {
        const char* missing = !(seen_ & 1) ? "\"dtype\"" : !(seen_ & 2) ? "\"shape\"" : "\"data_offsets\"";
        return stop("tensor ", quote(entry_.name), ": missing field ", missing,
                    "; expected \"dtype\", \"shape\" and \"data_offsets\"");
      }
      out_.entries.push_back(std::move(entry_));
      state_ = State::Top;
      return true;
    }
    state_ = State::Done;
    return true;
  }
  bool start_array(std::size_t) {
    if (state_ == State::Info && field_ == Field::Shape) {
      state_ = State::Shape;
      return true;
    }
    if (state_ == State::Info && field_ == Field::Offsets) {
      state_ = State::Offsets;
      return true;
    }
    return unexpected("an array");
  }
  bool end_array() {
    if (state_ == State::Offsets && entry_.offsets.size() != 2)
      return stop("tensor ", quote(entry_.name), ": expected \"data_offsets\" to be [begin, end], found ",
                  entry_.offsets.size(), " entries");
    state_ = State::Info;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line 1, column 7: ".
    std::string what = ex.what();
    if (auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    if (what.size() > 160) what = what.substr(0, 157) + "...";
    error_ = ember::detail::concat("header is not valid JSON near file offset ", 8 + (position ? position - 1 : 0),
                                   ": ", what);
    return false;
  }

 private:
  enum class State { Start, Top, Meta, Info, Shape, Offsets, Done };
  enum class Field { DType, Shape, Offsets };

  template <typename... Args>
  bool stop(Args&&... args) {
    error_ = ember::detail::concat(std::forward<Args>(args)...);
    return false;
  }
  // A value of the wrong JSON type: say what this position in the schema expects.
  bool unexpected(const std::string& found) {
    switch (state_) {
      case State::Start:
        return stop("expected the header to be a JSON object, found ", found);
      case State::Top:
        if (key_ == "__metadata__")
          return stop("expected \"__metadata__\" to be an object of string -> string, found ", found);
        return stop("tensor ", quote(key_), ": expected an object {\"dtype\", \"shape\", \"data_offsets\"}, found ",
                    found);
      case State::Meta:
        return stop("\"__metadata__\" key ", quote(meta_key_), ": expected a string value, found ", found);
      case State::Info:
        switch (field_) {
          case Field::DType:
            return stop("tensor ", quote(entry_.name), ": expected \"dtype\" to be a string such as \"F32\", found ",
                        found);
          case Field::Shape:
            return stop("tensor ", quote(entry_.name),
                        ": expected \"shape\" to be an array of non-negative integers, found ", found);
          case Field::Offsets:
            return stop("tensor ", quote(entry_.name),
                        ": expected \"data_offsets\" to be an array [begin, end] of non-negative integers, found ",
                        found);
        }
        break;
      case State::Shape:
        return stop("tensor ", quote(entry_.name), ": expected \"shape\" entries to be non-negative integers, found ",
                    found);
      case State::Offsets:
        return stop("tensor ", quote(entry_.name),
                    ": expected \"data_offsets\" entries to be non-negative integers, found ", found);
      case State::Done:
        break;
    }
    return stop("unexpected ", found, " after the header object");
  }

  Header& out_;
  std::string error_;
  State state_ = State::Start;
  Field field_ = Field::DType;
  std::string key_;       // current top-level key
  std::string meta_key_;  // current "__metadata__" key
  Entry entry_;
  unsigned seen_ = 0;  // fields of entry_ seen: 1 dtype, 2 shape, 4 data_offsets
  bool seen_metadata_ = false;
  std::unordered_set<std::string> names_;
};

// Offset of the first byte that is not valid UTF-8 (overlong forms and surrogates included) or is
// NUL, or npos. NUL is valid UTF-8 but never valid JSON, and nlohmann's lexer takes it for the end of
// the input: "{...}\0garbage" would otherwise parse.
size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c == 0) return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0)
      len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
      len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
      len = 4, cp = c & 0x07, min = 0x10000;
    else
      return i;
    if (s.size() - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

Header parse_header_json(const std::string& file, std::string_view text) {
  if (text.empty() || text[0] != '{') {
    char found[32] = "an empty header";
    if (!text.empty()) {
      const auto c = static_cast<unsigned char>(text[0]);
      if (c >= 0x20 && c < 0x7F)
        std::snprintf(found, sizeof found, "'%c'", c);
      else
        std::snprintf(found, sizeof found, "byte 0x%02x", static_cast<unsigned>(c));
    }
    fail(file, "expected the JSON header to start with '{' at file offset 8, found ", found);
  }
  if (size_t bad = invalid_utf8_at(text); bad != std::string_view::npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
    fail(file, "header is not valid UTF-8 JSON text: found byte ", hex, " at file offset ", 8 + bad);
  }

  Header header;
  HeaderSax sax(header);
  if (!json::sax_parse(text.data(), text.data() + text.size(), &sax)) fail(file, sax.error());
  return header;
}

}  // namespace ember::formats::detail
