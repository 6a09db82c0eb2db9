#pragma once
// defines: tessera::data::TableRows, the table data= names (data/table_source.hpp) in the order a run reads it: the
// labs' Dataset.shuffle(seed=shuffle_seed) applied (numpy's permutation, data/lab_order.hpp), so that dataset row r
// is table row row(r); with val_split_fraction=F > 0, only the train rows of train_test_split(test_size=F,
// seed=seed) of those, in that split's order (litgpt's Alpaca2k: F = 0.05, seed 42); num_train_samples then takes
// rows [0, N) (RowOrder), as .select(range(N)) does.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/data/table_source.hpp"

namespace tessera::data {

struct TableRows {
  std::shared_ptr<const TableSource> table;
  std::vector<std::int64_t> order;  // empty: the table's own order
  std::int64_t shuffle_seed = -1;
  double val_split_fraction = 0.0;  // > 0: the train rows of train_test_split(test_size=F, seed=split_seed)
  std::int64_t split_seed = 0;

  // Opens cfg.data (cfg.split); ConfigError / FormatError as TableSource.
  static TableRows open(const RunConfig& cfg);
  std::int64_t size() const { return order.empty() ? table->rows() : static_cast<std::int64_t>(order.size()); }
  std::int64_t row(std::int64_t r) const { return order.empty() ? r : order[static_cast<std::size_t>(r)]; }
  // e.g. "datasets directory d (split train, 1 Arrow file, 1,000 rows), shuffled with seed 42".
  std::string description() const;
};

}  // namespace tessera::data
