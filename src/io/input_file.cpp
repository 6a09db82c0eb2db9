// implements: io/input_file.hpp.
#include "tessera/io/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tessera/core/new_file.hpp"

namespace tessera::io {
namespace {

// Reads a descriptor in 64 KiB blocks; owns it.
class FdBuffer : public std::streambuf {
 public:
  explicit FdBuffer(int fd) : fd_(fd) { setg(block_, block_, block_); }
  ~FdBuffer() override { ::close(fd_); }
  FdBuffer(const FdBuffer&) = delete;
  FdBuffer& operator=(const FdBuffer&) = delete;

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    ssize_t n;
    do n = ::read(fd_, block_, sizeof block_);
    while (n < 0 && errno == EINTR);
    if (n <= 0) return traits_type::eof();  // an error reads as the end; callers compare what they got with size()
    setg(block_, block_, block_ + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  int fd_;
  char block_[1 << 16];
};

}  // namespace

InputFile::InputFile(const std::filesystem::path& path) : std::istream(nullptr) {
  // O_NONBLOCK: opening a FIFO without a writer returns at once (it would block), and is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat status {};
  if (fd < 0) {
    problem_ = errno == ENOENT ? "no such file" : std::string("cannot open it: ") + std::strerror(errno);
  } else if (::fstat(fd, &status) != 0) {
    problem_ = std::string("cannot open it: ") + std::strerror(errno);
  } else if (S_ISDIR(status.st_mode)) {
    problem_ = "is a directory, not a file";
  } else if (!S_ISREG(status.st_mode)) {
    problem_ = "is " + file_kind(status.st_mode) + ", not a regular file";
  }
  if (!problem_.empty()) {
    if (fd >= 0) ::close(fd);
    setstate(std::ios::failbit);
    return;
  }
  // Reads block on a regular file whatever the flag says; cleared all the same, for a file system that honours it.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<std::int64_t>(status.st_size);
  buffer_ = std::make_unique<FdBuffer>(fd);
  rdbuf(buffer_.get());
}

InputFile::~InputFile() = default;

}  // namespace tessera::io
