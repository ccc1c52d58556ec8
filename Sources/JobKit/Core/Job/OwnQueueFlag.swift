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
/// A queue made by the owner of several jobs has one flag, which those jobs share
/// (`JobController.shareOwnQueueFlag`): a read of any of their `taskQueue`s, or an operation
/// any of them adds to the queue, exposes it for all, as does the owner handing its queue out.
/// Not `Sendable` (a `ManagedBuffer`), though its one word is only read and written atomically:
/// threads reach it through its job (or that owner), which never replaces it once shared.
final class OwnQueueFlag: ManagedBuffer<Void, Int> {
  static func make() -> OwnQueueFlag {
    let buffer = create(minimumCapacity: 1) { _ in }
    buffer.withUnsafeMutablePointerToElements { $0.initialize(to: 0) }
    // `create` makes an instance of the class it is called on.
    return buffer as! OwnQueueFlag
  }

  /// The task queue of a new job or map: `given` (seen by whoever gave it: no flag), or, if none,
  /// a new concurrent queue named `name` with a new flag of its own.
  static func queue(given: OperationQueue?, name: String) -> (OperationQueue, OwnQueueFlag?) {
    if let given {
      return (given, nil)
    }
    let queue = OperationQueue()
    queue.name = name
    return (queue, make())
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
  /// (`OwnQueueFlag`) and `task` is a `ConcurrentOperation`, starts it directly. Returns
  /// whether it was added or started.
  @discardableResult
  func enqueue(_ task: Operation, on queue: OperationQueue) -> Bool {
    let operation = task as? ConcurrentOperation
    // One lock for a `ConcurrentOperation` (its `isExecuting` and `isFinished` take one each),
    // which also reads the class a direct start runs it at.
    let (started, qualityOfService) =
      operation?.state.withLock { (!$0.phase.isIdle, $0.qualityOfService) }
      ?? (task.isExecuting || task.isFinished, .default)
    if started {
      reportMisuse(.taskAlreadyRunning, "\(type(of: task)) is already running; tracked, not queued again")
      return false
    }
    if let ownQueueFlag, queue === queueOfTasks {
      if let operation, !ownQueueFlag.isExposed {
        startDirectly(operation, at: qualityOfService)
        return true
      }
      ownQueueFlag.expose()
    }
    queue.addOperation(task)
    return true
  }

  /// Adds `task` to `queue` (which starts it once it is ready); the job's own queue counts as
  /// exposed from then on.
  func addToQueue(_ task: Operation, _ queue: OperationQueue) {
    if queue === queueOfTasks {
      ownQueueFlag?.expose()
    }
    queue.addOperation(task)
  }

  /// Starts `operation` on libdispatch's global queue of its `qualityOfService`, in the pool of
  /// worker threads where the job's own queue would run it. If by then the queue was exposed or the operation
  /// is not ready (a dependency added meanwhile), it goes to the queue instead: it is in no queue
  /// yet, so that is allowed, and the queue then starts it once ready. The hand-off is a function
  /// and the operation as its context (`dispatch_async_f`), and the operation carries the job
  /// across (`ConcurrentOperation.directStarter`): no closure context, no block copy.
  private func startDirectly(_ operation: ConcurrentOperation, at qualityOfService: QualityOfService) {
    operation.directStarter = self
    // Retained for the worker, which takes the reference back.
    let context = Unmanaged.passRetained(operation).toOpaque()
    cjobkit_queue_async(cjobkit_global_queue(qualityOfService.dispatchClass), context) { context in
      // Always the context passed above, never nil.
      guard let context else { return }
      // The C hand-off's context: the operation retained above, taken back once.
      JobController.startHandedOver(Unmanaged<ConcurrentOperation>.fromOpaque(context).takeRetainedValue())
    }
  }

  /// On the worker: takes the job that handed `operation` over and starts it (or queues it).
  private static func startHandedOver(_ operation: ConcurrentOperation) {
    guard let job = operation.directStarter else { return }
    operation.directStarter = nil
    if job.ownQueueFlag?.isExposed != false || !operation.isReadyToStart {
      job.addToQueue(operation, job.queueOfTasks)
    } else {
      operation.startOutsideQueue()
    }
  }
}

extension QualityOfService {
  /// The `qos_class_t` of the global dispatch queue a job starts an operation of this class on: 0
  /// (the default queue) for `.default`, as for an operation of a job's own `OperationQueue`,
  /// which sets no class. Linux's libdispatch applies no classes; all its global queues share
  /// one pool of worker threads, as an `OperationQueue`'s dispatch queue does.
  fileprivate var dispatchClass: UInt32 {
    switch self {
    case .userInteractive: return 0x21  // QOS_CLASS_USER_INTERACTIVE
    case .userInitiated: return 0x19  // QOS_CLASS_USER_INITIATED
    case .utility: return 0x11  // QOS_CLASS_UTILITY
    case .background: return 0x09  // QOS_CLASS_BACKGROUND
    case .default: return 0
    @unknown default: return 0
    }
  }
}
