// AtomicFile: POSIX temp file, fsync, rename, directory fsync.
#include "formats/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/error.h"

namespace ember::formats {

AtomicFile::AtomicFile(std::string path, std::string what)
    : path_(std::move(path)), what_(std::move(what)), tmp_path_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) fail("cannot create temp file", errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_path_.c_str());
}

void AtomicFile::fail(const char* step, int err) const {
  throw IoError(detail::concat("cannot save ", what_, " ", path_, ": ", step, " ", tmp_path_, ": ", std::strerror(err),
                               "; the previous file (if any) is unchanged"));
}

void AtomicFile::write(const void* data, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    const size_t chunk = std::min<size_t>(bytes - done, size_t{1} << 30);
    const ssize_t w = ::write(fd_, static_cast<const char*>(data) + done, chunk);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail("cannot write temp file", errno);
    done += static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("cannot fsync temp file", errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail("cannot close temp file", errno);
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) fail("cannot rename over it the temp file", errno);
  committed_ = true;
  // The rename is durable only once the directory entry is on disk.
  std::string dir = std::filesystem::path(path_).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool synced = dir_fd >= 0 && (::fsync(dir_fd) == 0 || errno == EINVAL);
  const int err = errno;
  if (dir_fd >= 0) ::close(dir_fd);
  EMBER_CHECK(synced, IoError, "saved ", what_, " ", path_, " but could not sync its directory ", dir, ": ",
              std::strerror(err), "; a power loss now could lose the new file");
}

void write_text_file(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace ember::formats
