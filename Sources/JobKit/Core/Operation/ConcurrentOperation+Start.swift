import Foundation

extension ConcurrentOperation {
  /// `isReady`, without Foundation's lock when the class keeps Foundation's, which answers from
  /// dependencies alone (`inheritsFoundationsAnswers`), and none was ever added: for a job that starts the
  /// operation itself, in no queue (`JobController.enqueue`).
  var isReadyToStart: Bool {
    if inheritsFoundationsAnswers, !state.withLock({ $0.hadDependency }) { return true }
    return isReady
  }
}
