// implements: TableSource (data/table_source.hpp): which files data= names (here), and reading them with Arrow C++
// and Parquet (below, when tessera is built with them).
#include "tessera/data/table_source.hpp"

#include <algorithm>
#include <iterator>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/io/input_file.hpp"
#include "tessera/io/json_file.hpp"

#ifdef TESSERA_WITH_ARROW
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/util/byte_size.h>
#include <sys/mman.h>
#include <unistd.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#endif

namespace tessera::data {
namespace fs = std::filesystem;

namespace {

enum class FileFormat { arrow, parquet };

// The files of one split of the table data= names, in row order, and how to describe them.
struct TableFiles {
  FileFormat format = FileFormat::arrow;
  std::vector<fs::path> files;
  std::string kind;  // "datasets directory", "Parquet", ...
  fs::path root;     // where a relative image path is resolved
};

bool has_extension(const fs::path& p, std::string_view ext) { return p.extension() == ext; }

std::vector<fs::path> files_with(const fs::path& dir, std::string_view ext) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && has_extension(entry.path(), ext)) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The directories under `dir` (at most 6 levels down) that hold *.arrow files, sorted.
std::vector<fs::path> directories_with_arrow(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it.depth() >= 6) it.disable_recursion_pending();
    if (it->is_regular_file(ec) && has_extension(it->path(), ".arrow")) {
      const fs::path parent = it->path().parent_path();
      if (std::find(out.begin(), out.end(), parent) == out.end()) out.push_back(parent);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The '-'-separated words of a file's stem ("train-00000-of-00001-4e3a" -> train, 00000, of, 00001, 4e3a;
// "alpaca_2k_test-train" -> alpaca_2k_test, train): how the hub and load_dataset's cache name a split's files.
std::vector<std::string> stem_words(const fs::path& p) {
  std::vector<std::string> words;
  std::string stem = p.stem().string(), word;
  for (char c : stem) {
    if (c == '-') {
      words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  words.push_back(word);
  return words;
}

bool is_split_word(const std::string& w) {
  static const std::set<std::string> known = {"train", "validation", "valid", "val", "dev", "test", "eval"};
  return known.count(w) > 0;
}

// The files among `files` that belong to `split`: those whose name has it as a word when any file names a split,
// else all of them.
std::vector<fs::path> files_of_split(const std::vector<fs::path>& files, std::string_view split,
                                     const fs::path& data) {
  std::vector<fs::path> named;
  std::set<std::string> splits;
  for (const auto& f : files) {
    const auto words = stem_words(f);
    bool mine = false;
    for (const auto& w : words) {
      if (is_split_word(w)) splits.insert(w);
      if (w == split) mine = true;
    }
    if (mine) named.push_back(f);
  }
  if (!named.empty()) return named;
  if (splits.empty()) return files;
  std::string seen;
  for (const auto& s : splits) seen += (seen.empty() ? "" : ", ") + s;
  throw ConfigError("data=" + data.string() + ": no file of split '" + std::string(split) + "' (its files are of " +
                    seen + "); pick one with split=");
}

TableFiles find_table_files(const fs::path& data, std::string_view split) {
  std::error_code ec;
  if (fs::is_regular_file(data, ec)) {
    if (has_extension(data, ".parquet")) return {FileFormat::parquet, {data}, "Parquet file", data.parent_path()};
    if (has_extension(data, ".arrow")) return {FileFormat::arrow, {data}, "Arrow file", data.parent_path()};
  }
  if (!fs::is_directory(data, ec)) {
    throw ConfigError("data=" + data.string() + " is no datasets directory, Parquet or Arrow file");
  }
  if (fs::exists(data / "dataset_dict.json", ec)) {
    const auto dict = io::read_json_file(data / "dataset_dict.json", "a DatasetDict's dataset_dict.json");
    std::vector<std::string> splits;
    if (dict.contains("splits") && dict["splits"].is_array()) {
      for (const auto& s : dict["splits"]) {
        if (s.is_string()) splits.push_back(s.get<std::string>());
      }
    }
    if (std::find(splits.begin(), splits.end(), split) == splits.end()) {
      std::string listed;
      for (const auto& s : splits) listed += (listed.empty() ? "" : ", ") + s;
      throw ConfigError("data=" + data.string() + " is a DatasetDict without split '" + std::string(split) +
                        "' (dataset_dict.json lists: " + (listed.empty() ? "none" : listed) +
                        "); pick one with split=");
    }
    return find_table_files(data / std::string(split), split);
  }
  if (fs::exists(data / "state.json", ec)) {
    const fs::path state_path = data / "state.json";
    const auto state = io::read_json_file(state_path, "a datasets directory's state.json (Dataset.save_to_disk)");
    TableFiles out{FileFormat::arrow, {}, "datasets directory", data};
    if (!state.contains("_data_files") || !state["_data_files"].is_array() || state["_data_files"].empty()) {
      throw FormatError(state_path.string() + ": no \"_data_files\" list; the directory is not one "
                        "Dataset.save_to_disk wrote completely (save it again)");
    }
    for (const auto& entry : state["_data_files"]) {
      if (!entry.is_object() || !entry.contains("filename") || !entry["filename"].is_string()) {
        throw FormatError(state_path.string() + ": a \"_data_files\" entry without a \"filename\": " +
                          io::json_excerpt(entry));
      }
      const fs::path file = data / entry["filename"].get<std::string>();
      if (!fs::is_regular_file(file, ec)) {
        throw FormatError(state_path.string() + " names " + file.string() +
                          ", which is not there; the directory is incomplete (download or save it again)");
      }
      out.files.push_back(file);
    }
    return out;
  }
  if (auto arrow = files_with(data, ".arrow"); !arrow.empty()) {
    return {FileFormat::arrow, files_of_split(arrow, split, data), "directory of Arrow files", data};
  }
  auto parquet = files_with(data, ".parquet");
  if (parquet.empty() && fs::is_directory(data / "data", ec)) parquet = files_with(data / "data", ".parquet");
  if (!parquet.empty()) return {FileFormat::parquet, files_of_split(parquet, split, data), "Parquet directory", data};
  // load_dataset(..., cache_dir=data) keeps its Arrow files a few directories down
  // (NAME___REPO/default/0.0.0/HASH/): the one directory below that holds any.
  const auto holders = directories_with_arrow(data);
  if (holders.size() == 1) return find_table_files(holders.front(), split);
  if (holders.size() > 1) {
    std::string listed;
    for (std::size_t i = 0; i < holders.size() && i < 5; ++i) listed += (i ? ", " : "") + holders[i].string();
    throw ConfigError("data=" + data.string() + " holds Arrow files in " + std::to_string(holders.size()) +
                      " directories (" + listed + (holders.size() > 5 ? ", ..." : "") + "); point data= at one");
  }
  throw ConfigError("data=" + data.string() + " holds no state.json, dataset_dict.json, *.arrow or *.parquet");
}

std::string with_commas(std::int64_t n) {
  if (n < 0) return std::to_string(n);  // a damaged count, as it is
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

const char* kind_name(ColumnKind kind) {
  switch (kind) {
    case ColumnKind::text: return "text";
    case ColumnKind::integer: return "integer";
    case ColumnKind::image: return "image";
    case ColumnKind::other: break;
  }
  return "other";
}

}  // namespace

bool TableSource::recognizes(const fs::path& data) {
  std::error_code ec;
  if (fs::is_regular_file(data, ec)) return has_extension(data, ".parquet") || has_extension(data, ".arrow");
  if (!fs::is_directory(data, ec)) return false;
  return fs::exists(data / "dataset_dict.json", ec) || fs::exists(data / "state.json", ec) ||
         !files_with(data, ".arrow").empty() || !files_with(data, ".parquet").empty() ||
         (fs::is_directory(data / "data", ec) && !files_with(data / "data", ".parquet").empty()) ||
         !directories_with_arrow(data).empty();
}

#ifdef TESSERA_WITH_ARROW

namespace {

// A run of rows read as one record batch: an Arrow file's record batch, or a Parquet file's row group.
struct Chunk {
  std::size_t file = 0;
  int row_group = 0;              // Parquet
  std::int64_t start = 0;         // first row, across the files
  std::int64_t file_start = 0;    // first row, within its file
  std::int64_t rows = 0;
  std::shared_ptr<arrow::RecordBatch> batch;  // Arrow: a view of the mapping; Parquet: empty (decoded on demand)
};

[[noreturn]] void arrow_failed(const fs::path& file, const arrow::Status& status, std::string_view fix) {
  throw FormatError(file.string() + ": " + status.ToString() + "; " + std::string(fix));
}

template <class T>
T arrow_value(arrow::Result<T> result, const fs::path& file, std::string_view fix) {
  if (!result.ok()) arrow_failed(file, result.status(), fix);
  return std::move(result).ValueUnsafe();
}

ColumnKind kind_of(const arrow::DataType& type) {
  using arrow::Type;
  switch (type.id()) {
    case Type::STRING:
    case Type::LARGE_STRING:
    case Type::STRING_VIEW: return ColumnKind::text;
    case Type::INT8:
    case Type::INT16:
    case Type::INT32:
    case Type::INT64:
    case Type::UINT8:
    case Type::UINT16:
    case Type::UINT32:
    case Type::UINT64: return ColumnKind::integer;
    case Type::BINARY:
    case Type::LARGE_BINARY:
    case Type::BINARY_VIEW: return ColumnKind::image;
    case Type::STRUCT: {
      const auto& st = static_cast<const arrow::StructType&>(type);
      const auto bytes = st.GetFieldByName("bytes");
      if (bytes && kind_of(*bytes->type()) == ColumnKind::image) return ColumnKind::image;
      return ColumnKind::other;
    }
    default: return ColumnKind::other;
  }
}

std::string_view binary_view(const arrow::Array& array, std::int64_t i) {
  switch (array.type_id()) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY: return static_cast<const arrow::BinaryArray&>(array).GetView(i);
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY: return static_cast<const arrow::LargeBinaryArray&>(array).GetView(i);
    case arrow::Type::STRING_VIEW:
    case arrow::Type::BINARY_VIEW: return static_cast<const arrow::BinaryViewArray&>(array).GetView(i);
    default: return {};
  }
}

// An Arrow file's memory mapping: where it lies, so that the pages of an image read from it can be handed back.
struct Mapping {
  std::shared_ptr<arrow::Buffer> whole;  // the file's bytes, a view of the mapping (keeps it mapped)
  bool contains(const void* p, std::size_t n) const {
    const auto* b = reinterpret_cast<const std::uint8_t*>(whole->data());
    const auto* q = static_cast<const std::uint8_t*>(p);
    return q >= b && q + n <= b + whole->size();
  }
};

// Drops the whole pages of [p, p + n) from this process's resident set: they stay in the page cache, and a later
// read maps them again. Only for a read-only file mapping (on other memory MADV_DONTNEED would discard data).
void release_pages(const void* p, std::size_t n) {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Arrow files: one memory mapping each, read as an IPC stream (what datasets writes) or, failing that, an IPC file.
void add_arrow_file(const fs::path& path, std::size_t index, std::vector<Chunk>& chunks, std::int64_t& rows,
                    std::shared_ptr<arrow::Schema>& schema, std::vector<Mapping>& mappings) {
  constexpr std::string_view fix = "the file is truncated or was not written by datasets / Arrow (download it again)";
  auto file = arrow_value(arrow::io::MemoryMappedFile::Open(path.string(), arrow::io::FileMode::READ), path, fix);
  const std::int64_t size = arrow_value(file->GetSize(), path, fix);
  mappings.push_back({arrow_value(file->ReadAt(0, size), path, fix)});
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  std::shared_ptr<arrow::Schema> file_schema;
  auto stream = arrow::ipc::RecordBatchStreamReader::Open(file);
  if (stream.ok()) {
    file_schema = (*stream)->schema();
    batches = arrow_value((*stream)->ToRecordBatches(), path, fix);
  } else {
    auto ipc_file = arrow::ipc::RecordBatchFileReader::Open(file);
    if (!ipc_file.ok()) arrow_failed(path, stream.status(), fix);
    file_schema = (*ipc_file)->schema();
    batches = arrow_value((*ipc_file)->ToRecordBatches(), path, fix);
  }
  if (!schema) {
    schema = file_schema;
  } else if (!schema->Equals(*file_schema, /*check_metadata=*/false)) {
    throw FormatError(path.string() + ": its columns (" + file_schema->ToString() +
                      ") differ from the first file's (" + schema->ToString() + "); one table's files share them");
  }
  std::int64_t file_rows = 0;
  for (auto& batch : batches) {
    if (batch->num_rows() == 0) continue;
    // A damaged body (offsets past the buffers, invalid UTF-8 in a string column) must be an error here, not a read
    // out of bounds later. This reads the offsets and the strings, not the images' bytes.
    if (auto st = batch->ValidateFull(); !st.ok()) arrow_failed(path, st, fix);
    chunks.push_back({index, 0, rows, file_rows, batch->num_rows(), batch});
    rows += batch->num_rows();
    file_rows += batch->num_rows();
  }
}

struct ParquetFile {
  std::unique_ptr<parquet::arrow::FileReader> reader;
};

// Decoded row groups are kept up to this many bytes (and at least two).
constexpr std::int64_t kDecodedBytes = std::int64_t{512} << 20;
// The most a row group's rows may take at their fewest bytes (below): the reader allocates for every row its footer
// claims before it reads a page (levels, offsets, validity, values; several times this), so a damaged count must be
// refused from the footer. Row groups as datasets and pyarrow write them (at most 100 MB; 1,048,576 rows) are below.
constexpr std::int64_t kRowGroupBytes = std::int64_t{128} << 20;

// The fewest bytes one row of `type` decodes to in Arrow: its fixed width, or the offset of a string or list (whose
// values may be empty), the children of a struct; at least one byte (a validity bit and the reader's levels).
std::int64_t min_row_bytes(const arrow::DataType& type) {
  std::int64_t bytes = 0;
  if (type.id() == arrow::Type::STRUCT) {
    for (const auto& child : type.fields()) bytes += min_row_bytes(*child->type());
  } else if (const auto* fixed = dynamic_cast<const arrow::FixedWidthType*>(&type)) {
    bytes = fixed->bit_width() / 8;
  } else if (arrow::is_large_binary_like(type.id()) || type.id() == arrow::Type::LARGE_LIST) {
    bytes = 8;
  } else {
    bytes = 4;
  }
  return std::max<std::int64_t>(bytes, 1);
}

void add_parquet_file(const fs::path& path, std::size_t index, std::vector<Chunk>& chunks, std::int64_t& rows,
                      std::shared_ptr<arrow::Schema>& schema, std::vector<ParquetFile>& readers) {
  constexpr std::string_view fix = "the file is truncated or not Parquet (download it again)";
  auto file = arrow_value(arrow::io::ReadableFile::Open(path.string()), path, fix);
  std::unique_ptr<parquet::arrow::FileReader> reader;
  try {
    reader = arrow_value(parquet::arrow::OpenFile(file, arrow::default_memory_pool()), path, fix);
  } catch (const parquet::ParquetException& e) {
    throw FormatError(path.string() + ": " + e.what() + "; " + std::string(fix));
  }
  std::shared_ptr<arrow::Schema> file_schema;
  if (auto st = reader->GetSchema(&file_schema); !st.ok()) arrow_failed(path, st, fix);
  if (!schema) {
    schema = file_schema;
  } else if (!schema->Equals(*file_schema, /*check_metadata=*/false)) {
    throw FormatError(path.string() + ": its columns (" + file_schema->ToString() +
                      ") differ from the first file's (" + schema->ToString() + "); one table's files share them");
  }
  const auto metadata = reader->parquet_reader()->metadata();
  // Rows are found by the row groups' counts, and a row group is decoded whole: a count over kRowGroupBytes (a
  // damaged footer claiming 10^11 rows) or one that disagrees with the file's is refused before anything is allocated.
  std::int64_t row_bytes = 0;
  for (const auto& field : file_schema->fields()) row_bytes += min_row_bytes(*field->type());
  std::int64_t claimed = 0;
  for (int g = 0; g < metadata->num_row_groups(); ++g) {
    const std::int64_t n = metadata->RowGroup(g)->num_rows();
    if (const std::int64_t most = kRowGroupBytes / std::max<std::int64_t>(row_bytes, 1); n < 0 || n > most) {
      throw FormatError(path.string() + ": row group " + std::to_string(g) + " claims " + with_commas(n) +
                        " rows, more than tessera decodes at once (" + with_commas(most) + " rows of these columns, " +
                        std::to_string(kRowGroupBytes >> 20) + " MiB at their " + std::to_string(row_bytes) +
                        " fixed bytes a row); if the file is whole, write it again with smaller row groups " +
                        "(pyarrow.parquet.write_table(..., row_group_size=))");
    }
    claimed += n;
  }
  if (claimed != metadata->num_rows()) {
    throw FormatError(path.string() + ": its row groups hold " + with_commas(claimed) + " rows, its footer says " +
                      with_commas(metadata->num_rows()) + "; " + std::string(fix));
  }
  std::int64_t file_rows = 0;
  for (int g = 0; g < metadata->num_row_groups(); ++g) {
    const std::int64_t n = metadata->RowGroup(g)->num_rows();
    if (n == 0) continue;
    chunks.push_back({index, g, rows, file_rows, n, nullptr});
    rows += n;
    file_rows += n;
  }
  readers.push_back({std::move(reader)});
}

}  // namespace

struct TableSource::Impl {
  TableFiles files;
  std::vector<Chunk> chunks;
  std::vector<ParquetFile> parquet;  // one reader per file (Parquet tables)
  std::vector<Mapping> mappings;     // one per file (Arrow tables)
  std::shared_ptr<arrow::Schema> schema;
  std::vector<TableColumn> columns;
  std::int64_t rows = 0;
  std::string description;
  // Decoded row groups, most recent first, up to kDecodedBytes of them (and at least two): rows read in order decode
  // each group once; a shuffled order over a table larger than that decodes a group again on each miss.
  mutable std::mutex mutex;
  mutable std::list<std::pair<std::size_t, std::shared_ptr<arrow::RecordBatch>>> cache;
  mutable std::int64_t cache_bytes = 0;

  std::size_t chunk_of(std::int64_t row) const {
    if (row < 0 || row >= rows) {
      throw ConfigError("row " + std::to_string(row) + " of " + description + " is out of range (" +
                        std::to_string(rows) + " rows)");
    }
    auto it = std::upper_bound(chunks.begin(), chunks.end(), row,
                               [](std::int64_t r, const Chunk& c) { return r < c.start; });
    return static_cast<std::size_t>(std::prev(it) - chunks.begin());
  }

  std::shared_ptr<arrow::RecordBatch> batch(std::size_t c) const {
    const Chunk& chunk = chunks[c];
    if (chunk.batch) return chunk.batch;
    std::lock_guard lock(mutex);
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it->first == c) {
        cache.splice(cache.begin(), cache, it);
        return it->second;
      }
    }
    const fs::path& path = files.files[chunk.file];
    constexpr std::string_view fix = "the file is damaged (download it again)";
    std::shared_ptr<arrow::Table> table;
    try {
      table = arrow_value(parquet[chunk.file].reader->ReadRowGroup(chunk.row_group), path, fix);
    } catch (const parquet::ParquetException& e) {
      throw FormatError(path.string() + " row group " + std::to_string(chunk.row_group) + ": " + e.what() + "; " +
                        std::string(fix));
    }
    auto decoded = arrow_value(table->CombineChunksToBatch(), path, fix);
    if (auto st = decoded->ValidateFull(); !st.ok()) arrow_failed(path, st, fix);
    if (decoded->num_rows() != chunk.rows) {  // rows are found by the metadata's counts: they must hold
      throw FormatError(path.string() + " row group " + std::to_string(chunk.row_group) + ": " +
                        std::to_string(decoded->num_rows()) + " rows decoded where its metadata says " +
                        std::to_string(chunk.rows) + "; " + std::string(fix));
    }
    cache.emplace_front(c, decoded);
    cache_bytes += arrow::util::TotalBufferSize(*decoded);
    while (cache.size() > 2 && cache_bytes > kDecodedBytes) {
      cache_bytes -= arrow::util::TotalBufferSize(*cache.back().second);
      cache.pop_back();
    }
    return decoded;
  }

  // The column's array holding `row`, and the row's index in it.
  std::pair<std::shared_ptr<arrow::Array>, std::int64_t> cell(std::int64_t row, std::size_t column,
                                                              const TableSource& self) const {
    const std::size_t c = chunk_of(row);
    auto array = batch(c)->column(static_cast<int>(column));
    const std::int64_t i = row - chunks[c].start;
    if (array->IsNull(i)) throw FormatError(self.where(row, column) + " is null; tessera needs a value in every row");
    return {std::move(array), i};
  }
};

TableSource::TableSource(const fs::path& data, std::string_view split) : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.files = find_table_files(data, split);
  for (std::size_t i = 0; i < m.files.files.size(); ++i) {
    if (m.files.format == FileFormat::arrow) {
      add_arrow_file(m.files.files[i], i, m.chunks, m.rows, m.schema, m.mappings);
    } else {
      add_parquet_file(m.files.files[i], i, m.chunks, m.rows, m.schema, m.parquet);
    }
  }
  if (m.rows == 0) throw ConfigError("data=" + data.string() + " has no rows (" + m.files.kind + ")");
  for (const auto& field : m.schema->fields()) {
    m.columns.push_back({field->name(), kind_of(*field->type()), field->type()->ToString()});
  }
  const std::size_t n = m.files.files.size();
  m.description = m.files.kind + " " + data.string() + " (split " + std::string(split) + ", " + std::to_string(n) +
                  (m.files.format == FileFormat::arrow ? " Arrow file" : " Parquet file") + (n == 1 ? "" : "s") +
                  ", " + with_commas(m.rows) + " rows)";
}

std::int64_t TableSource::rows() const { return impl_->rows; }

std::string TableSource::text(std::int64_t row, std::size_t column) const {
  auto [array, i] = impl_->cell(row, column, *this);
  return std::string(binary_view(*array, i));
}

std::int64_t TableSource::integer(std::int64_t row, std::size_t column) const {
  auto [array, i] = impl_->cell(row, column, *this);
  auto scalar = arrow_value(array->GetScalar(i), impl_->files.files[0], "");
  auto as_int64 = scalar->CastTo(arrow::int64());
  if (!as_int64.ok()) {
    throw FormatError(where(row, column) + ": " + scalar->ToString() + " does not fit a 64-bit integer");
  }
  return static_cast<const arrow::Int64Scalar&>(**as_int64).value;
}

std::vector<std::uint8_t> TableSource::image_bytes(std::int64_t row, std::size_t column) const {
  auto [array, i] = impl_->cell(row, column, *this);
  std::string_view bytes;
  std::string path;
  if (array->type_id() == arrow::Type::STRUCT) {
    const auto& st = static_cast<const arrow::StructArray&>(*array);
    const auto bytes_field = st.GetFieldByName("bytes");
    if (!bytes_field->IsNull(i)) bytes = binary_view(*bytes_field, i);
    const auto path_field = st.GetFieldByName("path");
    if (bytes.empty() && path_field && !path_field->IsNull(i) && kind_of(*path_field->type()) == ColumnKind::text) {
      path = std::string(binary_view(*path_field, i));
    }
  } else {
    bytes = binary_view(*array, i);
  }
  if (!bytes.empty()) {
    std::vector<std::uint8_t> out(bytes.begin(), bytes.end());
    // An image in a memory-mapped Arrow file is read once per epoch: its pages leave the resident set once copied,
    // so that reading a data set larger than memory keeps the process's RSS at what it is using.
    if (!impl_->mappings.empty()) {
      const Mapping& mapping = impl_->mappings[impl_->chunks[impl_->chunk_of(row)].file];
      if (mapping.contains(bytes.data(), bytes.size())) release_pages(bytes.data(), bytes.size());
    }
    return out;
  }
  if (path.empty()) throw FormatError(where(row, column) + " holds neither the image's bytes nor its path");
  fs::path file(path);
  if (file.is_relative()) file = impl_->files.root / file;
  io::InputFile in(file);  // a FIFO or device refused, without blocking
  if (!in.is_open()) {
    throw FormatError(where(row, column) + " names the image " + file.string() + ", which cannot be read (" +
                      in.problem() + "); save the data set with its images embedded, or put the file there");
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

#else  // without Arrow

struct TableSource::Impl {
  std::vector<TableColumn> columns;
  std::string description;
};

TableSource::TableSource(const fs::path& data, std::string_view split) {
  find_table_files(data, split);  // a wrong data= or split= is named first
  throw ConfigError("data=" + data.string() + " is a table (a datasets directory or Parquet), and this tessera was "
                    "built without Apache Arrow (TESSERA_ARROW=OFF); configure with -DTESSERA_ARROW=ON (it reads "
                    "them with the pyarrow wheel's Arrow C++)");
}

std::int64_t TableSource::rows() const { return 0; }
std::string TableSource::text(std::int64_t, std::size_t) const { return {}; }
std::int64_t TableSource::integer(std::int64_t, std::size_t) const { return 0; }
std::vector<std::uint8_t> TableSource::image_bytes(std::int64_t, std::size_t) const { return {}; }

#endif

TableSource::~TableSource() = default;
TableSource::TableSource(TableSource&&) noexcept = default;
TableSource& TableSource::operator=(TableSource&&) noexcept = default;

const std::vector<TableColumn>& TableSource::columns() const { return impl_->columns; }
const std::string& TableSource::description() const { return impl_->description; }

bool TableSource::has_column(std::string_view name) const {
  return std::any_of(columns().begin(), columns().end(), [&](const TableColumn& c) { return c.name == name; });
}

std::size_t TableSource::column(std::string_view name, ColumnKind kind, std::string_view key) const {
  std::string listed;
  for (std::size_t i = 0; i < columns().size(); ++i) {
    const auto& c = columns()[i];
    if (c.name == name) {
      if (c.kind == kind) return i;
      throw ConfigError(description() + ": column '" + c.name + "' is " + c.type + ", not " + kind_name(kind) +
                        "; name the " + kind_name(kind) + " column with " + std::string(key) + "=");
    }
    listed += (listed.empty() ? "" : ", ") + c.name + " (" + kind_name(c.kind) + ": " + c.type + ")";
  }
  throw ConfigError(description() + " has no column '" + std::string(name) + "' (" + std::string(key) + "=" +
                    std::string(name) + "); its columns: " + listed + "; name the " + kind_name(kind) +
                    " column with " + std::string(key) + "=");
}

std::string TableSource::where(std::int64_t row, std::size_t column) const {
#ifdef TESSERA_WITH_ARROW
  const auto& m = *impl_;
  const auto& chunk = m.chunks[m.chunk_of(row)];
  return m.files.files[chunk.file].string() + " row " + std::to_string(row - chunk.start + chunk.file_start) +
         " column '" + columns()[column].name + "'";
#else
  return "row " + std::to_string(row) + " column " + std::to_string(column);
#endif
}

}  // namespace tessera::data
