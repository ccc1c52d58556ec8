import Logging

/// The worker's prune loop: the queue's finished rows past their retention are deleted
/// (``RemoteQueue/prune()``), by one worker of the queue at a time.
extension RemoteWorker {
  /// Prunes the queue's finished rows at start and every ``Configuration/pruneInterval`` until
  /// the calling task is cancelled. Nothing to do when the retention keeps every state for ever.
  /// A failed pass is logged (at info once per outage) and tried again at the next interval.
  func pruneLoop() async {
    guard !queue.configuration.retention.periods.isEmpty else { return }
    var failing = false
    while !Task.isCancelled {
      do {
        metrics.pruned(try await queue.prune())
        failing = false
      } catch {
        if Task.isCancelled { return }
        logger.log(
          level: failing ? .debug : .info, "pruning finished rows failed; trying again at the next interval",
          metadata: ["worker": "\(id)", "error": "\(String(reflecting: error))"])
        failing = true
      }
      do {
        try await Task.sleep(for: configuration.pruneInterval)
      } catch {
        return
      }
    }
  }
}
