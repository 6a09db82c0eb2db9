// Fuzz target: the table readers (data/table_source.hpp): the input as an Arrow IPC file (what Dataset.save_to_disk
// writes) and as a Parquet file, every value of every column read by its kind. The Arrow and Parquet libraries
// themselves are the pyarrow wheel's (uninstrumented); what is fuzzed is tessera's use of them: a reader that
// returns or throws tessera::Error, never a crash or an out-of-bounds read on a damaged file.
#include "fuzz_support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/table_source.hpp"

namespace {

void read_all(const std::filesystem::path& file) {
  using tessera::data::ColumnKind;
  try {
    const tessera::data::TableSource table(file, "train");
    for (std::size_t c = 0; c < table.columns().size(); ++c) {
      const ColumnKind kind = table.columns()[c].kind;
      for (std::int64_t r = 0; r < table.rows() && r < 64; ++r) {
        try {
          if (kind == ColumnKind::text) (void)table.text(r, c);
          if (kind == ColumnKind::integer) (void)table.integer(r, c);
          if (kind == ColumnKind::image) (void)table.image_bytes(r, c);
        } catch (const tessera::Error&) {
        }
      }
    }
  } catch (const tessera::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path dir = tessera::fuzz::work_dir() / "table";
  read_all(tessera::fuzz::write_file(dir / "data.arrow", data, size));
  read_all(tessera::fuzz::write_file(dir / "data.parquet", data, size));
  return 0;
}
