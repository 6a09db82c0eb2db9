// implements: the text readers and the token cache (data/text_data.hpp).
#include "tessera/data/text_data.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "tessera/core/crc32c.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/new_file.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/data/table_rows.hpp"
#include "tessera/io/input_file.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/report/console.hpp"

namespace tessera::data {
namespace fs = std::filesystem;
namespace {

static_assert(std::endian::native == std::endian::little, "token caches are written and read little-endian");

constexpr std::string_view kInstructionShape =
    "each record is {\"instruction\": \"...\", \"input\": \"...\" (optional), \"output\": \"...\"}";
constexpr std::string_view kDocumentShape = "each record is {\"text\": \"...\"}";
constexpr std::string_view kEitherShape =
    "each record is {\"text\": \"...\"} (documents) or {\"instruction\": \"...\", \"input\": \"...\", \"output\": "
    "\"...\"} (Alpaca-style instructions)";

// 2: the header's last line is "crc32c", the CRC-32C of the header before it and of the body.
constexpr std::string_view kCacheMagic = "tessera-token-cache 2\n";
constexpr std::size_t kCacheHeaderBytes = 4096;

// One record of the file, before tokenization.
struct Record {
  std::string where;  // FILE:LINE
  std::string text;   // documents: the text; instructions: the prompt
  std::string output; // instructions: the response
};

std::string string_key(const nlohmann::json& j, const char* key, const std::string& where, std::string_view shape,
                       bool required) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!required) return {};
    throw ConfigError(where + ": no \"" + std::string(key) + "\"; " + std::string(shape));
  }
  if (!it->is_string())
    throw ConfigError(where + ": \"" + std::string(key) + "\" must be a string, got " + io::json_type_phrase(*it) +
                      "; " + std::string(shape));
  return it->get<std::string>();
}

std::vector<Record> read_records(const fs::path& file, TextKind& kind) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw ConfigError("data=" + file.string() + ": " +
                      (fs::exists(file, ec) ? "is not a regular file" : "does not exist") +
                      "; give a .txt file, a .jsonl file or a .json array of records");
  std::vector<Record> out;
  const std::string ext = file.extension().string();
  if (ext == ".txt") {
    kind = TextKind::documents;
    io::InputFile in(file);  // checked again on the descriptor: a FIFO put in its place since does not block
    if (!in.is_open()) throw ConfigError("data=" + file.string() + ": " + in.problem());
    std::string line;
    std::int64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      out.push_back({file.string() + ":" + std::to_string(n), std::move(line), {}});
    }
    if (in.bad()) throw ConfigError(file.string() + ": read error after line " + std::to_string(n));
  } else {
    std::optional<TextKind> first;
    const auto row = [&](const std::string& where, const nlohmann::json& j) {
      const bool instruction = j.contains("instruction") || j.contains("output");
      if (!instruction && !j.contains("text"))
        throw ConfigError(where + ": neither \"text\" nor \"instruction\"; " + std::string(kEitherShape));
      const TextKind k = instruction ? TextKind::instructions : TextKind::documents;
      if (!first) first = k;
      if (k != *first)
        throw ConfigError(where + ": " + (instruction ? "an instruction record" : "a text record") +
                          " in a file whose first record is " +
                          (instruction ? "a text record" : "an instruction record") +
                          "; one file holds one kind: " + std::string(kEitherShape));
      if (k == TextKind::documents) {
        std::string text = string_key(j, "text", where, kDocumentShape, true);
        if (text.find_first_not_of(" \t\r\n") == std::string::npos)
          throw ConfigError(where + ": \"text\" is empty; remove the record or give it text");
        out.push_back({where, std::move(text), {}});
      } else {
        const std::string instr = string_key(j, "instruction", where, kInstructionShape, true);
        const std::string input = string_key(j, "input", where, kInstructionShape, false);
        std::string output = string_key(j, "output", where, kInstructionShape, true);
        if (output.empty())
          throw ConfigError(where + ": \"output\" is empty, so the record has nothing to learn; remove it or give "
                            "the response");
        out.push_back({where, alpaca_prompt(instr, input), std::move(output)});
      }
    };
    if (ext == ".json")
      io::for_each_json_array_object(file, kEitherShape, row);
    else
      io::for_each_json_line(file, kEitherShape, row);
    kind = first.value_or(TextKind::documents);
  }
  if (out.empty())
    throw ConfigError("data=" + file.string() + ": holds no records; " +
                      std::string(ext == ".txt" ? "each non-blank line is a document" : kEitherShape));
  return out;
}

// A progress bar on stderr when it is a terminal, at most five updates a second.
class Progress {
 public:
  Progress(std::string what, std::int64_t total)
      : what_(std::move(what)), total_(total), on_(isatty(STDERR_FILENO) != 0), start_(Clock::now()) {}
  void add(std::int64_t n) {
    const std::int64_t done = done_.fetch_add(n) + n;
    if (!on_) return;
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    if (done < total_ && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::cerr << "\r" << what_ << " " << format_progress(done, total_, elapsed) << std::flush;
    if (done >= total_) std::cerr << "\n";
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_;
  std::int64_t total_;
  bool on_;
  Clock::time_point start_, last_{};
  std::atomic<std::int64_t> done_{0};
  std::mutex mutex_;
};

struct Encoded {
  std::vector<std::int64_t> ids;
  std::uint32_t prompt = 0;
};

// litgpt 0.5.7's Tokenizer.encode(text, bos, eos): BOS put first when asked and not there, else a leading BOS
// dropped; EOS put last when asked and not there, else a trailing EOS dropped. (With OPT's tokenizer BOS and EOS are
// both </s>, so a text that starts or ends with "</s>" loses it.)
std::vector<std::int64_t> litgpt_encode(const text::Tokenizer& tok, const std::string& text, bool bos, bool eos) {
  std::vector<std::int64_t> ids = tok.encode(text);
  const auto bos_id = tok.bos_id(), eos_id = tok.eos_id();
  if (bos && bos_id) {
    if (ids.empty() || ids.front() != *bos_id) ids.insert(ids.begin(), *bos_id);
  } else if (bos_id && !ids.empty() && ids.front() == *bos_id) {
    ids.erase(ids.begin());
  }
  if (eos && eos_id) {
    if (ids.empty() || ids.back() != *eos_id) ids.push_back(*eos_id);
  } else if (eos_id && !ids.empty() && ids.back() == *eos_id) {
    ids.pop_back();
  }
  return ids;
}

Encoded encode_record(const Record& r, TextKind kind, const text::Tokenizer& tok) {
  Encoded e;
  const auto eos = tok.eos_id();
  if (kind == TextKind::documents) {
    e.ids = tok.encode_with_special(r.text);
    if (eos && !tok.add_eos_token()) e.ids.push_back(*eos);
  } else {
    // litgpt 0.5.7's SFTDataset: encode(prompt) (BOS as the tokenizer's config says), then encode(output, bos=False,
    // eos=True), back to back: the response is tokenized on its own.
    e.ids = litgpt_encode(tok, r.text, tok.add_bos_token(), false);
    e.prompt = static_cast<std::uint32_t>(e.ids.size());
    const std::vector<std::int64_t> output = litgpt_encode(tok, r.output, false, true);
    e.ids.insert(e.ids.end(), output.begin(), output.end());
  }
  for (const std::int64_t id : e.ids)
    if (id < 0 || id > 65535)
      throw ConfigError(r.where + ": token id " + std::to_string(id) + " of " + tok.source().string() +
                        " does not fit the uint16 token store (vocabularies up to 65,536)");
  if (e.ids.size() > UINT32_MAX) throw ConfigError(r.where + ": a record of more than 2^32 tokens; split it");
  return e;
}

// The file's identity in a cache header.
struct SourceId {
  std::string path;
  std::uintmax_t bytes = 0;
  std::int64_t mtime_ns = 0;
};

SourceId source_id(const fs::path& file) {
  std::error_code ec;
  SourceId id;
  id.path = fs::absolute(file, ec).lexically_normal().string();
  id.bytes = fs::file_size(file, ec);
  const auto t = fs::last_write_time(file, ec);
  id.mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return id;
}

// The header's text but for its last line, "crc32c <8 hex digits>\n", which write_cache appends.
std::string cache_header(const SourceId& src, const text::Tokenizer& tok, const TextRows& rows) {
  std::ostringstream h;
  h << kCacheMagic << "tokenizer " << tok.fingerprint() << "\n"
    << "tokenizer_source " << tok.source().string() << "\n"
    << "source " << src.path << "\n"
    << "source_bytes " << src.bytes << "\n"
    << "source_mtime_ns " << src.mtime_ns << "\n"
    << "kind " << (rows.kind == TextKind::documents ? "documents" : "instructions") << "\n"
    << "rows " << rows.rows() << "\n"
    << "tokens " << rows.tokens.size() << "\n";
  return h.str();
}

// The body's three arrays as bytes: row ends (uint64, the first row's start 0 is implied), prompt lengths (uint32),
// tokens (uint16).
std::array<std::span<const std::byte>, 3> cache_body(const TextRows& rows) {
  return {std::as_bytes(std::span(rows.starts).subspan(1)), std::as_bytes(std::span(rows.prompt_lengths)),
          std::as_bytes(std::span(rows.tokens))};
}

std::uint32_t cache_crc(std::string_view header_before_crc, const TextRows& rows) {
  std::uint32_t crc = crc32c(header_before_crc);
  for (const auto& bytes : cache_body(rows)) crc = crc32c(bytes, crc);
  return crc;
}

// The header's "key value" lines.
std::optional<std::string> header_value(std::string_view header, std::string_view key) {
  const std::string needle = "\n" + std::string(key) + " ";
  const auto at = header.find(needle);
  if (at == std::string_view::npos) return std::nullopt;
  const auto begin = at + needle.size();
  const auto end = header.find('\n', begin);
  return std::string(header.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
}

// The cache's rows when its header names this source and tokenizer; nullopt when it is absent or names others.
std::optional<TextRows> read_cache(const fs::path& cache, const SourceId& src, const text::Tokenizer& tok) {
  io::InputFile in(cache);  // a FIFO or device in its place is no cache (and does not block)
  if (!in.is_open()) return std::nullopt;
  std::string header(kCacheHeaderBytes, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header.size()))) return std::nullopt;
  if (header.rfind(kCacheMagic, 0) != 0) return std::nullopt;
  header.resize(header.find('\0') == std::string::npos ? header.size() : header.find('\0'));
  if (header_value(header, "tokenizer") != tok.fingerprint() || header_value(header, "source") != src.path ||
      header_value(header, "source_bytes") != std::to_string(src.bytes) ||
      header_value(header, "source_mtime_ns") != std::to_string(src.mtime_ns))
    return std::nullopt;
  const auto damaged = [&](const std::string& why) -> FormatError {
    return FormatError(cache.string() + ": a damaged token cache (" + why + "); delete it and it is written again");
  };
  TextRows rows;
  const auto kind = header_value(header, "kind");
  if (kind == "documents") rows.kind = TextKind::documents;
  else if (kind == "instructions") rows.kind = TextKind::instructions;
  else throw damaged("kind");
  std::int64_t n_rows = -1, n_tokens = -1;
  try {
    n_rows = std::stoll(header_value(header, "rows").value_or("-1"));
    n_tokens = std::stoll(header_value(header, "tokens").value_or("-1"));
  } catch (const std::exception&) {
    throw damaged("rows or tokens");
  }
  // Rows and tokens bounded by the body's bytes before anything is multiplied or allocated: 12 bytes per row, 2 per
  // token (a header claiming 2^62 rows once wrapped the size check around to pass, then asked for 2^62 rows).
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(cache, ec);
  const std::uintmax_t body = ec || size < kCacheHeaderBytes ? 0 : size - kCacheHeaderBytes;
  if (n_rows < 1 || n_tokens < 0 || static_cast<std::uintmax_t>(n_rows) > body / 12 ||
      static_cast<std::uintmax_t>(n_tokens) > body / 2 ||
      static_cast<std::uintmax_t>(n_rows) * 12 + static_cast<std::uintmax_t>(n_tokens) * 2 != body)
    throw damaged("its header says " + std::to_string(n_rows) + " rows and " + std::to_string(n_tokens) +
                  " tokens, and its body holds " + std::to_string(body) + " bytes, 12 per row and 2 per token");
  // The last line: "crc32c <8 hex digits>\n", covering the lines before it and the body.
  const std::size_t crc_line = header.rfind("\ncrc32c ");
  const std::string_view crc_text =
      crc_line == std::string::npos ? std::string_view() : std::string_view(header).substr(crc_line + 8);
  const std::optional<std::uint32_t> crc =
      crc_text.size() == 9 && crc_text.back() == '\n' ? parse_crc32c(crc_text.substr(0, 8)) : std::nullopt;
  if (!crc) throw damaged("its header does not end with its \"crc32c\" line");
  rows.starts.resize(static_cast<std::size_t>(n_rows) + 1);
  rows.prompt_lengths.resize(static_cast<std::size_t>(n_rows));
  rows.tokens.resize(static_cast<std::size_t>(n_tokens));
  in.read(reinterpret_cast<char*>(rows.starts.data() + 1), static_cast<std::streamsize>(n_rows * 8));
  in.read(reinterpret_cast<char*>(rows.prompt_lengths.data()), static_cast<std::streamsize>(n_rows * 4));
  in.read(reinterpret_cast<char*>(rows.tokens.data()), static_cast<std::streamsize>(n_tokens * 2));
  if (!in) throw damaged("cut short");
  if (const std::uint32_t actual = cache_crc(std::string_view(header).substr(0, crc_line + 1), rows); actual != *crc)
    throw damaged("its CRC-32C is " + crc32c_hex(actual) + " and its header says " + crc32c_hex(*crc) +
                  ": a byte changed since it was written");
  for (std::size_t i = 1; i < rows.starts.size(); ++i)
    if (rows.starts[i] < rows.starts[i - 1] || rows.prompt_lengths[i - 1] > rows.starts[i] - rows.starts[i - 1])
      throw damaged("row " + std::to_string(i - 1));
  if (rows.starts.back() != static_cast<std::uint64_t>(n_tokens)) throw damaged("rows and tokens disagree");
  return rows;
}

void write_cache(const fs::path& cache, const SourceId& src, const text::Tokenizer& tok, const TextRows& rows) {
  std::string header = cache_header(src, tok, rows);
  header += "crc32c " + crc32c_hex(cache_crc(header, rows)) + "\n";
  if (header.size() > kCacheHeaderBytes) return;  // a path too long to record: no cache
  header.resize(kCacheHeaderBytes, '\0');
  // A device, FIFO or directory in the cache's place stays; created beside it under a name of its own, the file is
  // never opened through a file or link already there (core/new_file.hpp).
  if (!replace_problem(cache).empty()) return;
  PartialFile created;
  try {
    created = create_partial_file(cache);
  } catch (const Error&) {
    return;  // an unwritable directory only costs the cache
  }
  const fs::path partial = created.path;
  bool ok = false;
  {
    std::ofstream out;
    if (open_stream(out, created)) {
      out.write(header.data(), static_cast<std::streamsize>(header.size()));
      for (const auto& bytes : cache_body(rows))
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      out.flush();
      ok = static_cast<bool>(out);
    }
  }
  std::error_code ec;
  if (ok) fs::rename(partial, cache, ec);
  if (!ok || ec) fs::remove(partial, ec);  // an unwritable directory only costs the cache
  unregister_partial_file(partial);
}

}  // namespace

bool is_text_data(const fs::path& data) {
  const std::string ext = data.extension().string();
  return ext == ".txt" || ext == ".json" || ext == ".jsonl";
}

std::string alpaca_prompt(std::string_view instruction, std::string_view input) {
  std::string out;
  if (!input.empty()) {
    out = "Below is an instruction that describes a task, paired with an input that provides further context. "
          "Write a response that appropriately completes the request.\n\n### Instruction:\n";
    out.append(instruction).append("\n\n### Input:\n").append(input);
  } else {
    out = "Below is an instruction that describes a task. Write a response that appropriately completes the "
          "request.\n\n### Instruction:\n";
    out.append(instruction);
  }
  out.append("\n\n### Response:\n");
  return out;
}

namespace {

// The records tokenized in order, on the machine's cores (a progress bar named `what` on a terminal).
TextRows tokenize_records(const std::vector<Record>& records, TextKind kind, const text::Tokenizer& tokenizer,
                          const std::string& what) {
  TextRows rows;
  rows.kind = kind;
  std::vector<Encoded> encoded(records.size());
  Progress progress("tokenizing " + what, static_cast<std::int64_t>(records.size()));
  const std::size_t n_threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::max<std::size_t>(1, records.size() / 64));
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto work = [&] {
    try {
      for (std::size_t i; (i = next.fetch_add(256)) < records.size();) {
        const std::size_t end = std::min(records.size(), i + 256);
        for (std::size_t k = i; k < end; ++k) encoded[k] = encode_record(records[k], rows.kind, tokenizer);
        progress.add(static_cast<std::int64_t>(end - i));
      }
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      next = records.size();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  for (const Encoded& e : encoded) {
    for (const std::int64_t id : e.ids) rows.tokens.push_back(static_cast<std::uint16_t>(id));
    rows.starts.push_back(rows.tokens.size());
    rows.prompt_lengths.push_back(e.prompt);
  }
  return rows;
}

}  // namespace

TextRows read_text_rows(const fs::path& file, const text::Tokenizer& tokenizer) {
  TextKind kind = TextKind::documents;
  const std::vector<Record> records = read_records(file, kind);
  return tokenize_records(records, kind, tokenizer, file.filename().string());
}

TextRows read_table_text_rows(const TableRows& table, const std::string& text_column,
                              const text::Tokenizer& tokenizer) {
  const TableSource& t = *table.table;
  const bool instructions = t.has_column("instruction") && t.has_column("output");
  std::vector<Record> records;
  records.reserve(static_cast<std::size_t>(table.size()));
  const auto non_empty = [&](std::int64_t row, std::size_t column, std::string value) {
    if (value.empty())
      throw ConfigError(t.where(row, column) + " is empty; every " + (instructions ? "instruction's output" : "text") +
                        " needs at least one character");
    return value;
  };
  if (instructions) {
    const std::size_t instruction = t.column("instruction", ColumnKind::text, "the Alpaca columns");
    const std::size_t output = t.column("output", ColumnKind::text, "the Alpaca columns");
    const bool has_input = t.has_column("input");
    const std::size_t input = has_input ? t.column("input", ColumnKind::text, "the Alpaca columns") : 0;
    for (std::int64_t r = 0; r < table.size(); ++r) {
      const std::int64_t row = table.row(r);
      records.push_back({t.where(row, instruction),
                         alpaca_prompt(non_empty(row, instruction, t.text(row, instruction)),
                                       has_input ? t.text(row, input) : std::string()),
                         non_empty(row, output, t.text(row, output))});
    }
  } else {
    const std::size_t column = t.column(text_column, ColumnKind::text, "text_column");
    for (std::int64_t r = 0; r < table.size(); ++r) {
      const std::int64_t row = table.row(r);
      records.push_back({t.where(row, column), non_empty(row, column, t.text(row, column)), {}});
    }
  }
  return tokenize_records(records, instructions ? TextKind::instructions : TextKind::documents, tokenizer,
                          t.description());
}

fs::path token_cache_path(const fs::path& file, const text::Tokenizer& tokenizer) {
  const std::string& fp = tokenizer.fingerprint();  // "kind:16 hex digits"
  const auto colon = fp.find(':');
  return fs::path(file.string() + "." + fp.substr(0, colon) + "-" + fp.substr(colon + 1, 8) + ".tokens");
}

TextRows load_text_rows(const fs::path& file, const text::Tokenizer& tokenizer) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return read_text_rows(file, tokenizer);  // its error message
  const SourceId src = source_id(file);
  const fs::path cache = token_cache_path(file, tokenizer);
  if (auto cached = read_cache(cache, src, tokenizer)) return std::move(*cached);
  TextRows rows = read_text_rows(file, tokenizer);
  write_cache(cache, src, tokenizer, rows);
  return rows;
}

}  // namespace tessera::data
