// The text corpus (read once into one buffer) and the masked windows drawn from it.
#include "data/text.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/error.h"

namespace ember::data {

namespace fs = std::filesystem;

namespace {

// The files a folder contributes: regular files without '.' in their names, in name order.
std::vector<std::string> folder_files(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find('.') == std::string::npos && it->is_regular_file(ec)) files.push_back(it->path().string());
  }
  EMBER_CHECK(!ec, IoError, "cannot list ", dir.string(), ": ", ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

// Appends the file's bytes to `out`; false (nothing appended) when `skip_binary` and it holds a NUL byte.
bool append_file(const std::string& path, std::vector<uint8_t>& out, bool skip_binary) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  EMBER_CHECK(f != nullptr, IoError, "cannot read ", path, ": ", std::strerror(errno));
  const size_t start = out.size();
  uint8_t chunk[1 << 16];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0;) out.insert(out.end(), chunk, chunk + n);
  EMBER_CHECK(!std::ferror(f.get()), IoError, "cannot read ", path, ": ", std::strerror(errno));
  if (skip_binary && std::find(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(), 0) != out.end()) {
    out.resize(start);
    return false;
  }
  return true;
}

uint64_t total_size(const std::vector<std::string>& files) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& f : files) total += fs::file_size(f, ec), ec.clear();
  return total;
}

// A uniform integer in [0, n) from the top 32 of 64 random bits (Lemire's multiply), for 0 < n <= 2^32.
int64_t below(uint64_t bits, int64_t n) {
  EMBER_ASSERT(n > 0 && n <= (int64_t{1} << 32), "below(): n = ", n);
  return static_cast<int64_t>(((bits >> 32) * static_cast<uint64_t>(n)) >> 32);
}
// A uniform double in [0, 1) from the top 53 of 64 random bits.
double unit(uint64_t bits) { return double(bits >> 11) * 0x1.0p-53; }

}  // namespace

std::string default_text_path() {
  const char* env = std::getenv("EMBER_TEXT_DIR");
  return env != nullptr && *env != '\0' ? env : kDebianFortunesDir;
}

TextCorpus load_text_corpus(const std::string& path, double held_out) {
  EMBER_CHECK(held_out > 0 && held_out < 1, ValueError, "the held-out fraction must be in (0, 1), got ", held_out);
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  EMBER_CHECK(fs::exists(status), IoError, "--text ", path, " does not exist",
              path == kDebianFortunesDir ? " (the default corpus: apt-get install fortunes)" : "",
              "; give a text file or a folder of them");
  TextCorpus c;
  c.source = path;
  const bool folder = fs::is_directory(status);
  c.files = folder ? folder_files(path) : std::vector<std::string>{path};
  EMBER_CHECK(!c.files.empty(), FormatError, "--text ", path,
              " holds no files without an extension (the corpus files); give a text file or a folder of them");
  c.bytes.reserve(total_size(c.files));
  std::vector<std::string> kept;
  for (const auto& f : c.files)
    if (append_file(f, c.bytes, folder)) kept.push_back(f);
  EMBER_CHECK(!kept.empty(), FormatError, "--text ", path, ": all ", c.files.size(),
              " file(s) are binary (they hold NUL bytes); give text");
  c.files = std::move(kept);
  EMBER_CHECK(!c.bytes.empty(), FormatError, "--text ", path, " is empty; give a file or folder with text in it");
  EMBER_CHECK(c.bytes.size() < (uint64_t{1} << 32), FormatError, "--text ", path, " holds ", c.bytes.size(),
              " bytes; ember reads corpora of up to 4 GiB");
  c.train_bytes = static_cast<int64_t>(std::floor(double(c.bytes.size()) * (1 - held_out)));
  return c;
}

void check_corpus_fits(const TextCorpus& c, int64_t seq_len) {
  const int64_t need = seq_len + 1;
  EMBER_CHECK(c.train_bytes >= need && c.held_out_bytes() >= need, FormatError, "--text ", c.source, " holds ",
              c.bytes.size(), " bytes: ", c.train_bytes, " to train on and ", c.held_out_bytes(),
              " held out, but each part needs more than one window of --seq-len ", seq_len,
              " bytes; give a longer text (at least ", need * 20, " bytes) or a shorter --seq-len");
}

MaskedBatch make_masked_batch(const uint8_t* text, int64_t size, int64_t batch, int64_t seq_len, Generator& generator,
                              const MaskingOptions& o) {
  EMBER_CHECK(batch >= 1 && seq_len >= 1 && size > seq_len, ValueError, "cannot draw ", batch, " windows of ", seq_len,
              " bytes from a text of ", size, " bytes");
  const int64_t n = batch * seq_len;
  // One stream word per window start, three per position (chosen?, how, which random byte).
  const uint64_t key = generator.seed(), base = generator.reserve(static_cast<uint64_t>(batch + 3 * n));
  MaskedBatch out;
  out.ids = Tensor::empty({batch, seq_len}, DType::I64);
  int64_t* ids = out.ids.data<int64_t>();
  std::vector<int64_t> positions, targets;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = below(philox_bits(key, base + static_cast<uint64_t>(b)), size - seq_len);
    for (int64_t t = 0; t < seq_len; ++t) ids[b * seq_len + t] = text[start + t];
  }
  const uint64_t words = base + static_cast<uint64_t>(batch);
  auto choose = [&](int64_t i) {
    const uint64_t w = words + 3 * static_cast<uint64_t>(i);
    positions.push_back(i);
    targets.push_back(ids[i]);
    const double how = unit(philox_bits(key, w + 1));
    if (how < o.mask_token_prob)
      ids[i] = kMaskToken;
    else if (how < o.mask_token_prob + o.random_token_prob)
      ids[i] = below(philox_bits(key, w + 2), 256);
  };
  for (int64_t i = 0; i < n; ++i)
    if (unit(philox_bits(key, words + 3 * static_cast<uint64_t>(i))) < o.mask_prob) choose(i);
  if (positions.empty()) choose(0);
  const auto m = static_cast<int64_t>(positions.size());
  out.positions = Tensor::from_vector(positions, {m});
  out.targets = Tensor::from_vector(targets, {m});
  return out;
}

MaskedBatch MaskedBatch::rows(int64_t begin, int64_t end) const {
  const int64_t seq_len = ids.size(1);
  EMBER_CHECK(0 <= begin && begin <= end && end <= ids.size(0), ValueError, "rows [", begin, ", ", end,
              ") of a batch of ", ids.size(0));
  const int64_t* p = positions.data<int64_t>();
  const int64_t* first = std::lower_bound(p, p + chosen(), begin * seq_len);
  const int64_t* last = std::lower_bound(p, p + chosen(), end * seq_len);
  std::vector<int64_t> part(first, last);
  for (int64_t& i : part) i -= begin * seq_len;
  const auto m = static_cast<int64_t>(part.size()), from = static_cast<int64_t>(first - p);
  return {ids.slice(0, begin, end).contiguous(), Tensor::from_vector(part, {m}),
          targets.slice(0, from, from + m).contiguous()};
}

MaskedBatch MaskedBatch::to(Device device) const { return {ids.to(device), positions.to(device), targets.to(device)}; }

}  // namespace ember::data
