/// @brief KernelCache: verified kernels and tuning outcomes per GPU fingerprint, in RocksDB on disk.
///
/// Note [Cache layout]
/// Keys (all under one RocksDB directory, default $XDG_CACHE_HOME/cudal1):
///   f/<fp-key>               -> the fingerprint's JSON (for `cudal1 cache ls`)
///   k/<fp-key>/<signature>   -> a KernelEntry record (a winner with its cubin, or a "no winner" outcome)
///   p/<fp-key>/<name>        -> optimizer state of one fingerprint, e.g. a transfer allowance (JSON)
///   a/sm<NN>/<name>          -> optimizer state of a GPU architecture, whatever the software stack: the learned
///                               policies (Note [Contrastive policy]), which an upgrade of the driver, torch or
///                               cudal1 should not discard; their names carry what they depend on
///   r/<run-id>               -> a run's profile report (JSON), newest runs kept
/// A record is "CL1E" | format version (u32) | xxh3 of payload (u64) | CBOR payload. A record is used only
/// when magic, format, checksum, the fingerprint's canonical text and the signature all match what was
/// asked for; anything else is reported as Corrupt/Mismatch and ignored by callers (with a warning).
///
/// Note [Generator versions]
/// The fingerprint names the card and the software stack (driver, CUDA, NVRTC, torch, cudal1, record format); each
/// record names the generator version of its own family (Family::version(), kChainGeneratorVersion for chains).
/// A record whose family's generator has moved on since is *stale*: the runtime does not serve it (the signature
/// tunes again in tune mode and the new outcome replaces it; serve mode leaves it on ATen), `cudal1 cache verify`
/// lists it and `repair` drops it. So bumping one family's version invalidates that family's records only.
///
/// Note [Cache processes]
/// RocksDB lets one process at a time open a directory for writing. Apps run as several processes (one per
/// GPU), so a KernelCache never keeps the database open: reads open it read-only, writes open it read-write
/// for one atomic, synced WriteBatch and close it again, retrying while another process holds the lock.
///
/// Note [Cache healing]
/// A cache must never make an app worse than no cache. heal() (the runtime calls it before it first reads the
/// cache) opens the database for writing and reads every record with its checksums; a database that fails
/// (flipped bytes in a table, a truncated manifest, a garbage CURRENT, a file where the directory should be) is
/// renamed to `<dir>.corrupt-<UTC time>`, kept for inspection, and a fresh one is created: the app tunes anew
/// instead of logging "unreadable" forever. A lock another process holds, or a directory this process may not
/// write, is not corruption: heal() leaves it and says so. verify() checks every record (codec, checksum,
/// fingerprint and signature against the key, sane outcome fields, and through a caller's check that a kernel's
/// code loads on this GPU); drop() deletes the records it names (`cudal1 cache verify` / `cudal1 cache repair`).
///
/// Note [Cache bundles]
/// A fleet tunes once per GPU model and ships the outcome: export_bundle writes one fingerprint's records to one
/// file, "CL1B" | bundle format (u32) | xxh3 of the payload (u64) | CBOR payload (cudal1 version, time, the
/// fingerprint's JSON and key, each record as its stored bytes). The file is written beside its path and renamed,
/// so it appears whole or not at all. import_bundle checks magic, format and checksum, then every record
/// against the bundle's fingerprint exactly as a cache read does, and merges the sound ones in one batch; a
/// record already present is kept unless told to overwrite. Records stay under the bundle's fingerprint: a node
/// serves them when its own fingerprint is the same (same GPU model, driver, CUDA, NVRTC, torch, cudal1 and
/// generators), as an image-based fleet has.
///
/// Note [Cache transfer]
/// Records serve only the fingerprint they were tuned under, unless told otherwise: `cudal1 cache import BUNDLE
/// --allow driver,torch` also stores an *allowance* for the bundle's fingerprint (state "transfer": the fields
/// that may differ). A process whose own fingerprint differs from an allowed one in those fields alone (never in
/// the GPU model, SM count or record format: transfer_check) may use that fingerprint's records, each kernel
/// verified against ATen on this machine before its first call is served (attach_cached), and its own records
/// first. Chain kernels do not transfer (they tune again here). So a fleet whose nodes run a newer driver patch
/// level than the tuning node serves the shipped kernels without re-tuning, and never an unverified one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/core/fingerprint.h"
#include "cudal1/core/status.h"

namespace cudal1::cache {

/// One tuning outcome for one signature on one fingerprint.
/// KernelEntry::kernel_name of a kernel that is a library call (no code).
inline constexpr const char* kLibraryKernel = "library";

struct KernelEntry {
  std::string signature;     ///< Signature::text (the key)
  bool has_kernel = false;   ///< false: tuned, and no variant beat ATen (the signature stays on ATen)
  std::string family;        ///< generator family, e.g. "unary_elementwise" ("chain" for chain kernels)
  int generator_version = 0;  ///< the family's generator version that made it (Note [Generator versions])
  std::string variant;       ///< readable technique choice, e.g. "vec4.b256.u2.grid"
  std::string launch_json;   ///< family-specific launch description (JSON)
  std::string kernel_name;   ///< entry point in the cubin; kLibraryKernel: a library call, no code
  std::string cubin;         ///< compiled code for the fingerprint's sm (bytes); empty for a library call
  double speedup = 0;        ///< median paired speedup over ATen, measured when tuned (best seen if no winner)
  double aten_us = 0;        ///< median ATen time, microseconds
  double kernel_us = 0;      ///< median time of the stored kernel (or best variant), microseconds
  int64_t trials = 0;        ///< variants tried
  int64_t created_unix = 0;  ///< seconds since the epoch
  /// The in-app ratio over ATen that decided the swap (Note [In-app confirmation] in dispatcher/confirm.h): with
  /// has_kernel, promoted; without, a verified kernel demoted by it. 0: not judged in an app (older records too).
  double in_app = 0;
  /// Not stored: set by the runtime on a record of another fingerprint it may use once the kernel is verified
  /// on this machine (Note [Cache transfer]); that fingerprint's key. Empty for the process's own records.
  std::string transferred_from;

  /// A kernel that is a call into a library ATen links (a chain rewritten to cuBLAS, Note [Library chains] in
  /// optimizer/chains/chain_library.h): it has no code, and nothing to load.
  bool library() const { return has_kernel && kernel_name == kLibraryKernel; }
};

/// The fields an allowance may name (Note [Cache transfer]): "driver", "cuda_runtime", "nvrtc", "torch", "cudal1".
const std::vector<std::string>& transferable_fields();

/// Ok when records tuned under `from` may serve a process whose fingerprint is `to` after re-verification, given
/// the allowed fields; Mismatch naming the fields that differ otherwise (the GPU model, SM count and record format
/// never transfer).
Status transfer_check(const GpuFingerprint& from, const GpuFingerprint& to, const std::vector<std::string>& allowed);

/// A report of one run (written by the runtime, shown by `cudal1 report`).
struct RunRecord {
  std::string run_id;  ///< "<unix-time>-<pid>", sortable
  std::string json;    ///< the report document
};

/// Everything stored for one fingerprint, as `cudal1 cache ls` shows it.
struct FingerprintListing {
  std::string key;
  Result<GpuFingerprint> fingerprint = Status(Code::kNotFound, "no fingerprint record");
  std::vector<KernelEntry> entries;
  std::vector<std::string> rejected;  ///< one line per record that failed its checks
};


/// What heal() found and did.
struct HealReport {
  bool healed = false;   ///< the database was unusable and was replaced by a fresh one
  std::string moved_to;  ///< where the unusable one was kept
  std::string reason;    ///< why it was unusable
};

/// One record that fails verify()'s checks.
struct RecordProblem {
  std::string key;  ///< its RocksDB key ("k/<fp-key>/<signature>", "f/<fp-key>", "r/<run-id>")
  std::string why;
};

/// A check of one kernel entry on this machine (e.g. that its cubin loads on this GPU); Unavailable means "not
/// checked here" (no GPU, another GPU's entry), any other error fails the record.
using KernelCheck = std::function<Status(const GpuFingerprint&, const KernelEntry&)>;

/// What import_bundle() did.
struct BundleImport {
  std::string fingerprint_key;  ///< the bundle's fingerprint
  int64_t imported = 0;         ///< records written
  int64_t kept = 0;             ///< records this cache already had (not overwritten)
  int64_t rejected = 0;         ///< records that failed their checks (not written)
};

class KernelCache {
 public:
  /// A cache rooted at `dir` (created on first write). Cheap: nothing is opened until a call needs it.
  explicit KernelCache(std::string dir);

  const std::string& dir() const { return dir_; }

  /// Opens the database for writing once (creating it) and records the format version, so that every
  /// process-wide object RocksDB makes on that path exists now. Call it before registering an atexit handler
  /// that writes to the cache: objects made earlier are destroyed later (Note [Exit order]).
  Status prepare();

  /// Makes the database usable (Note [Cache healing]): unusable ones are moved aside and replaced. An error only
  /// when no usable database can be had here (another process holds the lock past the wait, no write access).
  Result<HealReport> heal();

  /// Every record that fails its checks (Note [Cache healing]); `check_kernel` may be empty. An absent database
  /// has none; an unreadable one is an error (heal() or `cudal1 cache repair` replaces it).
  Result<std::vector<RecordProblem>> verify(const KernelCheck& check_kernel) const;

  /// Deletes the records `problems` names, atomically. Returns how many.
  Result<int64_t> drop(const std::vector<RecordProblem>& problems);

  /// Writes every sound record of fingerprint `fp_key` to the bundle file `path` (Note [Cache bundles]); returns
  /// how many. NotFound when the cache has no such fingerprint.
  Result<int64_t> export_bundle(const std::string& fp_key, const std::string& path) const;

  /// Merges the bundle at `path` into this cache (Note [Cache bundles]): Corrupt for a damaged or foreign file,
  /// Mismatch for another bundle format; nothing is written then. Existing records are kept unless `overwrite`.
  /// `check`, when given, sees the bundle's fingerprint before anything is written; its error aborts the import.
  Result<BundleImport> import_bundle(const std::string& path, bool overwrite,
                                     const std::function<Status(const GpuFingerprint&)>& check = {});

  /// Every fingerprint the cache holds a fingerprint record for (unreadable ones skipped).
  Result<std::vector<GpuFingerprint>> fingerprints() const;
  /// Stores the allowance of `fp` (Note [Cache transfer]): `fields` from transferable_fields(), else
  /// InvalidArgument naming the bad one.
  Status allow_transfer(const GpuFingerprint& fp, const std::vector<std::string>& fields);
  /// The allowance of `fp`: NotFound when there is none.
  Result<std::vector<std::string>> transfer_allowance(const GpuFingerprint& fp) const;

  /// Stores `e` for `fp` atomically together with the fingerprint record (durable when it returns ok).
  /// Retries for up to ~2 s while another process holds the database; then returns Unavailable and the caller
  /// keeps the entry to retry later. Thread-safe.
  Status put(const GpuFingerprint& fp, const KernelEntry& e);

  /// The entry for (fp, signature): NotFound if absent; Corrupt or Mismatch if a record exists but fails its
  /// checks (the caller must not use it). Thread-safe.
  Result<KernelEntry> get(const GpuFingerprint& fp, const std::string& signature) const;

  /// Every valid entry for `fp`. Records that fail their checks are skipped; each is described in `rejected`
  /// (may be null). NotFound-free: an empty or absent database gives an empty vector.
  Result<std::vector<KernelEntry>> load_all(const GpuFingerprint& fp, std::vector<std::string>* rejected) const;

  /// Everything in the cache, grouped by fingerprint key (for the CLI).
  Result<std::vector<FingerprintListing>> list() const;

  /// Optimizer state blobs per fingerprint.
  Status put_state(const GpuFingerprint& fp, const std::string& name, const std::string& json);
  Result<std::string> get_state(const GpuFingerprint& fp, const std::string& name) const;
  /// Every optimizer state blob of `fp` whose name starts with `prefix`, as (name, json) in name order (e.g. the
  /// tuner's "trials/" records, Note [Technique insights]); empty when there are none or no database.
  Result<std::vector<std::pair<std::string, std::string>>> states(const GpuFingerprint& fp,
                                                                  const std::string& prefix) const;
  /// Optimizer state blobs per GPU architecture (compute capability `sm`, e.g. 90), kept across fingerprints:
  /// the learned policies. NotFound when absent; InvalidArgument for sm <= 0 or an empty name.
  Status put_arch_state(int sm, const std::string& name, const std::string& json);
  Result<std::string> get_arch_state(int sm, const std::string& name) const;

  /// Run reports: put keeps the newest `keep` runs and deletes older ones; runs() returns newest first.
  Status put_run(const RunRecord& run, int keep = 20);
  Result<std::vector<RunRecord>> runs() const;

  /// Deletes every record of one fingerprint key, or of all (run reports and architecture state too) when `fp_key`
  /// is empty. Returns records deleted.
  Result<int64_t> erase(const std::string& fp_key);

  // Record codec, public for tests: encode an entry for fp, decode and check it against (fp, signature).
  static std::string encode(const GpuFingerprint& fp, const KernelEntry& e);
  static Result<KernelEntry> decode(const std::string& value, const GpuFingerprint* expect_fp,
                                    const std::string* expect_signature);
  static std::string entry_key(const GpuFingerprint& fp, const std::string& signature);

 private:
  std::string dir_;
  std::mutex write_mu_;  // one write session at a time within this process (RocksDB's lock is per process)
};

}  // namespace cudal1::cache
