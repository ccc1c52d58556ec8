import Foundation

extension JobController {
  private static let defaultTaskQueueStorage = LockedBox<OperationQueue?>(nil)

  /// The queue that jobs created without one (``JobController/init()``, and groups created
  /// without a `taskQueue`) add their tasks to: `nil` by default, and then each such job makes a
  /// concurrent queue of its own.
  ///
  /// Set it once, early (for example at program start), to run the tasks of every job and group
  /// on one queue you configured, such as one with a `maxConcurrentOperationCount`:
  ///
  /// ```swift
  /// let work = OperationQueue()
  /// work.maxConcurrentOperationCount = 4
  /// JobController.defaultTaskQueue = work
  /// ```
  ///
  /// Safe to set from any thread; a job reads it once, when it is created, so a change applies to
  /// jobs created afterwards. Keep it a concurrent queue if jobs nest: with a serial default
  /// queue, a group running as a task of another group would wait for a slot its parent holds.
  public static var defaultTaskQueue: OperationQueue? {
    get { defaultTaskQueueStorage.withLock { $0 } }
    set {
      let replaced = defaultTaskQueueStorage.withLock { exchange(&$0, with: newValue) }
      _ = replaced  // released after the lock: it may be the user's queue (or subclass)
    }
  }
}
