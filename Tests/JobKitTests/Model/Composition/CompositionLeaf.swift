import Foundation
import JobKit

/// A leaf of a composition tree: records its run, fires the storms its start and end trigger,
/// and (if its spec says so) adds its parent's late children from a thread of its own before
/// it finishes, ignoring a cancel until then.
class CompositionLeaf: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `ended` is behind a lock; every other stored property is immutable.
  let node: Int
  let attempt: Int
  let spec: LeafSpec
  let fails: Bool
  let log: CompositionLog
  let addLate: (@Sendable () -> Void)?
  private let ended = ModelLocked(false)

  init(node: Int, attempt: Int, spec: LeafSpec, fails: Bool, log: CompositionLog, addLate: (@Sendable () -> Void)?) {
    self.node = node
    self.attempt = attempt
    self.spec = spec
    self.fails = fails
    self.log = log
    self.addLate = addLate
    super.init()
  }

  override func operationStart() {
    CompositionStorms.fire(log.leafStarted(node, attempt: attempt), log: log)
    if let addLate {
      // From another thread than the group's, while this leaf keeps the group running.
      Thread {
        CompositionStorms.fire(self.log.claimAddingStorms(self.node), log: self.log)
        addLate()
        self.end(error: self.fails ? ModelError(spec: self.node) : nil)
      }.start()
      return
    }
    switch spec.finish {
    case .atOnce: end(error: fails ? ModelError(spec: node) : nil)
    case .later: DispatchQueue.global().async { self.end(error: self.fails ? ModelError(spec: self.node) : nil) }
    case .onThread: Thread { self.end(error: self.fails ? ModelError(spec: self.node) : nil) }.start()
    case .untilCancelled: break
    }
  }

  override func operationCancelled() {
    // An adder keeps running until its adds returned, so its group is still running when they
    // arrive (an add to a finished group is documented to change nothing).
    if spec.honorsCancel && addLate == nil { end(error: nil) }
  }

  /// Ends the run once (a cancel may race the work's own end).
  private func end(error: (any Error)?) {
    let first = ended.withLock { ended in
      defer { ended = true }
      return !ended
    }
    guard first else { return }
    CompositionStorms.fire(log.leafEnding(node), log: log)
    log.leafEnded(node, attempt: attempt)
    operationDone(error: error)
  }
}

/// A leaf counted against its job's `setMaxConcurrentTasks` limit (its own routing group).
final class LimitedLeaf: CompositionLeaf, @unchecked Sendable {
  // @unchecked Sendable: adds no state to CompositionLeaf.
}
