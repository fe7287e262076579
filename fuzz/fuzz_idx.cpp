// libFuzzer harness for the IDX reader (parse_idx_images / parse_idx_labels), with an independent oracle.
//
// Input layout: byte 0 selects the entry point and spec, the rest is the IDX file (raw or gzip):
//   0 images, default spec (28x28, 10M cap)     1 images of any size, no count cap
//   2 labels, default spec (10 classes, 10M cap)   3 labels, 256 classes, no count cap
// An ember::Error other than InternalError is an expected rejection. Anything else is a finding: a crash,
// a sanitizer report, another exception, InternalError (a broken invariant), or a verdict that differs
// from an independent oracle (plain zlib + the header rules of train/idx.h): a file it calls invalid
// accepted, a valid one rejected, or an accepted tensor that differs from the decoded bytes.
//
// A custom mutator lets the fuzzer work behind gzip: for half of the mutations of a gzip input it
// inflates the data, mutates the decoded bytes and deflates them again (at a level chosen by the seed,
// 0 = stored blocks), so header and payload mutations reach the parser instead of failing zlib's CRC.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <vector>

#include "base/error.h"
#include "formats/idx.h"

namespace {

using ember::Tensor;
using namespace ember::formats;

// Thrown instead of aborting in the coverage build, which must replay every input to the end.
struct Finding {};

[[noreturn]] void finding(const char* what, const char* detail = "") {
  std::fprintf(stderr, "fuzz_idx: FINDING: %s %s\n", what, detail);
  std::fflush(stderr);
#if EMBER_FUZZ_COVERAGE
  throw Finding{};
#else
  std::abort();
#endif
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The decoded file as the oracle sees it: raw bytes as they are; gzip (any number of concatenated
// members) inflated by zlib directly, at most `limit` bytes. False when zlib calls the data corrupt or
// truncated, or when bytes other than another gzip member follow a member.
bool decode(const uint8_t* data, size_t size, size_t limit, std::vector<uint8_t>* out) {
  out->clear();
  if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) {
    out->assign(data, data + std::min(size, limit));
    return true;
  }
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) finding("oracle: inflateInit2 failed");
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(size);
  bool ok = true;
  std::vector<uint8_t> chunk(64 * 1024);
  while (out->size() < limit) {
    zs.next_out = chunk.data();
    zs.avail_out = static_cast<uInt>(std::min(chunk.size(), limit - out->size()));
    const uInt before = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    out->insert(out->end(), chunk.data(), chunk.data() + (before - zs.avail_out));
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;                // clean end after a member
      if (zs.next_in[0] != 0x1f) {                // only another member may follow
        ok = false;
        break;
      }
      inflateReset(&zs);
      continue;
    }
    if (rc != Z_OK) {  // Z_BUF_ERROR (truncated), Z_DATA_ERROR, ...
      ok = false;
      break;
    }
  }
  inflateEnd(&zs);
  return ok;
}

// The oracle's verdict on an images file: valid (and what it holds) or not, decided from the decoded
// bytes alone with the rules train/idx.h documents.
struct Verdict {
  bool valid = false;
  std::vector<uint8_t> decoded;  // header + payload when valid
};

Verdict oracle_images(const uint8_t* data, size_t size, const IdxImageSpec& spec) {
  Verdict v;
  std::vector<uint8_t>& d = v.decoded;
  if (!decode(data, size, 16, &d) || d.size() < 16) return v;
  const uint64_t n = be32(d.data() + 4), rows = be32(d.data() + 8), cols = be32(d.data() + 12);
  if (be32(d.data()) != kIdxImagesMagic || n < 1 || n > static_cast<uint64_t>(spec.max_count) || rows < 1 ||
      cols < 1 || (spec.rows > 0 && rows != static_cast<uint64_t>(spec.rows)) ||
      (spec.cols > 0 && cols != static_cast<uint64_t>(spec.cols)))
    return v;
  uint64_t payload = 0;
  if (__builtin_mul_overflow(n, rows * cols, &payload)) return v;  // rows * cols < 2^64: both < 2^32
  // A file of `size` bytes cannot hold more than this (deflate's ratio): larger declarations are invalid.
  if (payload > static_cast<uint64_t>(size) * 1100 + 4096) return v;
  if (!decode(data, size, 16 + static_cast<size_t>(payload) + 1, &d)) return v;
  v.valid = d.size() == 16 + payload;
  return v;
}

Verdict oracle_labels(const uint8_t* data, size_t size, const IdxLabelSpec& spec) {
  Verdict v;
  std::vector<uint8_t>& d = v.decoded;
  if (!decode(data, size, 8, &d) || d.size() < 8) return v;
  const uint64_t n = be32(d.data() + 4);
  if (be32(d.data()) != kIdxLabelsMagic || n < 1 || n > static_cast<uint64_t>(spec.max_count)) return v;
  if (n > static_cast<uint64_t>(size) * 1100 + 4096) return v;
  if (!decode(data, size, 8 + static_cast<size_t>(n) + 1, &d) || d.size() != 8 + n) return v;
  for (size_t i = 8; i < d.size(); ++i)
    if (d[i] >= spec.num_classes) return v;
  v.valid = true;
  return v;
}

void check_accepted_images(const Tensor& t, const Verdict& v) {
  if (!v.valid) finding("images: accepted a file the oracle calls invalid");
  if (t.dim() != 3 || t.dtype() != ember::DType::U8 || !t.device().is_cpu() || !t.is_contiguous())
    finding("images: wrong tensor kind");
  const std::vector<uint8_t>& d = v.decoded;
  if (t.size(0) != be32(d.data() + 4) || t.size(1) != be32(d.data() + 8) || t.size(2) != be32(d.data() + 12))
    finding("images: shape differs from the header");
  if (static_cast<size_t>(t.numel()) != d.size() - 16 ||
      std::memcmp(d.data() + 16, t.data<uint8_t>(), d.size() - 16) != 0)
    finding("images: payload differs from the decoded file");
}

void check_accepted_labels(const Tensor& t, const Verdict& v) {
  if (!v.valid) finding("labels: accepted a file the oracle calls invalid");
  if (t.dim() != 1 || t.dtype() != ember::DType::I64 || !t.device().is_cpu() || !t.is_contiguous())
    finding("labels: wrong tensor kind");
  const std::vector<uint8_t>& d = v.decoded;
  if (static_cast<size_t>(t.size(0)) != d.size() - 8) finding("labels: count differs from the header");
  const int64_t* labels = t.data<int64_t>();
  for (size_t i = 8; i < d.size(); ++i)
    if (labels[i - 8] != d[i]) finding("labels: a label differs from its byte");
}

// Deflates `in` as one gzip member; empty on failure.
std::vector<uint8_t> gzip(const std::vector<uint8_t>& in, int level) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::vector<uint8_t> out(deflateBound(&zs, in.size()) + 64);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return {};
  return out;
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  const bool is_gzip = size >= 3 && data[1] == 0x1f && data[2] == 0x8b;
  if (is_gzip && seed % 2 == 0) {
    constexpr size_t kMaxDecoded = 64 * 1024;  // the seeds decode to at most a few KiB
    std::vector<uint8_t> decoded;
    decode(data + 1, size - 1, kMaxDecoded, &decoded);  // a corrupt member still yields its first bytes
    if (!decoded.empty()) {
      const size_t used = decoded.size();
      decoded.resize(std::max<size_t>(used * 2, 64));
      decoded.resize(LLVMFuzzerMutate(decoded.data(), used, decoded.size()));
      const std::vector<uint8_t> packed = gzip(decoded, static_cast<int>(seed / 2 % 10));
      if (!packed.empty() && packed.size() + 1 <= max_size) {
        std::memcpy(data + 1, packed.data(), packed.size());
        return packed.size() + 1;
      }
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

static int run_one(const uint8_t* input, size_t input_size) {
  if (input_size < 1) return 0;
  const unsigned mode = input[0] % 4;
  const uint8_t* data = input + 1;
  const size_t size = input_size - 1;
  // Modes 1 and 3 lift the caps: only the file's own size bounds the allocation.
  const IdxImageSpec image_spec = mode == 0 ? IdxImageSpec{} : IdxImageSpec{0, 0, std::numeric_limits<int64_t>::max()};
  const IdxLabelSpec label_spec = mode == 2 ? IdxLabelSpec{} : IdxLabelSpec{256, std::numeric_limits<int64_t>::max()};
  const bool images = mode <= 1;
  try {
    if (images) {
      Tensor t = parse_idx_images(data, size, "fuzz.idx", image_spec);
      check_accepted_images(t, oracle_images(data, size, image_spec));
    } else {
      Tensor t = parse_idx_labels(data, size, "fuzz.idx", label_spec);
      check_accepted_labels(t, oracle_labels(data, size, label_spec));
    }
  } catch (const ember::InternalError& e) {
    finding("InternalError (a broken invariant):", e.what());
  } catch (const ember::Error& e) {
    // An expected rejection, unless the oracle calls the file valid; its message is one line.
    if (std::strchr(e.what(), '\n') != nullptr) finding("multi-line error message:", e.what());
    if (images ? oracle_images(data, size, image_spec).valid : oracle_labels(data, size, label_spec).valid)
      finding("rejected a file the oracle calls valid:", e.what());
  } catch (const std::exception& e) {
    finding("std::exception not derived from ember::Error:", e.what());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    return run_one(data, size);
  } catch (const Finding&) {
    return 0;  // reported on stderr already (coverage build only; the fuzzing build aborts)
  }
}
