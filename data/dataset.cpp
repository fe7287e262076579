// Fashion-MNIST loading: locate the four IDX files, read and cross-check them, apply --limit.
#include "data/dataset.h"

#include <cstdlib>

#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "formats/idx.h"

namespace ember::data {

std::string default_fashion_mnist_dir() {
  const char* env = std::getenv("EMBER_FASHION_MNIST_DIR");
  return env != nullptr && *env != '\0' ? env : kDebianFashionMnistDir;
}

namespace fs = std::filesystem;
using detail::concat;

const std::array<const char*, 10> kFashionMnistClassNames = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

int64_t Dataset::sample_numel() const {
  if (!images.defined() || images.dim() < 1 || images.size(0) == 0) return 0;
  return images.numel() / images.size(0);
}

void Dataset::check() const {
  EMBER_CHECK(images.defined() && labels.defined(), ValueError, "Dataset: images and labels must both be set");
  EMBER_CHECK(images.device().is_cpu() && labels.device().is_cpu(), ValueError,
              "Dataset: images and labels live in host memory, but got images on ", images.device().str(),
              " and labels on ", labels.device().str());
  EMBER_CHECK(images.dtype() == DType::U8, DTypeError, "Dataset: images must be uint8, got ",
              dtype_name(images.dtype()));
  EMBER_CHECK(labels.dtype() == DType::I64, DTypeError, "Dataset: labels must be int64, got ",
              dtype_name(labels.dtype()));
  EMBER_CHECK(images.dim() >= 2 && labels.dim() == 1, ShapeError,
              "Dataset: expected images (N, H, W) and labels (N), got ", shape_str(images.shape()), " and ",
              shape_str(labels.shape()));
  EMBER_CHECK(images.size(0) == labels.size(0), ShapeError, "Dataset: ", images.size(0), " images but ", labels.size(0),
              " labels; they must match");
  EMBER_CHECK(images.size(0) >= 1 && sample_numel() >= 1, ShapeError, "Dataset: no samples (images of shape ",
              shape_str(images.shape()), ")");
  EMBER_CHECK(images.is_contiguous() && labels.is_contiguous(), ValueError,
              "Dataset: images and labels must be contiguous; call .contiguous() first");
}

Dataset Dataset::head(int64_t n) const {
  if (n >= size()) return *this;
  EMBER_CHECK(n >= 1, ValueError, "Dataset::head(", n, "): n must be >= 1");
  return {images.slice(0, 0, n), labels.slice(0, 0, n)};
}

Dataset Dataset::shard(int64_t index, int64_t count) const {
  EMBER_CHECK(count >= 1 && index >= 0 && index < count, ValueError, "Dataset::shard(", index, ", ", count,
              "): need 0 <= index < count");
  const int64_t begin = size() * index / count, end = size() * (index + 1) / count;
  EMBER_CHECK(end > begin, ValueError, "a set of ", size(), " samples cannot be split into ", count,
              " non-empty parts; use fewer ranks");
  if (count == 1) return *this;
  return {images.slice(0, begin, end), labels.slice(0, begin, end)};
}

const char* split_name(Split split) { return split == Split::Train ? "train" : "test"; }

namespace {

constexpr const char* kInstallHint =
    "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data DIR";

// `<stem>.gz` when present, else `<stem>`; IoError naming both when neither exists.
std::string find_file(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  for (const std::string& name : {stem + ".gz", stem}) {
    fs::path p = dir / name;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  throw IoError(concat("cannot find ", (dir / stem).string(), ".gz (or ", stem, " without .gz) in ", dir.string(), ": ",
                       kInstallHint));
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, Split split, int64_t limit) {
  EMBER_CHECK(limit != 0, ValueError,
              "load_fashion_mnist(): limit must be > 0 (the first N samples) or < 0 for all, got 0");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw IoError(concat("data directory ", dir, fs::exists(dir, ec) ? " is not a directory" : " does not exist", ": ",
                         kInstallHint));
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  Dataset data;
  data.images = formats::read_idx_images(images_path, formats::IdxImageSpec{28, 28, formats::kIdxMaxCount});
  data.labels = formats::read_idx_labels(labels_path, formats::IdxLabelSpec{kFashionMnistClasses, formats::kIdxMaxCount});
  if (data.images.size(0) != data.labels.size(0))
    throw FormatError(concat(labels_path, ": count mismatch: expected ", data.images.size(0),
                             " labels (one per image of ", images_path, "), found ", data.labels.size(0)));
  return limit > 0 ? data.head(limit) : data;
}

}  // namespace ember::data
