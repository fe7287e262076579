// Replays every input the fuzzers (fuzz/, scripts/fuzz) found under tests/fixtures/fuzz-regressions/ with the
// harnesses' rules, plus one named test per finding.
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/idx.h"
#include "formats/safetensors.h"

namespace fs = std::filesystem;
using namespace ember;
using namespace ember::formats;

namespace {

using Bytes = std::vector<uint8_t>;

const fs::path kRegressions = fs::path(EMBER_SOURCE_DIR) / "tests" / "fixtures" / "fuzz-regressions";

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

Bytes bytes_of(const Tensor& t) {
  Bytes out(t.nbytes());
  if (!out.empty()) std::memcpy(out.data(), t.raw_data(), out.size());
  return out;
}

// The harnesses' rule for a rejection: an ember::Error that is not InternalError, on one line.
template <typename F>
bool rejected_cleanly(F&& f) {
  try {
    f();
  } catch (const InternalError& e) {
    FAIL("InternalError (a broken invariant): " << e.what());
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::strchr(e.what(), '\n') == nullptr);
    return true;
  }  // anything else escapes and fails the test, as it aborts the fuzzer
  return false;
}

// What the fuzz_safetensors harness demands of an accepted file: the writer takes the tensors back
// and the reader reads the writer's bytes as the same tensors and metadata.
void require_round_trip(const SafetensorsFile& f) {
  Bytes again;
  try {
    again = safetensors_to_bytes(f.tensors, f.metadata);
  } catch (const Error& e) {
    FAIL("the writer refuses what the reader accepted: " << e.what());
  }
  const SafetensorsFile g = load_safetensors_bytes("round trip", again);
  REQUIRE(g.metadata == f.metadata);
  REQUIRE(g.tensors.size() == f.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    INFO("tensor " << i);
    CHECK(g.tensors[i].first == f.tensors[i].first);
    CHECK(g.tensors[i].second.dtype() == f.tensors[i].second.dtype());
    CHECK(g.tensors[i].second.shape() == f.tensors[i].second.shape());
    CHECK(bytes_of(g.tensors[i].second) == bytes_of(f.tensors[i].second));
  }
}

// The IDX file as plain zlib decodes it (gzip members one after another), at most `limit` bytes.
Bytes decoded(const uint8_t* data, size_t size, size_t limit) {
  if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) return Bytes(data, data + std::min(size, limit));
  z_stream zs{};
  REQUIRE(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK);
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(size);
  Bytes out(limit);
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(limit);
  while (zs.avail_out > 0) {
    const int rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END && zs.avail_in > 0) {
      inflateReset(&zs);
      continue;
    }
    if (rc != Z_OK) break;
  }
  out.resize(limit - zs.avail_out);
  inflateEnd(&zs);
  return out;
}

// fuzz_idx's input: one selector byte (0 images, 1 images of any size, 2 labels, 3 labels of 256
// classes), then the file. An accepted file's tensor must be exactly its decoded payload.
void replay_idx(const Bytes& input) {
  REQUIRE(!input.empty());
  const unsigned mode = input[0] % 4;
  const uint8_t* data = input.data() + 1;
  const size_t size = input.size() - 1;
  const auto no_cap = std::numeric_limits<int64_t>::max();
  Tensor t;
  bool rejected = false;
  if (mode <= 1) {
    const IdxImageSpec spec = mode == 0 ? IdxImageSpec{} : IdxImageSpec{0, 0, no_cap};
    rejected = rejected_cleanly([&] { t = parse_idx_images(data, size, "regression", spec); });
    if (rejected) return;
    const Bytes d = decoded(data, size, 16 + static_cast<size_t>(t.numel()) + 1);
    REQUIRE(d.size() == 16 + static_cast<size_t>(t.numel()));
    CHECK(Bytes(d.begin() + 16, d.end()) == bytes_of(t));
  } else {
    const IdxLabelSpec spec = mode == 2 ? IdxLabelSpec{} : IdxLabelSpec{256, no_cap};
    rejected = rejected_cleanly([&] { t = parse_idx_labels(data, size, "regression", spec); });
    if (rejected) return;
    const Bytes d = decoded(data, size, 8 + static_cast<size_t>(t.numel()) + 1);
    REQUIRE(d.size() == 8 + static_cast<size_t>(t.numel()));
    const std::vector<int64_t> labels = t.to_vector<int64_t>();
    for (size_t i = 0; i < labels.size(); ++i) CHECK(labels[i] == d[8 + i]);
  }
}

void replay_safetensors(const Bytes& input) {
  SafetensorsFile f;
  if (rejected_cleanly([&] { f = load_safetensors_bytes("regression", input); })) return;
  require_round_trip(f);
}

}  // namespace

TEST_CASE("every fuzzer finding in tests/fixtures/fuzz-regressions is rejected cleanly or loads and round-trips",
          "[formats]") {
  REQUIRE(fs::is_directory(kRegressions));
  int replayed = 0;
  for (const auto& entry : fs::directory_iterator(kRegressions)) {
    const std::string name = entry.path().filename().string();
    INFO(name);
    // The prefix names the harness, as scripts/fuzz expects when it seeds the fuzzers with these files.
    if (name.rfind("idx-", 0) == 0) {
      replay_idx(read_file(entry.path()));
    } else if (name.rfind("safetensors-", 0) == 0) {
      replay_safetensors(read_file(entry.path()));
    } else {
      FAIL("unexpected file: name it idx-* (input of fuzz_idx, selector byte first) or safetensors-*");
    }
    ++replayed;
  }
  CHECK(replayed >= 1);
}

// Found by fuzz_safetensors' round-trip check: the reader accepted a tensor named "" (valid JSON, and
// the spec sets no rule on names) that the writer refuses (ValueError "has an empty name"), so ember
// loaded a checkpoint it could not save again. The reader now rejects empty names; either side may move,
// but the two must agree. safetensors-empty-tensor-name-fuzzed.safetensors is the fuzzer's own input for
// the same bug (an F32 tensor of shape [0] named ""), replayed by the test above.
TEST_CASE("fuzz regression: a tensor with an empty name is rejected on load or saves back", "[formats]") {
  const Bytes input = read_file(kRegressions / "safetensors-empty-tensor-name.safetensors");
  SafetensorsFile f;
  try {
    f = load_safetensors_bytes("empty-name.safetensors", input);
  } catch (const FormatError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith("empty-name.safetensors: ") && Catch::Contains("name"));
    CHECK(what.find('\n') == std::string::npos);
    return;
  }
  REQUIRE(f.tensors.size() == 1);
  CHECK(f.tensors[0].first.empty());
  CHECK(f.tensors[0].second.shape() == Shape{1});
  require_round_trip(f);
}
