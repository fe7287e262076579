// Writing a file so that a reader (or a crash) sees either its old contents or all of its new ones: the bytes go to
// a temp file "<path>.tmp.<pid>" in the same directory, which is fsynced and renamed over `path`, and then the
// directory is fsynced. Every file ember writes goes this way: checkpoints, metrics, plots, benchmark reports.
#pragma once

#include <cstddef>
#include <string>

namespace ember::formats {

class AtomicFile {
 public:
  // Creates the temp file; IoError naming `path` (what: "checkpoint", "file") when it cannot.
  explicit AtomicFile(std::string path, std::string what = "file");
  // Removes the temp file unless commit() renamed it: a failed write leaves nothing behind. Never throws.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);  // IoError (disk full, ...); `path` keeps its previous contents
  // fsync, rename over `path`, fsync the directory: afterwards `path` holds exactly what was written.
  void commit();

 private:
  [[noreturn]] void fail(const char* step, int err) const;

  std::string path_, what_, tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// The whole of `text` into `path`, atomically as above.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace ember::formats
