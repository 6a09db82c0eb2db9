#pragma once
// defines: the units that the wrap_blocks and checkpoint_blocks settings name, read once against the family's
// units (models/family_parts.hpp), as Lightning's auto_wrap_policy={...} and activation_checkpointing_policy={...}
// name module classes.
//   checkpointed_blocks  checkpoint_blocks=all|T1,T2,...: the block units the checkpoint policy counts
//   wrapped_units        wrap_blocks=all|none|T1,name,...: the units that are FSDP units of their own; the others
//                        are the root unit (UnitEngine's `wrapped`)
//   frozen_units         freeze=none|M1,M2,...: the units under the named modules (a unit is under M when its
//                        module path is M or starts with "M."), never trained
// A name is a block type ("LlamaDecoderLayer") or, for wrap_blocks, a module path matched as PEFT's
// target_modules ("embed_tokens" names "model.embed_tokens"). A name that matches nothing is a ConfigError that
// lists what the family has.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/models/family_parts.hpp"

namespace tessera {

// family: the family's name, for messages. Result: one flag per unit.
std::vector<bool> checkpointed_blocks(const std::string& setting, std::span<const models::UnitInfo> units,
                                      std::string_view family);
std::vector<bool> wrapped_units(const std::string& setting, std::span<const models::UnitInfo> units,
                                std::string_view family);
// Also ConfigError when the names freeze every unit (nothing would train).
std::vector<bool> frozen_units(const std::string& setting, std::span<const models::UnitInfo> units,
                               std::string_view family);

}  // namespace tessera
