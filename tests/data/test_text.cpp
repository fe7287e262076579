// The text corpus (a file or a folder, name order, binary files skipped, the held-out split, the errors) and BERT's
// masking (the 15% / 80-10-10 rule, windows of the text, determinism, a rank's rows of a global batch).
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "data/text.h"
#include "support/run_ember.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// 4000 bytes whose every 8-byte run is unique, so a window says where it came from.
std::string numbered_text() {
  std::string s;
  for (int i = 0; s.size() < 4000; ++i) {
    char line[16];
    std::snprintf(line, sizeof line, "<%d>\n", 1000 + i);
    s += line;
  }
  return s.substr(0, 4000);
}

}  // namespace

TEST_CASE("A text folder is read in name order, without extensions and binary files", "[data][text]") {
  const fs::path dir = test::fresh_dir("text-corpus");
  write(dir / "b", "second ");
  write(dir / "a", "first ");
  write(dir / "a.dat", "an index, left out");
  write(dir / "c", std::string("bin\0ary", 7));
  fs::create_directory(dir / "d");
  const data::TextCorpus c = data::load_text_corpus(dir.string(), 0.25);
  CHECK(std::string(c.bytes.begin(), c.bytes.end()) == "first second ");
  CHECK(c.files == std::vector<std::string>{(dir / "a").string(), (dir / "b").string()});
  CHECK(c.train_bytes == 9);  // floor(13 * 0.75), the peer's int(len * 0.95) rule
  CHECK(c.held_out_bytes() == 4);
  const data::TextCorpus one = data::load_text_corpus((dir / "a.dat").string());
  CHECK(one.bytes.size() == 18);  // a file given by name is read whatever its name
  fs::remove_all(dir);
}

TEST_CASE("Bad corpora are one-line errors", "[data][text]") {
  const fs::path dir = test::fresh_dir("text-bad");
  CHECK_THROWS_WITH(data::load_text_corpus((dir / "missing").string()), Catch::Contains("does not exist"));
  fs::create_directory(dir / "none");
  write(dir / "none" / "x.txt", "text with an extension");
  CHECK_THROWS_AS(data::load_text_corpus((dir / "none").string()), FormatError);
  write(dir / "empty", "");
  CHECK_THROWS_WITH(data::load_text_corpus((dir / "empty").string()), Catch::Contains("is empty"));
  fs::create_directory(dir / "binary");
  write(dir / "binary" / "blob", std::string("\x7f" "ELF\0\0", 6));
  CHECK_THROWS_WITH(data::load_text_corpus((dir / "binary").string()), Catch::Contains("are binary"));
  write(dir / "short", std::string(100, 'x'));
  const data::TextCorpus c = data::load_text_corpus((dir / "short").string());
  CHECK_NOTHROW(data::check_corpus_fits(c, 4));
  CHECK_THROWS_WITH(data::check_corpus_fits(c, 64), Catch::Contains("needs more than one window of --seq-len 64"));
  fs::remove_all(dir);
}

TEST_CASE("Masked windows follow BERT's 15% and 80/10/10 rule and are windows of the text", "[data][text]") {
  const std::string text = numbered_text();
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  Generator g(3);
  const data::MaskedBatch b = data::make_masked_batch(bytes, 4000, 200, 50, g);
  REQUIRE(b.ids.shape() == Shape{200, 50});
  const int64_t* ids = b.ids.data<int64_t>();
  const int64_t* pos = b.positions.data<int64_t>();
  const int64_t* tgt = b.targets.data<int64_t>();
  const int64_t m = b.chosen();
  CHECK(m > 0.13 * 10000);
  CHECK(m < 0.17 * 10000);
  int64_t masks = 0, kept = 0;
  for (int64_t i = 0; i < m; ++i) {
    if (i > 0) CHECK(pos[i] > pos[i - 1]);
    masks += ids[pos[i]] == data::kMaskToken;
    kept += ids[pos[i]] == tgt[i];
  }
  CHECK(masks > 0.75 * double(m));
  CHECK(masks < 0.85 * double(m));
  CHECK(kept > 0.07 * double(m));  // 10% stay, plus random bytes that drew the same one
  CHECK(kept < 0.14 * double(m));
  // Each row, with the targets put back, is text at some start in [0, 4000 - 50).
  std::vector<int64_t> row(ids, ids + 10000);
  for (int64_t i = 0; i < m; ++i) row[pos[i]] = tgt[i];
  for (int64_t r = 0; r < 200; ++r) {
    const std::string window(row.begin() + r * 50, row.begin() + (r + 1) * 50);
    const size_t at = text.find(window);
    INFO("row " << r);
    CHECK((at != std::string::npos && at < 3950));
  }
  Generator again(3);
  CHECK(data::make_masked_batch(bytes, 4000, 200, 50, again).ids.to_vector<int64_t>() == b.ids.to_vector<int64_t>());
  CHECK(again.offset() == g.offset());
  CHECK(data::make_masked_batch(bytes, 4000, 200, 50, g).ids.to_vector<int64_t>() != b.ids.to_vector<int64_t>());
  // A text barely longer than a window: starts 0..9 only, never one that would read past the end.
  Generator other(4);
  const data::MaskedBatch near = data::make_masked_batch(bytes, 60, 200, 50, other, {.mask_prob = 0});
  for (int64_t r = 0; r < 200; ++r) {
    const int64_t* w = near.ids.data<int64_t>() + r * 50;
    const size_t at = text.substr(0, 60).find(std::string(w + 1, w + 50));  // byte 0 of row 0 is the forced mask
    INFO("row " << r);
    CHECK((at != std::string::npos && at >= 1 && at < 11));
  }
}

TEST_CASE("A batch's rows split it into ranks' parts, and no batch is without a chosen position", "[data][text]") {
  const std::string text = numbered_text();
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  Generator g(5);
  const data::MaskedBatch b = data::make_masked_batch(bytes, 4000, 7, 16, g);
  std::vector<int64_t> positions, targets, ids;
  for (int64_t begin : {0, 3, 5}) {
    const int64_t end = begin == 0 ? 3 : begin == 3 ? 5 : 7;
    const data::MaskedBatch part = b.rows(begin, end);
    for (int64_t p : part.positions.to_vector<int64_t>()) positions.push_back(p + begin * 16);
    for (int64_t t : part.targets.to_vector<int64_t>()) targets.push_back(t);
    for (int64_t i : part.ids.to_vector<int64_t>()) ids.push_back(i);
  }
  CHECK(positions == b.positions.to_vector<int64_t>());
  CHECK(targets == b.targets.to_vector<int64_t>());
  CHECK(ids == b.ids.to_vector<int64_t>());
  const data::MaskedBatch none = data::make_masked_batch(bytes, 4000, 2, 8, g, {.mask_prob = 0});
  REQUIRE(none.chosen() == 1);
  CHECK(none.positions.to_vector<int64_t>()[0] == 0);
}
