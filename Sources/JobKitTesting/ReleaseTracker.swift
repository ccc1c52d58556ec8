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

  /// The labels of watched objects that are still alive once every one was freed or `timeout`
  /// passed, whichever comes first. Empty means everything was freed.
  ///
  /// Objects are often freed a moment after a job finished (Foundation releases an operation on
  /// a global dispatch queue thread after its `completionBlock` ran), so this polls every
  /// millisecond instead of looking once. Pass a short `timeout` when you expect survivors.
  public func survivors(waitingUpTo timeout: Duration = .seconds(10)) async -> [String] {
    let deadline = ContinuousClock.now + timeout
    while true {
      let alive = aliveLabels()
      if alive.isEmpty || ContinuousClock.now >= deadline { return alive }
      try? await Task.sleep(for: .milliseconds(1))
    }
  }

  private func aliveLabels() -> [String] {
    lock.withLock { entries.filter { $0.object != nil }.map(\.label) }
  }
}
