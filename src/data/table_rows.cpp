// implements: TableRows (data/table_rows.hpp).
#include "tessera/data/table_rows.hpp"

#include "tessera/data/lab_order.hpp"

namespace tessera::data {

TableRows TableRows::open(const RunConfig& cfg) {
  TableRows out{std::make_shared<const TableSource>(cfg.data, cfg.split), {}, cfg.shuffle_seed, 0.0, cfg.seed};
  if (cfg.shuffle_seed >= 0) {
    out.order = numpy_permutation(static_cast<std::uint64_t>(cfg.shuffle_seed), out.table->rows());
  }
  if (cfg.val_split_fraction > 0) {
    // train_test_split(test_size=F, seed=seed)["train"] of the (shuffled) rows: the train indices, in their order.
    auto split = numpy_train_test_split(out.size(), cfg.val_split_fraction, static_cast<std::uint64_t>(cfg.seed));
    for (auto& r : split.train) r = out.row(r);
    out.order = std::move(split.train);
    out.val_split_fraction = cfg.val_split_fraction;
  }
  return out;
}

std::string TableRows::description() const {
  std::string out = table->description();
  if (shuffle_seed >= 0) out += ", shuffled as Dataset.shuffle(seed=" + std::to_string(shuffle_seed) + ")";
  if (val_split_fraction > 0)
    out += ", train_test_split(test_size=" + tessera::detail::format_value(val_split_fraction) + ", seed=" +
           std::to_string(split_seed) + ")'s " + std::to_string(size()) + " train rows";
  return out;
}

}  // namespace tessera::data
