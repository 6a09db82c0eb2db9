#pragma once
// defines: the row orders the Python labs use, reproduced bit for bit so that a tessera run can read its rows in the
// order a lab's script would (tests/reference/check_lab_order.py compares them with the libraries themselves):
//   numpy_permutation            numpy.random.default_rng(seed).permutation(n)          (numpy 2.3.5)
//                                = datasets.Dataset.shuffle(seed=seed)'s row order      (datasets 5.2.0)
//   numpy_train_test_split       datasets.Dataset.train_test_split(test_size, seed=seed)'s row indices
//   torch_randperm               torch.randperm(n, generator=torch.Generator().manual_seed(seed))   (torch 2.11)
//   TorchShuffledEpochs,         torch.utils.data.DataLoader(ds, batch_size, shuffle=True,
//   dataloader_epoch_order           generator=torch.Generator().manual_seed(seed), drop_last), epoch by epoch
//   distributed_sampler_indices  torch.utils.data.DistributedSampler(ds, W, rank, shuffle, seed, drop_last) after
//                                set_epoch(epoch)
// Every vector holds dataset row indices in [0, n), in the order the library yields them. Every function throws
// ConfigError, naming the value and the fix, for arguments the library would refuse or that give nothing to read.
//
// Where litgpt 0.5.7 uses them: Alpaca2k (litgpt/data/alpaca_2k.py) splits its 2,000 rows with
// datasets' train_test_split(test_size=val_split_fraction=0.05, seed=42): numpy_train_test_split(2000, 0.05, 42)
// (100 test rows, 1,900 train rows). Its train_dataloader, inherited from Alpaca (litgpt/data/alpaca.py), is
// DataLoader(train rows, shuffle=True, generator=torch.Generator().manual_seed(42)): TorchShuffledEpochs on one
// device, over positions in the train split (row train[k] for position k). (Alpaca itself splits with torch's
// random_split, which is not reproduced here.)
#include <ATen/core/Generator.h>

#include <cstdint>
#include <vector>

namespace tessera::data {

// numpy.random.default_rng(seed).permutation(n): SeedSequence(seed) (pool of 4 uint32 words) -> PCG64 (XSL-RR
// 128/64) state, then numpy's Fisher-Yates shuffle of arange(n) from the last element down, each swap partner drawn
// in [0, i] by masked rejection (random_interval: 32-bit draws, two per 64-bit output, while i < 2^32).
// (n,) ; n = 0 gives an empty vector, as numpy does. Every uint64 seed is one numpy accepts.
std::vector<std::int64_t> numpy_permutation(std::uint64_t seed, std::int64_t n);

// datasets.Dataset.train_test_split(test_size=test_size, seed=seed) (shuffle=True, no train_size) on n rows:
// n_test = ceil(test_size * n) (in double, as Python computes it), n_train = n - n_test; with
// p = numpy_permutation(seed, n), test = p[0, n_test) and train = p[n_test, n). ConfigError for test_size outside
// (0, 1), and where a split would be empty (n = 0, which datasets passes through as two empty splits, or
// n_test = n, which it refuses).
struct TrainTestSplit {
  std::vector<std::int64_t> train;  // (n - n_test,)
  std::vector<std::int64_t> test;   // (n_test,)
};
TrainTestSplit numpy_train_test_split(std::int64_t n, double test_size, std::uint64_t seed);

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)), through LibTorch's own at::randperm on a CPU
// generator. (n,). torch's CPU generator is an mt19937 seeded with the seed's low 32 bits, so seeds that differ
// only above bit 31 give the same permutation (torch does the same).
std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed);

// A DataLoader(ds of n rows, batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed), drop_last,
// num_workers=0) iterated to the end once per epoch. Each epoch's iterator first draws its _base_seed from the
// generator (random_ on an int64 scalar), then RandomSampler draws randperm(n); running to its end, the sampler then
// draws a second randperm(n) whose first num_samples % n = 0 rows it yields, so that one is drawn and discarded too.
// The generator's state carries from epoch to epoch. (An epoch left before its end draws less: not modelled.)
class TorchShuffledEpochs {
 public:
  // ConfigError for n < 1 (RandomSampler refuses an empty dataset) or batch_size < 1.
  TorchShuffledEpochs(std::int64_t n, std::uint64_t seed, std::int64_t batch_size, bool drop_last);

  // The rows of the next epoch in the order the batches hold them: (n,), or (floor(n / batch_size) * batch_size,)
  // with drop_last.
  std::vector<std::int64_t> next_epoch();
  // How many epochs next_epoch has returned.
  std::int64_t epochs_done() const { return epochs_done_; }

 private:
  std::int64_t n_, batch_size_;
  bool drop_last_;
  std::int64_t epochs_done_ = 0;
  at::Generator generator_;
};

// Epoch `epoch` (0-based) of TorchShuffledEpochs(n, seed, batch_size, drop_last): epochs 0 .. epoch-1 are drawn and
// dropped, so this costs epoch+1 epochs' draws. ConfigError also for epoch < 0.
std::vector<std::int64_t> dataloader_epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                                 std::int64_t batch_size = 1, bool drop_last = false);

// list(DistributedSampler(ds of n rows, num_replicas=world_size, rank=rank, shuffle, seed, drop_last)) after
// set_epoch(epoch). The global order is randperm(n) from a generator seeded seed + epoch (shuffle) or 0..n-1; without
// drop_last it is padded to total = ceil(n / W) * W by repeating it from its start (more than once where the padding
// exceeds n), with drop_last it is cut to total = floor(n / W) * W; rank r takes positions r, r + W, ... < total.
// (total / W,). ConfigError for n < 0, world_size < 1, rank outside [0, world_size), epoch < 0, or
// seed + epoch > 2^64 - 1 (torch's manual_seed refuses it).
std::vector<std::int64_t> distributed_sampler_indices(std::int64_t n, std::int64_t world_size, std::int64_t rank,
                                                      std::uint64_t seed, std::int64_t epoch, bool shuffle,
                                                      bool drop_last);

}  // namespace tessera::data
