#pragma once
// defines: InputFile, the way tessera opens a file it reads as a stream (metrics files, JSON Lines and text data,
// images, the token cache, tokenizer files). The path is opened O_NONBLOCK and checked on the descriptor, so a
// directory, FIFO, socket or device is refused before a byte is read and nothing blocks, not even a FIFO put in the
// file's place after an earlier check (once: a FIFO named labels.jsonl hung the run). The bytes are then read from
// it as from a std::ifstream.
#include <cstdint>
#include <filesystem>
#include <istream>
#include <memory>
#include <streambuf>
#include <string>

namespace tessera::io {

class InputFile : public std::istream {
 public:
  // When the file cannot be read, the stream starts failed and problem() says why, to follow "PATH: ": "no such
  // file", "is a directory, not a file", "is a FIFO, not a regular file", "cannot open it: Permission denied".
  explicit InputFile(const std::filesystem::path& path);
  ~InputFile() override;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  bool is_open() const { return problem_.empty(); }
  const std::string& problem() const { return problem_; }
  std::int64_t size() const { return size_; }  // bytes, as the file was when opened

 private:
  std::unique_ptr<std::streambuf> buffer_;
  std::string problem_;
  std::int64_t size_ = 0;
};

}  // namespace tessera::io
