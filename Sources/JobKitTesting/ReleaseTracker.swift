import Foundation

/// Checks that objects (a job, its tasks, its queue) were freed once you dropped them.
///
/// ```swift
/// let tracker = ReleaseTracker()
/// do {
///     let job = MyJob()
///     tracker.watch(job, "job")
///     tracker.watch(job.taskQueue, "queue")
///     try await job.run()
/// }
/// #expect(await tracker.survivors().isEmpty)
/// ```
public final class ReleaseTracker: @unchecked Sendable {
  // @unchecked Sendable: `entries` lives behind `lock`.
  private final class Entry {
    weak var object: AnyObject?
    let label: String
    init(_ object: AnyObject, _ label: String) {
      self.object = object
      self.label = label
    }
  }

  private let lock = NSLock()
  private var entries: [Entry] = []

  /// Creates an empty tracker.
  public init() {}

  /// Watches `object` (weakly) under `label`.
  public func watch(_ object: AnyObject, _ label: String = "") {
    let entry = Entry(object, label.isEmpty ? String(describing: type(of: object)) : label)
    lock.withLock { entries.append(entry) }
  }

  /// The labels of watched objects that are still alive, after letting work already queued on
  /// the global dispatch queues finish (Foundation releases an operation on such a thread right
  /// after its `completionBlock` ran). Empty means everything was freed.
  public func survivors() async -> [String] {
    for _ in 0..<3 {
      await withCheckedContinuation { continuation in
        DispatchQueue.global().async(flags: .barrier) { continuation.resume() }
      }
    }
    return lock.withLock { entries.filter { $0.object != nil }.map(\.label) }
  }
}
