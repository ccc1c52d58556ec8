/// The job's strong reference to itself, kept while something may still call into the job that
/// does not hold it: from its start to its finish, and, before its start, while a task it handed
/// out (queued, or tracked for its caller to queue) has not finished. A node holds its job
/// `unowned(unsafe)`, so a job that was never started, whose tasks wait for its start, is freed
/// with them once its user drops it. Only touched under the job's lock; the reference it gives up
/// is released after the lock (``AfterLockEffects``).
struct JobKeeper {
  private var job: JobController?
  private var isStarted = false
  /// Unfinished tasks tracked before the start that may run without the job's doing.
  private var tasks = 0

  /// Whether a task tracked before the start keeps the job (its finish must let go of it).
  var isKeptByTasks: Bool { tasks > 0 }

  /// The job started: it holds itself until it finishes.
  mutating func start(_ job: JobController) {
    isStarted = true
    if self.job == nil {
      self.job = job
    }
  }

  /// `node`'s task, tracked before the start, may run now: it keeps the job until it finished
  /// (once: a node that keeps the job already changes nothing).
  mutating func keep(for node: TaskNode) {
    guard !node.keepsJob else { return }
    node.keepJob(true)
    tasks += 1
    if job == nil {
      job = node.job
    }
  }

  /// `node`'s task finished (or is no longer tracked). Returns the job's reference to release
  /// after the lock if nothing else keeps the job any more.
  mutating func letGo(of node: TaskNode) -> JobController? {
    guard node.keepsJob else { return nil }
    node.keepJob(false)
    tasks -= 1
    guard tasks == 0, !isStarted else { return nil }
    return exchange(&job, with: nil)
  }

  /// The job finished: the reference to release after the lock.
  mutating func finish() -> JobController? {
    isStarted = false
    tasks = 0
    return exchange(&job, with: nil)
  }
}
