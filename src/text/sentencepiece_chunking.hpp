#pragma once
// defines: detail::sentencepiece_chunk_problem, whether libsentencepiece gives a long text the ids of its chunks cut
// as text/chunks.hpp cuts them, read from the serialized ModelProto (Debian's libsentencepiece-dev installs no
// sentencepiece_model.pb.h, so the few fields needed are read from the protobuf wire format here).
#include <string>
#include <string_view>

namespace tessera::text::detail {

// "" when, for every cut c of a text t, encode(t) == encode(t[0, c)) + encode(t[c + 1, end)): the space at c left
// out, the dummy prefix of the second part standing for it. Else why not, in a phrase ("a unigram model, ...").
std::string sentencepiece_chunk_problem(std::string_view model_proto);

}  // namespace tessera::text::detail
