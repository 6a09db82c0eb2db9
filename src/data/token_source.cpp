// implements: tessera::data::TokenSource (file formats, mmap lifetime, synthetic generator).
#include "tessera/data/token_source.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "tessera/core/error.hpp"

namespace tessera::data {
namespace {

// Both formats store little-endian integers and we read them in place from the mapping.
static_assert(std::endian::native == std::endian::little, "token files are read in place: little-endian hosts only");

constexpr std::int32_t kLlmcMagic = 20240520;
constexpr std::int32_t kLlmcVersion = 1;  // uint16 (GPT-2) tokens; llm.c version 2 holds uint32 tokens
constexpr std::size_t kLlmcHeaderBytes = 256 * sizeof(std::int32_t);

// 1234567 -> "1,234,567", so sizes in messages are readable at a glance.
std::string with_commas(std::uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::int32_t read_i32(const unsigned char* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Closes the descriptor on every exit path; the mapping outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() { ::close(fd); }
};

// splitmix64 (Steele et al.): fixed integer arithmetic, so the stream is identical on every
// machine and standard library, unlike std::*_distribution.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) for n <= 2^32 by multiply-shift of the high 32 bits (bias < n / 2^32).
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(((next() >> 32) * n) >> 32); }
};

}  // namespace

TokenSource TokenSource::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block us
  if (fd < 0) {
    throw FormatError("cannot open token file " + name + ": " + std::strerror(errno) +
                      "; check the path (relative paths are resolved from the working directory)");
  }
  FdGuard guard{fd};  // until the source owns the descriptor
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw FormatError("token file " + name + " is not a regular file; give the path of an llm.c or nanoGPT .bin file");
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes == 0) {
    throw FormatError("token file " + name + " is empty (0 bytes); it must hold at least one uint16 token");
  }

  TokenSource src;  // owns the mapping from here on, so a throw below unmaps it
  src.map_ = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  if (src.map_ == MAP_FAILED) {
    src.map_ = nullptr;
    throw FormatError("cannot mmap token file " + name + " (" + with_commas(bytes) + " bytes): " + std::strerror(errno));
  }
  src.map_bytes_ = bytes;
  src.fd_ = ::dup(fd);  // the guard closes `fd`; the source keeps its own descriptor of the same file
  src.path_ = name;
  const auto* base = static_cast<const unsigned char*>(src.map_);

  // The mapping is page-aligned and the header is 1024 bytes, so tokens are uint16-aligned.
  if (bytes >= sizeof(std::int32_t) && read_i32(base) == kLlmcMagic) {
    if (bytes < kLlmcHeaderBytes) {
      throw FormatError("token file " + name + " starts with the llm.c magic 20240520 but is only " + std::to_string(bytes) +
                        " bytes, shorter than the 1024-byte llm.c header; the file is truncated");
    }
    const std::int32_t version = read_i32(base + 4);
    if (version != kLlmcVersion) {
      throw FormatError("token file " + name + " is llm.c version " + std::to_string(version) +
                        "; tessera reads only version 1 (uint16 GPT-2 tokens). Re-export the data as version 1");
    }
    const std::int64_t n = read_i32(base + 8);
    const std::int64_t want = static_cast<std::int64_t>(kLlmcHeaderBytes) + 2 * n;
    if (n < 0 || want != static_cast<std::int64_t>(bytes)) {
      throw FormatError("llm.c token file " + name + ": header says " + std::to_string(n) + " tokens, so the file should be 1024 + 2*" +
                        std::to_string(n) + " = " + std::to_string(want) + " bytes, but it is " + std::to_string(bytes) +
                        " bytes; the file is truncated or its header is wrong");
    }
    if (n == 0) throw FormatError("llm.c token file " + name + " holds 0 tokens; it must hold at least one");
    src.tokens_ = {reinterpret_cast<const std::uint16_t*>(base + kLlmcHeaderBytes), static_cast<std::size_t>(n)};
    src.description_ = "llm.c file " + name + " (" + with_commas(static_cast<std::uint64_t>(n)) + " tokens)";
  } else {
    if (bytes % 2 != 0) {
      throw FormatError("token file " + name + " has " + std::to_string(bytes) +
                        " bytes, an odd count, so it is neither a raw uint16 token file (nanoGPT .bin) nor an llm.c file "
                        "(first int32 is not the magic 20240520)");
    }
    src.tokens_ = {reinterpret_cast<const std::uint16_t*>(base), bytes / 2};
    src.description_ = "raw uint16 file " + name + " (" + with_commas(bytes / 2) + " tokens)";
  }
  return src;
}

void TokenSource::ensure_unchanged() const {
  if (fd_ < 0) return;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<std::size_t>(st.st_size) != map_bytes_) {
    throw FormatError("token file " + path_ + " changed size while training read it (was " + with_commas(map_bytes_) +
                      " bytes, now " + with_commas(static_cast<std::uint64_t>(st.st_size)) +
                      "); do not rewrite or truncate a token file during a run, copy it instead");
  }
}

TokenSource TokenSource::synthetic(std::size_t n_tokens, std::uint32_t vocab_size, std::uint64_t seed) {
  if (n_tokens == 0) throw ConfigError("synthetic data: n_tokens is 0; ask for at least one token");
  if (vocab_size == 0 || vocab_size > 65536) {
    throw ConfigError("synthetic data: vocab_size " + std::to_string(vocab_size) +
                      " is outside [1, 65536] (tokens are uint16); use a vocab_size in that range");
  }
  SplitMix64 rng{seed};
  std::vector<std::uint16_t> successor(vocab_size);
  for (auto& s : successor) s = static_cast<std::uint16_t>(rng.below(vocab_size));

  TokenSource src;
  src.owned_.resize(n_tokens);
  src.owned_[0] = static_cast<std::uint16_t>(rng.below(vocab_size));
  for (std::size_t i = 1; i < n_tokens; ++i) {
    const bool follow = (rng.next() & 3) != 0;  // probability 3/4
    src.owned_[i] = follow ? successor[src.owned_[i - 1]] : static_cast<std::uint16_t>(rng.below(vocab_size));
  }
  src.tokens_ = src.owned_;
  src.description_ = "synthetic (" + with_commas(n_tokens) + " tokens, seed " + std::to_string(seed) + ")";
  return src;
}

TokenSource TokenSource::from_tokens(std::vector<std::uint16_t> tokens, std::string description) {
  if (tokens.empty()) throw ConfigError(description + ": holds no tokens; give data with some text");
  TokenSource src;
  src.owned_ = std::move(tokens);
  src.tokens_ = src.owned_;
  src.description_ = std::move(description);
  return src;
}

TokenSource::TokenSource(TokenSource&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      owned_(std::move(other.owned_)),  // steals the buffer, so tokens_ stays valid
      tokens_(std::exchange(other.tokens_, {})),
      description_(std::move(other.description_)),
      max_token_(other.max_token_.exchange(-1)) {}

TokenSource& TokenSource::operator=(TokenSource&& other) noexcept {
  if (this != &other) {
    release();
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    owned_ = std::move(other.owned_);
    tokens_ = std::exchange(other.tokens_, {});
    description_ = std::move(other.description_);
    max_token_.store(other.max_token_.exchange(-1));
  }
  return *this;
}

TokenSource::~TokenSource() { release(); }

void TokenSource::release() noexcept {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  map_ = nullptr;
  map_bytes_ = 0;
  owned_.clear();
  tokens_ = {};
}

std::uint16_t TokenSource::max_token() const {
  std::int32_t m = max_token_.load(std::memory_order_relaxed);
  if (m < 0) {
    m = tokens_.empty() ? 0 : *std::max_element(tokens_.begin(), tokens_.end());
    max_token_.store(m, std::memory_order_relaxed);
  }
  return static_cast<std::uint16_t>(m);
}

}  // namespace tessera::data
