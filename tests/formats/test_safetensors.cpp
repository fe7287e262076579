// safetensors: round trips, the reference implementation's files, the malformed corpus, every single-byte
// corruption and truncation of a small checkpoint, and atomic writes that leave the previous file intact
// (also when the writing process is killed).
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "formats/safetensors.h"

using namespace ember;
using namespace ember::formats;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(EMBER_SOURCE_DIR) / "tests" / "fixtures" / "safetensors";

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// A fresh directory per test, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("ember_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

std::vector<uint8_t> tensor_bytes(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<uint8_t> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size());
  return out;
}

void require_same_tensors(const NamedTensors& got, const NamedTensors& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("tensor " << i << " " << want[i].first);
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second.dtype() == want[i].second.dtype());
    CHECK(got[i].second.shape() == want[i].second.shape());
    CHECK(got[i].second.device() == Device::cpu());
    // Empty tensors count as contiguous whatever their strides (PyTorch's rule).
    CHECK((got[i].second.is_contiguous() || got[i].second.numel() == 0));
    CHECK(tensor_bytes(got[i].second) == tensor_bytes(want[i].second));
  }
}

const char* code_of(DType d) {
  switch (d) {
    case DType::F32:
      return "F32";
    case DType::F64:
      return "F64";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::U8:
      return "U8";
  }
  return "?";
}

// Independent oracle: a file ember accepted must hold exactly what its header (parsed here by
// nlohmann's DOM parser) declares: the same tensors, dtypes, shapes, bytes and metadata.
void require_matches_header(const std::vector<uint8_t>& bytes, const SafetensorsFile& loaded) {
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  REQUIRE(n <= bytes.size() - 8);
  const auto header =
      nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n), nullptr, false);
  REQUIRE(header.is_object());
  const bool has_metadata = header.contains("__metadata__");
  REQUIRE(loaded.tensors.size() == header.size() - (has_metadata ? 1 : 0));
  const uint8_t* data = bytes.data() + 8 + n;
  for (const auto& [name, t] : loaded.tensors) {
    INFO("tensor " << name);
    REQUIRE(header.contains(name));
    const auto& entry = header.at(name);
    REQUIRE(entry.at("dtype").get<std::string>() == code_of(t.dtype()));
    REQUIRE(entry.at("shape").get<std::vector<int64_t>>() == t.shape());
    const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    REQUIRE(offsets.size() == 2);
    REQUIRE(offsets[1] - offsets[0] == t.nbytes());
    REQUIRE(offsets[1] <= bytes.size() - 8 - n);
    REQUIRE(std::vector<uint8_t>(data + offsets[0], data + offsets[1]) == tensor_bytes(t));
  }
  const auto metadata = has_metadata ? header.at("__metadata__").get<std::map<std::string, std::string>>()
                                     : std::map<std::string, std::string>{};
  REQUIRE(loaded.metadata == metadata);
}

// The insertion-ordered set whose exact bytes valid/ember_order.safetensors holds (make_corpus.py
// wrote them by hand from the spec, and the reference reader accepted them).
NamedTensors ember_order_set() {
  return {
      {"e.u8", Tensor::from_vector<uint8_t>({0, 1, 127, 255}, {4})},
      {"c.f32", Tensor::from_vector<float>({-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f}, {2, 3})},
      {"a.f64", Tensor::from_vector<double>({0.5, -1.25}, {2})},
      {"d.i32", Tensor::from_vector<int32_t>({-7, 123456}, {2})},
      {"f.empty", Tensor::empty({0, 3}, DType::F32)},
      {"b.i64", Tensor::from_vector<int64_t>({-1, 0, (int64_t{1} << 40) + 7}, {3})},
      {"g.scalar", Tensor::from_vector<double>({3.25}, {})},
  };
}

}  // namespace

TEST_CASE("safetensors round-trips every dtype, empty tensors, 0-d scalars and metadata", "[formats]") {
  TempDir dir;
  std::vector<uint8_t> all_bytes(256);
  for (size_t i = 0; i < all_bytes.size(); ++i) all_bytes[i] = static_cast<uint8_t>(i);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const NamedTensors tensors = {
      {"0.weight", Tensor::rand({3, 5}, 11, DType::F32, Device::cpu(), -1, 1)},
      {"0.bias", Tensor::randn({5}, 12, DType::F64)},
      {"labels", Tensor::from_vector<int32_t>({-2147483647 - 1, -1, 0, 1, 2147483647}, {5})},
      {"steps", Tensor::from_vector<int64_t>({kMin, -1, 0, kMax}, {2, 2})},
      {"image", Tensor::from_vector<uint8_t>(all_bytes, {16, 16})},
      {"empty.f32", Tensor::empty({0}, DType::F32)},
      {"empty.i64", Tensor::empty({2, 0, 3}, DType::I64)},
      {"scalar.f32", Tensor::full({}, -0.125, DType::F32)},
      {"scalar.f64", Tensor::full({}, 1e-300, DType::F64)},
      {"scalar.i32", Tensor::full({}, -5, DType::I32)},
      {"scalar.i64", Tensor::full({}, 1e15, DType::I64)},
      {"scalar.u8", Tensor::full({}, 200, DType::U8)},
      {"unicode \xc3\xa9\xe2\x82\xac \"quoted\"\n", Tensor::ones({1}, DType::F32)},
  };
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"epoch", "3"}, {"note", "line\nbreak, \"quotes\", \xe2\x9c\x93"}, {"", ""}};
  const std::string path = (dir.path / "model.safetensors").string();
  save_safetensors(path, tensors, metadata);

  const SafetensorsFile loaded = load_safetensors(path);
  require_same_tensors(loaded.tensors, tensors);
  CHECK(loaded.metadata == metadata);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});  // the temp file was renamed away

  // Layout: u64 header length, a multiple of 8 padded with spaces, data right after, in insertion order.
  const std::vector<uint8_t> bytes = read_bytes(path);
  CHECK(safetensors_to_bytes(tensors, metadata) == bytes);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  const size_t close = header.find_last_of('}');
  CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);
  CHECK(n - close - 1 < 8);
  require_matches_header(bytes, loaded);
  size_t total = 0;
  for (const auto& entry : tensors) total += entry.second.nbytes();
  CHECK(bytes.size() == 8 + n + total);

  const SafetensorsFile from_bytes = load_safetensors_bytes("in-memory", bytes);
  require_same_tensors(from_bytes.tensors, tensors);
  CHECK(from_bytes.metadata == metadata);
}

TEST_CASE("safetensors without metadata writes no __metadata__ entry, and strided tensors save their values", "[formats]") {
  const Tensor base = Tensor::arange(6, DType::F32).view({2, 3});
  const Tensor transposed = base.t();  // (3, 2), not contiguous
  REQUIRE_FALSE(transposed.is_contiguous());
  const std::vector<uint8_t> bytes = safetensors_to_bytes({{"t", transposed}});
  const std::string text(bytes.begin() + 8, bytes.end());
  CHECK(text.find("__metadata__") == std::string::npos);
  const SafetensorsFile loaded = load_safetensors_bytes("t", bytes);
  REQUIRE(loaded.tensors.size() == 1);
  CHECK(loaded.tensors[0].second.shape() == Shape{3, 2});
  CHECK(loaded.tensors[0].second.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(loaded.metadata.empty());

  const SafetensorsFile none = load_safetensors_bytes("empty", safetensors_to_bytes({}));
  CHECK(none.tensors.empty());
}

TEST_CASE("safetensors reads the reference implementation's file and writes it back byte for byte", "[formats]") {
  const fs::path path = kData / "valid" / "reference_torch.safetensors";
  const SafetensorsFile ref = load_safetensors(path.string());
  // The reference writer orders tensors by dtype, then name.
  std::vector<std::string> names;
  for (const auto& entry : ref.tensors) names.push_back(entry.first);
  CHECK(names == std::vector<std::string>{"b.i64", "a.f64", "g.scalar", "c.f32", "f.empty", "d.i32", "e.u8"});
  CHECK(ref.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  std::map<std::string, Tensor> byname(ref.tensors.begin(), ref.tensors.end());
  CHECK(byname["a.f64"].shape() == Shape{2, 2});
  CHECK(byname["a.f64"].to_vector<double>() == std::vector<double>{0.5, -1.25, 1e-300, 6.02e23});
  CHECK(byname["b.i64"].to_vector<int64_t>() == std::vector<int64_t>{-1, 0, (int64_t{1} << 40) + 7});
  CHECK(byname["c.f32"].shape() == Shape{2, 3});
  CHECK(byname["c.f32"].to_vector<float>() == std::vector<float>{-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f});
  CHECK(byname["d.i32"].to_vector<int32_t>() == std::vector<int32_t>{-7, 123456});
  CHECK(byname["e.u8"].to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 127, 255});
  CHECK(byname["f.empty"].shape() == Shape{0, 3});
  CHECK(byname["f.empty"].dtype() == DType::F32);
  CHECK(byname["g.scalar"].shape() == Shape{});
  CHECK(byname["g.scalar"].item<double>() == 3.25);

  TempDir dir;
  const fs::path copy = dir.path / "copy.safetensors";
  save_safetensors(copy.string(), ref.tensors, ref.metadata);
  CHECK(read_bytes(copy) == read_bytes(path));
}

TEST_CASE("safetensors writes insertion order exactly as the file the reference reader accepted", "[formats]") {
  const std::vector<uint8_t> expected = read_bytes(kData / "valid" / "ember_order.safetensors");
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"epoch", "7"}};
  CHECK(safetensors_to_bytes(ember_order_set(), metadata) == expected);
  const SafetensorsFile loaded = load_safetensors_bytes("ember_order", expected);
  require_same_tensors(loaded.tensors, ember_order_set());
  CHECK(loaded.metadata == metadata);
}

TEST_CASE("safetensors rejects every file of the malformed corpus with a FormatError naming the file", "[formats]") {
  const fs::path dir = kData / "malformed";
  std::map<std::string, std::string> expected;  // file -> fragment of the message
  std::ifstream table(dir / "EXPECTED.tsv");
  REQUIRE(table.good());
  for (std::string line; std::getline(table, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab1 = line.find('\t'), tab2 = line.find('\t', tab1 + 1);
    REQUIRE(tab2 != std::string::npos);
    expected[line.substr(0, tab1)] = line.substr(tab1 + 1, tab2 - tab1 - 1);
  }
  size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    const std::string file = entry.path().filename().string();
    INFO(file);
    REQUIRE(expected.count(file) == 1);  // the corpus and its table stay in sync
    const std::string& fragment = expected[file];
    try {
      load_safetensors(entry.path().string());
      FAIL("accepted a malformed file");
    } catch (const FormatError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find(entry.path().string()) != std::string::npos);
      CHECK(what.find(fragment) != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
    try {
      load_safetensors_bytes(file, read_bytes(entry.path()));
      FAIL("accepted a malformed buffer");
    } catch (const FormatError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.rfind(file + ": ", 0) == 0);
      CHECK(what.find(fragment) != std::string::npos);
    }
    ++checked;
  }
  CHECK(checked == expected.size());
  CHECK(checked >= 20);
}

TEST_CASE("every single-byte corruption and truncation of a small checkpoint is rejected or loads as declared",
          "[formats]") {
  const NamedTensors tensors = {
      {"w", Tensor::from_vector<float>({1.f, -2.f, 3.5f, 0.25f}, {2, 2})},
      {"n", Tensor::from_vector<uint8_t>({7, 255}, {2})},
      {"s", Tensor::from_vector<int64_t>({42}, {})},
  };
  const std::vector<uint8_t> valid = safetensors_to_bytes(tensors, {{"v", "1"}});
  REQUIRE(valid.size() >= 180);
  REQUIRE(valid.size() <= 260);
  require_matches_header(valid, load_safetensors_bytes("valid", valid));

  size_t rejected = 0, loaded = 0;
  auto attempt = [&](const std::vector<uint8_t>& bytes, const std::string& what) {
    INFO(what);
    try {
      const SafetensorsFile file = load_safetensors_bytes(what, bytes);
      require_matches_header(bytes, file);
      ++loaded;
    } catch (const FormatError& e) {
      CHECK(std::string(e.what()).rfind(what + ": ", 0) == 0);
      ++rejected;
    }  // anything else (InternalError, ShapeError, bad_alloc, ...) escapes and fails the test
  };
  for (size_t i = 0; i < valid.size(); ++i) {
    const uint8_t b = valid[i];
    for (const uint8_t v : {uint8_t(0x00), uint8_t(0xFF), uint8_t(b ^ 0x01), uint8_t(b ^ 0x80), uint8_t('"'),
                            uint8_t('{'), uint8_t(','), uint8_t('9'), uint8_t(' ')}) {
      if (v == b) continue;
      std::vector<uint8_t> bytes = valid;
      bytes[i] = v;
      attempt(bytes, "byte " + std::to_string(i) + " set to " + std::to_string(v));
    }
  }
  CHECK(rejected > 0);
  CHECK(loaded > 0);  // flips inside the data (or header spaces) still load, with the flipped values

  // Truncations: every one is short of the data the header declares, so every one must be rejected,
  // from memory and from disk alike.
  TempDir dir;
  const fs::path path = dir.path / "truncated.safetensors";
  for (size_t len = 0; len < valid.size(); ++len) {
    INFO("truncated to " << len << " bytes");
    const std::vector<uint8_t> bytes(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(len));
    CHECK_THROWS_AS(load_safetensors_bytes("truncated", bytes), FormatError);
    write_bytes(path, bytes);
    CHECK_THROWS_AS(load_safetensors(path.string()), FormatError);
  }
}

TEST_CASE("safetensors writer validates names and tensors before touching the disk", "[formats]") {
  TempDir dir;
  const std::string path = (dir.path / "bad.safetensors").string();
  const Tensor x = Tensor::ones({2});
  CHECK_THROWS_AS(save_safetensors(path, {{"", x}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(path, {{"a", x}, {"b", x}, {"a", x}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(path, {{"__metadata__", x}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(path, {{"undefined", Tensor()}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(path, {{"meta", Tensor::empty({2}, DType::F32, Device::meta())}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(path, {{"bad\xff", x}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(path, {{"a", x}}, {{"k", "bad\xc3"}}), ValueError);
  CHECK(dir.entries().empty());
}

TEST_CASE("safetensors reports a missing file or a directory as IoError", "[formats]") {
  TempDir dir;
  const std::string missing = (dir.path / "missing.safetensors").string();
  try {
    load_safetensors(missing);
    FAIL("loaded a missing file");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find(missing) != std::string::npos);
  }
  CHECK_THROWS_AS(load_safetensors(dir.path.string()), IoError);
}

TEST_CASE("a failing safetensors save throws IoError, keeps the previous file and leaves no temp file", "[formats]") {
  TempDir dir;
  const fs::path target = dir.path / "model.safetensors";
  const NamedTensors first = {{"w", Tensor::full({4}, 1.5, DType::F32)}};
  save_safetensors(target.string(), first, {{"epoch", "1"}});
  const std::vector<uint8_t> before = read_bytes(target);

  SECTION("the parent path is a file") {
    const fs::path under_file = target / "model.safetensors";
    CHECK_THROWS_AS(save_safetensors(under_file.string(), first), IoError);
  }
  SECTION("the target is a directory, so the rename fails after the temp file was written") {
    const fs::path as_dir = dir.path / "checkpoint_dir";
    fs::create_directory(as_dir);
    CHECK_THROWS_AS(save_safetensors(as_dir.string(), first), IoError);
    CHECK(fs::is_directory(as_dir));
    fs::remove(as_dir);
  }
  SECTION("the disk fills mid-write (RLIMIT_FSIZE makes write() fail with EFBIG)") {
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
    rlimit small = old;
    small.rlim_cur = 4096;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    bool threw_io = false;
    try {
      save_safetensors(target.string(), {{"big", Tensor::zeros({1 << 16}, DType::F32)}});
    } catch (const IoError& e) {
      threw_io = std::string(e.what()).find("cannot write temp file") != std::string::npos;
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
    CHECK(threw_io);
  }
  SECTION("the directory is read-only (root saves as nobody, since root may write anyway)") {
    fs::permissions(dir.path, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                    fs::perm_options::remove);
    const bool root = ::geteuid() == 0;
    constexpr uid_t kNobody = 65534;
    if (root) REQUIRE(::seteuid(kNobody) == 0);  // needs CAP_SETUID and nobody mapped in a user namespace
    CHECK_THROWS_AS(save_safetensors(target.string(), {{"w", Tensor::zeros({4})}}), IoError);
    if (root) REQUIRE(::seteuid(0) == 0);
    fs::permissions(dir.path, fs::perms::owner_write, fs::perm_options::add);
  }
  CHECK(read_bytes(target) == before);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
  const SafetensorsFile still = load_safetensors(target.string());
  require_same_tensors(still.tensors, first);
  CHECK(still.metadata.at("epoch") == "1");
}

TEST_CASE("a stale temp file from a crashed save is neither loaded nor in the way", "[formats]") {
  TempDir dir;
  const fs::path target = dir.path / "model.safetensors";
  const NamedTensors good = {{"w", Tensor::full({3}, 2.0, DType::F64)}};
  save_safetensors(target.string(), good);
  const fs::path stale = dir.path / ("model.safetensors.tmp." + std::to_string(::getpid()));
  write_bytes(stale, {1, 2, 3});  // what a SIGKILL mid-write of this very process id would leave
  require_same_tensors(load_safetensors(target.string()).tensors, good);
  const NamedTensors next = {{"w", Tensor::full({3}, 3.0, DType::F64)}};
  save_safetensors(target.string(), next);
  require_same_tensors(load_safetensors(target.string()).tensors, next);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("a save killed by SIGKILL at random moments always leaves a complete checkpoint", "[formats]") {
  TempDir dir;
  const fs::path target = dir.path / "model.safetensors";
  // Versions differ in every value and in size, so a mix of two versions cannot pass for one.
  std::vector<NamedTensors> versions;
  for (int v = 0; v < 4; ++v) {
    std::vector<float> values(static_cast<size_t>(16384 + 4096 * v), static_cast<float>(v));
    versions.push_back({{"w", Tensor::from_vector<float>(values, {static_cast<int64_t>(values.size())})}});
  }
  save_safetensors(target.string(), versions[0], {{"version", "0"}});
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> delay_us(0, 20000);
  int kills = 0, torn = 0;
  for (int round = 0; round < 50; ++round) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Only the writer runs here (no kernels, no threads): save versions in a loop until killed.
      try {
        for (int i = 1;; ++i)
          save_safetensors(target.string(), versions[static_cast<size_t>(i % 4)], {{"version", std::to_string(i % 4)}});
      } catch (...) {
      }
      ::_exit(1);
    }
    ::usleep(static_cast<useconds_t>(delay_us(rng)));
    REQUIRE(::kill(child, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    kills += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;

    INFO("round " << round);
    const SafetensorsFile loaded = load_safetensors(target.string());
    const int version = std::stoi(loaded.metadata.at("version"));
    REQUIRE(version >= 0);
    REQUIRE(version < 4);
    require_same_tensors(loaded.tensors, versions[static_cast<size_t>(version)]);
    // A killed save may leave its temp file; it never replaces the checkpoint and is removed here.
    for (const auto& name : dir.entries())
      if (name != "model.safetensors") {
        CHECK(name == "model.safetensors.tmp." + std::to_string(child));
        fs::remove(dir.path / name);
        ++torn;
      }
  }
  CHECK(kills == 50);
  CHECK(torn > 0);  // some kills did land mid-write, so the test exercised what it claims
}
