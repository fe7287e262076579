// Text for the byte-level masked language model (`ember train --model bert`): a corpus read as bytes from a file or
// a folder, its held-out tail, and batches of random windows with BERT's masking (the peer
// ../shared/peers/torch_bert.py's recipe).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace ember::data {

// Where Debian's fortunes package installs its files (the default corpus).
inline constexpr const char* kDebianFortunesDir = "/usr/share/games/fortunes";
// $EMBER_TEXT_DIR when set (a staged copy, e.g. on the GPU check machine), else Debian's fortunes.
std::string default_text_path();

// The vocabulary: the 256 byte values and [MASK].
inline constexpr int64_t kMaskToken = 256;
inline constexpr int64_t kByteVocabulary = 257;

struct TextCorpus {
  std::vector<uint8_t> bytes;     // every file's bytes, concatenated in name order
  int64_t train_bytes = 0;        // bytes [0, train_bytes) train; the rest is held out
  std::vector<std::string> files; // the files read
  std::string source;             // the path given
  const uint8_t* train() const { return bytes.data(); }
  const uint8_t* held_out() const { return bytes.data() + train_bytes; }
  int64_t held_out_bytes() const { return static_cast<int64_t>(bytes.size()) - train_bytes; }
};

// Reads `path`: a file, or a folder's regular files without an extension ('.' in the name: fortunes' .dat and .u8
// indexes) in name order, each straight into one buffer (memory: the corpus's size). A folder's files holding a NUL
// byte are skipped as binary. The last `held_out` fraction (by the peer's rule, floor(size * (1 - held_out)))
// is held out. IoError for a missing or unreadable path, FormatError for one with no text in it.
TextCorpus load_text_corpus(const std::string& path = default_text_path(), double held_out = 0.05);

// FormatError unless both parts of `corpus` hold more than one window of `seq_len` bytes.
void check_corpus_fits(const TextCorpus& corpus, int64_t seq_len);

// BERT's masking: of each window's positions, `mask_prob` are chosen; a chosen one becomes [MASK] with probability
// `mask_token_prob`, a random byte with `random_token_prob`, and stays otherwise.
struct MaskingOptions {
  double mask_prob = 0.15, mask_token_prob = 0.8, random_token_prob = 0.1;
};

// A batch of masked windows on the host or a device; the loss is taken at the chosen positions only.
struct MaskedBatch {
  Tensor ids;        // (B, T) int64: the windows' bytes after masking (kMaskToken for [MASK])
  Tensor positions;  // (M) int64: the chosen positions as b * T + t, ascending
  Tensor targets;    // (M) int64: the original bytes there
  int64_t chosen() const { return positions.defined() ? positions.size(0) : 0; }
  // Rows [begin, end) with their chosen positions (renumbered): a rank's part of a global batch.
  MaskedBatch rows(int64_t begin, int64_t end) const;
  MaskedBatch to(Device device) const;
};

// `batch` windows of `seq_len` bytes at uniform random starts in text[0, size - seq_len), masked as `options` say, all
// drawn from `generator` (the same generator state gives the same batch). A batch where no position was chosen
// gets its first position chosen, so every batch has a loss.
MaskedBatch make_masked_batch(const uint8_t* text, int64_t size, int64_t batch, int64_t seq_len, Generator& generator,
                              const MaskingOptions& options = {});

}  // namespace ember::data
