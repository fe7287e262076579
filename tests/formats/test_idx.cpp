// IDX reader and Fashion-MNIST loading: valid files (raw and gzip), the malformed corpus, limits.
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/dataset.h"
#include "formats/idx.h"

namespace fs = std::filesystem;
using namespace ember;
using namespace ember::formats;
using namespace ember::data;

namespace {

using Bytes = std::vector<uint8_t>;

struct IdxTempDir {
  fs::path path;
  IdxTempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("ember_idx_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~IdxTempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name, const Bytes& bytes) const {
    fs::path p = path / name;
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
};

void put_be32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

Bytes image_bytes(uint32_t count, uint32_t rows = 28, uint32_t cols = 28) {
  Bytes out;
  put_be32(out, 0x00000803);
  put_be32(out, count);
  put_be32(out, rows);
  put_be32(out, cols);
  for (uint64_t i = 0; i < uint64_t{count} * rows * cols; ++i) out.push_back(static_cast<uint8_t>((i * 13 + 5) % 256));
  return out;
}

Bytes label_bytes(const std::vector<uint8_t>& labels) {
  Bytes out;
  put_be32(out, 0x00000801);
  put_be32(out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

Bytes gzip(const Bytes& data) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&zs, data.size()) + 32);
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

Bytes read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename F>
std::string format_error_of(F&& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected FormatError, got another exception: " << e.what());
  }
  FAIL("expected FormatError, but the input was accepted");
  return {};
}

const fs::path kCorpus = fs::path(EMBER_SOURCE_DIR) / "tests" / "fixtures" / "idx";

}  // namespace

TEST_CASE("read_idx_images reads raw and gzip files bit for bit", "[formats]") {
  IdxTempDir dir;
  Bytes raw = image_bytes(3);
  for (const std::string& path : {dir.file("images.idx", raw), dir.file("images.idx.gz", gzip(raw))}) {
    INFO(path);
    Tensor images = read_idx_images(path);
    REQUIRE(images.shape() == Shape{3, 28, 28});
    REQUIRE(images.dtype() == DType::U8);
    REQUIRE(images.device().is_cpu());
    std::vector<uint8_t> values = images.to_vector<uint8_t>();
    REQUIRE(values == Bytes(raw.begin() + 16, raw.end()));
  }
  // The same bytes parsed from memory.
  Tensor from_memory = parse_idx_images(raw.data(), raw.size(), "memory");
  REQUIRE(from_memory.to_vector<uint8_t>() == Bytes(raw.begin() + 16, raw.end()));
  Bytes gz = gzip(raw);
  REQUIRE(parse_idx_images(gz.data(), gz.size(), "memory.gz").to_vector<uint8_t>() ==
          Bytes(raw.begin() + 16, raw.end()));
}

TEST_CASE("read_idx_images accepts other sizes only when asked", "[formats]") {
  IdxTempDir dir;
  std::string path = dir.file("small.idx", image_bytes(2, 5, 7));
  REQUIRE(read_idx_images(path, IdxImageSpec{0, 0, kIdxMaxCount}).shape() == Shape{2, 5, 7});
  REQUIRE(read_idx_images(path, IdxImageSpec{5, 7, kIdxMaxCount}).shape() == Shape{2, 5, 7});
  std::string msg = format_error_of([&] { read_idx_images(path); });
  REQUIRE_THAT(msg, Catch::Contains("dimension 1 (rows) at offset 8: expected 28, found 5"));
  msg = format_error_of([&] { read_idx_images(path, IdxImageSpec{0, 0, 1}); });
  REQUIRE_THAT(msg, Catch::Contains("expected 1..1, found 2"));
  REQUIRE_THROWS_AS(read_idx_images(path, IdxImageSpec{-1, 0, 10}), ValueError);
}

TEST_CASE("read_idx_labels reads raw and gzip files and checks the label range", "[formats]") {
  IdxTempDir dir;
  Bytes raw = label_bytes({0, 9, 5, 1});
  for (const std::string& path : {dir.file("labels.idx", raw), dir.file("labels.idx.gz", gzip(raw))}) {
    INFO(path);
    Tensor labels = read_idx_labels(path);
    REQUIRE(labels.shape() == Shape{4});
    REQUIRE(labels.dtype() == DType::I64);
    REQUIRE(labels.to_vector<int64_t>() == std::vector<int64_t>{0, 9, 5, 1});
    // num_classes is the caller's: with 6 classes, the 9 is out of range.
    std::string msg = format_error_of([&] { read_idx_labels(path, IdxLabelSpec{6, kIdxMaxCount}); });
    REQUIRE_THAT(msg, Catch::Contains(path) && Catch::Contains("(sample 1): expected 0..5, found 9"));
  }
  REQUIRE(read_idx_labels(dir.file("wide.idx", label_bytes({200, 3})), IdxLabelSpec{256, 10}).to_vector<int64_t>() ==
          std::vector<int64_t>{200, 3});
}

TEST_CASE("IDX errors name the file, the offset, the expected and the found value", "[formats]") {
  IdxTempDir dir;
  std::string path = dir.file("train-labels-idx1-ubyte.gz", gzip(image_bytes(1)));
  std::string msg = format_error_of([&] { read_idx_labels(path); });
  REQUIRE(msg == path +
                     ": bad magic at offset 0 of the decompressed data: expected 0x00000801 (IDX labels), "
                     "found 0x00000803 (IDX images)");
  REQUIRE(msg.find('\n') == std::string::npos);
}

TEST_CASE("every file of the malformed IDX corpus is rejected with a clear FormatError", "[formats]") {
  REQUIRE(fs::is_directory(kCorpus));
  std::ifstream manifest(kCorpus / "corpus.tsv");
  REQUIRE(manifest.good());
  std::map<std::string, std::pair<std::string, std::string>> cases;  // file -> (reader, fragment)
  std::string line;
  while (std::getline(manifest, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string file, reader, fragment;
    std::getline(fields, file, '\t');
    std::getline(fields, reader, '\t');
    std::getline(fields, fragment);
    cases[file] = {reader, fragment};
  }
  // Every file in the folder is in the manifest: a new file cannot slip in untested.
  std::set<std::string> on_disk;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    std::string name = entry.path().filename().string();
    if (name == "make_corpus.py" || name == "corpus.tsv" || name == "valid") continue;
    on_disk.insert(name);
  }
  std::set<std::string> listed;
  for (const auto& [file, _] : cases) listed.insert(file);
  REQUIRE(on_disk == listed);
  REQUIRE(cases.size() >= 30);

  int rejected = 0;
  for (const auto& [file, expectation] : cases) {
    const auto& [reader, fragment] = expectation;
    const std::string path = (kCorpus / file).string();
    INFO(file << " (" << reader << ")");
    std::string msg;
    if (reader == "images" || reader == "images-anydims") {
      IdxImageSpec spec = reader == "images" ? IdxImageSpec{} : IdxImageSpec{0, 0, kIdxMaxCount};
      msg = format_error_of([&] { read_idx_images(path, spec); });
      // The same bytes from memory give the same verdict and message.
      Bytes bytes = read_all(path);
      std::string from_memory = format_error_of([&] { parse_idx_images(bytes.data(), bytes.size(), path, spec); });
      CHECK(from_memory == msg);
    } else if (reader == "labels") {
      msg = format_error_of([&] { read_idx_labels(path); });
      Bytes bytes = read_all(path);
      CHECK(format_error_of([&] { parse_idx_labels(bytes.data(), bytes.size(), path); }) == msg);
    } else if (reader == "dataset" || reader == "dataset-test") {
      msg = format_error_of([&] { load_fashion_mnist(path, reader == "dataset" ? Split::Train : Split::Test); });
    } else {
      FAIL("unknown reader " << reader);
    }
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains(file));
    CHECK_THAT(msg, Catch::Contains(fragment));
    CHECK(msg.find('\n') == std::string::npos);
    ++rejected;
  }
  REQUIRE(rejected == static_cast<int>(cases.size()));
}

TEST_CASE("the corpus's valid seeds load", "[formats]") {
  for (const char* name : {"images-2.idx", "images-2.idx.gz"})
    REQUIRE(read_idx_images((kCorpus / "valid" / name).string()).shape() == Shape{2, 28, 28});
  for (const char* name : {"labels-3.idx", "labels-3.idx.gz"})
    REQUIRE(read_idx_labels((kCorpus / "valid" / name).string()).to_vector<int64_t>() == std::vector<int64_t>{0, 9, 5});
}

TEST_CASE("a huge declared size is rejected before anything is allocated", "[formats]") {
  IdxTempDir dir;
  // 2^30 images of 65536 x 65536 = 2^62 bytes: allocating first would throw OutOfMemoryError
  // (or bad_alloc), not this FormatError.
  Bytes header;
  put_be32(header, 0x00000803);
  put_be32(header, 1u << 30);
  put_be32(header, 65536);
  put_be32(header, 65536);
  header.resize(header.size() + 100, 0);
  IdxImageSpec any{0, 0, std::numeric_limits<int64_t>::max()};
  std::string raw = dir.file("huge.idx", header);
  REQUIRE_THAT(format_error_of([&] { read_idx_images(raw, any); }),
               Catch::Contains("truncated payload: expected 4611686018427387920 bytes") &&
                   Catch::Contains("found a file of 116 bytes"));
  std::string gz = dir.file("huge.idx.gz", gzip(header));
  REQUIRE_THAT(format_error_of([&] { read_idx_images(gz, any); }), Catch::Contains("inflate to at most"));
  // Within the default caps (10M images of 28x28 = 7.8 GB) the same holds.
  Bytes capped;
  put_be32(capped, 0x00000803);
  put_be32(capped, 10'000'000);
  put_be32(capped, 28);
  put_be32(capped, 28);
  capped.resize(capped.size() + 784, 0);
  REQUIRE_THAT(format_error_of([&] { read_idx_images(dir.file("capped.idx", capped)); }),
               Catch::Contains("found a file of 800 bytes"));
  REQUIRE_THAT(format_error_of([&] { read_idx_images(dir.file("capped.idx.gz", gzip(capped))); }),
               Catch::Contains("deflate expands at most 1032x"));
  // The same from memory (the fuzzing entry point).
  Bytes capped_gz = gzip(capped);
  REQUIRE_THAT(format_error_of([&] { parse_idx_images(capped_gz.data(), capped_gz.size(), "m"); }),
               Catch::Contains("inflate to at most"));
}

TEST_CASE("a gzip stream is never inflated past the declared size", "[formats]") {
  // 1 image declared, then 64 MiB of zeros (about 64 KiB compressed): rejected after one extra byte.
  Bytes data = image_bytes(1);
  data.resize(data.size() + (64u << 20), 0);
  Bytes gz = gzip(data);
  REQUIRE(gz.size() < (1u << 20));
  std::string msg = format_error_of([&] { parse_idx_images(gz.data(), gz.size(), "bomb.gz"); });
  REQUIRE_THAT(msg, Catch::Contains("trailing bytes after the payload at offset 800 of the decompressed data"));
}

TEST_CASE("missing or unreadable IDX files are IoErrors naming the path", "[formats]") {
  IdxTempDir dir;
  std::string missing = (dir.path / "nope.idx").string();
  REQUIRE_THROWS_WITH(read_idx_images(missing), Catch::Contains(missing) && Catch::Contains("No such file"));
  REQUIRE_THROWS_AS(read_idx_labels(missing), IoError);
  REQUIRE_THROWS_AS(read_idx_images(dir.path.string()), IoError);
  REQUIRE_THROWS_WITH(read_idx_images(dir.path.string()), Catch::Contains("is a directory"));
}

TEST_CASE("load_fashion_mnist reads a directory of raw or gzip files and applies the limit", "[formats]") {
  IdxTempDir dir;
  Bytes images = image_bytes(5);
  Bytes labels = label_bytes({3, 1, 4, 1, 5});
  dir.file("train-images-idx3-ubyte", images);
  dir.file("train-labels-idx1-ubyte.gz", gzip(labels));
  // .gz is preferred: the raw test images file is corrupt, its .gz sibling is valid.
  dir.file("t10k-images-idx3-ubyte", Bytes{1, 2, 3});
  dir.file("t10k-images-idx3-ubyte.gz", gzip(image_bytes(2)));
  dir.file("t10k-labels-idx1-ubyte", label_bytes({9, 0}));

  Dataset train = load_fashion_mnist(dir.path.string(), Split::Train);
  REQUIRE(train.size() == 5);
  REQUIRE(train.images.shape() == Shape{5, 28, 28});
  REQUIRE(train.labels.to_vector<int64_t>() == std::vector<int64_t>{3, 1, 4, 1, 5});
  REQUIRE(train.sample_numel() == 784);
  train.check();

  Dataset limited = load_fashion_mnist(dir.path.string(), Split::Train, 2);
  REQUIRE(limited.size() == 2);
  REQUIRE(limited.images.shape() == Shape{2, 28, 28});
  REQUIRE(limited.labels.to_vector<int64_t>() == std::vector<int64_t>{3, 1});
  REQUIRE(limited.images.to_vector<uint8_t>() == Bytes(images.begin() + 16, images.begin() + 16 + 2 * 784));
  REQUIRE(load_fashion_mnist(dir.path.string(), Split::Train, 100).size() == 5);
  REQUIRE_THROWS_AS(load_fashion_mnist(dir.path.string(), Split::Train, 0), ValueError);

  Dataset test = load_fashion_mnist(dir.path.string(), Split::Test);
  REQUIRE(test.size() == 2);
  REQUIRE(test.labels.to_vector<int64_t>() == std::vector<int64_t>{9, 0});
}

TEST_CASE("a missing data directory or file says which package to install", "[formats]") {
  IdxTempDir dir;
  std::string missing = (dir.path / "no-such-dir").string();
  REQUIRE_THROWS_AS(load_fashion_mnist(missing), IoError);
  REQUIRE_THROWS_WITH(load_fashion_mnist(missing), Catch::Contains(missing) && Catch::Contains("does not exist") &&
                                                       Catch::Contains("apt-get install dataset-fashion-mnist"));
  dir.file("train-images-idx3-ubyte.gz", gzip(image_bytes(1)));
  REQUIRE_THROWS_WITH(
      load_fashion_mnist(dir.path.string()),
      Catch::Contains("train-labels-idx1-ubyte") && Catch::Contains("apt-get install dataset-fashion-mnist"));
  REQUIRE_THROWS_AS(load_fashion_mnist(dir.path.string(), Split::Test), IoError);
}

TEST_CASE("Fashion-MNIST class names", "[formats]") {
  REQUIRE(kFashionMnistClassNames.size() == 10);
  REQUIRE(std::string(kFashionMnistClassNames[0]) == "T-shirt/top");
  REQUIRE(std::string(kFashionMnistClassNames[9]) == "Ankle boot");
  REQUIRE(std::string(split_name(Split::Test)) == "test");
}

TEST_CASE("the real Fashion-MNIST loads when Debian's package is installed", "[formats]") {
  if (!fs::is_directory(default_fashion_mnist_dir())) {
    WARN("skipped: " << default_fashion_mnist_dir() << " not found (apt-get install dataset-fashion-mnist)");
    return;
  }
  for (Split split : {Split::Train, Split::Test}) {
    Dataset data = load_fashion_mnist(default_fashion_mnist_dir(), split);
    const int64_t n = split == Split::Train ? 60000 : 10000;
    REQUIRE(data.size() == n);
    REQUIRE(data.images.shape() == Shape{n, 28, 28});
    std::vector<int64_t> per_class(10, 0);
    for (int64_t label : data.labels.to_vector<int64_t>()) {
      REQUIRE(label >= 0);
      REQUIRE(label <= 9);
      per_class[label]++;
    }
    // Fashion-MNIST is balanced: 6000 (train) or 1000 (test) of each class.
    for (int64_t count : per_class) REQUIRE(count == n / 10);
  }
  REQUIRE(load_fashion_mnist(default_fashion_mnist_dir(), Split::Train, 2000).size() == 2000);
}
