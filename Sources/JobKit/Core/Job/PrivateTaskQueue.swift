internal import CJobKitAtomics
import Foundation

/// Whether the task queue a job made for itself is still seen by nobody but the job: one atomic
/// word, read for every task the job queues, written once.
///
/// The queue is *exposed* by the first read of the public ``JobController/taskQueue`` and by the
/// job adding any operation to it (that operation's code can read `OperationQueue.current`).
/// While it is not exposed, nobody can suspend it, limit it, read its `operations` or wait on it,
/// and with no limit and no suspension `OperationQueue` starts a ready operation at once (its
/// `queuePriority` only orders operations that wait for a slot): the job may start its
/// `ConcurrentOperation`s itself (`JobController.startDirectly`). Once exposed, it stays exposed.
/// Not `Sendable` (a `ManagedBuffer`): threads reach it through its job, which never replaces it.
final class PrivateTaskQueue: ManagedBuffer<Void, Int> {
  static func make() -> PrivateTaskQueue {
    let buffer = create(minimumCapacity: 1) { _ in }
    buffer.withUnsafeMutablePointerToElements { $0.initialize(to: 0) }
    return unsafeDowncast(buffer, to: PrivateTaskQueue.self)
  }

  /// Whether anyone but the job may have seen the queue.
  var isExposed: Bool {
    withUnsafeMutablePointerToElements { cjobkit_atomic_load($0) != 0 }
  }

  /// Records that the queue was seen (idempotent; no write once it is).
  func expose() {
    withUnsafeMutablePointerToElements { word in
      if cjobkit_atomic_load(word) == 0 {
        _ = cjobkit_atomic_exchange(word, 1)
      }
    }
  }
}

extension JobController {
  /// Adds `task` to `queue` unless it is already executing (a second `addOperation` would be a
  /// fatal error in Foundation), or, if `queue` is this job's own queue and nobody has seen it
  /// (`PrivateTaskQueue`) and `task` is a `ConcurrentOperation`, starts it directly. Returns
  /// whether it was added or started.
  @discardableResult
  func enqueue(_ task: Operation, on queue: OperationQueue) -> Bool {
    let operation = task as? ConcurrentOperation
    // One lock for a `ConcurrentOperation` (its `isExecuting` and `isFinished` take one each).
    if operation?.hasStarted ?? (task.isExecuting || task.isFinished) {
      reportMisuse(.taskAlreadyRunning, "\(type(of: task)) is already running; tracked, not queued again")
      return false
    }
    if let privateTaskQueue, queue === queueOfTasks {
      if let operation, !privateTaskQueue.isExposed {
        startDirectly(operation)
        return true
      }
      privateTaskQueue.expose()
    }
    queue.addOperation(task)
    return true
  }

  /// Adds `task` to `queue` (which starts it once it is ready); the job's own queue counts as
  /// exposed from then on.
  func addToQueue(_ task: Operation, _ queue: OperationQueue) {
    if queue === queueOfTasks {
      privateTaskQueue?.expose()
    }
    queue.addOperation(task)
  }

  /// Starts `operation` on a concurrent dispatch queue of its `qualityOfService`, as the job's
  /// own queue would on one of its worker threads. If by then the queue was exposed or the operation
  /// is not ready (a dependency added meanwhile), it goes to the queue instead: it is in no queue
  /// yet, so that is allowed, and the queue then starts it once ready. The work item captures only
  /// the operation, which carries the job across (`ConcurrentOperation.directStarter`): a closure
  /// of one reference needs no context of its own.
  private func startDirectly(_ operation: ConcurrentOperation) {
    operation.directStarter = self
    operation.qualityOfService.directStartQueue.async { JobController.startHandedOver(operation) }
  }

  /// On the worker: takes the job that handed `operation` over and starts it (or queues it).
  private static func startHandedOver(_ operation: ConcurrentOperation) {
    guard let job = operation.directStarter else { return }
    operation.directStarter = nil
    if job.privateTaskQueue?.isExposed != false || !operation.isReady {
      job.addToQueue(operation, job.queueOfTasks)
    } else {
      operation.startOutsideQueue()
    }
  }
}

/// The dispatch queues a job starts its own operations on, one per quality of service, shared by
/// all jobs: concurrent queues like the one an `OperationQueue` runs its operations on, and so
/// with its thread pool, which grows while work items block (libdispatch's global queues would
/// stop at one thread per core, and tasks that wait for each other would starve). The default
/// one has the label of a job's own `OperationQueue`.
private enum DirectStartQueues {
  static let userInteractive = make(.userInteractive, "userInteractive")
  static let userInitiated = make(.userInitiated, "userInitiated")
  static let utility = make(.utility, "utility")
  static let background = make(.background, "background")
  static let standard = DispatchQueue(label: "JobKit.JobController.taskQueue", attributes: .concurrent)

  private static func make(_ qos: DispatchQoS, _ name: String) -> DispatchQueue {
    DispatchQueue(label: "JobKit.JobController.taskQueue.\(name)", qos: qos, attributes: .concurrent)
  }
}

extension QualityOfService {
  /// The queue a job starts an operation of this quality of service on.
  fileprivate var directStartQueue: DispatchQueue {
    switch self {
    case .userInteractive: return DirectStartQueues.userInteractive
    case .userInitiated: return DirectStartQueues.userInitiated
    case .utility: return DirectStartQueues.utility
    case .background: return DirectStartQueues.background
    case .default: return DirectStartQueues.standard
    @unknown default: return DirectStartQueues.standard
    }
  }
}
