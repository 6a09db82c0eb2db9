#pragma once
// defines: tessera::data::TableSource, the rows of a table on disk as the labs' data sets ship, read with Apache
// Arrow C++ (the pyarrow wheel's): what data= points at decides the reader.
//   a `datasets` directory            Dataset.save_to_disk's: state.json naming its data-*.arrow files (Arrow IPC
//                                     stream format), dataset_info.json beside them
//   a `DatasetDict` directory         DatasetDict.save_to_disk's: dataset_dict.json and one such directory per split;
//                                     `split` picks one (train, validation, test, ...)
//   a directory of *.arrow files      the `datasets` cache of load_dataset (NAME-SPLIT.arrow, NAME-SPLIT-00000-of-
//                                     00002.arrow, ...): the files of `split`; or a load_dataset cache_dir, whose
//                                     one directory of them lies a few levels down (NAME___REPO/default/0.0.0/HASH)
//   a Parquet file, or a directory    *.parquet, in file-name order; in a directory with split-named files
//   of them                           (train-00000-of-00001.parquet, data/train-*.parquet) the files of `split`
// Rows are numbered across the files in order. Arrow files are memory-mapped (a record batch's columns are views of
// the mapping, read from disk when a row is touched); Parquet row groups are decoded when a row of theirs is asked
// for, the most recent kept up to 512 MiB: neither reads a data set into memory whole. (A shuffled order over a
// Parquet table larger than that decodes a row group once per row it misses: an Arrow copy reads faster.)
//
// Columns, by their Arrow type:
//   text     string, large_string, string_view
//   integer  int8 .. int64, uint8 .. uint32 (a ClassLabel is an int64 column)
//   image    struct<bytes: binary, path: string> (datasets' Image feature: the file's bytes, or null bytes and the
//            path of a file, relative to the table's directory when not absolute), or plain binary
// Errors: ConfigError naming data= when it is no table or the split is not there (listing the splits there are);
// FormatError naming the file for one Arrow or Parquet cannot read (truncated, not Arrow, a schema that differs from
// the first file's); ConfigError listing the table's columns and their types for a column that is missing or of
// another kind; FormatError naming the file, the row and the column for a null value.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::data {

enum class ColumnKind { text, integer, image, other };

struct TableColumn {
  std::string name;
  ColumnKind kind = ColumnKind::other;
  std::string type;  // Arrow's name of the type, e.g. "struct<bytes: binary, path: string>"
};

class TableSource {
 public:
  // Whether data= names a table TableSource reads (by the files it holds, without opening them), rather than one
  // of tessera's own layouts (data/caption_batches.hpp, ...).
  static bool recognizes(const std::filesystem::path& data);

  // ConfigError when tessera was built without Arrow (TESSERA_ARROW=OFF), naming the rebuild.
  TableSource(const std::filesystem::path& data, std::string_view split);
  ~TableSource();
  TableSource(TableSource&&) noexcept;
  TableSource& operator=(TableSource&&) noexcept;

  std::int64_t rows() const;
  const std::vector<TableColumn>& columns() const;
  // The index of column `name`, which must be of `kind`; `key` is the run-config key that names it (text_column,
  // ...), so that the error can say how to pick another.
  std::size_t column(std::string_view name, ColumnKind kind, std::string_view key) const;
  // Whether the table has a column `name` (of any kind).
  bool has_column(std::string_view name) const;

  std::string text(std::int64_t row, std::size_t column) const;
  std::int64_t integer(std::int64_t row, std::size_t column) const;
  // An image column's encoded file (PNG, JPEG, ...): its bytes, or the file its path names.
  std::vector<std::uint8_t> image_bytes(std::int64_t row, std::size_t column) const;

  // "FILE row R column 'NAME'" (R the row within FILE), for errors about one value.
  std::string where(std::int64_t row, std::size_t column) const;
  // e.g. "datasets directory data/gourmetgram_caption (split train, 1 Arrow file, 1,000 rows)".
  const std::string& description() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::data
