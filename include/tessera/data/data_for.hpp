#pragma once
// defines: DataFor<Batch>, the data class a family's batch type takes. Each is built as
// type(RunConfig, Model::data_spec(config), world_size) and gives batch(step, micro, rank, device), total_steps(),
// steps_per_epoch(), tokens_per_step() and description().
#include "tessera/data/caption_batches.hpp"
#include "tessera/data/image_batches.hpp"
#include "tessera/data/seq2seq_batches.hpp"
#include "tessera/data/token_batches.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera::data {

template <class Batch>
struct DataFor {
  static_assert(sizeof(Batch) == 0, "tessera: no data source reads this family's Batch type; families use "
                                    "models::TokenBatch (data/token_batches.hpp), models::ImageBatch "
                                    "(data/image_batches.hpp), models::Seq2SeqBatch (data/seq2seq_batches.hpp) or "
                                    "models::CaptionBatch (data/caption_batches.hpp)");
};
template <>
struct DataFor<models::TokenBatch> {
  using type = TokenBatches;
};
template <>
struct DataFor<models::ImageBatch> {
  using type = ImageBatches;
};
template <>
struct DataFor<models::Seq2SeqBatch> {
  using type = Seq2SeqBatches;
};
template <>
struct DataFor<models::CaptionBatch> {
  using type = CaptionBatches;
};

}  // namespace tessera::data
